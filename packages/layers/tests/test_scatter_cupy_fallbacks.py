"""The CuPy-only code path of the scatter ops, run on NumPy arrays (CuPy lacks
``multiply.at``)."""

import numpy as np
from sadl_layers.ops import scatter_gather


def test_multiply_at_in_rounds_matches_numpy_multiply_at():
    key = (np.array([[0, 0, 2], [1, 0, 0]]), np.array([[1, 1, 3], [0, 1, 1]]))
    values = np.arange(2.0, 8.0).reshape(2, 3)
    expected = np.ones((3, 4))
    np.multiply.at(expected, key, values)
    target = np.ones((3, 4))
    scatter_gather._multiply_at_in_rounds(target, key, values)
    np.testing.assert_array_equal(target, expected)
