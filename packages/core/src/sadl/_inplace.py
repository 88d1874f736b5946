"""In-place writes on the graph: ``t += 1``, ``t[key] = value`` and ``h[0] += 2`` through a view.

An in-place op is recorded as ``t = op(t, ...)``: the value ``t`` had is kept in a snapshot for
every backward that saved it, and ``t``'s version counter is bumped. The one-op path
(``apply`` -> ``backward``) never comes here; ``Tensor``'s in-place methods and ``__setitem__`` do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from sadl._engine import Node, apply, new_tensor, write_into
from sadl._ops import indexing as _ix
from sadl._records import OpDef

if TYPE_CHECKING:
    from sadl._tensor import Tensor

__all__ = ["is_view_at", "rebase_inplace", "rebase_view_write"]


def rebase_inplace(
    tensor: Tensor, op: OpDef, others: Sequence[Any], params: dict[str, Any]
) -> Tensor:
    """Record ``tensor = op(tensor, *others)`` on the graph, then overwrite its memory.

    The value ``tensor`` had is kept in a snapshot for every backward that needs it: the node
    that produced it now points at the snapshot, and ``y *= y`` reads the snapshot twice.
    """
    before = new_tensor(tensor.data.copy(), tensor._node)
    before._requires_grad = tensor._requires_grad
    if tensor._node is not None:
        _output_is(tensor._node, before.data, before._version)
    others = tuple(before if o is tensor else o for o in others)
    result = apply(op, (before, *others), params)
    write_into(tensor.data, result.data)
    tensor._version[0] += 1
    node = result._node
    if node is not None:
        _output_is(node, tensor.data, tensor._version)
    tensor._node = node
    tensor._requires_grad = node is not None
    return tensor


def _output_is(node: Node, out: Any, counter: list[int]) -> None:
    """Make ``out`` (with version counter ``counter``, as it is now) ``node``'s saved output."""
    node.out = out
    node.counters = (*node.counters[:-1], counter)
    node.versions = (*node.versions[:-1], counter[0])


def rebase_view_write(tensor: Tensor, op: OpDef, getitem_op: OpDef, view: Tensor, key: Any) -> bool:
    """``tensor[key] = view`` where ``view`` is ``tensor[key]`` changed in place (``h[0] += 2``):
    the memory already holds the result, so nothing is written; the graph records
    ``tensor = setitem(old, key, view)``, ``old`` being ``tensor`` before the in-place change
    (rebuilt from the slice the view's first in-place op kept), and ``view`` becomes
    ``getitem(tensor, key)`` again. False when ``view`` was not made so (the caller assigns as
    usual).
    """
    node, getitem = view._node, None
    while node is not None and node.parents and isinstance(node.parents[0], Node):
        if node.op.name == "getitem" and node.parents[0] is tensor._node:
            getitem = node
            break
        node = node.parents[0]
    if getitem is None or getitem.datas is None or getitem.datas[0] is not tensor.data:
        return False  # not a view of tensor, or its graph was freed by a backward
    old = tensor.data.copy()
    old[key] = getitem.out  # the slice as it was (kept by the first in-place op's rebase)
    counter = [0]
    before = new_tensor(old, tensor._node, counter)
    if tensor._node is not None:
        _output_is(tensor._node, old, counter)
    getitem.datas = (old, *getitem.datas[1:])
    getitem.counters = (counter, *getitem.counters[1:])
    getitem.versions = (0, *getitem.versions[1:])
    result = apply(op, (before, view), {"key": key})
    node = result._node
    if node is not None and node.datas is not None:  # the view's values as they are now
        node.datas = (node.datas[0], view.data.copy(), *node.datas[2:])
        node.counters = (node.counters[0], [0], *node.counters[2:])
        node.versions = (node.versions[0], 0, *node.versions[2:])
        _output_is(node, tensor.data, tensor._version)
    tensor._node = node
    tensor._requires_grad = node is not None
    # view._node is not None: getitem was found above it; its output lives on
    _output_is(cast(Node, view._node), view.data.copy(), [0])
    again = apply(getitem_op, (tensor,), {"key": key})._node
    if again is not None:
        _output_is(again, view.data, view._version)
    view._node = again
    return True


def is_view_at(data: Any, key: Any, value: Any) -> bool:
    """Whether ``value`` is the very view ``data[key]`` (same memory, shape and strides)."""
    if getattr(value, "base", None) is None or not isinstance(data, np.ndarray):
        return False
    if not _ix._is_basic(key):
        return False  # fancy indexing copies: never a view
    target = data[key]
    return (
        isinstance(target, np.ndarray)
        and target.shape == value.shape
        and target.strides == value.strides
        and target.__array_interface__["data"][0] == value.__array_interface__["data"][0]
    )
