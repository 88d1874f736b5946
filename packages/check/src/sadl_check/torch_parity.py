"""PyTorch as the reference for an op, in float64: forward, gradient and double backward
(``assert_matches_torch``), the gradient at each of its declared singular points
(``assert_singular_point_matches_torch``), and the gradient of one scalar expression at given
values (``assert_gradient_matches_torch``).

torch is imported when one of these is called: it is a test dependency of the plugin that uses
them, never one of sadl-check. Each raises ``AssertionError`` saying what differs.

    >>> import numpy as np, torch
    >>> from sadl_check.torch_parity import assert_matches_torch
    >>> assert_matches_torch(lambda x: x.tanh(), torch.tanh, np.array([0.5, -1.0]))
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import sadl

from sadl_check.checks import materialize

__all__ = [
    "assert_gradient_matches_torch",
    "assert_matches_torch",
    "assert_singular_point_matches_torch",
]


def _torch() -> Any:
    return importlib.import_module("torch")


def _numpy(value: Any, shape: tuple[int, ...]) -> Any:
    """A sadl or torch result (or a missing gradient: zeros of ``shape``) as a NumPy array."""
    if value is None:
        return np.zeros(shape)
    if hasattr(value, "detach"):
        return value.detach().numpy()
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def _close(ours: Any, theirs: Any, shape: tuple[int, ...], what: str) -> None:
    np.testing.assert_allclose(
        _numpy(ours, shape), _numpy(theirs, shape), rtol=1e-9, atol=1e-12, err_msg=what
    )


def assert_matches_torch(
    ours: Callable[..., Any],
    theirs: Callable[..., Any],
    *inputs: Any,
    double: bool = True,
    seed: int = 0,
) -> None:
    """``ours`` (on sadl Tensors) gives what ``theirs`` (on torch tensors) gives for the float64
    arrays ``inputs``: the forward, the gradient of a random weighting of the output and, with
    ``double``, the second derivative along random directions (to rtol 1e-9).
    """
    torch = _torch()
    rng = np.random.default_rng(seed)
    xs = [sadl.tensor(a, requires_grad=True) for a in inputs]
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    out, ref = ours(*xs), theirs(*ts)
    _close(out, ref, (), "forward")
    w = rng.normal(size=out.shape)
    grads = sadl.grad((out * w).sum(), xs, create_graph=double, allow_unused=True)
    ref_grads = torch.autograd.grad(
        (ref * torch.tensor(w)).sum(), ts, create_graph=double, allow_unused=True
    )
    for g, r, x in zip(grads, ref_grads, inputs, strict=True):
        _close(g, r, np.shape(x), "grad")
    if not double:
        return
    vs = [rng.normal(size=np.shape(a)) for a in inputs]
    ours2 = [(g * v).sum() for g, v in zip(grads, vs) if g is not None and g.requires_grad]
    theirs2 = [(g * torch.tensor(v)).sum() for g, v in zip(ref_grads, vs) if g is not None]
    theirs2 = [t for t in theirs2 if t.requires_grad]
    second: Any = [None] * len(xs)
    if ours2:
        second = sadl.grad(sum(ours2[1:], ours2[0]), xs, allow_unused=True)
    ref_second: Any = [None] * len(ts)
    if theirs2:
        ref_second = torch.autograd.grad(sum(theirs2[1:], theirs2[0]), ts, allow_unused=True)
    for g, r, x in zip(second, ref_second, inputs, strict=True):
        _close(g, r, np.shape(x), "double backward")


def assert_singular_point_matches_torch(
    op: Any, index: int, reference: Callable[..., Any], torch_nan_ok: Collection[str] = ()
) -> None:
    """At ``op.singular_points[index]``, ``op`` (a registered OpDef) gives ``reference``'s (a
    torch function taking the op's inputs and parameters) value, and a finite gradient equal to
    torch's wherever torch's is finite; where torch's is NaN, ``op.name`` must be in
    ``torch_nan_ok`` (the ops where sadl deliberately gives a finite subgradient).
    """
    torch = _torch()
    name = op.name
    inputs, params = materialize(op.singular_points[index], np.random.default_rng(0))
    ours = [
        sadl.Tensor(x.copy(), requires_grad=True) if isinstance(x, np.ndarray) else x
        for x in inputs
    ]
    theirs = [
        torch.tensor(x, requires_grad=True) if isinstance(x, np.ndarray) else x for x in inputs
    ]
    out = op(*ours, **params)
    ref = reference(*theirs, **params)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12, err_msg=name)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, size=out.shape)
    (out * weights).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    for mine, theirs_x in zip(ours, theirs, strict=True):
        if not isinstance(mine, sadl.Tensor):
            continue
        assert np.isfinite(mine.grad).all(), f"{name}: gradient {mine.grad} is not finite"
        expected = theirs_x.grad.numpy()
        finite = np.isfinite(expected)
        np.testing.assert_allclose(
            mine.grad[finite], expected[finite], rtol=1e-10, atol=1e-12, err_msg=name
        )
        if not finite.all():
            assert name in torch_nan_ok, f"{name}: torch gives {expected}, sadl {mine.grad}"


def assert_gradient_matches_torch(expression: Callable[[Any], Any], values: Any) -> None:
    """``expression(x).backward()`` (a scalar written with methods both libraries share) gives
    ``x`` torch's gradient at the float64 ``values`` (to rtol 1e-12): a singular point reached
    through a composition of ops, not only through one op.
    """
    torch = _torch()
    x = sadl.tensor(np.array(values), requires_grad=True)
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    expression(x).backward()
    expression(t).backward()
    np.testing.assert_allclose(x.grad, t.grad.numpy(), rtol=1e-12)
