"""The pass pipeline: which passes run, in which order, with which options.

Passes are ``CompilePassDef`` records. Core's own come through its built-in plugin and any plugin
adds more through the ``register_compile_passes`` hook; the plugin host (a higher layer) hands
this module the registered records with :func:`install_pass_source`. They run in ascending
``order``; a pass with ``fusion=True`` changes how values are computed and is skipped by
``sadl.compile(fusion=False)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sadl._compile.ir import Graph
from sadl._records import CompilePassDef

__all__ = ["Options", "PassContext", "install_pass_source", "run_passes"]

PassSource = Callable[[], Mapping[str, CompilePassDef]]


def _no_source() -> Mapping[str, CompilePassDef]:
    raise RuntimeError("sadl's plugin host is not loaded; import sadl first")


_source: PassSource = _no_source


def _no_check(name: str) -> None:
    """Stand-in until the plugin host installs its check."""


_check_name: Callable[[str], None] = _no_check


def install_pass_source(source: PassSource, check: Callable[[str], None] = _no_check) -> None:
    """Called once by the plugin host: ``source()`` returns the registered passes by name, and
    ``check(name)`` raises for a name that is not served because plugins contest it.
    """
    global _source, _check_name
    _source, _check_name = source, check


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
    registered = dict(_source())
    if options.passes is not None:
        unknown = [n for n in options.passes if n not in registered]
        for name in unknown:
            _check_name(name)  # a pass two plugins register raises the plugin host's error
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
