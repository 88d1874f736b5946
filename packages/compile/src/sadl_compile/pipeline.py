"""The pass pipeline: which passes run, in which order, with which options.

Passes are ``CompilePassDef`` records. sadl-compile's own come through its plugin module and any
plugin adds more through the ``register_compile_passes`` hook; sadl's plugin host collects them
(``sadl.plugins.records("compile_passes")``). Each pass names the passes it runs ``before`` and
``after``; :func:`pass_order` sorts the registered passes by those names (a cycle or a name no
plugin registered is an error naming the passes), ties kept in registration order. A pass with
``fusion=True`` changes how values are computed and is skipped by ``sadl.compile(fusion=False)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sadl.plugins import PluginConflictError, UnknownNameError, records, served

from sadl_compile.hookspecs import CompilePassDef
from sadl_compile.ir import Graph

__all__ = ["Options", "PassContext", "PassOrderError", "pass_order", "run_passes"]


class PassOrderError(ValueError):
    """The passes' ``before``/``after`` names cannot be satisfied: a cycle or an unknown name."""


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


def _contested(name: str) -> bool:
    """A pass name two plugins register: sadl serves neither (its ordering names are moot)."""
    try:
        served("compile_passes", name)
    except PluginConflictError:
        return True
    except UnknownNameError:
        return False
    return False


def _edges(registered: Mapping[str, CompilePassDef]) -> dict[str, set[str]]:
    """For each pass, the passes that must run before it (checked: every name registered; one
    that plugins contest runs nowhere, so ordering against it is dropped).
    """
    needs: dict[str, set[str]] = {name: set() for name in registered}
    for name, p in registered.items():
        for field, names in (("after", p.after), ("before", p.before)):
            missing = [n for n in names if n not in registered and not _contested(n)]
            if missing:
                raise PassOrderError(
                    f"compile pass {name!r} runs {field} {missing}, which no plugin registered; "
                    f"registered passes: {sorted(registered)}"
                )
        needs[name].update(n for n in p.after if n in registered)
        for later in p.before:
            if later in registered:
                needs[later].add(name)
    return needs


def _cycle(needs: dict[str, set[str]], left: set[str]) -> list[str]:
    """One cycle among ``left`` (every pass there waits on another one there)."""
    start = min(left)
    path, seen = [start], {start}
    while True:
        step = min(n for n in needs[path[-1]] if n in left)
        if step in seen:
            return [*path[path.index(step) :], step]
        path.append(step)
        seen.add(step)


def pass_order(registered: Mapping[str, CompilePassDef]) -> list[CompilePassDef]:
    """Every registered pass in the order it runs: each after its ``after`` names and before its
    ``before`` names, ties in registration order. Raises :class:`PassOrderError` on a cycle or on
    a name that is not a registered pass.
    """
    key = tuple((n, p.before, p.after) for n, p in registered.items())
    cached = _ORDER.get(key)
    if cached is not None:
        return [registered[n] for n in cached]
    needs = _edges(registered)
    rank = {name: i for i, name in enumerate(registered)}
    done: list[str] = []
    left = set(registered)
    while left:
        ready = [n for n in left if not (needs[n] & left)]
        if not ready:
            chain = " -> ".join(reversed(_cycle(needs, left)))
            raise PassOrderError(f"compile passes order themselves in a cycle: {chain}")
        first = min(ready, key=rank.__getitem__)
        done.append(first)
        left.remove(first)
    _ORDER[key] = tuple(done)
    return [registered[n] for n in done]


#: The order of each set of registered passes seen (the registry rarely changes).
_ORDER: dict[tuple[Any, ...], tuple[str, ...]] = {}


def selected(options: Options) -> list[CompilePassDef]:
    """The passes to run for ``options``, in order."""
    registered: dict[str, CompilePassDef] = records("compile_passes")
    ordered = pass_order(registered)
    if options.passes is not None:
        unknown = [n for n in options.passes if n not in registered]
        for name in unknown:
            with contextlib.suppress(UnknownNameError):
                served("compile_passes", name)  # a pass two plugins contest raises why
        if unknown:
            raise ValueError(
                f"sadl.compile: unknown passes {unknown}; registered: {sorted(registered)}"
            )
        chosen = set(options.passes)
        ordered = [p for p in ordered if p.name in chosen]
    if not options.fusion:
        ordered = [p for p in ordered if not p.fusion]
    return ordered


def run_passes(graph: Graph, options: Options) -> None:
    """Run the selected passes over ``graph``, in place (their names go to ``graph.passes``)."""
    context = PassContext(options, {})
    for compile_pass in selected(options):
        compile_pass.run(graph, context)
        graph.passes.append(compile_pass.name)
