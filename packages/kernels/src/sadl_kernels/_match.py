"""Find a traced pattern of NumPy calls in a graph and replace it with one kernel call.

A :class:`Pattern` is a list of :class:`Step` records, one per NumPy call, in program order.
Matching walks the graph's nodes from a start node, skipping nodes that only make a view (a
reshape, a slice: their output shares its input's memory), and binds each step's operands to
the graph's values by name. A pattern's ``check`` then tests what steps cannot say (shapes,
dtypes, that one value is a view of another) and returns the literal parameters of the kernel.

The rewrite keeps the meaning of the graph exactly: the kernel writes the final contents of
EVERY value the removed calls produced or wrote (``provides``), so nothing downstream can tell
(except in rounding, within the kernel's stated tolerance). A removed call that produced a value
becomes an allocation (``np.empty``) at the same place, so views taken of it still work; the
kernel call goes where the last removed call was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sadl_kernels._api import Graph, Node, Value, contiguous, new_node

__all__ = ["Cap", "Lit", "Pattern", "Step", "contiguous", "disjoint", "rewrite_all"]


@dataclass(frozen=True)
class Lit:
    """A literal operand that must be equal to ``value`` (a number or a string)."""

    value: Any


@dataclass(frozen=True)
class Cap:
    """A literal number, captured under ``name`` for the pattern's ``check``."""

    name: str


@dataclass(frozen=True)
class Step:
    """One NumPy call: ``func(*args, **kwargs, out=out)`` returning ``result``.

    ``args`` are value names (``str``), :class:`Lit` or :class:`Cap`; ``kwargs`` literal.
    """

    func: str
    args: tuple[Any, ...]
    out: str | None = None
    result: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    optional: bool = False


@dataclass(frozen=True)
class Pattern:
    """A sequence of calls, the kernel that replaces it and what the kernel reads and writes.

    ``kernel(*reads, *provides, *params)`` where ``params`` is what ``check(bound)`` returned
    (``None``: the match does not qualify). ``provides`` must name every value the steps produce
    or write; names bound only by an optional step that did not match are passed as ``None``.
    """

    name: str
    steps: tuple[Step, ...]
    reads: tuple[str, ...]
    provides: tuple[str, ...]
    kernel: Callable[..., Any]
    check: Callable[[dict[str, Any]], tuple[Any, ...] | None]


def func_name(node: Node) -> str:
    """``multiply`` for a ufunc call, the function's name otherwise (``einsum``)."""
    key = node.key
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], np.ufunc):
        return key[0].__name__ if key[1] == "__call__" else f"{key[0].__name__}.{key[1]}"
    return str(getattr(node.func, "__name__", ""))


def is_view(node: Node) -> bool:
    """A call whose one output shares the memory of its first input (reshape, slice)."""
    return (
        node.kind == "call"
        and not node.writes
        and len(node.outputs) == 1
        and bool(node.reads)
        and node.outputs[0].storage is node.reads[0].storage
    )


def extent(v: Value) -> tuple[int, int] | None:
    """The elements ``[start, stop)`` of its storage that contiguous ``v`` spans, when its chain
    of views (reshapes, row slices) says; None when unknown.
    """
    if not contiguous(v):
        return None
    node = v.producer
    size = math.prod(v.shape)
    if node is None:
        return (0, size) if v.storage.root is v else None
    if not is_view(node):
        return (0, size)  # a call's new array: a storage of its own
    src = node.args[0] if node.args and _is_value(node.args[0]) else None
    base = None if src is None else extent(src)
    if base is None or src is None:
        return None
    name = func_name(node)
    if name in ("reshape", "ravel") and math.prod(src.shape) == size:
        return base
    if name == "__getitem__" and len(node.args) == 2:
        index = node.args[1]
        if index in ((), Ellipsis, (Ellipsis,)):
            return base
        if isinstance(index, slice) and index.step in (None, 1) and src.shape:
            start, stop, _ = index.indices(src.shape[0])
            row = math.prod(src.shape[1:])
            return (base[0] + start * row, base[0] + max(start, stop) * row)
    return None


def disjoint(*values: Value | None) -> bool:
    """No two of ``values`` (None ignored) can share an element of memory."""
    vs = [v for v in values if v is not None]
    for i, a in enumerate(vs):
        for b in vs[i + 1 :]:
            if a.storage is not b.storage:
                continue
            ea, eb = extent(a), extent(b)
            if ea is None or eb is None or (ea[0] < eb[1] and eb[0] < ea[1]):
                return False
    return True


def _same_literal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return isinstance(b, int | float) and not isinstance(b, bool) and a == b


def _bind(token: Any, x: Any, bound: dict[str, Any]) -> bool:
    if isinstance(token, Lit):
        return not _is_value(x) and _same_literal(token.value, x)
    if isinstance(token, Cap):
        if _is_value(x) or isinstance(x, bool) or not isinstance(x, int | float):
            return False
        bound[token.name] = float(x)
        return True
    if not _is_value(x):
        return False
    seen = bound.get(token)
    if seen is None:
        bound[token] = x
        return True
    return seen is x


def _is_value(x: Any) -> bool:
    return hasattr(x, "storage") and hasattr(x, "strides")


def _match_step(step: Step, node: Node, bound: dict[str, Any]) -> bool:
    if node.kind != "call" or func_name(node) != step.func or len(node.args) != len(step.args):
        return False
    kwargs = dict(node.kwargs)
    out = kwargs.pop("out", None)
    if set(kwargs) != set(step.kwargs):
        return False
    if any(not _same_literal(step.kwargs[k], v) for k, v in kwargs.items()):
        return False
    trial = dict(bound)
    for token, x in zip(step.args, node.args):
        if not _bind(token, x, trial):
            return False
    if step.out is None:
        if out is not None:
            return False
    else:
        target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        if not _is_value(target) or not _bind(step.out, target, trial):
            return False
    if step.result is None:
        if node.outputs:
            return False
    elif len(node.outputs) != 1 or not _bind(step.result, node.outputs[0], trial):
        return False
    bound.clear()
    bound.update(trial)
    return True


def match(
    nodes: Sequence[Node], start: int, pattern: Pattern
) -> tuple[dict[str, Any], list[int]] | None:
    """The bindings and the indices of the matched calls, for a match starting at ``start``."""
    bound: dict[str, Any] = {}
    taken: list[int] = []
    j = start
    for index, step in enumerate(pattern.steps):
        while taken and j < len(nodes) and is_view(nodes[j]):
            j += 1
        if j < len(nodes) and _match_step(step, nodes[j], bound):
            bound[f"#{index}"] = True  # which steps matched, for the pattern's check
            taken.append(j)
            j += 1
        elif not step.optional:
            return None
    return (bound, taken) if taken else None


def _qualifies(
    pattern: Pattern, nodes: Sequence[Node], taken: list[int], bound: dict[str, Any]
) -> tuple[Any, ...] | None:
    """The kernel's parameters, or None when the match cannot be replaced."""
    provided = {id(bound[n]) for n in pattern.provides if n in bound}
    for k in taken:
        node = nodes[k]
        for v in (*node.outputs, *node.writes):
            if id(v) not in provided:
                return None  # a pattern must say where every result goes
        for v in (*node.reads, *node.outputs):
            if v.storage.device is not None:
                return None  # host kernels only
    for v in bound.values():
        if _is_value(v) and v.dtype not in (np.float32, np.float64):
            return None
    for k in taken:
        for v in nodes[k].outputs:
            if not contiguous(v):
                return None  # replaced by np.empty: must be laid out as np.empty lays it out
    return pattern.check(bound)


def _rewrite(
    graph: Graph, pattern: Pattern, taken: list[int], bound: dict[str, Any], params: tuple[Any, ...]
) -> Node:
    nodes: list[Node | None] = list(graph.nodes)
    first = graph.nodes[taken[0]]
    reads = [bound.get(n) for n in pattern.reads]
    provides = [bound.get(n) for n in pattern.provides]
    values = [v for v in (*reads, *provides) if v is not None]
    kernel = new_node(
        first,
        kind="call",
        func=pattern.kernel,
        key=("sadl_kernels", pattern.name),
        args=(*reads, *provides, *params),
        kwargs={},
        outputs=(),
        reads=tuple(dict.fromkeys(values)),
        writes=tuple(dict.fromkeys(v for v in provides if v is not None)),
        label=f"kernel[{pattern.name}]",
        const=False,
    )
    for k in taken:
        node = graph.nodes[k]
        if node.outputs:
            v = node.outputs[0]
            nodes[k] = new_node(
                node,
                kind="call",
                func=np.empty,
                key=np.empty,
                args=(v.shape,),
                kwargs={"dtype": v.dtype},
                reads=(),
                writes=(),
                label="empty",
                const=False,
            )
            v.producer = nodes[k]
        else:
            nodes[k] = None
    nodes[taken[-1]] = kernel if nodes[taken[-1]] is None else nodes[taken[-1]]
    if nodes[taken[-1]] is not kernel:
        nodes.insert(taken[-1] + 1, kernel)
    graph.nodes = [n for n in nodes if n is not None]
    return kernel


def rewrite_all(graph: Graph, patterns: Sequence[Pattern]) -> dict[str, int]:
    """Replace every qualifying match of ``patterns`` (first pattern first); counts by name."""
    counts: dict[str, int] = {}
    for pattern in patterns:
        i = 0
        while i < len(graph.nodes):
            found = match(graph.nodes, i, pattern)
            if found is None:
                i += 1
                continue
            bound, taken = found
            params = _qualifies(pattern, graph.nodes, taken, bound)
            if params is None:
                i += 1
                continue
            kernel = _rewrite(graph, pattern, taken, bound, params)
            counts[pattern.name] = counts.get(pattern.name, 0) + 1
            i = next(k for k in range(taken[0], len(graph.nodes)) if graph.nodes[k] is kernel) + 1
    return counts


def rows_of(v: Value) -> int:
    """The number of rows of a 2-D value (its elements over the last axis otherwise)."""
    return int(math.prod(v.shape[:-1]))
