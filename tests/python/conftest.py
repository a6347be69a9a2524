"""Fixtures of the Python package's suite (run by CTest: tests/python/CMakeLists.txt sets the
environment; by hand: PYTHONPATH=build/python ALTGRAD_HOST=build/altgrad-host
ALTGRAD_PLUGIN_DIR=build/plugins /usr/bin/python3 -m pytest tests/python)."""
import json
import os
import subprocess

import numpy as np
import pytest

import altgrad

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plugin_dir():
    return altgrad.default_plugin_dir()


def host_path():
    path = os.environ.get("ALTGRAD_HOST") or os.path.join(ROOT, "build", "altgrad-host")
    if not os.access(path, os.X_OK):
        pytest.fail(f"altgrad-host not found at {path} (set ALTGRAD_HOST)")
    return path


def run_host(*args, stdin=None, plugins=None, check=True):
    """altgrad-host --plugins DIR ARGS..., its CompletedProcess (text)."""
    p = subprocess.run([host_path(), "--plugins", plugins or plugin_dir(), *args], input=stdin,
                       capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"altgrad-host {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def host_json(*args, plugins=None):
    return json.loads(run_host(*args, "--json", plugins=plugins).stdout)


@pytest.fixture(scope="session")
def registry():
    reg = altgrad.Registry(plugin_dir())
    yield reg
    reg.close()


def train_losses(model, x, target, steps=60, lr=1e-2):
    """The training losses of `steps` Adam steps of model(x) against target (mean squared error)."""
    import torch
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def bits(a):
    """float32 values as their bit patterns (exact comparison, -0 apart from +0)."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def assert_same_floats(actual, expected):
    """Bit-identical, except that any NaN equals any NaN (the CLI prints NaN without its payload)."""
    actual, expected = np.asarray(actual, dtype=np.float32), np.asarray(expected, dtype=np.float32)
    assert actual.shape == expected.shape
    nan_a, nan_e = np.isnan(actual), np.isnan(expected)
    assert (nan_a == nan_e).all(), f"NaN at {np.nonzero(nan_a != nan_e)[0][:5]}"
    keep = ~nan_a
    differ = np.nonzero(bits(actual[keep]) != bits(expected[keep]))[0]
    assert differ.size == 0, (f"{differ.size} values differ, first at {differ[0]}: "
                              f"{actual[keep][differ[0]]!r} != {expected[keep][differ[0]]!r}")


# ---- Products computed by a BLAS or a vectorised reduction: compared within a bound, not bit for bit.
# Which kernel OpenBLAS and ATen take depends on the CPU (and on OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY),
# and each adds in its own order, so two float32 products of the same operands may differ in the last
# bits even through one call (a kernel may peel for the buffers' alignment). Any order of float32
# additions, with or without FMA, keeps a sum of n terms within gamma_n * sum |term| of the exact one
# (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.1, (3.4)-(3.5)),
# gamma_n = n u / (1 - n u), u = 2^-24 (round to nearest). The reference is the float64 sum of the
# same terms, whose own error is at most gamma_n(2^-53) of the same magnitude.

U32, U64 = 2.0 ** -24, 2.0 ** -53


def gamma(n, u=U32):
    return n * u / (1 - n * u)


def assert_sum_within_bound(actual, exact, magnitude, n):
    """actual (float32) is a float32 sum of n terms whose float64 sum is `exact` and whose sum of
    magnitudes is `magnitude`, in any order: |actual - exact| <= (gamma_n(u32) + gamma_n(u64)) * magnitude."""
    actual = np.asarray(actual, np.float64)
    exact, magnitude = np.asarray(exact, np.float64), np.asarray(magnitude, np.float64)
    assert actual.shape == exact.shape, (actual.shape, exact.shape)
    bound = (gamma(n) + gamma(n, U64)) * magnitude
    error = np.abs(actual - exact)
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    assert (error <= bound).all(), (f"{int((error > bound).sum())} of {error.size} sums beyond the bound, worst at "
                                    f"{worst}: {actual[worst]!r} vs exact {exact[worst]!r} (bound {bound[worst]:.3g})")


def assert_product_within_bound(actual, a, b):
    """actual = a @ b as some float32 BLAS kernel computes it (a [M, K], b [K, N]; tensors or arrays)."""
    a64, b64 = (np.asarray(t.detach() if hasattr(t, "detach") else t, np.float64) for t in (a, b))
    assert_sum_within_bound(np.asarray(actual.detach() if hasattr(actual, "detach") else actual), a64 @ b64,
                            np.abs(a64) @ np.abs(b64), a64.shape[1])


def forward_weight_copy(layer, w):
    """The weight's forward copy, q(W), as a QuantLinear whose input stays float32 uses it: the
    layer's output for the identity matrix (each output one product with 1, the rest with 0: exact),
    with w as its weight and no bias."""
    import torch
    with torch.no_grad():
        layer.weight.copy_(w)
        if layer.bias is not None:
            layer.bias.zero_()
        return layer(torch.eye(w.shape[1])).t().contiguous()
