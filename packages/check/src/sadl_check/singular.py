"""``singular_point_check``: what ``check_op`` asks of an op at a point where it is not smooth.

Float inputs become float64 leaf Tensors (as ``sadl.testing.gradcheck`` prepares them); the
gradient there must be finite and lie between the one-sided difference quotients.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sadl import Tensor
from sadl import grad as _grad
from sadl.testing import GradcheckError, Projection, is_float_input, keep_layout_copy

__all__ = ["singular_point_check"]


def _prepare(inputs: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """Float arrays/tensors as float64 leaf Tensors that require grad; the rest pass through."""
    prepared: list[Any] = []
    diff: list[int] = []
    for i, x in enumerate(inputs):
        if is_float_input(x):
            data = x.data if isinstance(x, Tensor) else x
            prepared.append(Tensor(keep_layout_copy(data.astype(np.float64)), requires_grad=True))
            diff.append(i)
        else:
            prepared.append(x)
    return prepared, diff


def singular_point_check(
    fn: Callable[..., Any],
    *inputs: Any,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    seed: int = 0,
    eps: float = 1e-6,
) -> None:
    """At a singular point: a finite gradient, between the one-sided derivatives.

    A one-sided derivative is estimated with two step sizes; where the estimates disagree the
    function jumps or has an infinite slope on that side (``arctan2`` at the origin, ``x ** x``
    left of 0), and only finiteness is asked there. Raises ``sadl.testing.GradcheckError``.
    """
    xs, diff = _prepare(inputs)
    project = Projection(seed)
    s = project(fn(*xs))
    targets = [xs[i] for i in diff]
    analytic = _grad(s, targets, allow_unused=True) if s.requires_grad else [None] * len(diff)

    def value() -> float:
        return float(project(fn(*xs)).data)

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        center = value()
        for i, x, a in zip(diff, targets, analytic):
            grad = np.zeros(x.shape) if a is None else np.asarray(a.data, dtype=np.float64)
            if not np.isfinite(grad).all():
                where = tuple(int(k) for k in np.argwhere(~np.isfinite(grad))[0])
                raise GradcheckError(
                    f"singular point: the gradient of input {i} is {grad[where]} at {where}"
                )
            data = x.data
            for j in np.ndindex(x.shape):
                sides = []
                for direction in (1.0, -1.0):
                    quotients = []
                    for step in (eps, eps / 10):
                        orig = data[j]
                        data[j] = orig + direction * step
                        quotients.append(direction * (value() - center) / step)
                        data[j] = orig
                    q1, q2 = quotients
                    if np.isfinite(q1) and abs(q1 - q2) <= atol + 0.01 * abs(q1):
                        sides.append(q2)
                if len(sides) < 2:
                    continue  # no derivative on one side: finiteness is all we ask
                lo, hi = min(sides), max(sides)
                tol = atol + rtol * max(abs(lo), abs(hi))
                if not lo - tol <= grad[j] <= hi + tol:
                    raise GradcheckError(
                        f"singular point: the gradient of input {i} at {j} is {grad[j]:.6g}, "
                        f"outside the one-sided derivatives [{lo:.6g}, {hi:.6g}]"
                    )
