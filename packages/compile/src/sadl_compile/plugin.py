"""sadl-compile's plugin module (entry point ``compile`` in the group ``sadl.plugins``).

It adds the ``register_compile_passes`` hook (``sadl_compile.hookspecs``) and registers
sadl-compile's own passes through it, as any plugin adding a pass does. Plugin discovery imports
this module whenever a registry is first used (an eager op is enough), so it imports nothing
else of sadl-compile: each pass's module is imported when the pass first runs, and the tracer
when ``sadl.compile`` is first used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import import_module
from typing import Any

from sadl.plugins import hookimpl, require_api

from sadl_compile import hookspecs
from sadl_compile.hookspecs import CompilePassDef

require_api("1.0")


def _lazy(module: str, name: str) -> Callable[[Any, Any], None]:
    """``sadl_compile.<module>.<name>(graph, context)``, the module imported on the first run."""

    def run(graph: Any, context: Any) -> None:
        getattr(import_module(f"sadl_compile.{module}"), name)(graph, context)

    run.__name__ = run.__qualname__ = name
    return run


def _pass(name: str, module: str, order: float, doc: str, **kw: Any) -> CompilePassDef:
    function = "dead_code" if name == "dead_code_final" else name
    return CompilePassDef(name, _lazy(module, function), order=order, doc=doc, **kw)


#: sadl-compile's passes, in the order they run.
BUILTIN_PASSES: tuple[CompilePassDef, ...] = (
    _pass("fold_constants", "passes", 10, "calls independent of the inputs run once, at trace"),
    _pass("dead_code", "passes", 20, "drop calls whose results nothing needs"),
    _pass("common_subexpressions", "passes", 30, "the same pure call on the same values once"),
    _pass("shared_recomputation", "recompute", 35, "a recomputed array reads the forward's"),
    _pass("fuse_elementwise", "fusion", 50, "blocked loops for elementwise chains", fusion=True),
    _pass("flat_optimizer", "optimizer", 60, "optimizer steps over flat buffers per group"),
    _pass("dead_code_final", "passes", 70, "dead code again, after fusion"),
    _pass("memory_plan", "memory", 90, "temporaries in reused buffers (out=), views hoisted"),
)


@hookimpl
def add_hookspecs(pluginmanager: Any) -> None:
    """Declare ``register_compile_passes``."""
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def register_compile_passes() -> Iterable[CompilePassDef]:
    """sadl-compile's passes (folding, dead code, common subexpressions, fusion, memory)."""
    return BUILTIN_PASSES
