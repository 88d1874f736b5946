"""The CuPy-only code paths of the new ops, run on NumPy arrays (CuPy lacks these ufunc methods)."""

import numpy as np
from sadl import backends


def test_multiply_at_in_rounds_matches_numpy_multiply_at():
    key = (np.array([[0, 0, 2], [1, 0, 0]]), np.array([[1, 1, 3], [0, 1, 1]]))
    values = np.arange(2.0, 8.0).reshape(2, 3)
    expected = np.ones((3, 4))
    np.multiply.at(expected, key, values)
    target = np.ones((3, 4))
    backends._multiply_at_in_rounds(target, key, values)
    np.testing.assert_array_equal(target, expected)
