"""QuantLinear's and quantize_model's accumulators (altgrad.torch, docs/python.md): each of a layer's
three products through its own accumulator, checked against the exact rational model of
test_matmul.py (Fractions, written independently of the C++ code), the config's rule semantics,
and the mistakes."""
import numpy as np
import pytest
import torch

import altgrad
import altgrad.torch as aqt
from conftest import assert_same_floats, assert_sum_within_bound
from test_matmul import GRIDS, exact_model


def _layer(**kwargs):
    torch.manual_seed(3)
    return aqt.QuantLinear.from_linear(torch.nn.Linear(12, 7), **kwargs)


def test_each_product_is_its_accumulators_model():
    q = _layer(accumulators={"forward": {"format": "fp16", "mma_depth": 4},
                             "input_gradient": {"format": "bf16", "rounding": "nearest", "mma_depth": 3,
                                                "promote_every": 5},
                             "weight_gradient": {"format": "fp16", "rounding": "nearest", "mma_depth": 2}})
    x = torch.randn(2, 3, 12, requires_grad=True)
    dy = torch.randn(2, 3, 7)
    y = q(x)
    y.backward(dy)
    w, b = q.weight.detach().numpy(), q.bias.detach().numpy()
    x2, dy2 = x.detach().reshape(6, 12).numpy(), dy.reshape(6, 7).numpy()
    want_y = exact_model(x2, np.ascontiguousarray(w.T), GRIDS["fp16"], False, 4, 0) + b
    assert_same_floats(y.detach().reshape(6, 7).numpy(), want_y.astype(np.float32))
    assert_same_floats(x.grad.reshape(6, 12).numpy(), exact_model(dy2, w, GRIDS["bf16"], True, 3, 5))
    assert_same_floats(q.weight.grad.numpy(), exact_model(np.ascontiguousarray(dy2.T), x2, GRIDS["fp16"], True, 2, 0))
    # The bias gradient is a vectorised float32 sum (ATen's order, by CPU capability): within the bound.
    dy64 = dy2.astype(np.float64)
    assert_sum_within_bound(q.bias.grad.numpy(), dy64.sum(0), np.abs(dy64).sum(0), 6)


def test_without_accumulators_the_layer_is_torchs():
    q = _layer()
    x = torch.randn(4, 12)
    assert torch.equal(q(x), torch.nn.functional.linear(x, q.weight, q.bias))


def test_quantize_model_gives_products_their_accumulators_as_configs_do():
    model = torch.nn.Sequential()
    model.add_module("fc", torch.nn.Linear(8, 8))
    model.add_module("head", torch.nn.Linear(8, 4))
    aqt.quantize_model(model, {
        "forward": {"accumulator": {"format": "float", "params": {"exponent_bits": 8, "mantissa_bits": 13},
                                    "promote_every": 128}},
        "rules": [{"pattern": "head", "forward": {"accumulator": "none"},
                   "weight_gradient": {"accumulator": {"format": "fp16"}}}]})
    fwd, dx, dw = model.fc.accumulators
    assert (fwd["format"], fwd["rounding"], fwd["mma_depth"], fwd["promote_every"]) == ("float", "toward-zero", 32, 128)
    assert dx is None and dw is None
    fwd, dx, dw = model.head.accumulators
    assert fwd is None and dx is None and dw["format"] == "fp16"
    # No format: the layers quantize nothing, but they are QuantLinear for their accumulators.
    assert aqt.quantized_layers(model) == {"fc": (None, None, None), "head": (None, None, None)}
    model(torch.randn(3, 8)).sum().backward()


@pytest.mark.parametrize("accumulators, message", [
    ({"backward": {"format": "fp16"}}, "accumulators: unknown product 'backward'"),
    ({"forward": {"rounding": "nearest"}}, "key 'quantization.forward.accumulator.format': missing"),
    ({"forward": {"format": "fp16", "depth": 4}}, "key 'quantization.forward.accumulator.depth': unknown key"),
    ({"forward": {"format": "fp16", "rounding": "stochastic"}},
     "key 'quantization.forward.accumulator.rounding': expected nearest or toward-zero"),
    ({"forward": {"format": "float", "params": {"mantissa_bits": 22}, "rounding": "nearest"}},
     r"key 'quantization.forward.accumulator' \(layer\): accumulator format 'float': nearest rounding"),
    ({"forward": {"format": "no_such_format"}}, "no_such_format"),
])
def test_mistakes_are_refused_naming_the_product(accumulators, message):
    with pytest.raises((ValueError, TypeError, RuntimeError), match=message):
        _layer(accumulators=accumulators)


def test_quantize_model_refuses_a_malformed_product_table():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with pytest.raises(altgrad.Error, match="key 'quantization.forward.format': unknown key"):
        aqt.quantize_model(model, {"forward": {"format": "fp16"}})


def test_a_product_through_a_gpu_instruction_is_the_trainers():
    # sm90_wgmma_fp8 (K = 32) aligns each product to the largest exponent and truncates it to 13
    # fractional bits below (docs/accumulation.md). E4M3 x = (1, 2^-9, 0...) and W = (1, 2^-6, 0...):
    # 1 + 2^-15 exactly, whose 2^-15 lies below the 13 bits kept: the instruction gives 1, float32
    # gives 1 + 2^-15. QuantLinear runs the trainer's layer, so it runs the instruction too.
    recipe = {"weight_format": "e4m3", "activation_format": "e4m3",
              "forward": {"accumulator": {"instruction": "sm90_wgmma_fp8", "promote_every": 128}}}
    resolved = altgrad.recipe.resolve(recipe, ["fc"])
    fwd = resolved.layers["fc"]["forward"]["accumulator"]
    assert (fwd["instruction"], fwd["format"], fwd["promote_every"]) == ("sm90_wgmma_fp8", "", 128)
    x = torch.zeros(1, 32)
    x[0, :2] = torch.tensor([1.0, 2.0 ** -9])
    w = torch.zeros(1, 32)
    w[0, :2] = torch.tensor([1.0, 2.0 ** -6])
    through = aqt.QuantLinear(32, 1, bias=False, recipe=resolved, layer="fc")
    plain = aqt.QuantLinear(32, 1, bias=False, recipe={"weight_format": "e4m3", "activation_format": "e4m3"},
                            layer="fc")
    for layer in (through, plain):
        with torch.no_grad():
            layer.weight.copy_(w)
    assert through(x).item() == 1.0
    assert plain(x).item() == 1.0 + 2.0 ** -15
