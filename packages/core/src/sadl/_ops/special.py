"""Ops about the data itself rather than its values: dtype casts, device moves, guards."""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl._records import Example, OpDef
from sadl.backends import device_of, to_device


def _astype(x, *, dtype, copy=True):
    """The same values as ``dtype`` (a float cast is differentiable; int/bool results are not)."""
    return x.astype(dtype, copy=copy)


ASTYPE = OpDef(
    "astype",
    _astype,
    (lambda g, out, x, *, dtype, copy=True: g.astype(x.dtype),),
    numpy_funcs=(np.astype,) if hasattr(np, "astype") else (),
    examples=(Example((3, 4), dtype=np.float64),),
)


def _to(x, *, device, source=None):
    """The same values on ``device`` (differentiable: the gradient moves back to ``x``'s device).

    ``source`` (where ``x`` lives) is informational: it shows in the graph.
    """
    return to_device(x, device)


def _to_grad(g, out, x, *, device, source=None):
    return TO_DEVICE(g, device=str(device_of(x)))


TO_DEVICE = OpDef("to_device", _to, (_to_grad,), examples=(Example((3, 4), device="cpu"),))


def _no_double_backward(*inputs: Any, value: Any, op_name: str) -> Any:
    """Hand out ``value`` (a first-order gradient) on the graph of ``inputs``."""
    return value


def _refuse_double_backward(g, out, *inputs, value, op_name):
    raise RuntimeError(
        f"op {op_name!r} does not support double backward: its backward rule is not "
        "differentiable, so gradients of its gradients cannot be computed"
    )


NO_DOUBLE_BACKWARD = OpDef(
    "no_double_backward",
    _no_double_backward,
    _refuse_double_backward,
    doc="Internal: marks gradients of ops whose backward rule is not differentiable.",
)

OPS = (ASTYPE, TO_DEVICE)
