"""The IR of a compiled function: array values, the memory they live in, and the calls between them.

A :class:`Graph` is a flat list of :class:`Node` records in program order. A node calls one
function (a ufunc, a NumPy function, an ndarray method, a random draw) on :class:`Value` slots and
literal parameters, produces new values, and may write into the memory of values it was given
(``out=``, ``a[i] = b``, ``a += b``). Several values can share one :class:`Storage` (a reshape or
a slice is a view), which is what the passes reason about: a write into a storage is seen by every
value viewing it, and a buffer can be reused once no value of its storage is needed any more.

Besides calls, a graph has effect nodes: what the traced Python did to objects that outlive the
call (``param.grad = g``, an optimizer step, a module's training flag), replayed in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "AsTensor",
    "Graph",
    "ObjectResult",
    "Node",
    "OpRegion",
    "Storage",
    "Value",
    "install_formatter",
    "iter_values",
    "map_values",
    "region_nodes",
]

#: Where a value comes from when it is not computed by a node: ``("arg", i)`` the i-th array
#: among the call's arguments, ``("data", tensor)`` / ``("grad", tensor)`` an attribute of a
#: tensor that outlives the call, ``("const", array)`` an array known while compiling.
Entry = tuple[str, Any]


class Storage:
    """One block of memory shared by every value that views it.

    ``kind`` is ``"input"`` (an argument's array: new each call), ``"external"`` (an array that
    outlives the call: a parameter's data, an optimizer's state, a captured array) or ``"temp"``
    (allocated by a node of the graph). ``const`` says the contents are known while compiling
    (they depend on no input, parameter or random draw); ``escapes`` that a value of it is handed
    out (returned, stored as a gradient), so its memory must be fresh on every call.
    ``device`` is the ``sadl.backends.Device`` the memory lives on, None on the host (NumPy).
    """

    __slots__ = ("const", "device", "dynamic", "escapes", "index", "kind", "nonconst_read", "root")

    def __init__(self, index: int, kind: str, const: bool) -> None:
        self.index = index
        self.kind = kind
        self.const = const
        self.escapes = False
        self.dynamic = False  #: some value's shape depends on data (boolean indexing)
        self.nonconst_read = False  #: read by a node that is not constant (tracing bookkeeping)
        self.root: Value | None = None  #: the value that spans the whole storage, if any
        self.device: Any = None  #: where the memory lives (a Device); None: the host

    def __repr__(self) -> str:
        where = "" if self.device is None else f" on {self.device}"
        return f"<storage {self.index} {self.kind}{' const' if self.const else ''}{where}>"


class Value:
    """One array in the graph: its shape, dtype, memory layout and where it comes from."""

    __slots__ = (
        "array",
        "dtype",
        "entry",
        "index",
        "name",
        "producer",
        "scalar",
        "shape",
        "storage",
        "strides",
    )

    def __init__(
        self,
        index: int,
        storage: Storage,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        strides: tuple[int, ...],
        producer: Node | None = None,
        entry: Entry | None = None,
    ) -> None:
        self.index = index
        self.storage = storage
        self.shape = shape
        self.dtype = dtype
        self.strides = strides
        self.producer = producer
        self.entry = entry
        self.scalar = False  #: the traced call returned a NumPy scalar, not an array
        self.array: Any = None  #: the concrete array, for constants (set by constant folding)
        self.name = ""  #: a readable label for inputs and captured tensors

    @property
    def const(self) -> bool:
        """Known while compiling: computed from nothing that changes between calls."""
        return self.storage.const

    @property
    def nbytes(self) -> int:
        """Bytes spanned by the value (its elements, times the item size)."""
        return math.prod(self.shape) * self.dtype.itemsize

    def describe(self) -> str:
        """``float32[16, 64]`` (``float32[16, 64]@cuda:0`` on a device)."""
        dims = ", ".join(str(n) for n in self.shape)
        where = self.storage.device
        return f"{self.dtype}[{dims}]" + ("" if where is None else f"@{where}")

    def __repr__(self) -> str:
        return f"%{self.index}"


@dataclass(eq=False)
class Node:
    """One call (or effect) of the graph.

    ``func`` is what replay calls; ``key`` identifies the computation for common-subexpression
    elimination (the function and, for ufunc methods, the method). ``args``/``kwargs`` are trees
    (tuples, lists, dicts) with :class:`Value` leaves and literal parameters. ``reads`` are every
    value leaf, ``writes`` the values whose memory the call changes in place, ``outputs`` the new
    values it returns. ``kind`` is ``"call"``, ``"draw"`` (random numbers: never removed, never
    merged), ``"guard"`` (a condition checked on every replay) or an effect (``"set_grad"``,
    ``"set_data"``, ``"set_training"``, ``"optimizer"``, ``"version"``). ``where`` is the source
    line that made the call.
    """

    kind: str
    func: Callable[..., Any] | None
    key: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: tuple[Value, ...] = ()
    reads: tuple[Value, ...] = ()
    writes: tuple[Value, ...] = ()
    label: str = ""
    where: Any = None
    const: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    region: OpRegion | None = None  #: the innermost op application that made this call

    @property
    def is_effect(self) -> bool:
        """Effects, draws and guards are kept whatever their outputs' use."""
        return self.kind != "call"

    def __repr__(self) -> str:
        return f"<node {self.label or self.kind}>"


@dataclass(eq=False)
class OpRegion:
    """One op application the traced code made: the registered op, what it was given, what it
    returned, and (through ``Node.region``) the calls it made.

    ``op`` is the ``sadl.plugins.OpDef`` that ran; ``phase`` is ``"forward"`` (its forward, on
    the graph or on plain arrays as a backward rule calls an op) or ``"backward"`` (its backward
    rule: ``inputs`` are the upstream gradient, the forward's output and its inputs, ``outputs``
    one gradient per input, None where none was asked for). ``inputs`` and ``params`` are the
    arguments as the op saw them, with a :class:`Value` for each array; ``outputs`` the returned
    arrays as values. ``parent`` is the application this one ran inside (a backward rule calls
    ``layer_norm_backward``), None at the top. Regions are recorded while tracing; a pass that
    replaces a region's calls (a kernel) should check :func:`region_nodes` first.
    """

    op: Any
    phase: str
    inputs: tuple[Any, ...]
    params: dict[str, Any]
    outputs: tuple[Value | None, ...] = ()
    parent: OpRegion | None = None

    @property
    def name(self) -> str:
        """The op's registered name (``layer_norm``), ``/backward`` added for a rule."""
        name: str = self.op.name
        return name if self.phase == "forward" else f"{name}/backward"

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def region_nodes(nodes: list[Node], region: OpRegion) -> list[int]:
    """The indices of the nodes ``region`` made (its nested regions' included), in order."""
    found: list[int] = []
    for i, node in enumerate(nodes):
        r = node.region
        while r is not None and r is not region:
            r = r.parent
        if r is region:
            found.append(i)
    return found


@dataclass(eq=False)
class Graph:
    """The traced program: inputs, nodes in order, outputs, and what must hold to replay it."""

    name: str
    inputs: list[Value]
    nodes: list[Node]
    outputs: Any  #: the returned structure, with Value leaves
    values: list[Value] = field(default_factory=list)
    storages: list[Storage] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  #: what the passes did, for printing
    passes: list[str] = field(default_factory=list)  #: the passes that ran, in order
    meta: dict[str, Any] = field(default_factory=dict)

    def output_values(self) -> list[Value]:
        """Every value the function returns."""
        return list(iter_values(self.outputs))

    def __str__(self) -> str:
        return _formatter(self)

    def __repr__(self) -> str:
        calls = sum(1 for n in self.nodes if n.kind == "call")
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {calls} calls>"


class AsTensor:
    """An output the function returned as a Tensor: the replay wraps the value's array."""

    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"tensor({self.value!r})"


class ObjectResult:
    """An output object (a dataclass, a plain object) holding values: the replay makes a shallow
    copy of ``proto`` with ``fields`` (trees with Value leaves) put into its ``__dict__``.
    """

    __slots__ = ("fields", "proto")

    def __init__(self, proto: Any, fields: dict[str, Any]) -> None:
        self.proto = proto
        self.fields = fields

    def __repr__(self) -> str:
        return f"{type(self.proto).__name__}({self.fields!r})"


def _no_formatter(graph: Graph) -> str:
    return repr(graph)


_formatter: Callable[[Graph], str] = _no_formatter


def install_formatter(formatter: Callable[[Graph], str]) -> None:
    """Called once by ``sadl_compile.show`` (which imports this module): ``str(graph)``."""
    global _formatter
    _formatter = formatter


def iter_values(tree: Any) -> Iterator[Value]:
    """The :class:`Value` leaves of a tree of tuples, lists and dicts, in order."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if type(item) is Value:
            yield item
        elif type(item) is AsTensor:
            yield item.value
        elif type(item) is ObjectResult:
            stack.extend(reversed(list(item.fields.values())))
        elif isinstance(item, tuple | list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))


def map_values(tree: Any, fn: Callable[[Value], Any]) -> Any:
    """``tree`` with every :class:`Value` leaf replaced by ``fn(leaf)``."""
    if type(tree) is Value:
        return fn(tree)
    if type(tree) is AsTensor:
        return AsTensor(fn(tree.value))
    if type(tree) is ObjectResult:
        return ObjectResult(tree.proto, map_values(tree.fields, fn))
    if isinstance(tree, tuple):
        items = [map_values(x, fn) for x in tree]
        return tuple(items) if type(tree) is tuple else type(tree)(*items)
    if isinstance(tree, list):
        return [map_values(x, fn) for x in tree]
    if isinstance(tree, dict):
        return {k: map_values(v, fn) for k, v in tree.items()}
    return tree
