#!/usr/bin/env python3
"""Plain PyTorch's GPT-2-small training throughput on this GPU: the ceiling AltGrad's GPU runs are read against.

Run ON A GPU MACHINE: `python3 scripts/gpt2_reference.py [BATCH]`. A nanoGPT-shaped GPT-2 small (12 layers,
12 heads, width 768, context 1024, vocabulary 50304, tied head: 124 M parameters) trains on random tokens
with AdamW, in float32 and under BF16 autocast, with PyTorch's fused attention and no torch.compile.
Prints one JSON line per precision: tokens per second (the median of 10 timed steps after 3 warm-ups)
and the model FLOPs utilisation at 6 N + 12 L T d FLOPs per token, against BF16's dense peak (989 TFLOP/s).
"""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, HEADS, WIDTH, CONTEXT, VOCAB = 12, 12, 768, 1024, 50304


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.fc, self.out = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, WIDTH // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, WIDTH)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return F.cross_entropy(self.head(self.ln_f(x)).view(-1, VOCAB), targets.reshape(-1))


def measure(batch, autocast):
    torch.manual_seed(0)
    model = GPT().cuda()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=True)
    idx = torch.randint(0, VOCAB, (batch, CONTEXT + 1), device="cuda")
    times = []
    for step in range(13):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= 3:
            times.append(time.perf_counter() - t)
    median = sorted(times)[len(times) // 2]
    tokens = batch * CONTEXT
    flops = 6 * params + 12 * LAYERS * CONTEXT * WIDTH
    return {"precision": "bf16 autocast" if autocast else "float32", "parameters": params, "batch": batch,
            "context": CONTEXT, "step_s_median": round(median, 5), "tokens_per_s": round(tokens / median),
            "mfu_vs_bf16_peak": round(flops * tokens / median / 989e12, 4), "loss": round(loss.item(), 4),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__}


if __name__ == "__main__":
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    torch.backends.cuda.matmul.allow_tf32 = False
    for autocast in (True, False):
        print(json.dumps(measure(batch, autocast)), flush=True)
        torch.cuda.empty_cache()
