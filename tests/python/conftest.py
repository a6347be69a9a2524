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
