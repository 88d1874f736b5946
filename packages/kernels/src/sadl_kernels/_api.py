"""Everything sadl-kernels takes from the compiler, in one place.

The pass record ``CompilePassDef`` and the IR's types (``Graph``, ``Node``, ``Value``,
``OpRegion``: what an op application made, see ``sadl_compile.ir``) come from sadl-compile, which
declares the ``register_compile_passes`` hook, with its tools to edit a graph by op application
(``op_regions``, ``replace_region``, and ``contiguous``, the strides check they use);
``hookimpl`` and ``records`` (the registered optimizers, by name) from core's plugin-author API.

The passes edit nodes through ``new_node`` (a copy of an existing node with some fields
changed); ``new_value`` adds a temporary to the graph (a GELU recomputed for the backward).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sadl.plugins import hookimpl, records
from sadl_compile import (
    CompilePassDef,
    Graph,
    Node,
    OpRegion,
    PassContext,
    Storage,
    Value,
    contiguous,
    map_values,
    op_regions,
    replace_region,
)

__all__ = [
    "CompilePassDef",
    "Graph",
    "Node",
    "OpRegion",
    "PassContext",
    "Value",
    "contiguous",
    "hookimpl",
    "map_values",
    "new_node",
    "new_value",
    "op_regions",
    "records",
    "replace_region",
]


def new_node(template: Node, **fields: Any) -> Node:
    """A new node like ``template`` with ``fields`` changed (and its own, empty ``meta``)."""
    fields.setdefault("meta", {})
    return dataclasses.replace(template, **fields)


def new_value(graph: Graph, like: Value, storage: Storage | None = None) -> Value:
    """A value of ``graph`` shaped and laid out like ``like``: the owner of new temporary memory
    or, with ``storage``, a view in it.
    """
    owner = storage is None
    if storage is None:
        storage = Storage(len(graph.storages), "temp", False)
        storage.device = like.storage.device
        graph.storages.append(storage)
    value = Value(len(graph.values), storage, like.shape, like.dtype, like.strides)
    if owner:
        storage.root = value
    graph.values.append(value)
    return value
