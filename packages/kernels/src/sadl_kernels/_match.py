"""Where a traced value lies in its memory: what the bias fold (``_bias.py``) checks before it
moves a Linear's bias-add into the GELU kernels that read the sum.

The kernels themselves find their ops by name (``_ops.py``); these helpers only follow a value's
chain of views (reshapes, row slices) to the elements of its storage it spans.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sadl_kernels._api import Node, Value, contiguous

__all__ = ["contiguous", "extent", "func_name", "is_view", "touches"]


def func_name(node: Node) -> str:
    """``multiply`` for a ufunc call, the function's name otherwise (``einsum``)."""
    key = node.key
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], np.ufunc):
        return key[0].__name__ if key[1] == "__call__" else f"{key[0].__name__}.{key[1]}"
    return str(getattr(node.func, "__name__", ""))


def is_view(node: Node) -> bool:
    """A call whose one output shares the memory of its first input (reshape, slice)."""
    return (
        node.kind == "call"
        and not node.writes
        and len(node.outputs) == 1
        and bool(node.reads)
        and node.outputs[0].storage is node.reads[0].storage
    )


def touches(node: Node, storage: Any) -> bool:
    """``node`` reads, writes or makes a value of ``storage`` (a guard's source call included)."""
    values = (*node.reads, *node.writes, *node.outputs)
    source = node.meta.get("source")
    if source is not None:
        values = (*values, *source.reads)
    return any(v.storage is storage for v in values)


def extent(v: Value) -> tuple[int, int] | None:
    """The elements ``[start, stop)`` of its storage that contiguous ``v`` spans, when its chain
    of views (reshapes, row slices) says; None when unknown.
    """
    if not contiguous(v):
        return None
    node = v.producer
    size = math.prod(v.shape)
    if node is None:
        return (0, size) if v.storage.root is v else None
    if not is_view(node):
        return (0, size)  # a call's new array: a storage of its own
    src = node.args[0] if node.args and _is_value(node.args[0]) else None
    base = None if src is None else extent(src)
    if base is None or src is None:
        return None
    name = func_name(node)
    if name in ("reshape", "ravel") and math.prod(src.shape) == size:
        return base
    if name == "__getitem__" and len(node.args) == 2:
        index = node.args[1]
        if index in ((), Ellipsis, (Ellipsis,)):
            return base
        if isinstance(index, slice) and index.step in (None, 1) and src.shape:
            start, stop, _ = index.indices(src.shape[0])
            row = math.prod(src.shape[1:])
            return (base[0] + start * row, base[0] + max(start, stop) * row)
    return None


def _is_value(x: Any) -> bool:
    return hasattr(x, "storage") and hasattr(x, "strides")
