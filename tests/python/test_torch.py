"""altgrad.torch: the straight-through estimator, QuantLinear and quantize_model."""
import pytest
import torch

import altgrad
import altgrad.torch as aqt
from conftest import assert_sum_within_bound, bits, forward_weight_copy, train_losses


def test_ste_gradient_by_hand():
    # Forward E4M3 (3 mantissa bits), nearest: 0.3 -> 0.3125, 1.1 -> 1.125, 3 -> 3, 1000 -> 448 (saturated).
    # Backward: dL/dy = w, quantized to E5M2 (2 mantissa bits), nearest:
    # 0.3 -> 0.3125, 1.1 -> 1.0, 3 -> 3, 1 -> 1; straight through, even where the forward saturated.
    x = torch.tensor([0.3, 1.1, 3.0, 1000.0], requires_grad=True)
    w = torch.tensor([0.3, 1.1, 3.0, 1.0])
    y = aqt.fake_quantize(x, "e4m3", grad_format="e5m2", grad_rounding="nearest")
    assert y.tolist() == [0.3125, 1.125, 3.0, 448.0]
    (y * w).sum().backward()
    assert x.grad.tolist() == [0.3125, 1.0, 3.0, 1.0]


def test_ste_without_gradient_format_passes_the_gradient_unchanged():
    x = torch.tensor([0.3, 1.1], requires_grad=True)
    w = torch.tensor([0.3, 1.1])
    (aqt.fake_quantize(x, "e4m3") * w).sum().backward()
    assert x.grad.tolist() == w.tolist()


def test_gradient_rounding_is_the_formats_stochastic_rounding():
    registry = aqt.default_registry()
    g = torch.randn(1000) * 100
    x = torch.zeros(1000, requires_grad=True)
    aqt.fake_quantize(x, None, grad_format="e4m3", grad_rounding="stochastic", grad_seed=11).backward(g)
    expected = registry.format("e4m3").quantize(g.numpy(), rounding="stochastic", seed=11).output
    assert (bits(x.grad.numpy()) == bits(expected)).all()


def test_quant_linear_forward_is_linear_of_quantized_weight_and_input():
    torch.manual_seed(0)
    layer = aqt.QuantLinear(8, 4, weight="e3m4", activation="e5m2", gradient="e5m2")
    x = torch.randn(3, 8)
    e3m4, e5m2 = aqt.default_registry().format("e3m4"), aqt.default_registry().format("e5m2")
    w_q = torch.from_numpy(e3m4.quantize(layer.weight.detach().numpy()).output)
    x_q = torch.from_numpy(e5m2.quantize(x.numpy()).output)
    # x_q·w_qᵀ + b as BLAS adds it, in its own order: within the bound of any order (conftest), which
    # unquantized operands miss by far.
    x64, w64, b64 = x_q.double(), w_q.double(), layer.bias.detach().double()
    assert_sum_within_bound(layer(x).detach(), x64 @ w64.t() + b64, x64.abs() @ w64.abs().t() + b64.abs(), 9)
    assert not torch.equal(x_q, x) and not torch.equal(w_q, layer.weight.detach())
    assert layer.formats() == ("e3m4", "e5m2", "e5m2")


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                        torch.nn.ReLU())
        self.head = torch.nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.body(x))


def test_quantize_model_swaps_the_layers_the_rules_name():
    model = aqt.quantize_model(Small(), [{"pattern": "body.*", "weight": "e4m3", "activation": "e4m3",
                                          "gradient": "e5m2"}])
    assert aqt.quantized_layers(model) == {"body.0": ("e4m3", "e4m3", "e5m2"), "body.2": ("e4m3", "e4m3", "e5m2")}
    assert type(model.head) is torch.nn.Linear


def test_quantize_model_first_rule_wins_and_defaults_fill_in():
    model = aqt.quantize_model(Small(), {"weight_format": "e4m3", "activation_format": "e4m3",
                                         "gradient_format": "e5m2",
                                         "rules": [{"pattern": "head", "format": "bf16", "gradient": "fp32"},
                                                   {"pattern": "body.2", "activation": "e3m4"}]})
    # fp32 is no quantization, as in configs.
    assert aqt.quantized_layers(model) == {"body.0": ("e4m3", "e4m3", "e5m2"), "body.2": ("e4m3", "e3m4", "e5m2"),
                                           "head": ("bf16", "bf16", None)}


def test_quantize_model_keeps_the_parameters():
    model = Small()
    weight = model.body[0].weight
    aqt.quantize_model(model, [{"pattern": "*", "format": "e5m2"}])
    assert model.body[0].weight is weight


# The C++ config reader's errors, each naming its key (the recipe is read as the trainer reads it).
@pytest.mark.parametrize("rules,message", [
    ([{"pattern": "body.*.weight", "format": "e4m3"}],
     r"recipe: key 'quantization.rules\[0\].pattern': \"body.\*.weight\" matches no layer of this model "
     r"\(patterns match layer names, without \".weight\"\); its layers: body.0, body.2, head"),
    ([{"pattern": "*", "format": "e4m3"}, {"pattern": "head", "format": "bf16"}],
     r"key 'quantization.rules\[1\].pattern': \"head\" never applies: every layer it matches is taken by an "
     r"earlier rule \(quantization.rules\[0\]"),
    ([{"pattern": "head"}], r"key 'quantization.rules\[0\]': sets nothing"),
    ([{"pattern": "head", "fromat": "e4m3"}], r"key 'quantization.rules\[0\].fromat': unknown key"),
    ({"weight_fromat": "e4m3"}, r"key 'quantization.weight_fromat': unknown key"),
    ({"forward": {"x": {"format": "e4m3", "granularity": "row", "block_rows": 16}}},
     r"key 'quantization.forward.x.block_rows': block_rows 16 needs granularity = \"block\""),
    ({"input_gradient": {"x": {"format": "e4m3"}}}, r"key 'quantization.input_gradient.x'"),
])
def test_quantize_model_refuses_mistaken_rules(rules, message):
    with pytest.raises(altgrad.Error, match=message):
        aqt.quantize_model(Small(), rules)


def test_quantize_model_with_an_unknown_format_names_it():
    with pytest.raises(altgrad.Error, match=r"recipe: key 'quantization.rules\[0\]' \(head\): .*no plugin named 'e9m9'"):
        aqt.quantize_model(Small(), [{"pattern": "head", "format": "e9m9"}])


# A plugin's refusal names the key that chose the plugin and the layer, as `altgrad-host run` does
# (issue #45: Python named only the plugin).
@pytest.mark.parametrize("recipe,message", [
    ({"weight_gradient": {"transform": {"name": "random_hadamard", "params": {"d": 12}}}},
     r"recipe: key 'quantization.weight_gradient.transform' \(body.0\): .*random_hadamard"),
    ({"forward": {"accumulator": {"format": "float", "params": {"exponent_bits": 99}}}},
     r"recipe: key 'quantization.forward.accumulator' \(body.0\): .*exponent_bits"),
    ({"weight_format": "int", "params": {"int": {"bits": 99}}},
     r"recipe: key 'quantization.weight_format' \(body.0\): .*bits"),
])
def test_a_plugins_refusal_names_the_recipe_key(recipe, message):
    with pytest.raises(altgrad.Error, match=message):
        aqt.quantize_model(Small(), recipe)


def test_tiles_that_do_not_divide_name_the_block_rows_key():
    # body.0's weight is [32, 4]: 32 rows, tiles of 3 rows do not divide it.
    model = aqt.quantize_model(Small(), {"weight_format": "e4m3", "weight": {"granularity": "block",
                                                                             "block_size": 4, "block_rows": 3}})
    with pytest.raises(altgrad.Error, match=r"recipe: key 'quantization.weight.block_rows': "
                                            r"tiles of 3x4 do not divide body.0.weight as \[32, 4\]"):
        model(torch.randn(2, 4))


@pytest.mark.parametrize("scaling", ["none", "current", "delayed"])
def test_a_quantized_model_trains(scaling):
    torch.manual_seed(1)
    x = torch.randn(256, 4)
    y = (x[:, :1] * 2 - x[:, 1:2] + 0.5 * x[:, 2:3] * x[:, 3:4])
    model = aqt.quantize_model(Small(), {"weight_format": "e4m3", "activation_format": "e4m3",
                                         "gradient_format": "e5m2", "scaling": scaling}, seed=3)
    losses = train_losses(model, x, y)
    assert len(aqt.quantized_layers(model)) == 3
    assert losses[-1] < 0.25 * losses[0], losses[::10]


def test_scaling_is_the_trainers_power_of_two_rule():
    # scale = the largest 2^k <= max_finite / (amax * 2^margin); E4M3's max_finite is 448.
    # current: amax 3 -> 448/3 = 149.3 -> 128; then amax 96 -> 4.67 -> 4 (96*4 = 384 exact).
    # delayed: the second call still uses the history's amax, 3 -> 128: 96*128 saturates to 448 -> 3.5.
    first, second = torch.tensor([3.0, -1.0]), torch.tensor([96.0, 1.0])
    current = aqt.Quantizer("e4m3", scaling="current")
    assert current(first).tolist() == [3.0, -1.0] and current.scaling.scale == 128.0
    assert current(second).tolist() == [96.0, 1.0] and current.scaling.scale == 4.0
    delayed = aqt.Quantizer("e4m3", scaling="delayed")
    delayed(first)
    assert delayed(second).tolist() == [3.5, 1.0] and delayed.scaling.scale == 128.0
    margin = aqt.Quantizer("e4m3", scaling="current", margin=2)  # 448 / (3 * 4) = 37.3 -> 32
    margin(first)
    assert margin.scaling.scale == 32.0


def test_a_scale_format_plugin_gets_the_recipes_parameters():
    # "float" with E4M3's fields (fn: no infinities) is E4M3: its block scales must be e4m3's, as the
    # trainer makes them. Without the parameters it would be the plugin's default, E5M2.
    model = aqt.quantize_model(Small(), {
        "weight_format": "e4m3",
        "weight": {"granularity": "block", "block_size": 4, "scale_format": "float", "scale_rule": "nearest"},
        "params": {"float": {"exponent_bits": 4, "mantissa_bits": 3, "specials": "fn"}}})
    torch.manual_seed(1)
    w = torch.randn(32, 32) * 0.37
    got = forward_weight_copy(model.body[2], w)
    e4m3 = aqt.default_registry().format("e4m3")
    want = e4m3.quantize(w.numpy(), block_size=4, scale_rule="nearest", scale_format="e4m3").output
    assert torch.equal(got, torch.from_numpy(want))
    e5m2_scaled = e4m3.quantize(w.numpy(), block_size=4, scale_rule="nearest", scale_format="e5m2").output
    assert not torch.equal(got, torch.from_numpy(e5m2_scaled))
