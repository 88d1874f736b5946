"""The pass pipeline: which passes run, in which order, with which options.

Passes are ``CompilePassDef`` records. sadl-compile's own come through its plugin module and any
plugin adds more through the ``register_compile_passes`` hook; sadl's plugin host collects them
(``sadl.plugins.records("compile_passes")``). They run in ascending
``order``; a pass with ``fusion=True`` changes how values are computed and is skipped by
``sadl.compile(fusion=False)``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from sadl.plugins import UnknownNameError, records, served

from sadl_compile.hookspecs import CompilePassDef
from sadl_compile.ir import Graph

__all__ = ["Options", "PassContext", "run_passes"]


@dataclass(frozen=True)
class Options:
    """What ``sadl.compile`` was asked for."""

    fusion: bool = True
    passes: tuple[str, ...] | None = None
    cuda_graph: bool = False


@dataclass
class PassContext:
    """What a pass gets besides the graph: the options, and a place to leave notes."""

    options: Options
    data: dict[str, Any]


def selected(options: Options) -> list[CompilePassDef]:
    """The passes to run for ``options``, in order."""
    registered: dict[str, CompilePassDef] = records("compile_passes")
    if options.passes is not None:
        unknown = [n for n in options.passes if n not in registered]
        for name in unknown:
            with contextlib.suppress(UnknownNameError):
                served("compile_passes", name)  # a pass two plugins contest raises why
        if unknown:
            raise ValueError(
                f"sadl.compile: unknown passes {unknown}; registered: {sorted(registered)}"
            )
        chosen = [registered[n] for n in options.passes]
    else:
        chosen = list(registered.values())
    if not options.fusion:
        chosen = [p for p in chosen if not p.fusion]
    return sorted(chosen, key=lambda p: p.order)


def run_passes(graph: Graph, options: Options) -> None:
    """Run the selected passes over ``graph``, in place."""
    context = PassContext(options, {})
    for compile_pass in selected(options):
        compile_pass.run(graph, context)
