"""sadl-compile's plugin module (entry point ``compile`` in the group ``sadl.plugins``).

It adds the ``register_compile_passes`` hook (``sadl_compile.hookspecs``) and registers
sadl-compile's own passes through it, as any plugin adding a pass does. Plugin discovery imports
this module whenever a registry is first used (an eager op is enough), so it imports nothing
else of sadl-compile: each pass's module is imported when the pass first runs, and the tracer
when ``sadl.compile`` is first used. It adds the command ``sadl passes`` (``sadl_compile.listing``,
imported when it runs), which core's ``sadl plugins --passes`` runs.
"""

from __future__ import annotations

import argparse
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


def _chain(*passes: tuple[str, str, str, bool]) -> tuple[CompilePassDef, ...]:
    """``(name, module, doc, fusion)`` records, each declared to run after every one before it
    (so the rest keep their order when plugins contest one name, which then runs nowhere).
    """
    made: list[CompilePassDef] = []
    for name, module, doc, fusion in passes:
        after = tuple(p.name for p in made)
        made.append(CompilePassDef(name, _lazy(module, name), after=after, fusion=fusion, doc=doc))
    return tuple(made)


#: sadl-compile's passes, in the order they run.
BUILTIN_PASSES: tuple[CompilePassDef, ...] = _chain(
    ("fold_constants", "passes", "calls independent of the inputs run once, at trace", False),
    ("dead_code", "passes", "drop calls whose results nothing needs", False),
    ("common_subexpressions", "passes", "the same pure call on the same values once", False),
    ("shared_recomputation", "recompute", "a recomputed array reads the forward's", False),
    ("fuse_elementwise", "fusion", "blocked loops for elementwise chains", True),
    ("flat_optimizer", "optimizer", "optimizer steps over flat buffers per group", False),
    ("dead_code_final", "passes", "dead code again, after fusion", False),
    ("memory_plan", "memory", "temporaries in reused buffers (out=), views hoisted", False),
)


@hookimpl
def add_hookspecs(pluginmanager: Any) -> None:
    """Declare ``register_compile_passes``."""
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def register_compile_passes() -> Iterable[CompilePassDef]:
    """sadl-compile's passes (folding, dead code, common subexpressions, fusion, memory)."""
    return BUILTIN_PASSES


def _list_passes(args: argparse.Namespace) -> int:
    return int(import_module("sadl_compile.listing").run(args))


@hookimpl
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``sadl passes``: the compile passes in the order they run, with their plugins."""
    p = subparsers.add_parser("passes", help="list the compile passes in the order they run")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_list_passes)
