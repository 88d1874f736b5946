"""Everything sadl-kernels takes from the compiler, in one place.

The pass record ``CompilePassDef`` and the IR's types (``Graph``, ``Node``, ``Value``,
``OpRegion``: what an op application made, see ``sadl_compile.ir``) come from sadl-compile, which
declares the ``register_compile_passes`` hook, with its tools to edit a graph by op application
(``op_regions``, ``replace_region``, and ``contiguous``, the strides check they use);
``hookimpl`` and ``records`` (the registered optimizers, by name) from core's plugin-author API.

The passes edit nodes through ``new_node`` (a copy of an existing node with some fields
changed) and keep the graph's own values.
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
    Value,
    contiguous,
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
    "new_node",
    "op_regions",
    "records",
    "replace_region",
]


def new_node(template: Node, **fields: Any) -> Node:
    """A new node like ``template`` with ``fields`` changed (and its own, empty ``meta``)."""
    fields.setdefault("meta", {})
    return dataclasses.replace(template, **fields)
