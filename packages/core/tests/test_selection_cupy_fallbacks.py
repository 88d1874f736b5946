"""The CuPy-only code paths of core's selection ops, run on NumPy arrays (CuPy lacks the ufunc
methods they replace)."""

import types

import numpy as np
from sadl._ops import selection


def test_doubling_scan_matches_accumulate(monkeypatch):
    x = np.random.default_rng(0).normal(size=(3, 9))
    x[1, 4] = np.nan
    not_numpy = types.SimpleNamespace(__name__="cupy")
    monkeypatch.setattr(selection, "array_module", lambda data: not_numpy)
    for ufunc in (np.maximum, np.minimum):
        for axis in (0, 1):
            np.testing.assert_array_equal(
                selection._scan(ufunc, x, axis), ufunc.accumulate(x, axis=axis)
            )
