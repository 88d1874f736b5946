"""Gradients at the ops' declared singular points, compared with PyTorch's.

Where the math has a finite answer (``norm`` at 0, ``x ** 0`` and ``x ** x`` at 0, ties) sadl
must give PyTorch's value, never the NaN of a naive 0/0. (``arctan2``, ``hypot``, ``prod``,
``std``, ``cumprod`` and ``clip`` are sadl-layers' ops now: tested there.)
"""

import numpy as np
import pytest
import sadl
from sadl._builtin import CORE_OPS
from sadl.testing import materialize

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


@pytest.mark.parametrize(
    ("expression", "values"),
    [
        (lambda x: x.norm(), [0.0, 0.0]),
        (lambda x: (x**0).sum(), [0.0, 1.0]),
        (lambda x: (x**x).sum(), [0.0, 1.0]),
        (lambda x: (x**2).sum(), [0.0, 1.0]),
        (lambda x: x.abs().sum() + x.relu().sum(), [0.0, -1.0]),
    ],
    ids=["norm", "pow0", "xpowx", "square", "abs"],
)
def test_the_issue_expressions_match_torch(expression, values):
    x = sadl.tensor(np.array(values), requires_grad=True)
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    expression(x).backward()
    expression(t).backward()
    np.testing.assert_allclose(x.grad, t.grad.numpy(), rtol=1e-12)
