"""Gradient clipping: ``clip_grad_norm`` and ``clip_grad_value`` (torch's ``clip_grad_norm_`` /
``clip_grad_value_``).

Both change the gradients in place: a gradient array is overwritten, a gradient Tensor (left by
``backward(create_graph=True)``) is updated with an in-place op under ``no_grad``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
from sadl import Module, Tensor, no_grad
from sadl.backends import array_module

from sadl_optim._checks import check_number

__all__ = ["clip_grad_norm", "clip_grad_value"]

Params = Tensor | Iterable[Tensor] | Module


def _parameters(owner: str, params: Params) -> list[Tensor]:
    """A single tensor, an iterable of tensors, or a Module (its parameters) as a list."""
    if isinstance(params, Tensor):
        return [params]
    if isinstance(params, Module):
        return list(params.parameters())
    try:
        items = list(params)
    except TypeError:
        raise TypeError(
            f"{owner}: params must be a Tensor, an iterable of Tensors or a Module, got "
            f"{type(params).__name__}"
        ) from None
    for i, p in enumerate(items):
        if not isinstance(p, Tensor):
            raise TypeError(f"{owner}: params[{i}] is a {type(p).__name__}, not a Tensor")
    return items


def _is_scalar(grad: Any) -> bool:
    """True for the NumPy (or Python) scalar gradient that a 0-d parameter gets from backward."""
    return isinstance(grad, numbers.Number | np.generic)


def _grad_array(grad: Any) -> Any:
    return grad.data if isinstance(grad, Tensor) else grad


def _norm(grad: Any, p: float) -> Any:
    """The ``p``-norm of one gradient as a 0-d float64 array of its array module (summed in the
    gradient's dtype, half precision in float32), with no read of its value into Python.
    """
    g = _grad_array(grad)
    xp = array_module(g)
    g = xp.asarray(g)
    if g.size == 0:
        return xp.zeros((), xp.float64)
    if g.dtype.kind == "f" and g.dtype.itemsize < 4:
        g = g.astype(xp.float32)
    if p == math.inf:
        norm = xp.max(xp.abs(g))
    elif p == 2.0:
        norm = xp.sqrt(xp.sum(g * g))
    else:
        norm = xp.sum(xp.abs(g) ** p) ** (1.0 / p)
    return xp.asarray(norm).astype(xp.float64)


def _scale(param: Tensor, coef: Any) -> None:
    """Multiply ``param.grad`` in place by the 0-d ``coef``, cast to the gradient's dtype (a
    float32 gradient is multiplied in float32).
    """
    grad = param.grad
    g = _grad_array(grad)
    dtype = getattr(g, "dtype", None)
    factor = coef.astype(dtype) if dtype is not None and dtype.kind in "fc" else coef
    if isinstance(grad, Tensor):
        with no_grad():
            grad *= factor
    elif _is_scalar(grad):  # not updatable in place: replaced
        param.grad = grad * factor
    else:
        grad *= factor


def clip_grad_norm(
    params: Params,
    max_norm: float,
    norm_type: float | str = 2.0,
    error_if_nonfinite: bool = False,
) -> Any:
    """Scale the gradients in place so their total norm is at most ``max_norm``; return the norm.

    The total norm is the ``norm_type``-norm of all gradients together (as if concatenated into
    one vector; ``norm_type`` may be ``math.inf`` or ``"inf"`` for the max-norm). Every gradient
    is multiplied by ``min(1, max_norm / (total + 1e-6))`` (cast to its dtype), exactly as
    ``torch.nn.utils.clip_grad_norm_``: the factor stays an array and no value is read into
    Python, so a training step that calls this traces under ``sadl.compile``. Parameters without
    a gradient are skipped; with none at all the norm is 0.0.

    The return value is the norm before clipping, in float64, kept on the gradients' device
    (torch returns a 0-d tensor): for NumPy gradients a ``numpy.float64``, which *is* a
    ``float``; for device gradients a 0-d device array (``float(total)`` reads it, the call
    itself does not wait for the device); inside ``sadl.compile`` a 0-d array that the compiled
    function returns with the value of each call.

    A non-finite total norm raises ``RuntimeError`` when ``error_if_nonfinite``; otherwise the
    gradients are scaled by the resulting non-finite factor (torch's behaviour). The check reads
    the norm's value, so under ``sadl.compile`` ``error_if_nonfinite=True`` after ``backward``
    in the same step is refused with a ``sadl.CompileError`` naming this line (with nothing
    changed before it in the call it is a guarded branch instead: a call whose norm is
    non-finite runs eagerly and raises); keep the default ``False`` in a compiled step.
    """
    owner = "clip_grad_norm"
    items = _parameters(owner, params)
    max_norm = check_number(owner, "max_norm", max_norm, low=0, allow_inf=True)
    if norm_type == "inf":
        norm_type = math.inf
    p = check_number(owner, "norm_type", norm_type, low=0, low_open=True, allow_inf=True)
    with_grad = [q for q in items if q.grad is not None]
    if not with_grad:
        return 0.0
    norms = [_norm(q.grad, p) for q in with_grad]
    xp = array_module(norms[0])
    total = norms[0] if p == math.inf else norms[0] ** p
    for n in norms[1:]:
        total = xp.maximum(total, n) if p == math.inf else total + n**p
    if p == 2.0:
        total = xp.sqrt(total)
    elif p != math.inf:
        total = total ** (1.0 / p)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"{owner}: the total norm of order {p} of the gradients is {float(total)}, so it "
            "cannot be clipped; pass error_if_nonfinite=False to scale by the non-finite norm "
            "anyway"
        )
    # torch's clamp(max=1): a NaN factor stays NaN and is applied
    coef = xp.minimum(max_norm / (total + 1e-6), 1.0)
    for q in with_grad:
        _scale(q, xp.asarray(coef))
    return total[()] if type(total) is np.ndarray else total


def clip_grad_value(params: Params, clip_value: float) -> None:
    """Clip every gradient in place to ``[-clip_value, clip_value]`` (torch's ``clip_grad_value_``).

    Parameters without a gradient are skipped.
    """
    owner = "clip_grad_value"
    items = _parameters(owner, params)
    c = check_number(owner, "clip_value", clip_value, low=0)
    for q in items:
        grad = q.grad
        if grad is None:
            continue
        if isinstance(grad, Tensor):
            with no_grad():
                grad.copy_(np.clip(grad.data, -c, c))  # core, without sadl-layers' clip op
        elif _is_scalar(grad):
            q.grad = np.clip(grad, -c, c)
        else:
            array_module(grad).clip(grad, -c, c, out=grad)


#: torch's names (``torch.nn.utils.clip_grad_norm_``); the underscore marks the in-place change.
clip_grad_norm_ = clip_grad_norm
clip_grad_value_ = clip_grad_value
