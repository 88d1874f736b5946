"""The CuPy-only code path of cummax/cummin (a doubling scan), run on NumPy arrays."""

import numpy as np
from sadl_layers.ops import selection


def test_doubling_scan_matches_accumulate(monkeypatch):
    x = np.random.default_rng(0).normal(size=(3, 9))
    x[1, 4] = np.nan
    monkeypatch.setattr(selection, "array_module", lambda data: None)  # "not NumPy"
    for ufunc in (np.maximum, np.minimum):
        for axis in (0, 1):
            np.testing.assert_array_equal(
                selection._scan(ufunc, x, axis), ufunc.accumulate(x, axis=axis)
            )
