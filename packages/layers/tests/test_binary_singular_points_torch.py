"""Gradients of sadl-layers' binary ufuncs (``arctan2``, ``hypot``) at their singular points,
compared with PyTorch's. Where PyTorch gives NaN (``hypot`` at the origin) sadl gives the minimal
subgradient, as for ``norm``, and the test says so.
"""

import numpy as np
import pytest
import sadl
from sadl.testing import materialize
from sadl_layers.ops import binary

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")

TORCH = {"arctan2": torch.atan2, "hypot": torch.hypot}
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
    example = op.singular_points[index]
    inputs, params = materialize(example, np.random.default_rng(0))
    ours = [
        sadl.Tensor(x.copy(), requires_grad=True) if isinstance(x, np.ndarray) else x
        for x in inputs
    ]
    theirs = [
        torch.tensor(x, requires_grad=True) if isinstance(x, np.ndarray) else x for x in inputs
    ]
    out = op(*ours, **params)
    ref = TORCH[name](*theirs, **params)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, size=out.shape)
    (out * weights).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    for mine, reference in zip(ours, theirs):
        if not isinstance(mine, sadl.Tensor):
            continue
        assert np.isfinite(mine.grad).all(), f"{name}: {mine.grad}"
        expected = reference.grad.numpy()
        finite = np.isfinite(expected)
        np.testing.assert_allclose(mine.grad[finite], expected[finite], rtol=1e-10, atol=1e-12)
        if not finite.all():
            assert name in SADL_FINITE_WHERE_TORCH_IS_NAN, f"{name}: torch gives {expected}"
