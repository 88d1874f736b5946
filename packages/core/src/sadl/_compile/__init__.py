"""``sadl.compile``: static graph capture and replay.

A call of a compiled function with a new signature runs it under a tracer that records every
array call (``tracer``, ``traced``, ``capture``, ``patches``) into a graph (``ir``); passes
simplify it (``passes``), plan its memory (``memory``), fuse elementwise chains (``fusion``) and
pack optimizer updates (``optimizer``); ``codegen`` turns it into a Python function that later
calls replay. ``api`` holds the user-facing ``compile`` and the cache. See docs/compile.md.
"""

from __future__ import annotations

from sadl._compile.api import CompiledFunction, compile
from sadl._compile.fusion import fuse_elementwise
from sadl._compile.memory import memory_plan
from sadl._compile.optimizer import flat_optimizer
from sadl._compile.passes import common_subexpressions, dead_code, fold_constants
from sadl._compile.recompute import shared_recomputation
from sadl._compile.show import format_graph
from sadl._records import CompilePassDef

__all__ = ["CORE_PASSES", "CompiledFunction", "compile", "format_graph"]

#: Core's passes, registered by its built-in plugin (``sadl._builtin``).
CORE_PASSES: tuple[CompilePassDef, ...] = (
    CompilePassDef("fold_constants", fold_constants, order=10),
    CompilePassDef("dead_code", dead_code, order=20),
    CompilePassDef("common_subexpressions", common_subexpressions, order=30),
    CompilePassDef("shared_recomputation", shared_recomputation, order=35),
    CompilePassDef("fuse_elementwise", fuse_elementwise, order=50, fusion=True),
    CompilePassDef("flat_optimizer", flat_optimizer, order=60),
    CompilePassDef("dead_code_final", dead_code, order=70),
    CompilePassDef("memory_plan", memory_plan, order=90),
)
