"""sadl-compile's plugin module (entry point ``compile`` in the group ``sadl.plugins``).

It adds the ``register_compile_passes`` hook (``sadl_compile.hookspecs``) and registers
sadl-compile's own passes through it, as any plugin adding a pass does. Importing it loads the
passes, not the tracer: ``sadl.compile`` imports that on first use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sadl.plugins import hookimpl, require_api

from sadl_compile import hookspecs
from sadl_compile.fusion import fuse_elementwise
from sadl_compile.hookspecs import CompilePassDef
from sadl_compile.memory import memory_plan
from sadl_compile.optimizer import flat_optimizer
from sadl_compile.passes import common_subexpressions, dead_code, fold_constants
from sadl_compile.recompute import shared_recomputation

require_api("1.0")

#: sadl-compile's passes, in the order they run.
BUILTIN_PASSES: tuple[CompilePassDef, ...] = (
    CompilePassDef("fold_constants", fold_constants, order=10),
    CompilePassDef("dead_code", dead_code, order=20),
    CompilePassDef("common_subexpressions", common_subexpressions, order=30),
    CompilePassDef("shared_recomputation", shared_recomputation, order=35),
    CompilePassDef("fuse_elementwise", fuse_elementwise, order=50, fusion=True),
    CompilePassDef("flat_optimizer", flat_optimizer, order=60),
    CompilePassDef("dead_code_final", dead_code, order=70),
    CompilePassDef("memory_plan", memory_plan, order=90),
)


@hookimpl
def add_hookspecs(pluginmanager: Any) -> None:
    """Declare ``register_compile_passes``."""
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def register_compile_passes() -> Iterable[CompilePassDef]:
    """sadl-compile's passes (folding, dead code, common subexpressions, fusion, memory)."""
    return BUILTIN_PASSES
