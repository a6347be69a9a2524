"""Format.quantize with derived block scales (block_size= or block_shape= without block_scales): the
trainer's quantize_blocked, against an independent NumPy computation of OCP MX (E2M1 elements, E8M0
scales by the floor rule X = 2^(floor(log2 amax) - 2)) and against `altgrad-host quantize --block-size`."""
import numpy as np
import pytest
import torch

import altgrad
from conftest import assert_same_floats, forward_weight_copy, run_host

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # codes 0..7: an even index is an even mantissa


def e2m1(v):
    """OCP E2M1 of float64 values: the nearest grid value (ties to the even code), saturating at 6."""
    a = np.abs(v).reshape(-1, 1)
    d = np.abs(a - E2M1)
    nearest = d == d.min(axis=1, keepdims=True)
    even = nearest & (np.arange(8) % 2 == 0)
    pick = np.where(even.any(axis=1), even.argmax(axis=1), nearest.argmax(axis=1))
    return (np.sign(v).reshape(-1) * E2M1[pick]).reshape(v.shape)


def mx_reference(x, tile_rows, tile_cols, pre_scale=1.0):
    """x (2-D float32) through E2M1 with one E8M0 scale per tile_rows x tile_cols tile, by MX's floor rule."""
    y = np.empty_like(x)
    for r in range(0, x.shape[0], tile_rows):
        for c in range(0, x.shape[1], tile_cols):
            tile = x[r:r + tile_rows, c:c + tile_cols]
            amax = float(np.abs(tile).max())
            s = 1.0 if amax == 0 else 2.0 ** (2 - (np.frexp(amax)[1] - 1))  # 1/X, X = 2^(floor(log2 a) - 2)
            sc = np.float32(s * pre_scale)
            scaled = (tile * sc).astype(np.float64)  # float32 product, as the plugin forms it
            y[r:r + tile_rows, c:c + tile_cols] = e2m1(scaled).astype(np.float32) / sc
    return y


def sample(rows, cols, seed):
    """Normal values whose magnitude changes every 8 columns and every 4 rows (so tiles and rows of
    blocks get different scales), and one all-zero block."""
    rng = np.random.default_rng(seed)
    mag = np.exp2(rng.integers(-12, 12, size=(rows // 4 + 1, cols // 8 + 1)))
    x = rng.standard_normal((rows, cols)) * np.repeat(np.repeat(mag, 4, 0), 8, 1)[:rows, :cols]
    x[0, :32] = 0
    return x.astype(np.float32)


def test_mx_e2m1_blocks_of_32_along_rows(registry):
    fp4 = registry.format("fp4_e2m1")
    x = sample(4, 64, 1)
    y, overflow, underflow = fp4.quantize(x, block_size=32, scale_rule="mx_floor", scale_format="ue8m0")
    assert y.shape == x.shape
    assert_same_floats(y, mx_reference(x, 1, 32))
    # MX's floor rule lets a block's largest element exceed 6: some saturate.
    assert overflow > 0
    # The same by name "pow2" (E8M0's powers of two over float32's range), as an altgrad.Format, on
    # threads, and on a torch tensor.
    assert_same_floats(fp4.quantize(x, block_size=32).output, y)
    assert_same_floats(fp4.quantize(x, block_size=32, scale_format=registry.format("ue8m0"), threads=3).output, y)
    t = fp4.quantize(torch.from_numpy(x), block_size=32, scale_format="ue8m0").output
    assert isinstance(t, torch.Tensor)
    assert_same_floats(t.numpy(), y)
    # Rows of 48: a row's second block is short (16), with its own scale.
    x48 = sample(4, 48, 2)
    assert_same_floats(fp4.quantize(x48, block_size=32, scale_format="ue8m0").output, mx_reference(x48, 1, 32))


def test_mx_e2m1_tiles_of_16_by_16(registry):
    fp4 = registry.format("fp4_e2m1")
    x = sample(32, 48, 3)
    y = fp4.quantize(x, block_shape=(16, 16), scale_format="ue8m0").output
    assert_same_floats(y, mx_reference(x, 16, 16))
    assert not np.array_equal(y, mx_reference(x, 1, 16))  # tiles are not rows of blocks
    # pre_scale c: q(x*s*c)/(s*c).
    assert_same_floats(fp4.quantize(x, block_shape=(16, 16), scale_format="ue8m0", pre_scale=0.75).output,
                       mx_reference(x, 16, 16, 0.75))


def test_the_cli_gives_the_same_bits(registry, tmp_path):
    fp4 = registry.format("fp4_e2m1")
    x = sample(32, 48, 4)
    np.save(tmp_path / "x.npy", x)
    run_host("quantize", "fp4_e2m1", "--block-size", "16", "--block-rows", "16", "--scale-format", "ue8m0",
             "--scale-rule", "round_up", "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"))
    expected = np.load(tmp_path / "y.npy")
    assert_same_floats(fp4.quantize(x, block_shape=(16, 16), scale_rule="round_up", scale_format="ue8m0").output,
                       expected)


def test_the_nearest_rule_from_python_and_a_recipe(registry):
    # The rule issue #45 added through the table: X = a / 6 to the nearest power of two, ties up
    # (worked out by hand in tests/host/cli_test.cpp's QuantizeWithTheNearestScaleRule).
    fp4 = registry.format("fp4_e2m1")
    y = fp4.quantize(np.float32([8.4, 1, 9, 1]), block_size=2, scale_rule="nearest").output
    assert_same_floats(y, [6, 1, 8, 1])
    rules = {r.name: r for r in altgrad.scale_rules()}
    assert list(rules) == ["mx_floor", "round_up", "two_level", "nearest"]
    assert rules["nearest"].may_clip and not rules["nearest"].needs_tensor_amax
    assert rules["two_level"].needs_tensor_amax and not rules["round_up"].may_clip
    # The docstring names every rule of the table.
    assert " | ".join(rules) in " ".join(altgrad.Format.quantize.__doc__.split())
    # From a recipe: the config reader knows it, and QuantLinear's operands are quantized by it.
    import altgrad.torch as aqt
    recipe = {"weight_format": "fp4_e2m1", "activation_format": "fp32", "gradient_format": "fp32",
              "granularity": "block", "block_size": 2, "scale_format": "pow2", "scale_rule": "nearest"}
    resolved = altgrad.recipe.resolve(recipe, ["fc"])
    assert resolved.layers["fc"]["forward"]["w"]["scale_rule"] == "nearest"
    layer = aqt.QuantLinear(2, 2, bias=False, recipe=recipe, layer="fc")
    w = torch.tensor([[8.4, 1.0], [9.0, 1.0]])
    assert_same_floats(forward_weight_copy(layer, w).numpy(), [[6, 1], [8, 1]])


def test_block_options_refused_clearly(registry):
    fp4 = registry.format("fp4_e2m1")
    x = sample(4, 64, 5)
    with pytest.raises(altgrad.Error, match=r"tiles of 3x16 do not divide a tensor of \[4, 64\]"):
        fp4.quantize(x, block_shape=(3, 16))
    with pytest.raises(ValueError, match="block_shape=\\(2, 2\\) needs a 2-D array, got 1 dimensions"):
        fp4.quantize(x.reshape(-1), block_shape=(2, 2))
    with pytest.raises(ValueError, match="scale_rule 'floor': expected one of mx_floor, round_up, two_level, nearest"):
        fp4.quantize(x, block_size=32, scale_rule="floor")
    with pytest.raises(ValueError, match="pre_scale"):
        fp4.quantize(x, block_size=32, pre_scale=0.0)
    with pytest.raises(ValueError, match="scale_rule is for derived block scales"):
        fp4.quantize(x, block_scales=np.ones(8, np.float32), block_size=32, scale_rule="mx_floor")
    with pytest.raises(ValueError, match="not both"):
        fp4.quantize(x, block_size=32, block_shape=(2, 32))
    with pytest.raises(altgrad.Error, match="quantize: scale_format 'e9m9': no plugin named 'e9m9'"):
        fp4.quantize(x, block_size=32, scale_format="e9m9")
