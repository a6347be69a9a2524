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
    assert (fwd.format.name, fwd.rounding, fwd.mma_depth, fwd.promote_every) == ("float", "toward-zero", 32, 128)
    assert dx is None and dw is None
    fwd, dx, dw = model.head.accumulators
    assert fwd is None and dx is None and dw.format.name == "fp16"
    # No format: the layers quantize nothing, but they are QuantLinear for their accumulators.
    assert aqt.quantized_layers(model) == {"fc": (None, None, None), "head": (None, None, None)}
    model(torch.randn(3, 8)).sum().backward()


@pytest.mark.parametrize("accumulators, message", [
    ({"backward": {"format": "fp16"}}, "accumulators: unknown product 'backward'"),
    ({"forward": {"rounding": "nearest"}}, "accumulators.forward.format: missing"),
    ({"forward": {"format": "fp16", "depth": 4}}, "accumulators.forward.depth: unknown key"),
    ({"forward": {"format": "fp16", "rounding": "stochastic"}}, "accumulators.forward:"),
    ({"forward": {"format": "float", "params": {"mantissa_bits": 22}, "rounding": "nearest"}},
     "accumulators.forward: "),
    ({"forward": {"format": "no_such_format"}}, "no_such_format"),
])
def test_mistakes_are_refused_naming_the_product(accumulators, message):
    with pytest.raises((ValueError, TypeError, RuntimeError), match=message):
        _layer(accumulators=accumulators)


def test_quantize_model_refuses_a_malformed_product_table():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with pytest.raises(altgrad.Error, match="key 'quantization.forward.format': unknown key"):
        aqt.quantize_model(model, {"forward": {"format": "fp16"}})


def test_an_instruction_accumulator_resolves_and_quantlinear_says_it_runs_the_model_only():
    # The trainer runs a GPU instruction's products (docs/accumulation.md); QuantLinear does not yet.
    recipe = {"forward": {"accumulator": {"instruction": "sm90_wgmma_fp8", "promote_every": 128}}}
    resolved = altgrad.recipe.resolve(recipe, ["fc"])
    fwd = resolved.layers["fc"]["forward"]["accumulator"]
    assert (fwd["instruction"], fwd["format"], fwd["promote_every"]) == ("sm90_wgmma_fp8", "", 128)
    model = torch.nn.Sequential()
    model.add_module("fc", torch.nn.Linear(8, 8))
    with pytest.raises(altgrad.Error, match="key 'quantization.forward.accumulator' \\(fc\\): instruction "
                                            "'sm90_wgmma_fp8': QuantLinear sums products with the chunked model"):
        aqt.quantize_model(model, recipe)
