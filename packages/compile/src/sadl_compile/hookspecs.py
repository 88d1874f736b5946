"""The hook sadl-compile adds to sadl (through ``add_hookspecs``) and the record it returns.

``register_compile_passes`` is declared with ``sadl.plugins.records_hookspec``: sadl collects its
records like its own (checked, attributed, listed by ``sadl plugins``), and the pass pipeline
reads them with ``sadl.plugins.records("compile_passes")``. A plugin implements the hook as any
other, once sadl-compile is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sadl.plugins import records_hookspec

__all__ = ["CompilePassDef", "register_compile_passes"]


@dataclass(frozen=True)
class CompilePassDef:
    """A pass of ``sadl.compile``: ``run(graph, context)`` edits the traced graph in place.

    Passes run in ascending ``order`` (sadl-compile's: fold_constants 10, dead_code 20,
    common_subexpressions 30, shared_recomputation 35, fuse_elementwise 50, flat_optimizer 60,
    dead_code_final 70, memory_plan 90). ``fusion=True`` marks a pass that changes how values
    are computed (results may differ from eager in the last bits); ``sadl.compile(fusion=False)``
    skips it.
    """

    name: str
    run: Callable[..., Any]
    order: float = 50.0
    fusion: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"CompilePassDef: name must be a Python identifier, got {self.name!r}")
        if not callable(self.run):
            raise TypeError(f"CompilePassDef {self.name!r}: run must be callable")
        if isinstance(self.order, bool) or not isinstance(self.order, int | float):
            raise TypeError(f"CompilePassDef {self.name!r}: order must be a number")
        if not self.doc:
            doc = (getattr(self.run, "__doc__", None) or "").strip()
            object.__setattr__(self, "doc", doc.split("\n\n")[0].replace("\n", " "))


@records_hookspec(CompilePassDef, "compile pass")
def register_compile_passes() -> Iterable[CompilePassDef]:
    """Return passes for ``sadl.compile`` as ``CompilePassDef(name, run, order=50, fusion=False)``.

    ``run(graph, context)`` edits the traced graph in place. A graph is a list of nodes in
    program order (``graph.nodes``); a node calls ``node.func`` on ``node.args`` /
    ``node.kwargs`` (trees whose leaves are values or literal parameters), returns
    ``node.outputs`` and writes into ``node.writes`` in place. Values sharing memory share a
    ``value.storage``; ``storage.const`` marks contents known while compiling,
    ``storage.escapes`` memory handed out of the call. Effects (``node.kind`` other than
    ``"call"``) must be kept in order. ``context.options.fusion`` is False when the user asked
    for results identical to eager.

    Passes run in ascending ``order``. sadl-compile's: ``fold_constants`` (10), ``dead_code``
    (20), ``common_subexpressions`` (30), ``shared_recomputation`` (35),
    ``fuse_elementwise`` (50, fusion), ``flat_optimizer`` (60),
    ``dead_code_final`` (70), ``memory_plan`` (90). A pass that changes how values are computed
    (a fused kernel whose rounding differs from NumPy's) sets ``fusion=True`` and is skipped
    under ``sadl.compile(fusion=False)``. ``docs/compile.md`` shows a complete example.

    Example::

        from sadl.plugins import hookimpl
        from sadl_compile import CompilePassDef


        def count_calls(graph, context):
            calls = sum(1 for node in graph.nodes if node.kind == "call")
            graph.notes.append(f"count_calls: {calls} calls")


        @hookimpl
        def register_compile_passes():
            return [CompilePassDef("count_calls", count_calls, order=95)]
    """
    raise NotImplementedError
