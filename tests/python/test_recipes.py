"""altgrad.recipe and the per-product recipes of QuantLinear and quantize_model (issue #30).

The expected values come from the recipes' definitions (docs/recipes.md) and from an E2M1 model
written here from OCP MX's table, not from the code under test.
"""
import math
import os
import tomllib

import numpy as np
import pytest
import torch

import altgrad
import altgrad.recipe
import altgrad.torch as aqt
from conftest import ROOT, assert_product_within_bound, assert_same_floats, assert_sum_within_bound, train_losses

NVFP4 = os.path.join(ROOT, "configs", "recipes", "nvfp4.toml")
TSENG = os.path.join(ROOT, "configs", "recipes", "tseng_mxfp4.toml")
# The trainer's layers for the default model (4 blocks), as the recipes' rules name them.
GPT_LAYERS = [f"blocks.{n}.{name}" for n in range(4) for name in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")] + [
    "lm_head"]


def _operand(format, rounding, granularity="block", block_size=16, block_rows=1, scale_format="e4m3",
             scale_rule="two_level", pre_scale=1.0, source="unquantized"):
    return dict(format=format, rounding=rounding, granularity=granularity, block_size=block_size,
                block_rows=block_rows, scale_format=scale_format, scale_rule=scale_rule, pre_scale=pre_scale,
                source=source)


def _without_own(products):
    # The settings alone: without "own" and the keys that set them (what errors name).
    drop = ("own", "key", "tile_key")
    return {p: {k: ({kk: vv for kk, vv in v.items() if kk not in drop} if isinstance(v, dict) else v)
                for k, v in d.items()} for p, d in products.items()}


def test_nvfp4_resolves_as_the_paper_describes_it():
    # arXiv 2509.25149 (docs/recipes.md): E2M1 in 1x16 blocks with E4M3 scales under a float32 tensor
    # scale; W in 16x16 tiles; stochastic rounding for dy only; a 16x16 random Hadamard transform on
    # the weight-gradient product only, one fixed sign vector; the last block's MLP and the head in BF16.
    r = altgrad.recipe.resolve(NVFP4, GPT_LAYERS)
    rht = {"name": "random_hadamard", "params": {"d": 16, "signs": "fixed", "sign_seed": 1}}
    x, w, dy = (_operand("fp4_e2m1", "nearest"), _operand("fp4_e2m1", "nearest", block_rows=16),
                _operand("fp4_e2m1", "stochastic"))
    quantized = {"forward": {"transform": None, "accumulator": None, "x": x, "w": w},
                 "input_gradient": {"transform": None, "accumulator": None, "dy": dy, "w": w},
                 "weight_gradient": {"transform": rht, "accumulator": None, "dy": dy, "x": x}}
    bf16 = _operand("bf16", "nearest", granularity="tensor")
    bf16_w = dict(bf16, block_rows=16)  # [quantization.weight]'s tiles, moot per tensor
    kept = {"forward": {"transform": None, "accumulator": None, "x": bf16, "w": bf16_w},
            "input_gradient": {"transform": None, "accumulator": None,
                               "dy": dict(bf16, rounding="stochastic"), "w": bf16_w},
            "weight_gradient": {"transform": None, "accumulator": None,
                                "dy": dict(bf16, rounding="stochastic"), "x": bf16}}
    for layer in GPT_LAYERS:
        expected = kept if layer.startswith("blocks.3.mlp.") or layer == "lm_head" else quantized
        assert _without_own(r.layers[layer]) == expected, layer
    # Every second use is quantized as its first (W's tiles serve both products).
    assert not any(r.layers["blocks.0.attn.qkv"][p][o]["own"]
                   for p, o in (("input_gradient", "w"), ("weight_gradient", "x"), ("weight_gradient", "dy")))
    assert r.globals["sr_bits"] == 32 and r.seed == 42


RECIPES = sorted(os.path.join(ROOT, "configs", "recipes", f) for f in os.listdir(os.path.join(ROOT, "configs", "recipes"))
                 if f.endswith(".toml"))


class UserModel(torch.nn.Module):
    """A model that is not the trainer's GPT: its linear layers have names no recipe mentions."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.GELU(), torch.nn.Linear(128, 128),
                                           torch.nn.GELU(), torch.nn.Linear(128, 128))
        self.classifier = torch.nn.Linear(128, 64)

    def forward(self, x):
        return self.classifier(self.encoder(x))


@pytest.mark.parametrize("recipe", RECIPES, ids=os.path.basename)
def test_every_published_recipe_applies_to_any_model(recipe):
    # A recipe's exceptions name layers by their place (last = 1: the output head; last_fraction:
    # the last part of the linear layers in order), so they reach any model's last layers.
    torch.manual_seed(1)
    model = aqt.quantize_model(UserModel(), recipe)
    with open(recipe, "rb") as f:
        rules = tomllib.load(f).get("quantization", {}).get("rules", [])
    assert all("pattern" not in r for r in rules), "a published recipe names the GPT's layers"
    formats = aqt.quantized_layers(model)
    order = ["encoder.0", "encoder.2", "encoder.4", "classifier"]  # the model's linear layers in order
    for r in rules:
        kept = r["last"] if "last" in r else math.ceil(r["last_fraction"] * len(order))
        for name in order[-kept:]:
            assert set(formats[name]) <= {"bf16"}, (name, formats[name])
    assert formats["encoder.0"] != ("bf16", "bf16", "bf16") or not rules  # the rest is the recipe's format
    x = torch.randn(4, 16, 128, requires_grad=True)  # 64 tokens: the transforms reduce in blocks of up to 64
    model(x).square().mean().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(model.classifier.weight.grad).all()


def test_a_rule_selects_the_last_layers_in_order():
    layers = ["a", "b", "c", "d", "e"]
    r = altgrad.recipe.resolve({"weight_format": "e4m3", "rules": [{"last": 2, "format": "bf16"}]}, layers)
    assert [r.layers[n]["forward"]["w"]["format"] for n in layers] == ["e4m3"] * 3 + ["bf16"] * 2
    # ceil(0.3 * 5) = 2 as well; 0.2 * 5 = 1 exactly: one layer.
    for fraction, kept in ((0.3, 2), (0.2, 1), (1.0, 5)):
        r = altgrad.recipe.resolve({"weight_format": "e4m3", "rules": [{"last_fraction": fraction, "format": "bf16"}]},
                                   layers)
        assert [r.layers[n]["forward"]["w"]["format"] for n in layers] == ["e4m3"] * (5 - kept) + ["bf16"] * kept
    with pytest.raises(altgrad.Error, match=r"key 'quantization.rules\[0\]': names its layers twice"):
        altgrad.recipe.resolve({"rules": [{"last": 1, "pattern": "a", "format": "bf16"}]}, layers)
    with pytest.raises(altgrad.Error, match=r"key 'quantization.rules\[0\].last_fraction': expected a number in \(0, 1\]"):
        altgrad.recipe.resolve({"rules": [{"last_fraction": 0, "format": "bf16"}]}, layers)
    with pytest.raises(altgrad.Error, match=r"key 'quantization.rules\[1\].last': last = 1 never applies"):
        altgrad.recipe.resolve({"rules": [{"last": 2, "format": "bf16"}, {"last": 1, "format": "e5m2"}]}, layers)


def test_a_recipe_is_the_same_as_a_path_its_parsed_dict_or_with_overrides():
    with open(NVFP4, "rb") as f:
        parsed = tomllib.load(f)
    assert altgrad.recipe.resolve(parsed, GPT_LAYERS).layers == altgrad.recipe.resolve(NVFP4, GPT_LAYERS).layers
    # Each NVFP4 component off with one override, as with --set.
    off = altgrad.recipe.resolve(NVFP4, GPT_LAYERS, ["quantization.weight_gradient.transform=none",
                                                     "quantization.weight.block_rows=1",
                                                     "quantization.backward_rounding=nearest"])
    layer = off.layers["blocks.0.attn.qkv"]
    assert layer["weight_gradient"]["transform"] is None
    assert layer["forward"]["w"]["block_rows"] == 1
    assert layer["input_gradient"]["dy"]["rounding"] == "nearest"


def test_tsengs_second_uses_have_their_own_settings():
    # arXiv 2502.20586: the forward product in BF16; both backward products in MXFP4 with stochastic
    # rounding and values scaled by 3/4 before rounding; Hadamard blocks of 64.
    r = altgrad.recipe.resolve(TSENG, GPT_LAYERS)
    layer = r.layers["blocks.1.mlp.fc"]
    assert layer["forward"]["w"]["format"] == "bf16"
    w2 = layer["input_gradient"]["w"]
    assert (w2["format"], w2["rounding"], w2["pre_scale"], w2["block_size"], w2["scale_format"], w2["own"]) == (
        "fp4_e2m1", "stochastic", 0.75, 32, "ue8m0", True)
    assert layer["input_gradient"]["transform"]["params"] == {"d": 64}  # the paper code's HBS


def test_recipe_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[quantization.forward]\nz = { format = "e4m3" }\n')
    with pytest.raises(altgrad.Error, match=r"bad.toml: key 'quantization.forward.z'"):
        altgrad.recipe.resolve(str(bad), ["fc"])
    with pytest.raises(ValueError, match=r"no-such.toml: cannot read the recipe"):
        altgrad.recipe.resolve(str(tmp_path / "no-such.toml"), ["fc"])
    with pytest.raises(TypeError, match=r"recipe: expected"):
        altgrad.recipe.resolve(42, ["fc"])


def test_resolve_checks_the_plugins_as_a_run_does():
    # What `run` refuses when it loads the plugins, resolve refuses too, naming the key and layer.
    with pytest.raises(altgrad.Error, match=r"recipe: key 'quantization.weight_format' \(fc\): no plugin named 'e9m9'"):
        altgrad.recipe.resolve({"weight_format": "e9m9"}, ["fc"])
    with pytest.raises(altgrad.Error, match=r"key 'quantization.weight_gradient.transform' \(fc\): .*"
                                            r"parameter 'd' = \"16\": expected an integer, got a string"):
        altgrad.recipe.resolve({"weight_gradient": {"transform": {"name": "hadamard", "params": {"d": "16"}}}},
                               ["fc"])
    with pytest.raises(altgrad.Error, match=r"'mantissa_bits' = \"99\": out of range"):
        altgrad.recipe.resolve({"weight_format": "float", "params": {"float": {"mantissa_bits": 99}}}, ["fc"])
    with pytest.raises(altgrad.Error, match=r"'range' is a diagnostic plugin, not a format"):
        altgrad.recipe.resolve({"gradient_format": "range"}, ["fc"])
    # Off: nothing is loaded, as a run with quantization off loads no format.
    assert not altgrad.recipe.resolve({"enabled": False, "weight_format": "e9m9"}, ["fc"]).globals["enabled"]


# ---- The numerics, against an E2M1 model written here.

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_nearest(v):
    # OCP MX FP4 (E2M1): the grid above, nearest, ties to the even code (codes 0, 2, 4, 6 in grid
    # order: 0, 1.0, 2.0, 4.0), saturating at 6.
    a = np.abs(v)
    out = np.empty_like(a)
    for i, value in np.ndenumerate(a):
        best = 7
        for c in range(7):
            mid = (E2M1[c] + E2M1[c + 1]) / 2
            if value < mid or (value == mid and c % 2 == 0):
                best = c
                break
        out[i] = E2M1[best]
    return np.copysign(out, v)


def e2m1_tiles(t, rows, cols):
    # t [R, C] in tiles of rows x cols, each with the decode scale round_up gives on powers of two:
    # the smallest 2^e >= amax / 6; elements q(v / 2^e) * 2^e.
    t = np.asarray(t, np.float64)
    out = np.empty_like(t)
    for r0 in range(0, t.shape[0], rows):
        for c0 in range(0, t.shape[1], cols):
            tile = t[r0:r0 + rows, c0:c0 + cols]
            amax = np.abs(tile).max()
            scale = 2.0 ** np.ceil(np.log2(amax / 6)) if amax > 0 else 1.0
            out[r0:r0 + rows, c0:c0 + cols] = e2m1_nearest(tile / scale) * scale
    return torch.from_numpy(out.astype(np.float32))


POW2_E2M1 = {"weight_format": "fp4_e2m1", "activation_format": "fp4_e2m1", "gradient_format": "fp4_e2m1",
             "forward_rounding": "nearest", "backward_rounding": "nearest", "granularity": "block",
             "block_size": 16, "scale_format": "pow2", "scale_rule": "round_up"}


def _spread(*shape):
    # Normal values times 2^k, k uniform in -4..3 per element: blocks and tiles of very different amax.
    return torch.randn(*shape) * 2.0 ** torch.randint(-4, 4, shape)


def _run(layer, x, dy):
    x = x.clone().requires_grad_(True)
    y = layer(x)
    y.backward(dy)
    return y.detach(), x.grad, layer.weight.grad


def test_each_product_takes_its_operands_along_its_own_reduction_dimension():
    torch.manual_seed(3)
    layer = aqt.QuantLinear(32, 48, bias=False, recipe=POW2_E2M1, layer="fc")
    layer.weight.data = _spread(48, 32)
    x, dy = _spread(32, 32), _spread(32, 48)
    w = layer.weight.detach()
    y, dx, dw = _run(layer, x, dy)
    # The products are BLAS's, compared within the bound any summation order keeps (conftest); a
    # block along the wrong dimension changes operands by up to a quarter, far beyond it.
    # forward y = x·Wᵀ: x and W in 1x16 blocks along the input features.
    assert_product_within_bound(y, e2m1_tiles(x, 1, 16), e2m1_tiles(w, 1, 16).t())
    # dx = dy·W: dy along the output features, W along its columns (W.t()'s rows).
    assert_product_within_bound(dx, e2m1_tiles(dy, 1, 16), e2m1_tiles(w.t(), 1, 16).t())
    # dW = dyᵀ·x: both along the tokens.
    assert_product_within_bound(dw, e2m1_tiles(dy.t(), 1, 16), e2m1_tiles(x.t(), 1, 16).t())


def test_a_tiled_weight_is_one_copy_for_both_products():
    torch.manual_seed(4)
    recipe = dict(POW2_E2M1, weight={"block_rows": 16})
    layer = aqt.QuantLinear(32, 48, bias=False, recipe=recipe, layer="fc")
    layer.weight.data = _spread(48, 32)
    x, dy = _spread(32, 32), _spread(32, 48)
    y, dx, _ = _run(layer, x, dy)
    qw = e2m1_tiles(layer.weight.detach(), 16, 16)
    assert_product_within_bound(y, e2m1_tiles(x, 1, 16), qw.t())
    assert_product_within_bound(dx, e2m1_tiles(dy, 1, 16), qw)
    # Not what 1x16 blocks give: the test tells tiles from blocks.
    blocks = aqt.QuantLinear(32, 48, bias=False, recipe=POW2_E2M1, layer="fc")
    blocks.weight = layer.weight
    assert not torch.equal(_run(blocks, x, dy)[1], dx)


def test_a_second_use_with_its_own_pre_scale():
    # W's input-gradient copy in E2M1 blocks of 16 along the output features, times 3/4 before
    # rounding: q(W * s * 0.75) / (s * 0.75); forward and dy unquantized.
    torch.manual_seed(5)
    recipe = dict(POW2_E2M1, weight_format="fp32", activation_format="fp32", gradient_format="fp32",
                  input_gradient={"w": {"format": "fp4_e2m1", "pre_scale": 0.75}})
    layer = aqt.QuantLinear(16, 32, bias=False, recipe=recipe, layer="fc")
    layer.weight.data = _spread(32, 16)
    x, dy = torch.randn(8, 16), torch.randn(8, 32)
    _, dx, dw = _run(layer, x, dy)
    wt = layer.weight.detach().t().numpy().astype(np.float64)  # [in, out]: rows along out
    expected_w = np.empty_like(wt)
    for r in range(wt.shape[0]):
        for c0 in range(0, wt.shape[1], 16):
            block = wt[r, c0:c0 + 16]
            scale = 2.0 ** np.ceil(np.log2(np.abs(block).max() / 6))
            expected_w[r, c0:c0 + 16] = e2m1_nearest(block / scale * 0.75) * scale / 0.75
    assert_product_within_bound(dx, dy, expected_w.astype(np.float32).T)
    assert_product_within_bound(dw, dy.t(), x)
    assert not np.array_equal(expected_w.astype(np.float32), wt.astype(np.float32))  # the bound tells them apart


def test_transforms_preserve_the_products_and_the_bias_gradient():
    torch.manual_seed(6)
    recipe = {"weight_gradient": {"transform": {"name": "random_hadamard", "params": {"d": 16}}},
              "input_gradient": {"transform": {"name": "random_hadamard", "params": {"d": 16}}}}
    layer = aqt.QuantLinear(24, 32, recipe=recipe, layer="fc")
    x, dy = torch.randn(2, 16, 24), torch.randn(2, 16, 32)
    y, dx, dw = _run(layer, x, dy)
    x64, dy64, w64 = x.double().reshape(32, 24), dy.double().reshape(32, 32), layer.weight.detach().double()
    # The forward product is untransformed: x·Wᵀ + b as BLAS adds it (K + 1 terms with the bias).
    b64 = layer.bias.detach().double()
    assert_sum_within_bound(y.reshape(32, 32), x64 @ w64.t() + b64, x64.abs() @ w64.abs().t() + b64.abs(), 25)
    assert (dw.double() - dy64.t() @ x64).abs().max() < 1e-4
    assert (dx.double().reshape(32, 24) - dy64 @ w64).abs().max() < 1e-4
    # The bias gradient in the layer's own basis, though dy's input-gradient copy is transformed.
    assert (layer.bias.grad.double() - dy64.sum(0)).abs().max() < 1e-5
    # Per-call signs: another call rounds another way, but dW is the same product.
    layer.weight.grad = None
    _, _, dw2 = _run(layer, x, dy)
    assert not torch.equal(dw, dw2) and (dw2.double() - dy64.t() @ x64).abs().max() < 1e-4


def test_a_transform_that_does_not_divide_names_the_layer_and_product():
    layer = aqt.QuantLinear(24, 32, recipe={"forward": {"transform": {"name": "hadamard", "params": {"d": 16}}}},
                            layer="fc")
    with pytest.raises(altgrad.Error, match=r"key 'quantization.forward.transform' \(fc\): transform 'hadamard' "
                                            r"\(d = 16\) along a reduction dimension of 24"):
        layer(torch.randn(4, 24))


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 64)
        self.proj = torch.nn.Linear(64, 32)
        self.head = torch.nn.Linear(32, 1)

    def forward(self, x):
        return self.head(torch.relu(self.proj(torch.relu(self.fc(x)))))


def test_the_nvfp4_recipe_trains_a_model_in_a_few_lines():
    torch.manual_seed(7)
    x = torch.randn(64, 16)
    target = x[:, :1] * 2 - x[:, 1:2] + 0.5 * x[:, 2:3] * x[:, 3:4]
    model = Tiny()
    # The recipe file as published; its BF16 rules name the GPT's layers, this model's head instead.
    aqt.quantize_model(model, NVFP4, overrides=[
        'quantization.rules=[{ pattern = "head", format = "bf16", granularity = "tensor", '
        'weight_gradient = { transform = "none" } }]'])
    assert aqt.quantized_layers(model) == {"fc": ("fp4_e2m1",) * 3, "proj": ("fp4_e2m1",) * 3,
                                           "head": ("bf16",) * 3}
    assert model.fc.transforms[2]["name"] == "random_hadamard" and model.head.transforms == (None, None, None)
    assert model.fc.products["forward"]["w"]["block_rows"] == 16
    losses = train_losses(model, x, target)
    assert losses[-1] < 0.3 * losses[0], losses[::10]


def test_a_recipe_is_given_or_formats_not_both():
    with pytest.raises(ValueError, match="not both"):
        aqt.QuantLinear(16, 16, weight="e4m3", recipe=NVFP4)
