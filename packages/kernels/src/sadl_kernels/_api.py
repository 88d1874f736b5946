"""Everything sadl-kernels takes from the compiler, in one place.

The pass record ``CompilePassDef`` comes from sadl-compile, which declares the
``register_compile_passes`` hook; ``hookimpl`` from core's plugin-author API.

The passes never import the IR's classes: they edit nodes through ``new_node`` (a copy of an
existing node with some fields changed) and keep the graph's own values, so the IR names below
are only type aliases.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sadl.plugins import hookimpl
from sadl_compile import CompilePassDef

__all__ = ["CompilePassDef", "Graph", "Node", "Value", "hookimpl", "new_node"]

#: The IR's graph, node and value (``sadl.compile``'s ``Graph``, ``Node``, ``Value``).
Graph = Any
Node = Any
Value = Any


def new_node(template: Node, **fields: Any) -> Node:
    """A new node like ``template`` with ``fields`` changed (and its own, empty ``meta``)."""
    fields.setdefault("meta", {})
    return dataclasses.replace(template, **fields)
