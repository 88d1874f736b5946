"""The hook sadl-compile adds to sadl (through ``add_hookspecs``) and the record it returns.

``register_compile_passes`` is declared with ``sadl.plugins.records_hookspec``: sadl collects its
records like its own (checked, attributed, listed by ``sadl plugins``), and the pass pipeline
reads them with ``sadl.plugins.records("compile_passes")``. A plugin implements the hook as any
other, once sadl-compile is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sadl.plugins import records_hookspec

if TYPE_CHECKING:
    from sadl_compile.ir import Graph
    from sadl_compile.pipeline import PassContext

__all__ = ["CompilePassDef", "register_compile_passes"]


def _names(owner: str, field: str, names: Any) -> tuple[str, ...]:
    if isinstance(names, str) or not isinstance(names, tuple | list):
        raise TypeError(
            f"CompilePassDef {owner!r}: {field} must be a tuple of pass names, got {names!r}"
        )
    for n in names:
        if not isinstance(n, str) or not n.isidentifier():
            raise ValueError(f"CompilePassDef {owner!r}: {field} holds {n!r}, not a pass name")
        if n == owner:
            raise ValueError(f"CompilePassDef {owner!r}: a pass cannot run {field} itself")
    return tuple(names)


@dataclass(frozen=True)
class CompilePassDef:
    """A pass of ``sadl.compile``: ``run(graph, context)`` edits the traced graph in place.

    The order is declared by name: ``after=("fusion_pass",)`` runs this pass after the named
    ones, ``before=(...)`` before them. The pipeline sorts the registered passes by these
    constraints (ties keep registration order) and refuses a cycle or a name no plugin
    registered, naming the passes involved. sadl-compile's own run as a chain:
    fold_constants, dead_code, common_subexpressions, shared_recomputation, fuse_elementwise,
    flat_optimizer, dead_code_final, memory_plan. ``print(compiled.graph)`` shows the order a
    call ran. ``fusion=True`` marks a pass that changes how values are computed (results may
    differ from eager in the last bits); ``sadl.compile(fusion=False)`` skips it.
    """

    name: str
    run: Callable[[Graph, PassContext], None]
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    fusion: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"CompilePassDef: name must be a Python identifier, got {self.name!r}")
        if not callable(self.run):
            raise TypeError(f"CompilePassDef {self.name!r}: run must be callable")
        object.__setattr__(self, "before", _names(self.name, "before", self.before))
        object.__setattr__(self, "after", _names(self.name, "after", self.after))
        if set(self.before) & set(self.after):
            both = sorted(set(self.before) & set(self.after))
            raise ValueError(f"CompilePassDef {self.name!r}: {both} both before and after it")
        if not self.doc:
            doc = (getattr(self.run, "__doc__", None) or "").strip()
            object.__setattr__(self, "doc", doc.split("\n\n")[0].replace("\n", " "))


@records_hookspec(CompilePassDef, "compile pass")
def register_compile_passes() -> Iterable[CompilePassDef]:
    """Return passes for ``sadl.compile`` as ``CompilePassDef(name, run, before=(), after=())``.

    ``run(graph, context)`` edits the traced graph in place. A graph is a list of nodes in
    program order (``graph.nodes``); a node calls ``node.func`` on ``node.args`` /
    ``node.kwargs`` (trees whose leaves are values or literal parameters), returns
    ``node.outputs`` and writes into ``node.writes`` in place. Values sharing memory share a
    ``value.storage``; ``storage.const`` marks contents known while compiling,
    ``storage.escapes`` memory handed out of the call. Effects (``node.kind`` other than
    ``"call"``) must be kept in order. ``context.options.fusion`` is False when the user asked
    for results identical to eager.

    A pass names the passes it runs ``after=`` and ``before=``; sadl-compile's run as a chain:
    ``fold_constants``, ``dead_code``, ``common_subexpressions``, ``shared_recomputation``,
    ``fuse_elementwise`` (fusion), ``flat_optimizer``, ``dead_code_final``, ``memory_plan``.
    A cycle or an unknown name is refused with the passes named. A pass that changes how values
    are computed (a fused kernel whose rounding differs from NumPy's) sets ``fusion=True`` and
    is skipped under ``sadl.compile(fusion=False)``. ``docs/compile.md`` shows a complete example.

    Example::

        from sadl.plugins import hookimpl
        from sadl_compile import CompilePassDef


        def count_calls(graph, context):
            calls = sum(1 for node in graph.nodes if node.kind == "call")
            graph.notes.append(f"count_calls: {calls} calls")


        @hookimpl
        def register_compile_passes():
            return [CompilePassDef("count_calls", count_calls, after=("dead_code_final",))]
    """
    raise NotImplementedError
