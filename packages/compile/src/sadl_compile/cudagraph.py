"""Replay through a CUDA graph (``sadl.compile(fn, cuda_graph=True)``, CuPy only).

A CUDA graph records the kernels of one run and launches all of them again with one call, which
takes the per-kernel launch cost (a few microseconds of Python and driver work each) out of a
replay. A graph replays the *same* kernels on the *same* memory with the *same* scalar
arguments, so only a trace that is nothing but array calls on CuPy arrays, with every temporary
in a buffer planned once (``memory_plan``), qualifies: no random draws (a graph would draw the
same numbers again), no host/device copies, no guards, no effects (``.grad``, optimizer steps,
whose Python runs on every replay), no writes into memory that outlives the call, no shapes that
depend on data. :func:`unsupported` says why a trace does not qualify; it then replays as usual.

How a qualifying replay runs: the checks of the trace's assumptions run in Python as always; the
arguments are copied into static device arrays the graph reads; the graph is launched on a
stream of its own, ordered after the caller's stream; the outputs are copied out of the graph's
memory into fresh arrays. The first replay captures the graph (a warm-up run first, so kernels
are compiled and CuPy's memory pool holds the blocks the capture asks for). The arrays the
capture made (its outputs) are kept for as long as the graph, which writes into them on every
launch; nothing but the graph allocates on its stream. If the capture fails, a
``CompileWarning`` says why and every replay runs the recorded calls directly.

This path is written against CuPy's documented stream-capture API (``Stream.begin_capture``,
``end_capture``, ``Graph.launch``) and selected only when the arrays are CuPy's; it has not run
on a GPU in sadl's CI (the tests drive it through a stand-in for the graph API).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

from sadl import CompileWarning, backends

from sadl_compile.codegen import (
    Emitter,
    Program,
    checks,
    name_entries,
    output_text,
    statements,
    used_values,
)
from sadl_compile.ir import Graph, Value, iter_values

__all__ = ["CupyGraph", "generate_graphed", "graph_for", "unsupported"]

_counter = itertools.count()


class CupyGraph:
    """One CUDA graph, captured and launched with CuPy on a stream of its own."""

    def __init__(self, cupy: Any) -> None:
        self._cupy = cupy
        self._stream = cupy.cuda.Stream(non_blocking=True)
        self._graph: Any = None

    def capture(self, run: Callable[[], Any]) -> Any:
        """Run ``run`` once (warm-up), then capture a second run; returns its outputs."""
        stream = self._stream
        self._cupy.cuda.get_current_stream().synchronize()
        with stream:
            run()
            stream.synchronize()
            stream.begin_capture()
            try:
                outs = run()
            finally:
                self._graph = stream.end_capture()
        return outs

    def launch(self, before: Callable[[], None], after: Callable[[], Any]) -> Any:
        """``before()`` and the graph on the graph's stream, after the caller's stream's work
        so far; then ``after()`` on the caller's stream, after the graph. Returns ``after()``.

        ``after`` (the copies out) allocates on the caller's stream on purpose: CuPy's memory
        pool keeps freed blocks per stream, so the blocks the captured calls used for their
        own temporaries stay in the graph stream's share, which nothing else allocates from.
        """
        stream = self._stream
        current = self._cupy.cuda.get_current_stream()
        stream.wait_event(current.record())
        with stream:
            before()
            self._graph.launch(stream)
        current.wait_event(stream.record())
        return after()


def graph_for(module: Any) -> Any:
    """A graph for arrays of ``module`` (an array module), or None where there is none: only
    CuPy has CUDA graphs (the stand-in serving ``"cuda"`` in tests does not).
    """
    if getattr(module, "__name__", "") != "cupy":
        return None
    return CupyGraph(module)


def unsupported(graph: Graph) -> str | None:
    """Why ``graph`` cannot replay as a CUDA graph (None: it can)."""
    if not any(n.kind == "call" for n in graph.nodes):
        return "no array calls"
    used = used_values(graph)
    modules = set()
    for v in graph.values:
        if v.index not in used:
            continue
        device = v.storage.device
        if device is None:
            return f"{v.name or 'a value'} lives on the host"
        modules.add(backends.backend(device.type).module)
    if len(modules) != 1 or graph_for(next(iter(modules))) is None:
        return "the arrays are not CuPy arrays"
    for node in graph.nodes:
        if node.kind != "call":
            return f"a {node.kind} node (runs Python on every replay)"
        if node.meta.get("dynamic") or node.meta.get("emit") is not None:
            return f"{node.label} cannot be captured"
        if any(w.storage.kind != "temp" for w in node.writes):
            return f"{node.label} writes into memory that outlives the call"
        for v in node.outputs:
            s = v.storage
            if s.kind == "temp" and s.root is v and v.array is None and not s.escapes:
                return f"{node.label} allocates a temporary on every call (not planned)"
    for v in graph.values:
        if v.index in used and v.entry is not None and v.entry[0] == "grad":
            return "it reads a .grad (a new array on every call)"
    return None


class _Launcher:
    """Runs the graphed body: captures it on the first call, launches it on the next ones."""

    def __init__(self, make_graph: Callable[[], Any], graph: Graph) -> None:
        self._make_graph = make_graph
        self._ir = graph
        self.body: Callable[[list[Any], list[Any]], Any] = _unset
        self._graph: Any = None
        self._static: list[Any] = []
        self._outs: tuple[Any, ...] = ()
        self.failure: str | None = None

    def __call__(self, arrays: list[Any], tensors: list[Any]) -> list[Any]:
        if self._graph is None and self.failure is None:
            self._capture(arrays, tensors)
        if self.failure is not None:
            return list(self.body(arrays, tensors))
        static = self._static

        def copy_in() -> None:
            for target, source in zip(static, arrays):
                if target is not source:
                    target[...] = source

        return self._graph.launch(copy_in, lambda: [o.copy() for o in self._outs])  # type: ignore[no-any-return]

    def _capture(self, arrays: list[Any], tensors: list[Any]) -> None:
        try:
            kind = type(next(iter(a for a in arrays if backends.is_array(a))))
            static = [a.copy() if type(a) is kind else a for a in arrays]
            graph = self._make_graph()
            outs = graph.capture(lambda: self.body(static, tensors))
        except Exception as error:  # a capture CUDA refuses: replay the calls directly
            self.failure = f"{type(error).__name__}: {error}"
            self._ir.notes.append(f"cuda_graph: capture failed ({self.failure}); calls replayed")
            warnings.warn(
                f"sadl.compile: capturing a CUDA graph of {self._ir.name} failed "
                f"({self.failure}); its replays run the recorded calls instead",
                CompileWarning,
                stacklevel=4,
            )
            return
        self._static, self._outs, self._graph = static, tuple(outs), graph


def _unset(arrays: list[Any], tensors: list[Any]) -> Any:
    raise AssertionError("the graphed body is set when its program is generated")


def generate_graphed(graph: Graph) -> Program:
    """The replay program of a qualifying ``graph`` (see :func:`unsupported`): ``body`` holds
    the calls (what the CUDA graph captures), ``replay`` the checks, the launch and the outputs.
    """
    em = Emitter()
    names: dict[int, str] = {}
    head: list[str] = []
    checks(graph, em, head)
    body: list[str] = []
    name_entries(graph, em, names, body)
    for i, node in enumerate(graph.nodes):
        body.extend(statements(node, i, em, names))
    outs: list[Value] = list(dict.fromkeys(iter_values(graph.outputs)))
    body.append("return (" + "".join(f"{names[v.index]}, " for v in outs) + ")")
    launched = {**names, **{v.index: f"O[{i}]" for i, v in enumerate(outs)}}
    head.append("O = _launch(A, T)")
    head.append(f"return {output_text(graph.outputs, em, launched)}")
    used = used_values(graph)
    devices = {v.storage.device for v in graph.values if v.index in used}
    module = backends.backend(next(iter(devices)).type).module
    launcher = _Launcher(lambda: graph_for(module), graph)
    em.namespace["_launch"] = launcher
    source = "".join(
        f"def {name}(A, T):\n" + "".join(f"    {line}\n" for line in lines)
        for name, lines in (("body", body), ("replay", head))
    )
    filename = f"<sadl.compile {graph.name} #{next(_counter)} (CUDA graph)>"
    program = Program(source, em.namespace, filename)
    launcher.body = em.namespace["body"]
    graph.notes.append("cuda_graph: replays launch one CUDA graph (captured on the first replay)")
    return program
