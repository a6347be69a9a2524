"""altgrad.matmul through an accumulator plugin's instructions (docs/accumulation.md, docs/python.md):
the H200's own products of tests/data/mma (read here with NumPy from the layout its README gives,
E4M3 and BF16 codes decoded by their definitions) bit for bit, block scales on sums exact in any
accumulator, threads, and the mistakes."""
import os

import numpy as np
import pytest

import altgrad

MMA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "mma")


def _e4m3(codes):
    # OCP FP8 E4M3FN: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, subnormals at field 0.
    c = codes.astype(np.int64)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, np.ldexp(m.astype(np.float64), -9), np.ldexp((m + 8).astype(np.float64), e - 10))
    return np.where(c & 0x80, -v, v).astype(np.float32)


def _read_capture(name):
    """(a [M, K], b [N, K], [outputs as uint32 [M, N]...], bf16) of tests/data/mma/NAME.bin."""
    raw = open(os.path.join(MMA, name + ".bin"), "rb").read()
    assert raw[:8] == b"AGMMA001"
    kind, m, n, k, variants = np.frombuffer(raw, "<u4", 5, 8)
    at, bf16 = 28, kind == 2
    operands = []
    for rows in (m, n):
        if bf16:
            codes = np.frombuffer(raw, "<u2", rows * k, at).astype(np.uint32) << 16
            operands.append(codes.view(np.float32).reshape(rows, k))
            at += 2 * rows * k
        else:
            operands.append(_e4m3(np.frombuffer(raw, np.uint8, rows * k, at)).reshape(rows, k))
            at += rows * k
    outputs = [np.frombuffer(raw, "<u4", m * n, at + 4 * m * n * v).reshape(m, n) for v in range(variants)]
    assert at + 4 * m * n * variants == len(raw)
    return operands[0], operands[1], outputs, bf16


@pytest.mark.parametrize("name", ["e4m3_k512_normal", "e4m3_k4096_normal", "e4m3_k32_codes"])
def test_the_h200s_fp8_products_bit_for_bit(name):
    a, b, (default, fast), _ = _read_capture(name)
    # cuBLASLt's default FP8 GEMM promotes every 128 elements; fast accumulation never.
    got = altgrad.matmul(a, b.T, accumulator="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3",
                         promote_every=128)
    assert np.array_equal(got.view(np.uint32), default)
    got = altgrad.matmul(a, b.T, accumulator="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    assert np.array_equal(got.view(np.uint32), fast)


def test_the_h200s_bf16_product_bit_for_bit():
    a, b, (default,), bf16 = _read_capture("bf16_k256_spread")
    assert bf16
    got = altgrad.matmul(a, np.ascontiguousarray(b.T), accumulator="sm90_wgmma_fp16", a_format="bf16",
                         b_format="bf16")
    assert np.array_equal(got.view(np.uint32), default)


def test_threads_do_not_change_the_result():
    a, b, (default, fast), _ = _read_capture("e4m3_k512_normal")
    for threads in (2, 3, 0):
        got = altgrad.matmul(a, b.T, accumulator="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3",
                             promote_every=256, threads=threads)
        one = altgrad.matmul(a, b.T, accumulator="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3",
                             promote_every=256)
        assert np.array_equal(got.view(np.uint32), one.view(np.uint32))


def test_torch_tensors_give_a_tensor():
    import torch
    a, b, (default, _), _ = _read_capture("e4m3_k512_normal")
    c = altgrad.matmul(torch.from_numpy(a), torch.from_numpy(b).T, accumulator="sm90_wgmma_fp8",
                       a_format="e4m3", b_format="e4m3", promote_every=128)
    assert isinstance(c, torch.Tensor) and np.array_equal(c.numpy().view(np.uint32), default)


def test_block_scales_go_with_their_block():
    # All ones, K = 64: two UE8M0 blocks of 32; (i, j) = 32 sa[i, 0] sb[0, j] + 32 sa[i, 1] sb[1, j], exact.
    a, b = np.ones((2, 64), np.float32), np.ones((64, 3), np.float32)
    sa = np.array([[2, 4], [0.25, 8]], np.float32)
    sb = np.array([[1, 2, 0.5], [0.5, 1, 4]], np.float32)
    c = altgrad.matmul(a, b, accumulator="sm100_tcgen05_mxf8f6f4", a_format="e4m3", b_format="e4m3",
                       scale_a=sa, scale_b=sb)
    assert np.array_equal(c, 32 * sa @ sb)
    bad = sb.copy()
    bad[1, 2] = 3  # no power of two
    with pytest.raises(altgrad.Error, match=r"^scale_b\[1, 2\] = 3 is not a ue8m0_32 scale$"):
        altgrad.matmul(a, b, accumulator="sm100_tcgen05_mxf8f6f4", a_format="e4m3", b_format="e4m3",
                       scale_a=sa, scale_b=bad)
    with pytest.raises(ValueError, match=r"scale_a: expected 2 x 2, one scale per 32 elements"):
        altgrad.matmul(a, b, accumulator="sm100_tcgen05_mxf8f6f4", a_format="e4m3", b_format="e4m3",
                       scale_a=sa[:, :1], scale_b=sb)


def test_mistakes():
    a = np.ones((2, 64), np.float32)
    fp8 = dict(accumulator="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    bad = a.copy()
    bad[1, 5] = 0.3  # between E4M3's 0.28125 and 0.3125
    with pytest.raises(altgrad.Error, match=r"^a\[1, 5\] = 0.30000001192092896 is not a value of e4m3$"):
        altgrad.matmul(bad, a.T, **fp8)
    with pytest.raises(altgrad.Error, match=r"^b\[5, 1\] = 0.30000001192092896 is not a value of e4m3$"):
        altgrad.matmul(a, bad.T.copy(), **fp8)
    with pytest.raises(altgrad.Error, match="promote_every 48: not a multiple of sm90_wgmma_fp8's instruction "
                                            "depth 32"):
        altgrad.matmul(a, a.T, promote_every=48, **fp8)
    with pytest.raises(ValueError, match="rounding and mma_depth are the accumulation model's"):
        altgrad.matmul(a, a.T, rounding="nearest", **fp8)
    with pytest.raises(ValueError, match="matmul b_format: an instruction accumulator needs"):
        altgrad.matmul(a, a.T, accumulator="sm90_wgmma_fp8", a_format="e4m3")
    with pytest.raises(ValueError, match="matmul a_format: only for an accumulator plugin"):
        altgrad.matmul(a, a.T, accumulator="fp16", a_format="e4m3")
    with pytest.raises(ValueError, match="scale_a and scale_b go together"):
        altgrad.matmul(a, a.T, scale_a=np.ones((2, 2), np.float32), **fp8)
    with pytest.raises(ValueError, match="takes no block scales"):
        altgrad.matmul(a, a.T, scale_a=np.ones((2, 2), np.float32), scale_b=np.ones((2, 2), np.float32), **fp8)
