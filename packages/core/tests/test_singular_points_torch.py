"""Gradients at the ops' declared singular points, compared with PyTorch's.

Where the math has a finite answer (``norm`` at 0, ``x ** 0`` and ``x ** x`` at 0, ties) sadl
must give PyTorch's value, never the NaN of a naive 0/0: ``std`` of a constant, ``cumprod`` and
``prod`` through a zero, ``clip`` at its bounds. (``arctan2`` and ``hypot`` are sadl-layers'.)
"""

import pytest
import sadl
from sadl._builtin import CORE_OPS
from sadl_check.torch_parity import (
    assert_gradient_matches_torch,
    assert_singular_point_matches_torch,
)

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")


def _axis(f):
    """A torch reduction taking NumPy's axis=/ddof= names."""
    return lambda x, axis=None, **kw: f(x, axis, **kw)


TORCH = {
    "absolute": torch.abs,
    "relu": torch.relu,
    "power": lambda a, b: a**b,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "max": _axis(lambda x, axis: x.amax() if axis is None else x.amax(dim=axis)),
    "norm": _axis(lambda x, axis: torch.linalg.vector_norm(x, dim=axis)),
    "prod": lambda x: x.prod(),
    "std": _axis(lambda x, axis, ddof=0: x.std(dim=axis, correction=ddof)),
    "cumprod": _axis(lambda x, axis: x.flatten().cumprod(0) if axis is None else x.cumprod(axis)),
    "clip": lambda x, lo=None, hi=None: torch.clamp(x, lo, hi),
}
#: Where sadl deliberately differs from PyTorch's NaN: op name -> why.
SADL_FINITE_WHERE_TORCH_IS_NAN: dict[str, str] = {}  # (hypot's case: sadl-layers' tests)
SINGULAR = [(op.name, i) for op in CORE_OPS for i in range(len(op.singular_points))]


def test_every_op_with_singular_points_has_a_torch_reference():
    assert {name for name, _ in SINGULAR} <= set(TORCH)
    assert len(SINGULAR) >= 11


@pytest.mark.parametrize(("name", "index"), SINGULAR, ids=[f"{n}-{i}" for n, i in SINGULAR])
def test_gradient_at_a_singular_point_matches_torch(name, index):
    op = sadl.ops.get(name)
    assert_singular_point_matches_torch(op, index, TORCH[name], SADL_FINITE_WHERE_TORCH_IS_NAN)


@pytest.mark.parametrize(
    ("expression", "values"),
    [
        (lambda x: x.norm(), [0.0, 0.0]),
        (lambda x: (x**0).sum(), [0.0, 1.0]),
        (lambda x: (x**x).sum(), [0.0, 1.0]),
        (lambda x: (x**2).sum(), [0.0, 1.0]),
        (lambda x: x.abs().sum() + x.relu().sum(), [0.0, -1.0]),
        (lambda x: x.std(), [1.0, 1.0, 1.0]),
        (lambda x: x.cumprod(0).sum(), [2.0, 0.0, 3.0]),
        (lambda x: x.cumprod(0).sum(), [2.0, 0.0, 3.0, 0.0, 5.0]),
        (lambda x: x.prod(), [2.0, 0.0, 0.0]),
    ],
    ids=["norm", "pow0", "xpowx", "square", "abs", "std", "cumprod", "cumprod-2-zeros", "prod"],
)
def test_gradients_through_zeros_and_constants_match_torch(expression, values):
    assert_gradient_matches_torch(expression, values)
