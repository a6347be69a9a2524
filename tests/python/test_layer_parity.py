"""Python's QuantLinear is the trainer's quantized linear layer, bit for bit (#45): for every
published recipe and the configs that exercise accumulators and block scales, a layer of the
config's GPT run by the trainer's own code (altgrad_layer_probe: train::assign_formats and
train::quantized_linear) and the same layer as a QuantLinear give the same output, input
gradient, weight gradient and bias gradient over three steps, every float32 bit. The steps
differ in their inputs, so delayed scaling's amax history, stochastic rounding's per-step seeds
and per-step transforms all have to agree too."""
import glob
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import altgrad.recipe  # noqa: E402
import altgrad.torch as aqt  # noqa: E402
from conftest import ROOT, plugin_dir  # noqa: E402

TOKENS, IN, OUT, STEPS = 128, 128, 256, 3

CONFIGS = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "configs", "recipes", "*.toml")))
CONFIGS += ["configs/accumulation_e8m13_promoted.toml", "configs/mxfp4_e2m1.toml", "configs/e5m2_fp8.toml"]


def probe_path():
    path = os.environ.get("ALTGRAD_LAYER_PROBE") or os.path.join(
        os.environ.get("ALTGRAD_BUILD_DIR") or os.path.join(ROOT, "build"), "altgrad_layer_probe")
    if not os.access(path, os.X_OK):
        pytest.fail(f"altgrad_layer_probe not found at {path} (set ALTGRAD_LAYER_PROBE)")
    return path


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(OUT, IN, generator=g) * 0.05
    b = torch.randn(OUT, generator=g) * 0.1
    # Each step's x and dy on another scale, as a run's drift: the amax histories see different amaxes.
    xs = [torch.randn(1, TOKENS, IN, generator=g) * 2.0 ** s for s in range(STEPS)]
    dys = [torch.randn(1, TOKENS, OUT, generator=g) * 1e-3 * 2.0 ** -s for s in range(STEPS)]
    return w, b, xs, dys


def trainer_layer(tmp_path, config, layer, w, b, xs, dys):
    """(the model's layer names, [(y, dx, dw, db) per step]) from the trainer's code."""
    src, dst = tmp_path / "in.f32", tmp_path / "out.f32"
    parts = [w, b] + [t for x, dy in zip(xs, dys) for t in (x, dy)]
    np.concatenate([p.numpy().ravel() for p in parts]).astype(np.float32).tofile(src)
    p = subprocess.run([probe_path(), plugin_dir(), os.path.join(ROOT, config), layer, str(TOKENS), str(IN),
                        str(OUT), str(STEPS), str(src), str(dst)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = np.fromfile(dst, dtype=np.float32)
    sizes = (TOKENS * OUT, TOKENS * IN, OUT * IN, OUT)
    assert out.size == STEPS * sum(sizes)
    steps, at = [], 0
    for _ in range(STEPS):
        step = []
        for n in sizes:
            step.append(out[at:at + n])
            at += n
        steps.append(step)
    return p.stdout.split(), steps


def same_bits(got, want, what):
    got = got.detach().contiguous().numpy().ravel().view(np.uint32)
    want = want.view(np.uint32)
    differ = np.flatnonzero(got != want)
    assert differ.size == 0, (f"{what}: {differ.size} of {want.size} differ, the first at {differ[0]}: "
                              f"{got[differ[0]:differ[0] + 1].view(np.float32)[0]!r} (Python) vs "
                              f"{want[differ[0]:differ[0] + 1].view(np.float32)[0]!r} (trainer)")


@pytest.mark.parametrize("config", CONFIGS)
def test_quant_linear_is_the_trainers_layer(tmp_path, config):
    w, b, xs, dys = inputs(len(config))
    names, _ = trainer_layer(tmp_path, config, "lm_head", w, b, xs[:1] * STEPS, dys[:1] * STEPS)
    recipe = altgrad.recipe.resolve(os.path.join(ROOT, config), names)
    # The first layer, the last block's first (a recipe's BF16 tail starts there in some), and the head.
    layers = [names[0], next(n for n in names if n.startswith(names[-2].split(".mlp")[0].split(".attn")[0])),
              names[-1]]
    checked = 0
    for layer in dict.fromkeys(layers):
        if not recipe.quantizes(layer):
            continue
        _, want = trainer_layer(tmp_path, config, layer, w, b, xs, dys)
        q = aqt.QuantLinear(IN, OUT, recipe=recipe, layer=layer)
        with torch.no_grad():
            q.weight.copy_(w)
            q.bias.copy_(b)
        for step in range(STEPS):
            q.weight.grad = q.bias.grad = None
            x = xs[step].clone().requires_grad_(True)
            y = q(x)
            y.backward(dys[step])
            where = f"{config} {layer} step {step}"
            for got, expected, what in zip((y, x.grad, q.weight.grad, q.bias.grad), want[step],
                                           ("y", "dx", "dW", "db")):
                same_bits(got, expected, f"{where} {what}")
        checked += 1
    assert checked >= 1, f"{config}: no layer quantizes anything"
