"""Group and instance normalization (torch's F.group_norm and F.instance_norm), as composites
of ``batch_norm``: folding the normalized groups into the channel axis of a batch of one makes
batch norm's per-channel statistics the per-group (or per-instance) ones. Their gradients and
second derivatives are batch norm's.
"""

from __future__ import annotations

import math

import numpy as np
from sadl import Tensor
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, const, shape_of
from sadl_layers.ops.batchnorm import batch_norm

__all__ = ["group_norm", "instance_norm"]


def _affine(y, weight, bias, ndim):
    view = (1, -1) + (1,) * (ndim - 2)
    if weight is not None:
        y = y * np.reshape(weight, view)
    if bias is not None:
        y = y + np.reshape(bias, view)
    return y


def _constant(fn, name, value):
    """A float param as a Python float; a Tensor that requires grad is refused, not detached."""
    if isinstance(value, Tensor) and value.requires_grad:
        raise TypeError(
            f"op {fn!r}: {name}= is a constant parameter, but the Tensor given for it requires "
            "grad and would get no gradient; pass value.detach() if a constant is meant"
        )
    return float(const(value))


def _check_channels(fn, x, weight, bias):
    check_float(fn, "input", const(x))
    if np.ndim(x) < 2:
        raise ValueError(f"{fn}: input must have shape (N, C, ...), got {shape_of(x)}")
    C = shape_of(x)[1]
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and shape_of(p) != (C,):
            raise ValueError(
                f"{fn}: {name} has shape {shape_of(p)}, expected ({C},) (one per channel of the "
                f"input of shape {shape_of(x)})"
            )
    return C


def _group_norm(input, num_groups, weight=None, bias=None, *, eps=1e-5):
    """Normalize each group of ``C / num_groups`` channels of each sample over the group's
    channels and spatial axes, then scale and shift per channel (torch.nn.functional.group_norm).
    """
    fn = "group_norm"
    C = _check_channels(fn, input, weight, bias)
    G = int(num_groups)
    if G < 1 or C % G:
        raise ValueError(f"{fn}: num_groups={num_groups} must be positive and divide {C} channels")
    shape = shape_of(input)
    folded = np.reshape(input, (1, shape[0] * G, math.prod(shape[1:]) // G))  # N may be 0
    y = batch_norm(folded, None, None, training=True, eps=_constant(fn, "eps", eps))
    return _affine(np.reshape(y, shape), weight, bias, len(shape))


group_norm: OpDef = OpDef(
    "group_norm",
    _group_norm,
    composite=True,
    examples=(
        Example((2, 4, 3), 2, (4,), (4,)),
        Example((2, 6, 2, 3), 3, None, None, eps=1e-3),
        Example((3, 2, 5), 1, (2,), None),
    ),
)


def _instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
):
    """Normalize each channel of each sample over its spatial axes (torch's F.instance_norm).

    With ``use_input_stats`` and running statistics given, these are updated in place with the
    batch's average per-instance mean and (unbiased) variance, as torch does; without it the
    running statistics normalize instead.
    """
    fn = "instance_norm"
    C = _check_channels(fn, input, weight, bias)
    eps, momentum = _constant(fn, "eps", eps), _constant(fn, "momentum", momentum)
    shape = shape_of(input)
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError(f"{fn}: use_input_stats=False needs running_mean and running_var")
        view = (1, -1) + (1,) * (len(shape) - 2)  # (differentiable in the statistics too)
        rm, rv = np.reshape(running_mean, view), np.reshape(running_var, view)
        y = (input - rm) / np.sqrt(rv + eps)
        return _affine(y, weight, bias, len(shape))
    folded = np.reshape(input, (1, shape[0] * C, *shape[2:]))
    y = batch_norm(folded, None, None, training=True, eps=eps)
    if (running_mean is not None or running_var is not None) and y.size:
        # (an empty batch has no statistics: the running ones stay as they are, as batch norm's;
        # torch's instance norm makes them NaN)
        x = const(input)
        axes = tuple(range(2, x.ndim))
        n = int(np.prod(shape[2:]))
        m = momentum
        if running_mean is not None:  # the buffers' own arrays, updated in place
            mean = const(running_mean)
            mean *= 1.0 - m
            mean += m * x.mean(axis=axes).mean(axis=0)
        if running_var is not None:
            var = const(running_var)
            var *= 1.0 - m
            var += m * (x.var(axis=axes) * (n / max(n - 1, 1))).mean(axis=0)
    return _affine(np.reshape(y, shape), weight, bias, len(shape))


instance_norm: OpDef = OpDef(
    "instance_norm",
    _instance_norm,
    composite=True,
    examples=(
        Example((2, 3, 4), None, None, (3,), (3,)),
        Example((2, 2, 3, 3)),
        Example((1, 2, 2, 2, 3), None, None, None, (2,), eps=1e-3),
        Example(
            (2, 2, 4),
            np.array([0.1, -0.2]),
            np.array([0.5, 2.0]),
            (2,),
            (2,),
            use_input_stats=False,
        ),
    ),
)

INTERNAL_OPS: tuple[OpDef, ...] = ()
