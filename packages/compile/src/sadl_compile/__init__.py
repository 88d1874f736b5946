"""``sadl.compile``: static graph capture and replay (the sadl-compile package).

A call of a compiled function with a new signature runs it under a tracer that records every
array call (``tracer``, ``traced``, ``capture``, ``hooks``) into a graph (``ir``); passes
simplify it (``passes``), plan its memory (``memory``), fuse elementwise chains (``fusion``) and
pack optimizer updates (``optimizer``); ``codegen`` turns it into a Python function that later
calls replay. ``api`` holds the user-facing ``compile`` and the cache; ``hookspecs`` the
``register_compile_passes`` hook and ``plugin`` the passes registered through it. Once installed,
``sadl.compile`` and ``sadl.CompiledFunction`` are this package's. See docs/compile.md.

Importing the package is cheap (plugin discovery imports ``sadl_compile.plugin``): the tracer is
imported on first use of ``compile``, ``CompiledFunction`` or ``format_graph``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from sadl_compile.hookspecs import CompilePassDef

if TYPE_CHECKING:
    from sadl_compile.api import CompiledFunction, compile
    from sadl_compile.ir import Graph, Node, OpRegion, Storage, Value
    from sadl_compile.pipeline import Options, PassContext, PassOrderError
    from sadl_compile.rewrite import contiguous, op_regions, replace_region
    from sadl_compile.show import format_graph

__all__ = [
    "CompilePassDef",
    "CompiledFunction",
    "Graph",
    "Node",
    "OpRegion",
    "Options",
    "PassContext",
    "PassOrderError",
    "Storage",
    "Value",
    "__version__",
    "compile",
    "contiguous",
    "format_graph",
    "map_values",
    "op_regions",
    "replace_region",
]
_LAZY = {
    "compile": "api",
    "CompiledFunction": "api",
    "format_graph": "show",
    **dict.fromkeys(("Graph", "Node", "OpRegion", "Storage", "Value", "map_values"), "ir"),
    **dict.fromkeys(("Options", "PassContext", "PassOrderError"), "pipeline"),
    **dict.fromkeys(("contiguous", "op_regions", "replace_region"), "rewrite"),
}


def __getattr__(name: str) -> Any:
    """``compile``, the IR's and the pipeline's classes (and the version) on first use."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("sadl-compile")
        except PackageNotFoundError:  # a source tree that is not installed
            return "0.0.0+unknown"
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sadl_compile' has no attribute {name!r}")
    return getattr(import_module(f"sadl_compile.{module}"), name)
