"""Gradients at the singular points of the ops that left core for sadl-layers (``arctan2``,
``hypot``, ``prod``, ``std``, ``cumprod``, ``clip``), compared with PyTorch's.

Where the math has a finite answer (``std`` of a constant, ``cumprod`` and ``prod`` through a
zero, ``clip`` at its bounds) sadl must give PyTorch's value, never the NaN of a naive 0/0. Where
PyTorch gives NaN (``hypot`` at the origin) sadl gives the minimal subgradient, as for ``norm``,
and the test says so.
"""

import pytest
import sadl
from sadl_check.torch_parity import (
    assert_gradient_matches_torch,
    assert_singular_point_matches_torch,
)
from sadl_layers.ops import binary, piecewise, reductions

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")


def _axis(f):
    """A torch reduction taking NumPy's axis=/ddof= names."""
    return lambda x, axis=None, **kw: f(x, axis, **kw)


TORCH = {
    "arctan2": torch.atan2,
    "hypot": torch.hypot,
    "prod": lambda x: x.prod(),
    "std": _axis(lambda x, axis, ddof=0: x.std(dim=axis, correction=ddof)),
    "cumprod": _axis(lambda x, axis: x.flatten().cumprod(0) if axis is None else x.cumprod(axis)),
    "clip": lambda x, lo=None, hi=None: torch.clamp(x, lo, hi),
}
#: Where sadl deliberately differs from PyTorch's NaN: op name -> why.
SADL_FINITE_WHERE_TORCH_IS_NAN = {
    "hypot": "at the origin hypot is a 2-norm: the minimal subgradient 0, as torch's norm gives",
}
OPS = [getattr(table, name) for table in (binary, reductions) for name in table.__all__]
OPS.append(piecewise.clip)
SINGULAR = [(op.name, i) for op in OPS for i in range(len(op.singular_points))]


def test_the_ops_with_singular_points_have_a_torch_reference():
    assert {name for name, _ in SINGULAR} == set(TORCH)


@pytest.mark.parametrize(("name", "index"), SINGULAR, ids=[f"{n}-{i}" for n, i in SINGULAR])
def test_gradient_at_a_singular_point_matches_torch(name, index):
    op = sadl.ops.get(name)
    assert_singular_point_matches_torch(op, index, TORCH[name], SADL_FINITE_WHERE_TORCH_IS_NAN)


@pytest.mark.parametrize(
    ("expression", "values"),
    [
        (lambda x: x.std(), [1.0, 1.0, 1.0]),
        (lambda x: x.cumprod(0).sum(), [2.0, 0.0, 3.0]),
        (lambda x: x.cumprod(0).sum(), [2.0, 0.0, 3.0, 0.0, 5.0]),
        (lambda x: x.prod(), [2.0, 0.0, 0.0]),
    ],
    ids=["std", "cumprod", "cumprod-2-zeros", "prod"],
)
def test_the_issue_expressions_match_torch(expression, values):
    assert_gradient_matches_torch(expression, values)
