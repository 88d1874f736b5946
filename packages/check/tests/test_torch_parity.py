"""``sadl_check.torch_parity``: PyTorch as the reference for an op (skipped without torch)."""

import numpy as np
import pytest
import sadl
from sadl.plugins import Example, OpDef
from sadl_check.torch_parity import (
    assert_gradient_matches_torch,
    assert_matches_torch,
    assert_singular_point_matches_torch,
)

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")

# The derivative of x**3 is 3x**2, not 2x**2 (as fake_check_plugins/wronggrad.py).
WRONG_CUBE = OpDef(
    "wrong_cube",
    lambda x: x**3,
    (lambda g, out, x: 2 * g * x * x,),
    singular_points=(Example(np.array([0.0, 1.0])),),
)
# The right first derivative, as a constant in x: its second derivative is 0, not 6x.
FLAT_CUBE = OpDef(
    "flat_cube", lambda x: x**3, (lambda g, out, x: 3 * g * np.asarray(getattr(x, "data", x)) ** 2,)
)


def test_a_matching_function_passes_forward_gradient_and_double_backward():
    a, b = np.array([[0.5, -1.0], [2.0, 0.1]]), np.array([[1.5, 0.3], [-0.7, 2.0]])
    assert_matches_torch(lambda x, y: (x * y).tanh(), lambda x, y: (x * y).tanh(), a, b)
    assert_matches_torch(lambda x: x.exp(), torch.exp, a, double=False)


def test_each_difference_is_named():
    x = np.array([0.5, -1.0, 2.0])
    with pytest.raises(AssertionError, match="forward"):
        assert_matches_torch(lambda t: t * 2.0, lambda t: t * 2.0001, x)
    with pytest.raises(AssertionError, match="grad"):
        assert_matches_torch(WRONG_CUBE, lambda t: t**3, x)
    assert_matches_torch(FLAT_CUBE, lambda t: t**3, x, double=False)
    with pytest.raises(AssertionError, match="double backward"):
        assert_matches_torch(FLAT_CUBE, lambda t: t**3, x)


def test_a_singular_point_matches_torch_or_says_which_op_differs():
    absolute = sadl.ops.get("absolute")
    assert_singular_point_matches_torch(absolute, 0, torch.abs)
    with pytest.raises(AssertionError, match="absolute"):
        assert_singular_point_matches_torch(absolute, 0, lambda t: t.abs() * 1.001)
    with pytest.raises(AssertionError, match="wrong_cube"):
        assert_singular_point_matches_torch(WRONG_CUBE, 0, lambda t: t**3)


def test_an_expression_gradient_matches_torch_or_fails():
    assert_gradient_matches_torch(lambda x: (x**x).sum(), [0.0, 1.0])
    with pytest.raises(AssertionError):  # sadl's cube has 2x**2 here, torch's 3x**2
        assert_gradient_matches_torch(
            lambda x: WRONG_CUBE(x).sum() if isinstance(x, sadl.Tensor) else (x**3).sum(),
            [0.5, 2.0],
        )
