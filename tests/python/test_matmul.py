"""altgrad.matmul (docs/accumulation.md, docs/python.md): the same bits as `altgrad-host gemm`, an
exact rational model written here with fractions.Fraction, transposed views, threads, torch
tensors, and the bad arguments."""
import math
from fractions import Fraction

import numpy as np
import pytest

import altgrad
from conftest import assert_same_floats, bits, run_host

E8M13 = {"exponent_bits": 8, "mantissa_bits": 13}


@pytest.mark.parametrize("args, fmt, kwargs", [
    (["--accumulator", "fp16", "--promote-every", "128"], "fp16", {"promote_every": 128}),
    (["--accumulator", "bf16", "--promote-every", "0", "--rounding", "nearest", "--mma-depth", "7",
      "--distribution", "fp8-e4m3"], "bf16", {"rounding": "nearest", "mma_depth": 7}),
    (["--accumulator", "fp32", "--promote-every", "48", "--rounding", "nearest", "--distribution", "uniform"],
     "fp32", {"rounding": "nearest", "promote_every": 48}),
])
def test_matmul_is_the_gemm_command_bit_for_bit(tmp_path, args, fmt, kwargs):
    run_host("gemm", "--k", "300", "--rows", "9", "--cols", "13", "--seed", "5", "--save", str(tmp_path), *args)
    a, b, c = (np.load(tmp_path / f"{x}.npy") for x in "abc")
    assert a.shape == (9, 300) and b.shape == (300, 13) and c.shape == (9, 13)
    kwargs = {"rounding": "toward-zero", **kwargs}
    assert_same_floats(altgrad.matmul(a, b, fmt, **kwargs), c)
    assert_same_floats(altgrad.matmul(a, b, fmt, threads=3, **kwargs), c)
    # Transposed views go in as the transposed layout, uncopied: the same bits.
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    assert_same_floats(altgrad.matmul(at.T, bt.T, fmt, **kwargs), c)


def test_a_14_bit_float_through_a_format_object(tmp_path, registry):
    params = [x for key, value in E8M13.items() for x in ("--param", f"{key}={value}")]
    run_host("gemm", "--k", "200", "--rows", "4", "--cols", "6", "--accumulator", "float", *params,
             "--promote-every", "64", "--rounding", "nearest", "--save", str(tmp_path))
    a, b, c = (np.load(tmp_path / f"{x}.npy") for x in "abc")
    e8m13 = registry.format("float", params=E8M13)
    assert_same_floats(altgrad.matmul(a, b, e8m13, rounding="nearest", promote_every=64), c)


def test_fp8_inputs_are_e4m3_values(tmp_path, registry):
    run_host("gemm", "--k", "64", "--rows", "8", "--cols", "8", "--accumulator", "fp16", "--promote-every", "0",
             "--distribution", "fp8-e4m3", "--save", str(tmp_path))
    for name in "ab":
        x = np.load(tmp_path / f"{name}.npy")
        assert (bits(registry.format("e4m3").quantize(x).output) == bits(x)).all()
        assert len(np.unique(x)) > 20


# The model by its definition, in exact rationals: each chunk's sum a Fraction, rounded straight to
# the format's grid (p significant bits, subnormals from 2^emin), promotions in float32.
GRIDS = {"fp16": (11, -14, 65504.0), "bf16": (8, -126, float.fromhex("0x1.fep127"))}


def round_to(s, grid, nearest):
    p, emin, largest = grid
    if s == 0:
        return 0.0
    x = abs(s)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - (p - 1))
    n = math.floor(x / q)
    rest = x - n * q
    if nearest and (2 * rest > q or (2 * rest == q and n % 2 == 1)):
        n += 1
    v = n * q
    if v > largest:
        v = math.inf if nearest else largest
    return math.copysign(float(v), s)


def exact_model(a, b, grid, nearest, g, promote):
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), np.float32)
    interval = promote or k
    for i in range(m):
        for j in range(n):
            total, acc = np.float32(0), 0.0
            for start in range(0, k, interval):
                end = min(k, start + interval)
                for k0 in range(start, end, g):
                    s = Fraction(acc) + sum(Fraction(float(a[i, t])) * Fraction(float(b[t, j]))
                                            for t in range(k0, min(end, k0 + g)))
                    acc = round_to(s, grid, nearest)
                total = np.float32(total + np.float32(acc))
                acc = 0.0
            c[i, j] = total
    return c


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("rounding", ["toward-zero", "nearest"])
@pytest.mark.parametrize("g, promote", [(32, 0), (5, 0), (8, 24), (6, 20), (1, 1)])
def test_matmul_is_the_exact_model(fmt, rounding, g, promote):
    rng = np.random.default_rng(g * 100 + promote)
    # bf16: exponents over +-48 binades, chunks whose float64 sums are not exact; fp16: within its range.
    spread = {"fp16": 5, "bf16": 40}[fmt]
    a = (rng.standard_normal((2, 45)) * 2.0 ** rng.integers(-spread, spread + 1, (2, 45))).astype(np.float32)
    b = (rng.standard_normal((45, 3)) * 2.0 ** rng.integers(-3, 4, (45, 3))).astype(np.float32)
    got = altgrad.matmul(a, b, fmt, rounding=rounding, mma_depth=g, promote_every=promote)
    assert_same_floats(got, exact_model(a, b, GRIDS[fmt], rounding == "nearest", g, promote))


def test_torch_tensors_give_a_tensor():
    import torch
    torch.manual_seed(0)
    a, b = torch.randn(6, 100), torch.randn(100, 4)
    c = altgrad.matmul(a, b, "fp16", promote_every=32)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float32 and c.shape == (6, 4)
    assert_same_floats(c.numpy(), altgrad.matmul(a.numpy(), b.numpy(), "fp16", promote_every=32))
    assert torch.allclose(c, a @ b, rtol=0, atol=0.1)


def test_bad_arguments():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="expected nearest or toward-zero"):
        altgrad.matmul(a, b, "fp16", rounding="stochastic")
    with pytest.raises(ValueError, match="mma_depth 0"):
        altgrad.matmul(a, b, "fp16", mma_depth=0)
    with pytest.raises(ValueError, match="promote_every -1"):
        altgrad.matmul(a, b, "fp16", promote_every=-1)
    with pytest.raises(ValueError, match="inner sizes differ"):
        altgrad.matmul(a, a, "fp16")
    with pytest.raises(ValueError, match="2-D"):
        altgrad.matmul(np.ones(3, np.float32), b, "fp16")
    with pytest.raises(TypeError, match="float32"):
        altgrad.matmul(a.astype(np.float64), b, "fp16")
    with pytest.raises(TypeError, match="format plugin's name or an altgrad.Format"):
        altgrad.matmul(a, b, 16)
    with pytest.raises(altgrad.Error, match="no plugin named 'fp17'"):
        altgrad.matmul(a, b, "fp17")
    with pytest.raises(altgrad.Error, match="at most 22 significant bits"):
        altgrad.matmul(a, b, "e0m7", rounding="nearest")
