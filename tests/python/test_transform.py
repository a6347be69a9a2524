"""Transform plugins from Python (ABI 1.4): altgrad.transform on NumPy arrays and CPU tensors.

Expected values come from a dense Hadamard matrix built here (Sylvester's doubling) and
from the orthogonality the transforms promise, not from the plugins."""
import numpy as np
import pytest

import altgrad


def sylvester(d):
    h = np.array([[1.0]])
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def test_hadamard_matches_the_dense_matrix():
    t = altgrad.transform("hadamard", d=32)
    assert t.info["block_size"] == 32 and t.info["self_inverse"] and not t.info["uses_seed"]
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    y = t.apply(x)
    h = sylvester(32) / np.sqrt(32)
    want = np.concatenate([x[:, :32].astype(np.float64) @ h.T, x[:, 32:].astype(np.float64) @ h.T], axis=1)
    assert np.abs(y - want).max() < 1e-5
    assert y.shape == x.shape and y.dtype == np.float32


def test_known_values_d16():
    # H_16 e_0 / 4: every element 1/4, exactly.
    x = np.zeros((1, 16), dtype=np.float32)
    x[0, 0] = 1.0
    assert np.array_equal(altgrad.transform("hadamard").apply(x), np.full((1, 16), 0.25, dtype=np.float32))


def test_products_preserved_and_inverse():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 128)).astype(np.float32)
    b = rng.standard_normal((5, 128)).astype(np.float32)
    t = altgrad.transform("random_hadamard", d=16)
    ta, tb = t.apply(a, seed=9), t.apply(b, seed=9)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.abs(ta.astype(np.float64) @ tb.astype(np.float64).T - exact).max() < 1e-4
    assert np.abs(t.apply(ta, inverse=True, seed=9) - a).max() < 1e-5
    assert np.abs(t.apply(ta, seed=9) - a).max() > 1e-2  # not its own inverse


def test_bit_reproducible_and_seeded():
    x = np.random.default_rng(3).standard_normal((2, 3, 32)).astype(np.float32)
    t = altgrad.transform("random_hadamard", d=32)
    assert np.array_equal(t.apply(x, seed=5), t.apply(x, seed=5))
    assert not np.array_equal(t.apply(x, seed=5), t.apply(x, seed=6))
    fixed = altgrad.transform("random_hadamard", d=32, seed=5)
    assert not fixed.info["uses_seed"]
    assert np.array_equal(fixed.apply(x, seed=1), fixed.apply(x, seed=2))
    assert np.array_equal(fixed.apply(x), t.apply(x, seed=5))  # the fixed vector is seed 5's


def test_in_place():
    x = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
    t = altgrad.transform("hadamard")
    want = t.apply(x)
    t.apply(x, out=x)
    assert np.array_equal(x, want)


def test_bad_input_refused():
    t = altgrad.transform("hadamard", d=16)
    with pytest.raises(altgrad.Error, match="not a multiple of the block size 16"):
        t.apply(np.zeros((2, 24), dtype=np.float32))
    with pytest.raises(TypeError, match="float32"):
        t.apply(np.zeros((2, 16), dtype=np.float64))
    with pytest.raises(altgrad.Error, match="'d'"):
        altgrad.transform("hadamard", d=24)
    with pytest.raises(altgrad.Error, match="not a transform"):
        altgrad.transform("e4m3")


def test_torch_tensor():
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 16)
    y = altgrad.transform("hadamard").apply(x)
    assert isinstance(y, torch.Tensor)
    assert torch.allclose(altgrad.transform("hadamard").apply(y), x, atol=1e-6)
