#!/usr/bin/python3
"""Fake-quantize a small PyTorch model with AltGrad's format plugins and train it.

A character-level language model (an embedding of the previous 16 characters and an
MLP) on the bundled corpus (Debian's `fortunes`), with its linear layers in E4M3
(weights and inputs) and E5M2 (output gradients, stochastic rounding), except the
output layer in BF16: the same rule syntax as a config's [quantization] section.
Writes OUT/loss.csv and, when gnuplot is installed, OUT/loss.png.

    PYTHONPATH=build/python /usr/bin/python3 docs/examples/python_fake_quant.py --steps 300
"""
import argparse
import glob
import os
import shutil
import subprocess

import torch

import altgrad.torch as aqt

CONTEXT = 16


def read_corpus(path):
    files = [path] if os.path.isfile(path) else sorted(
        f for f in glob.glob(os.path.join(path, "*")) if os.path.isfile(f) and not f.endswith((".dat", ".u8")))
    return "".join(open(f, encoding="utf-8", errors="replace").read() for f in files)


class CharMLP(torch.nn.Module):
    def __init__(self, vocab, embed=24, hidden=256):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, embed)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(CONTEXT * embed, hidden), torch.nn.GELU(),
                                       torch.nn.Linear(hidden, hidden), torch.nn.GELU())
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, context):
        return self.head(self.mlp(self.embed(context).flatten(1)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--data", default="/usr/share/games/fortunes")
    parser.add_argument("--out", default="python_fake_quant")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)

    text = read_corpus(args.data)
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text[:400_000]], dtype=torch.long)
    model = CharMLP(len(chars))
    # The config's [quantization] section, as a dict: defaults, then rules (the first match wins).
    aqt.quantize_model(model, {"weight_format": "e4m3", "activation_format": "e4m3", "gradient_format": "e5m2",
                               "backward_rounding": "stochastic", "scaling": "current",
                               "rules": [{"pattern": "head", "format": "bf16"}]}, seed=42)
    print("quantized layers:", aqt.quantized_layers(model))

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    os.makedirs(args.out, exist_ok=True)
    csv_path = os.path.join(args.out, "loss.csv")
    with open(csv_path, "w") as log:
        log.write("step,loss\n")
        for step in range(1, args.steps + 1):
            starts = torch.randint(0, len(ids) - CONTEXT - 1, (args.batch,))
            context = torch.stack([ids[s:s + CONTEXT] for s in starts.tolist()])
            target = ids[starts + CONTEXT]
            loss = torch.nn.functional.cross_entropy(model(context), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            log.write(f"{step},{loss.item():.6f}\n")
            if step % 50 == 0 or step == args.steps:
                print(f"step {step}: loss {loss.item():.4f}")
    print("wrote", csv_path)

    if shutil.which("gnuplot"):
        png = os.path.join(args.out, "loss.png")
        script = (f"set terminal pngcairo size 800,480; set output '{png}'; set datafile separator ',';"
                  "set xlabel 'step'; set ylabel 'training loss';"
                  f"plot '{csv_path}' every ::1 using 1:2 with lines title 'E4M3/E5M2, head BF16'")
        if subprocess.run(["gnuplot", "-e", script]).returncode == 0:
            print("wrote", png)


if __name__ == "__main__":
    main()
