"""Format.quantize / encode / decode against `altgrad-host quantize` (the C++ path), bit for bit."""
import re

import numpy as np
import pytest
import torch

import altgrad
from conftest import assert_same_floats, bits, host_json, run_host

ROUNDINGS = ["nearest", "stochastic", "toward-zero"]


def make_inputs():
    """Specials, float32 subnormals, and values over 2^-40 .. 2^40 (every format's range and past it)."""
    rng = np.random.default_rng(20261124)
    specials = [0.0, -0.0, 1.0, -1.0, 0.1, 464.0, 1e5, -1e5, np.nan, np.inf, -np.inf, 1e-40, -1e-45, 3.0e38,
                0.5, 1.5, 2.5, 448.0, 57344.0, 240.0, 6.0, 7.5]
    spread = rng.standard_normal(3000) * np.exp2(rng.uniform(-40, 40, 3000))
    return np.concatenate([np.array(specials), spread]).astype(np.float32)


X = make_inputs()
FINITE = X[np.isfinite(X)]  # encode refuses what a format cannot encode (fp4_e2m1 has no NaN code)


def host_quantize(name, x, *options):
    """altgrad-host quantize NAME OPTIONS --counts on x: (values, overflow, underflow)."""
    text = "\n".join("nan" if np.isnan(v) else float(v).hex() for v in x.astype(np.float64))
    p = run_host("quantize", name, "--counts", *options, stdin=text)
    values = np.array([float.fromhex(t) if "nan" not in t else np.nan for t in p.stdout.split()], dtype=np.float64)
    m = re.search(r"overflow (\d+) underflow (\d+) of (\d+)", p.stderr)
    assert m and int(m.group(3)) == len(x), p.stderr
    return values.astype(np.float32), int(m.group(1)), int(m.group(2))


def cases(registry):
    for name in sorted(registry.formats()):
        for rounding in registry.format(name).info["rounding_modes"]:
            yield name, rounding


@pytest.fixture(scope="module")
def formats(registry):
    return {name: registry.format(name) for name in registry.formats()}


def test_every_format_and_rounding_is_the_host_bit_for_bit(registry, formats):
    # Every rounding mode with overflow saturate; nonfinite with nearest (one host call each: the
    # host starts in about a second, so the suite keeps to these).
    checked = 0
    for name, rounding in cases(registry):
        for overflow in ["saturate"] + (["nonfinite"] if rounding == "nearest" else []):
            options = ["--rounding", rounding, "--overflow", overflow, "--seed", "12345", "--offset", "77"]
            expected, overflow_count, underflow_count = host_quantize(name, X, *options)
            y, o, u = formats[name].quantize(X, rounding=rounding, overflow=overflow, seed=12345, offset=77)
            assert_same_floats(y, expected)
            assert (o, u) == (overflow_count, underflow_count), (name, rounding, overflow)
            checked += 1
    assert checked >= 4 * 9  # every bundled format has nearest, and the float ones all three modes


@pytest.mark.parametrize("name,rounding,scale", [("e4m3", "nearest", 0.25), ("e5m2", "stochastic", 1024.0),
                                                 ("fp4_e2m1", "toward-zero", 3.0)])
def test_scaled_quantize_is_the_host(formats, name, rounding, scale):
    expected, o, u = host_quantize(name, X, "--rounding", rounding, "--scale", float(scale).hex(), "--seed", "9")
    y = formats[name].quantize(X, rounding=rounding, scale=scale, seed=9)
    assert_same_floats(y.output, expected)
    assert (y.overflow, y.underflow) == (o, u)


def test_few_random_bits_are_the_hosts_and_biased_as_documented(formats):
    # sr_bits is the host's --sr-bits, bit for bit, in one call and in threaded chunks.
    expected, o, u = host_quantize("e3m4", X, "--rounding", "stochastic", "--seed", "4", "--sr-bits", "3")
    y = formats["e3m4"].quantize(X, rounding="stochastic", seed=4, sr_bits=3)
    assert_same_floats(y.output, expected)
    assert (y.overflow, y.underflow) == (o, u)
    assert_same_floats(formats["e3m4"].quantize(X, rounding="stochastic", seed=4, sr_bits=3, threads=3).output,
                       expected)
    # 32 is the default; fewer bits change some results.
    full = formats["e3m4"].quantize(X, rounding="stochastic", seed=4).output
    assert_same_floats(formats["e3m4"].quantize(X, rounding="stochastic", seed=4, sr_bits=32).output, full)
    assert (bits(y.output) != bits(full)).any()
    # E4M3 between 1 and 1.125: x at f = 0.3 rounds up with 2 random bits at floor(0.3 * 4) / 4 = 0.25.
    n = 40000
    up = np.count_nonzero(formats["e4m3"].quantize(np.full(n, 1.0375, np.float32), rounding="stochastic",
                                                   seed=8, sr_bits=2).output == 1.125)
    assert abs(up / n - 0.25) < 5 * np.sqrt(0.25 * 0.75 / n)
    codes, _, _ = formats["e3m4"].encode(FINITE, rounding="stochastic", seed=4, sr_bits=3)
    assert_same_floats(formats["e3m4"].decode(codes),
                       formats["e3m4"].quantize(FINITE, rounding="stochastic", seed=4, sr_bits=3).output)
    assert formats["e3m4"].info["random_bits"] and formats["e3m4"].info["block_scales"]
    for bad in (0, 33, -1):
        with pytest.raises(ValueError, match=f"sr_bits {bad}: expected 1 .. 32"):
            formats["e3m4"].quantize(X, rounding="stochastic", sr_bits=bad)


def test_stochastic_rounding_in_chunks_equals_one_call(formats):
    e3m4 = formats["e3m4"]
    whole = e3m4.quantize(X, rounding="stochastic", seed=5, offset=1000).output
    cut = [0, 7, 1000, 2011, len(X)]
    pieces = [e3m4.quantize(X[a:b], rounding="stochastic", seed=5, offset=1000 + a).output for a, b in zip(cut, cut[1:])]
    assert (bits(np.concatenate(pieces)) == bits(whole)).all()
    threaded = e3m4.quantize(X, rounding="stochastic", seed=5, offset=1000, threads=3).output
    assert (bits(threaded) == bits(whole)).all()
    # ...and another seed or offset gives other roundings (so the check above could fail).
    assert (bits(e3m4.quantize(X, rounding="stochastic", seed=6, offset=1000).output) != bits(whole)).any()
    assert (bits(e3m4.quantize(X, rounding="stochastic", seed=5, offset=1001).output) != bits(whole)).any()


def test_output_goes_to_the_callers_buffer_without_a_copy(formats):
    x = X.copy()
    out = np.empty_like(x)
    result = formats["e4m3"].quantize(x, out=out)
    assert result.output is out
    expected = formats["e4m3"].quantize(X).output
    assert (bits(out) == bits(expected)).all()
    # In place: the input itself is the output.
    inplace = formats["e4m3"].quantize(x, out=x)
    assert inplace.output is x and (bits(x) == bits(expected)).all()
    # A view into a bigger buffer is written where it lies.
    big = np.zeros(len(X) + 10, dtype=np.float32)
    formats["e4m3"].quantize(X, out=big[5:5 + len(X)])
    assert (bits(big[5:5 + len(X)]) == bits(expected)).all() and not big[:5].any() and not big[-5:].any()


def test_torch_tensors_in_place_and_into_out(formats):
    t = torch.from_numpy(X.copy())
    address = t.data_ptr()
    expected = formats["e5m2"].quantize(X, rounding="stochastic", seed=3).output
    result = formats["e5m2"].quantize(t, rounding="stochastic", seed=3, out=t)
    assert result.output is t and t.data_ptr() == address
    assert (bits(t.numpy()) == bits(expected)).all()
    out = torch.empty(len(X))
    y = formats["e5m2"].quantize(torch.from_numpy(X), rounding="stochastic", seed=3, out=out).output
    assert y is out and (bits(out.numpy()) == bits(expected)).all()
    fresh = formats["e5m2"].quantize(torch.from_numpy(X).reshape(-1, 2), rounding="stochastic", seed=3).output
    assert isinstance(fresh, torch.Tensor) and fresh.shape == (len(X) // 2, 2)
    assert (bits(fresh.numpy().ravel()) == bits(expected)).all()


def test_encode_decode_round_trip_is_quantize(formats):
    for name in ("e4m3", "bf16", "fp4_e2m1", "fp32"):
        f = formats[name]
        codes, o, u = f.encode(FINITE, rounding="stochastic", seed=2)
        assert codes.dtype == {1: np.uint8, 2: np.uint16, 4: np.uint32}[f.info["code_bytes"]]
        q = f.quantize(FINITE, rounding="stochastic", seed=2)
        assert (o, u) == (q.overflow, q.underflow)
        assert_same_floats(f.decode(codes), q.output)


def test_decode_of_every_code_is_the_describe_table(registry, formats):
    for name in ("e4m3", "e5m2", "fp6_e3m2"):
        table = host_json("describe", name, "--table")["codes"]
        f = formats[name]
        codes = np.arange(len(table), dtype=f.code_dtype)
        values = f.decode(codes)
        # "hex" rather than "value": JSON writes a non-finite value as null, the hex text as inf or nan.
        expected = np.array([float.fromhex(c["hex"]) for c in table], dtype=np.float32)
        assert_same_floats(values, expected)


def test_block_scales_are_one_scale_per_block(formats):
    f = formats["fp4_e2m1"]
    x = FINITE[:96]
    scales = np.array([0.5, 8.0, 2.0 ** -20], dtype=np.float32)
    y = f.quantize(x, block_scales=scales, block_size=32).output
    expected = np.concatenate([f.quantize(x[32 * b:32 * b + 32], scale=float(s)).output for b, s in enumerate(scales)])
    assert (bits(y) == bits(expected)).all()
    codes = f.encode(x, block_scales=scales, block_size=32).codes
    assert (bits(f.decode(codes, block_scales=scales, block_size=32)) == bits(expected)).all()
    # Chunked over threads: whole blocks each, the same result.
    assert (bits(f.quantize(x, block_scales=scales, block_size=32, threads=2).output) == bits(y)).all()
    with pytest.raises(ValueError, match="expected 3 scales"):
        f.quantize(x, block_scales=scales[:2], block_size=32)


def test_wrong_input_raises_clear_errors(formats):
    e4m3 = formats["e4m3"]
    with pytest.raises(TypeError, match="expected a float32 array, got float64"):
        e4m3.quantize(X.astype(np.float64))
    with pytest.raises(TypeError, match="expected a float32 array, got int32"):
        e4m3.quantize(np.arange(4, dtype=np.int32))
    with pytest.raises(ValueError, match="not contiguous"):
        e4m3.quantize(X[::2])
    with pytest.raises(TypeError, match="expected a torch.float32 tensor, got torch.float64"):
        e4m3.quantize(torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="not contiguous"):
        e4m3.quantize(torch.zeros(4, 3).t())
    with pytest.raises(TypeError, match="expected a numpy.ndarray or a torch.Tensor, got list"):
        e4m3.quantize([1.0, 2.0])
    with pytest.raises(ValueError, match="rounding 'up': expected one of nearest, stochastic, toward-zero"):
        e4m3.quantize(X, rounding="up")
    with pytest.raises(ValueError, match="out has 3 elements"):
        e4m3.quantize(X, out=np.empty(3, dtype=np.float32))
    with pytest.raises(ValueError, match="overlaps"):
        shifted = X.copy()
        e4m3.quantize(shifted[1:], out=shifted[:-1])
    readonly = X.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        e4m3.quantize(X, out=readonly)
    with pytest.raises(TypeError, match="expected a uint8 array, got uint16"):
        e4m3.decode(np.zeros(4, dtype=np.uint16))


def test_a_plugins_refusal_carries_its_message(formats):
    # The plugin checks the scale (finite, > 0) and says why; the host names the plugin and the call.
    with pytest.raises(altgrad.Error, match=r"plugin 'e4m3': quantize failed .*scale"):
        formats["e4m3"].quantize(X, scale=-1.0)


def test_the_gil_is_released_while_the_plugin_runs(formats):
    # While a worker thread is inside a quantize call (tens of ms), the main thread's Python code
    # must run, waking every millisecond.
    import threading
    import time
    x = np.ones(1 << 24, dtype=np.float32)
    spans = []

    def work():
        for _ in range(4):
            start = time.perf_counter()
            formats["e4m3"].quantize(x, rounding="stochastic", out=x)
            spans.append((start, time.perf_counter()))

    worker = threading.Thread(target=work)
    wakeups = []
    worker.start()
    while worker.is_alive():
        time.sleep(0.001)
        wakeups.append(time.perf_counter())
    worker.join()
    # The first half of each span: the Python around the call (argument checks, the return) may
    # let the main thread in at its edges, but a call holding the GIL would leave the middle empty.
    inside = [t for t in wakeups if any(start < t < (start + end) / 2 for start, end in spans)]
    assert len(inside) >= 3, (len(inside), spans)
