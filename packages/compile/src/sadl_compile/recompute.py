"""``shared_recomputation``: a backward that recomputes what the forward still holds reads it.

Memory-frugal ops recompute in the backward what their forward computed (attention rebuilds the
softmax probabilities from q and k, as flash attention does), because eager cannot keep it
cheaply. In a compiled step the forward's array is often still intact when the backward
recomputes it. This pass numbers values the way common-subexpression elimination does, but
through in-place writes: a storage has a *state*, and each write (``st -= m``, ``np.exp(st,
out=st)``) gives it a new state numbered from the write's inputs. When the backward reads an
array whose number and state equal those of an array the forward made, and that array has not
been written since, the backward reads the forward's array; the recomputation is then dead code.

Only reads are redirected (a write keeps its own memory), so results are identical to eager.
The forward's array lives longer: the memory plan accounts for it.
"""

from __future__ import annotations

import itertools
from typing import Any

from sadl_compile.ir import Graph, Node, Storage, Value, map_values
from sadl_compile.passes import dead_code

__all__ = ["shared_recomputation"]

#: Constants up to this size are numbered by content (two folded copies of a mask are one).
_CONTENT_LIMIT = 1 << 22


class _Numbering:
    """Value numbers and storage states, in program order."""

    def __init__(self) -> None:
        self.numbers: dict[int, Any] = {}
        self.states: dict[Storage, Any] = {}
        self.fresh = itertools.count()
        self._ids: dict[Any, int] = {}  # interned signatures: numbers stay small

    def intern(self, thing: Any) -> int:
        """A small integer standing for ``thing`` (equal things, equal integers)."""
        found = self._ids.get(thing)
        if found is None:
            found = self._ids[thing] = len(self._ids)
        return found

    def number(self, v: Value) -> Any:
        n = self.numbers.get(v.index)
        if n is None:
            array = v.array
            # host constants only: reading a device array's bytes would copy it to the host
            host = v.storage.device is None
            if v.storage.const and host and array is not None and array.nbytes <= _CONTENT_LIMIT:
                content = ("const", array.dtype.str, array.shape, array.strides, array.tobytes())
                n = ("const", self.intern(content))
            else:
                n = ("value", v.index)
            self.numbers[v.index] = n
        return n

    def state(self, s: Storage) -> Any:
        st = self.states.get(s)
        if st is None:
            # Constants are numbered by content: two folded copies of one mask (the forward's and
            # the backward's) are the same until one is written, whatever memory holds them.
            st = self.states[s] = ("initial", "const" if s.const else s.index)
        return st

    def key(self, v: Value) -> tuple[Any, Any]:
        return self.number(v), self.state(v.storage)

    def signature(self, node: Node) -> Any:
        def leaf(x: Any) -> Any:
            return _Leaf(self.intern(self.key(x))) if type(x) is Value else x

        args = map_values(node.args, leaf)
        kwargs = map_values(node.kwargs, leaf)
        try:
            return self.intern((node.key, _frozen(args), _frozen(kwargs)))
        except TypeError:
            return None


class _Leaf(int):
    """A value's interned (number, state) inside a signature."""


def _frozen(tree: Any) -> Any:
    if isinstance(tree, list | tuple):
        return (type(tree).__name__, *(_frozen(x) for x in tree))
    if isinstance(tree, dict):
        return ("{", *((k, _frozen(v)) for k, v in tree.items()))
    if isinstance(tree, slice):
        return ("slice", tree.start, tree.stop, tree.step)
    if type(tree) is _Leaf:
        return ("%", int(tree))
    if hasattr(tree, "__array_interface__"):
        raise TypeError("arrays are not numbered by value")
    return tree


def shared_recomputation(graph: Graph, context: Any) -> None:
    """Let reads of a recomputed array use the array the forward computed, while intact."""
    nb = _Numbering()
    holders: dict[tuple[Any, Any], Value] = {}
    last_write = {w.storage: i for i, node in enumerate(graph.nodes) for w in node.writes}
    moved: dict[int, Storage] = {}  # views that now view an earlier array: their old storage
    shared = 0
    for i, node in enumerate(graph.nodes):
        if node.kind == "call" and not node.meta.get("dynamic"):
            _follow_moved_views(node, moved)
            shared += _redirect(node, i, nb, holders, last_write, moved)
        sig = nb.signature(node) if node.kind == "call" else None
        if sig is None or node.meta.get("dynamic"):
            sig = ("fresh", next(nb.fresh))
        for k, out in enumerate(node.outputs):
            nb.numbers[out.index] = ("out", sig, k)
            if out.storage.root is out:  # new memory: its state is its making
                nb.states[out.storage] = ("made", sig, k)
        for w in node.writes:
            nb.states[w.storage] = ("write", sig, nb.number(w))
        for v in (*node.outputs, *node.reads):
            holders.setdefault(nb.key(v), v)
        for w in node.writes:  # an array filled block by block is whole once the last block is
            root = w.storage.root
            if root is not None and root.storage is w.storage:
                holders.setdefault(nb.key(root), root)
    if shared:
        graph.notes.append(f"shared_recomputation: {shared} reads use an array computed before")
        dead_code(graph, context)  # the recomputations nothing reads any more


def _redirect(
    node: Node,
    i: int,
    nb: _Numbering,
    holders: dict[tuple[Any, Any], Value],
    last_write: dict[Storage, int],
    moved: dict[int, Storage],
) -> int:
    """Point the node's pure reads at earlier arrays with the same number and state.

    A node that makes a view (a reshape, a slice) of a redirected array makes it of the earlier
    array instead, so its outputs move to that memory. That is only allowed when neither memory
    is written from here on: a write through the view must not reach the earlier array (eager
    writes into its own copy), and the view must not see later writes into the earlier array.
    """
    written = {v.index for v in (*node.writes, *node.outputs)}
    out_leaves = {id(x) for x in _leaves(node.kwargs.get("out"))}
    views = {o.storage for o in node.outputs if o.storage.root is not o}
    swap: dict[Value, Value] = {}
    for v in node.reads:
        if v.index in written or id(v) in out_leaves or v in swap:
            continue
        key = nb.key(v)
        holder = holders.get(key)
        if (
            holder is not None
            and holder is not v
            and holder.storage is not v.storage
            and nb.state(holder.storage) == key[1]
            and holder.shape == v.shape
            and holder.strides == v.strides
            and holder.dtype == v.dtype
        ):
            if v.storage in views and (
                last_write.get(v.storage, -1) >= i or last_write.get(holder.storage, -1) >= i
            ):
                continue
            swap[v] = holder
    if not swap:
        return 0

    def use(x: Value) -> Value:
        return swap.get(x, x)

    node.args = map_values(node.args, use)
    node.kwargs = {
        k: (val if k == "out" else map_values(val, use)) for k, val in node.kwargs.items()
    }
    node.reads = tuple(use(v) for v in node.reads)
    source = node.meta.get("source")
    if source is not None:
        source.args = map_values(source.args, use)
        source.reads = tuple(use(v) for v in source.reads)
    region = node.region  # the op applications it ran in read the earlier array too (a kernel
    while region is not None:  # replacing one later takes its inputs from there)
        region.inputs = map_values(region.inputs, use)
        region = region.parent
    for v, holder in swap.items():
        for o in node.outputs:
            if o.storage is v.storage and o.storage.root is not o:
                moved[o.index] = o.storage
                o.storage = holder.storage
    return len(swap)


def _follow_moved_views(node: Node, moved: dict[int, Storage]) -> None:
    """A view of a view that moved to an earlier array views that array too."""
    for o in node.outputs:
        if o.storage.root is o:
            continue
        for r in node.reads:
            if moved.get(r.index) is o.storage:
                moved[o.index] = o.storage
                o.storage = r.storage
                break


def _leaves(tree: Any) -> list[Any]:
    if type(tree) is Value:
        return [tree]
    if isinstance(tree, list | tuple):
        return [x for item in tree for x in _leaves(item)]
    return []
