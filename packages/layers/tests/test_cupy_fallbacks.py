"""The CuPy-only code paths of the scatter and selection ops, run on NumPy arrays (CuPy lacks
these ufunc methods)."""

import numpy as np
from sadl_layers.ops import scatter_gather, selection


def test_doubling_scan_matches_accumulate(monkeypatch):
    x = np.random.default_rng(0).normal(size=(3, 9))
    x[1, 4] = np.nan
    monkeypatch.setattr(selection, "array_module", lambda data: None)  # "not NumPy"
    for ufunc in (np.maximum, np.minimum):
        for axis in (0, 1):
            np.testing.assert_array_equal(
                selection._scan(ufunc, x, axis), ufunc.accumulate(x, axis=axis)
            )


def test_multiply_at_in_rounds_matches_numpy_multiply_at():
    key = (np.array([[0, 0, 2], [1, 0, 0]]), np.array([[1, 1, 3], [0, 1, 1]]))
    values = np.arange(2.0, 8.0).reshape(2, 3)
    expected = np.ones((3, 4))
    np.multiply.at(expected, key, values)
    target = np.ones((3, 4))
    scatter_gather._multiply_at_in_rounds(target, key, values)
    np.testing.assert_array_equal(target, expected)
