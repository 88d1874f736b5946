"""One-hot codes: an integer array of class numbers to an indicator array (torch's
``F.one_hot``). Core has the other selection ops (``sort``, ``topk``, ``cummax``, ``nonzero``...).

"""

from __future__ import annotations

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef


def _one_hot(indices, *, num_classes=-1):
    """An int64 array with one more axis of length ``num_classes``: 1 at each index, else 0."""
    if not hasattr(indices, "dtype") or indices.dtype.kind not in "iu":
        kind = getattr(indices, "dtype", type(indices).__name__)
        raise TypeError(f"one_hot: indices must be integers (class numbers), got {kind}")
    low = int(indices.min()) if indices.size else 0
    high = int(indices.max()) if indices.size else -1
    if num_classes < 0:
        if not indices.size:
            raise ValueError("one_hot: cannot infer num_classes from empty indices; pass it")
        num_classes = high + 1
    if low < 0 or high >= num_classes:
        raise ValueError(
            f"one_hot: indices must lie in [0, {num_classes}), got values from {low} to {high}"
        )
    classes = array_module(indices).arange(num_classes)
    return (indices[..., None] == classes).astype(np.int64)


ONE_HOT = OpDef(
    "one_hot",
    _one_hot,
    differentiable=False,
    examples=(Example(np.array([0, 2, 1])), Example(np.array([[1], [3]]), num_classes=5)),
)


__all__ = ["one_hot"]
INTERNAL_OPS: tuple[OpDef, ...] = ()
one_hot = ONE_HOT
