"""Gradients at the singular points of sadl-layers' binary ufuncs (``arctan2``, ``hypot``),
compared with PyTorch's. Where PyTorch gives NaN (``hypot`` at the origin) sadl gives the minimal
subgradient, as for ``norm``, and the test says so. (Core's ops: core's tests.)
"""

import pytest
import sadl
from sadl_check.torch_parity import assert_singular_point_matches_torch
from sadl_layers.ops import binary

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")


TORCH = {
    "arctan2": torch.atan2,
    "hypot": torch.hypot,
}
#: Where sadl deliberately differs from PyTorch's NaN: op name -> why.
SADL_FINITE_WHERE_TORCH_IS_NAN = {
    "hypot": "at the origin hypot is a 2-norm: the minimal subgradient 0, as torch's norm gives",
}
OPS = [getattr(binary, name) for name in binary.__all__]
SINGULAR = [(op.name, i) for op in OPS for i in range(len(op.singular_points))]


def test_the_ops_with_singular_points_have_a_torch_reference():
    assert {name for name, _ in SINGULAR} == set(TORCH)


@pytest.mark.parametrize(("name", "index"), SINGULAR, ids=[f"{n}-{i}" for n, i in SINGULAR])
def test_gradient_at_a_singular_point_matches_torch(name, index):
    op = sadl.ops.get(name)
    assert_singular_point_matches_torch(op, index, TORCH[name], SADL_FINITE_WHERE_TORCH_IS_NAN)
