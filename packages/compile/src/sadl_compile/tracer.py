"""The tracer: runs a function for real and records every array call it makes into a graph.

Arrays enter a trace as values with an *entry* (an argument, a tensor's ``.data`` or ``.grad``, a
captured constant) and leave it as outputs or effects. Each recorded call notes which values it
read, which it wrote in place and which it returned, and whether its result is *constant*
(computed from nothing that changes between calls: those calls are folded away). Memory is
tracked per :class:`~sadl_compile.ir.Storage`: a view shares the storage of its base.

The tracer is driven from three sides: the traced arrays (``sadl_compile.traced``: NumPy calls
on host arrays; ``sadl_compile.device``: calls on device arrays and their array module),
``sadl_compile.hooks`` (sadl's tracer protocol: tensor attributes, modules' flags, optimizer
steps, random draws, host/device copies; NumPy's array constructors) and ``sadl_compile.api``
(arguments in, results out). A storage records the device its memory lives on (None: the host).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from sadl import CompileError, backends
from sadl.random import default_generator, observed_device_generator

from sadl_compile import device, rules, streams
from sadl_compile.ir import Node, Storage, Value
from sadl_compile.traced import TracedArray, TracedDeviceArray, plain, unwrap_plain
from sadl_compile.where import caller, orphan_message, read_message, source_line

__all__ = ["Tracer"]

_ndarray = np.ndarray
_asarray = np.asarray  # the original: NumPy's constructors are wrapped while tracing


def root_of(array: Any) -> Any:
    """The array that owns ``array``'s memory (following ``.base`` through views).

    A view made through the array interface (``as_strided``, and so ``sliding_window_view``)
    has for base a plain object that holds the viewed array as its own ``base``: followed too,
    so such a view shares the storage of what it views.
    """
    if isinstance(array, _ndarray):
        while True:
            base = array.base
            if not isinstance(base, _ndarray) and hasattr(base, "__array_interface__"):
                base = getattr(base, "base", None)
            if not isinstance(base, _ndarray):
                return array
            array = base
    kind = type(array)  # a device array: its base is a device array of its class, or None
    while type(array.base) is kind:
        array = array.base
    return array


def _read_only(array: Any) -> bool:
    """A host array that cannot be written (device arrays always can)."""
    return isinstance(array, _ndarray) and not array.flags.writeable


def _is_result_array(result: Any) -> bool:
    """An array (of any backend) or a NumPy scalar: what a recorded call may return."""
    return isinstance(result, _ndarray | np.generic) or backends.is_array(result)


class Tracer:
    """Records one call of a function: values, storages and nodes, in program order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.values: list[Value] = []
        self.storages: list[Storage] = []
        self.nodes: list[Node] = []
        self._traced: dict[int, weakref.ref[TracedArray]] = {}  # value index -> its array
        self._roots: dict[int, tuple[Any, Storage]] = {}  # id(root array) -> (weakref, storage)
        self._known: dict[int, tuple[Any, Value]] = {}  # id(plain array) -> (array, value)
        self._storage_values: dict[int, list[Value]] = {}
        self._modules: dict[int, device.RecordingModule] = {}  # id(array module) -> recording
        self.irreversible: Node | None = None  #: the first effect a fallback could not undo
        self.busy = 0  #: > 0 while a recorded call runs (NumPy's own constructor calls pass)
        self._fresh: dict[int, tuple[Any, int]] = {}  # generators seeded during the trace
        self.arg_generators: list[Any] = []  #: NumPy generators among the arguments
        self.streams = streams.Streams(self._state_key)  #: CPU generators between draws
        #: id(array) -> (array, its contents before the trace wrote it), for captured arrays
        self.snapshots: dict[int, tuple[Any, Any]] = {}

    def owns(self, value: Value) -> bool:
        """Whether ``value`` belongs to this trace (an array of another trace is plain data)."""
        v = self.values
        return value.index < len(v) and v[value.index] is value

    # ------------------------------------------------------------------ values and storages
    def _storage(self, array: Any, kind: str, const: bool) -> tuple[Storage, bool]:
        """The storage holding ``array`` (found by its memory's owner), and whether it is new."""
        root = root_of(array)
        hit = self._roots.get(id(root))
        if hit is not None and hit[0]() is root:
            return hit[1], False
        storage = Storage(len(self.storages), kind, const)
        if not isinstance(root, _ndarray):
            storage.device = backends.device_of(root)
        self.storages.append(storage)
        self._storage_values[storage.index] = []
        key = id(root)
        self._roots[key] = (weakref.ref(root, self._forget(key)), storage)
        return storage, True

    def _forget(self, key: int) -> Callable[[Any], None]:
        """A weakref callback: the array owning memory ``key`` is gone (ids get reused)."""

        def forget(_: Any) -> None:
            self._roots.pop(key, None)

        return forget

    def _value(self, array: Any, storage: Storage, producer: Node | None, entry: Any) -> Value:
        shape = tuple(int(n) for n in array.shape)
        value = Value(len(self.values), storage, shape, array.dtype, array.strides, producer, entry)
        self.values.append(value)
        self._storage_values[storage.index].append(value)
        if storage.const:
            value.array = array
        if storage.root is None and root_of(array) is array:
            storage.root = value
        return value

    def wrap(self, array: Any, value: Value) -> Any:
        """A traced array standing for ``value``: a ``TracedArray`` view of a host array, a
        ``TracedDeviceArray`` around a device array.
        """
        traced: Any
        if isinstance(array, _ndarray):
            traced = _ndarray.view(array, TracedArray)
            traced._p = array
            traced._v = value
        else:
            traced = TracedDeviceArray(array, value)
        self._traced[value.index] = weakref.ref(traced)
        return traced

    def recording_module(self, module: Any) -> device.RecordingModule:
        """The recording stand-in for a device backend's array module (one per module)."""
        found = self._modules.get(id(module))
        if found is None:
            found = self._modules[id(module)] = device.RecordingModule(module, self)
        return found

    def traced_of(self, value: Value, array: Any) -> Any:
        """The live ``TracedArray`` of ``value`` (a new view of ``array`` if it was dropped)."""
        ref = self._traced.get(value.index)
        found = ref() if ref is not None else None
        return found if found is not None else self.wrap(array, value)

    def traced_base(self, traced: Any, base: Any) -> Any:
        """``traced.base``, as the traced array of the owner when the trace knows it."""
        hit = self._known.get(id(base))
        if hit is not None and hit[0] is base:
            return self.traced_of(hit[1], base)
        storage = traced._v.storage
        root = storage.root
        if root is not None and (ref := self._traced.get(root.index)) is not None:
            owner = ref()
            if owner is not None and plain(owner) is base:
                return owner
        return base

    def external(self, array: Any, entry: Any, name: str = "") -> Value:
        """The value of an array that exists outside the trace (found again by identity)."""
        hit = self._known.get(id(array))
        if hit is not None and hit[0] is array:
            return hit[1]
        kind = "input" if entry[0] == "arg" else "external"
        const = entry[0] == "const" and _read_only(array)
        storage, _ = self._storage(array, kind, const)
        if storage.kind == "temp":  # a plain view of memory the trace made: the replay's moves
            raise CompileError(
                "sadl.compile: a plain NumPy array viewing memory made inside the compiled "
                f"function reached {source_line(caller())}; a NumPy function the trace does not "
                "see made it (np.ascontiguousarray, np.frombuffer ...): keep the array itself, "
                "or use np.asarray / sadl.backends.array_module(x).ascontiguousarray(x)"
            )
        value = self._value(array, storage, None, entry)
        value.name = name
        self._known[id(array)] = (array, value)
        return value

    def _set_nonconst(self, storage: Storage) -> None:
        if storage.const:
            storage.const = False
            for v in self._storage_values[storage.index]:
                v.array = None

    # ------------------------------------------------------------------ recording calls
    def _unwrap(self, tree: Any, reads: list[Value], plains: list[Any]) -> tuple[Any, Any]:
        """(plain tree to execute, template tree with Value leaves) of call arguments."""
        kind = type(tree)
        if kind is TracedArray:
            value = tree._v
            p = plain(tree)
            if value is None:
                raise CompileError(orphan_message())
            if not self.owns(value):
                value = self.external(p, ("const", p))
            reads.append(value)
            plains.append(p)
            return p, value
        if kind is _ndarray:
            value = self.external(tree, ("const", tree))
            reads.append(value)
            plains.append(tree)
            return tree, value
        if kind is tuple or kind is list:
            pairs = [self._unwrap(x, reads, plains) for x in tree]
            return kind(p for p, _ in pairs), kind(t for _, t in pairs)
        if kind is dict:
            out_p, out_t = {}, {}
            for k, v in tree.items():
                out_p[k], out_t[k] = self._unwrap(v, reads, plains)
            return out_p, out_t
        if rules.is_tensor(tree):
            return self._unwrap(tree.data, reads, plains)
        if isinstance(tree, _ndarray):  # another ndarray subclass: its plain view
            return self._unwrap(_ndarray.view(tree, _ndarray), reads, plains)
        if kind is TracedDeviceArray:
            value = tree._v
            p = tree._p
            if not self.owns(value):
                value = self.external(p, ("const", p))
            reads.append(value)
            plains.append(p)
            return p, value
        if backends.is_array(tree):  # a device array made outside the trace
            value = self.external(tree, ("const", tree))
            reads.append(value)
            plains.append(tree)
            return tree, value
        return tree, tree

    def ufunc(self, ufunc: np.ufunc, method: str, inputs: Any, kwargs: Any) -> Any:
        """``TracedArray.__array_ufunc__``: record ``ufunc.method(*inputs, **kwargs)``.

        A call that also involves a Tensor is the Tensor's to handle (NumPy then asks it).
        """
        if rules.has_tensor(inputs) or rules.has_tensor(kwargs.get("out", ())):
            return NotImplemented
        func = ufunc if method == "__call__" else getattr(ufunc, method)
        label = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        return self.call(func, (ufunc, method), inputs, kwargs, label)

    def function(self, func: Any, args: Any, kwargs: Any) -> Any:
        """``TracedArray.__array_function__``: record ``func(*args, **kwargs)``."""
        if rules.has_tensor(args) or rules.has_tensor(tuple(kwargs.values())):
            return NotImplemented
        if func in rules.METADATA:
            return func(*unwrap_plain(args), **unwrap_plain(kwargs))
        return self.call(func, func, args, kwargs, getattr(func, "__name__", repr(func)))

    def device_ufunc(self, ufunc: np.ufunc, method: str, inputs: Any, kwargs: Any) -> Any:
        """``TracedDeviceArray.__array_ufunc__``: recorded as the backend's ufunc."""
        return device.device_ufunc(self, ufunc, method, inputs, kwargs)

    def device_function(self, func: Any, args: Any, kwargs: Any) -> Any:
        """``TracedDeviceArray.__array_function__``: recorded as the backend's function."""
        return device.device_function(self, func, args, kwargs)

    def call(
        self, func: Any, key: Any, args: Any, kwargs: Any, label: str, kind: str = "call"
    ) -> Any:
        """Run ``func`` on the plain arrays and record the call; returns traced results.

        ``key`` is what the passes know the call as (the NumPy function it stands for).
        """
        reads: list[Value] = []
        plains: list[Any] = []
        plain_args, targs = self._unwrap(tuple(args), reads, plains)
        plain_kwargs, tkwargs = self._unwrap(dict(kwargs), reads, plains)
        writes = rules.written(key, targs, tkwargs)
        for w in writes:
            if w.entry is not None and w.entry[0] == "const" and w.storage.kind == "external":
                self._snapshot(w.entry[1])
        data_reads = reads if key not in rules.SHAPE_ONLY else []
        const = kind == "call" and all(v.storage.const for v in data_reads)
        # A product runs as in eager, on the BLAS threads its size calls for (the replay's too:
        # codegen), so a result kept while tracing (a folded constant) has eager's bits.
        run = rules.eager_product(func)
        self.busy += 1
        try:
            result = run(*plain_args, **plain_kwargs)
        finally:
            self.busy -= 1
        if result is None and not writes and kind == "call":
            writes = tuple(dict.fromkeys(reads))  # an unknown function that mutates its inputs
        node = Node(kind, func, key, targs, tkwargs, reads=tuple(reads), writes=writes)
        node.label = label
        node.where = caller()
        node.const = const
        if rules.dynamic_shape(key, reads, len(targs)):
            node.meta["dynamic"] = True
        for v in reads:
            if not const:
                v.storage.nonconst_read = True
        for w in writes:
            storage = w.storage
            if not const or storage.nonconst_read:
                self._set_nonconst(storage)
            if storage.kind != "temp":
                self.note_irreversible(node)
        out = self._outputs(result, node, plains, reads)
        if node.outputs or node.writes or kind != "call":
            self.nodes.append(node)
        if node.meta.get("dynamic") and not node.const:
            for v in _sized_by_values(node, reads):  # a size from values: a replay checks it
                check = Node("call", _has_shape, None, (v, v.shape), {}, reads=(v,))
                check.label, check.where = "has_shape", node.where
                self._guard(check, True, f"shape of %{v.index} is {v.shape}")
        return out

    def _outputs(self, result: Any, node: Node, plains: list[Any], reads: list[Value]) -> Any:
        if isinstance(result, _ndarray):
            return self._output(result, node, plains, reads)
        if isinstance(result, np.generic):
            out = self._output(_asarray(result), node, plains, reads)
            out._v.scalar = True
            return out
        if isinstance(result, tuple | list) and result and all(map(_is_result_array, result)):
            return type(result)(self._outputs(r, node, plains, reads) for r in result)
        if backends.is_array(result):  # a device array
            return self._output(result, node, plains, reads)
        if result is None or node.const:
            return result
        return self._python_value(result, node)

    def _output(self, array: Any, node: Node, plains: list[Any], reads: list[Value]) -> Any:
        for p, v in zip(plains, reads):
            if array is p:
                return self.traced_of(v, p)  # the call returned one of its inputs
        dynamic = node.meta.get("dynamic") or any(v.storage.dynamic for v in reads)
        storage = self._aliased(array, plains, reads)
        aliased, new = storage is not None, False
        if storage is None:
            storage, new = self._storage(array, "temp", node.const)
        if new:
            storage.dynamic = bool(dynamic)
        value = self._value(array, storage, node, None)
        if aliased and storage.root is value:
            storage.root = None  # a view of the input's memory, not its owner
        node.outputs = (*node.outputs, value)
        return self.wrap(array, value)

    def _aliased(self, array: Any, plains: list[Any], reads: list[Value]) -> Storage | None:
        """The storage of an input whose memory a result overlaps though no ``.base`` chain
        leads there (a view made behind NumPy's back): a result can only alias what its call
        was given, and memory the trace knows must be one storage whatever made the view.
        """
        if not isinstance(array, _ndarray):
            return None
        hit = self._roots.get(id(root_of(array)))
        if hit is not None and hit[0]() is root_of(array):
            return None  # found by its owner: the ordinary case
        for p, v in zip(plains, reads):
            if isinstance(p, _ndarray) and np.may_share_memory(array, p):
                return v.storage
        return None

    def _python_value(self, result: Any, node: Node) -> Any:
        """A call returned a Python value computed from the inputs (``np.count_nonzero``)."""
        if isinstance(result, bool | np.bool_):
            return self._guard(node, bool(result), node.label)
        raise CompileError(read_message(f"np.{node.label}(...)", node.label, tensor_level=False))

    # ------------------------------------------------------------------ values read into Python
    def host_read(self, traced: Any, what: str, convert: Any) -> Any:
        """``bool(a)``, ``a.item()``, ``float(a)``...: allowed for constants, a guard for a
        ``bool`` of an array in op code, an error for anything else.
        """
        value = traced._v
        result = convert(plain(traced))
        if value.storage.const:
            return result
        frame: Any = sys._getframe(3)  # host_read <- _host_read <- Traced*Array.<method> <- caller
        tensor_level = frame.f_code.co_filename.endswith(_TENSOR_FILES)
        while frame is not None and frame.f_code.co_filename.endswith(_TENSOR_FILES):
            what = _TENSOR_READS.get(frame.f_code.co_name, what)  # float(t) calls t.item()
            frame = frame.f_back
        if not tensor_level and what == "bool":
            read = Node("call", bool, bool, (value,), {}, reads=(value,))
            read.label, read.where = "bool", caller()
            return self._guard(read, result, "bool")
        raise CompileError(read_message(what, traced, tensor_level))

    def _guard(self, source: Node, expected: bool, label: str) -> bool:
        """Record that ``source`` (a call returning a bool) must give ``expected`` on replay."""
        guard = Node("guard", None, None, (), {}, reads=source.reads)
        guard.label, guard.where = f"guard {label} is {expected}", caller()
        guard.meta.update(source=source, expected=expected)
        if self.irreversible is not None and self._hoist(guard):
            return expected
        if self.irreversible is not None:
            raise CompileError(
                f"sadl.compile: a value-dependent branch ({source_line(guard.where)}) comes after "
                f"the function changed state that outlives the call "
                f"({self.irreversible.label} at {source_line(self.irreversible.where)}); a "
                "replay that takes the other branch could not fall back to running eagerly. "
                "Move the condition before the update or out of the compiled function."
            )
        self.nodes.append(guard)
        return expected

    def _hoist(self, guard: Node) -> bool:
        """Move ``guard`` and what it is computed from to the start of the replay, if it can be.

        A condition computed by pure calls from the call's arguments alone (a loss checking its
        class ids, after a BatchNorm counted the batch) reads nothing the function changes:
        tested before anything runs, a failing replay falls back to running eagerly from the
        very state an eager call starts from. An argument written in place by then, a random
        draw, a captured array or a parameter among its sources keeps it where it is (refused).
        """
        chain: dict[int, Node] = {}
        pending = [v for v in guard.reads]
        leaves: set[int] = set()
        while pending:
            value = pending.pop()
            node = value.producer
            if node is None:
                if value.storage.kind != "input" and not value.storage.const:
                    return False
                leaves.add(value.storage.index)
                continue
            if node.kind != "call" or node.writes:
                return False
            if id(node) not in chain:
                chain[id(node)] = node
                pending.extend(node.reads)
        for node in self.nodes:
            if id(node) not in chain and any(w.storage.index in leaves for w in node.writes):
                return False  # an argument changed in place before the test
        moved = [n for n in self.nodes if id(n) in chain]
        self.nodes[:] = [*moved, guard, *(n for n in self.nodes if id(n) not in chain)]
        guard.meta["hoisted"] = True
        return True

    def note_irreversible(self, node: Node) -> None:
        """``node`` changed state outside the call: a later guard could not fall back."""
        if self.irreversible is None:
            self.irreversible = node

    # ------------------------------------------------------------------ effects
    def effect(self, kind: str, label: str, reads: tuple[Value, ...] = (), **meta: Any) -> Node:
        """Record an effect node (``set_grad``, ``set_data``, ``set_training``, ``optimizer``)."""
        node = Node(kind, None, None, (), {}, reads=reads)
        node.label, node.where = label, caller()
        node.meta.update(meta)
        self.nodes.append(node)
        return node

    def _snapshot(self, array: Any) -> None:
        """An array the trace did not make is written: its contents before the first write
        (``Capture.finish`` decides whether a replay starts from them).
        """
        root = root_of(array)
        if id(root) not in self.snapshots:
            self.snapshots[id(root)] = (root, root.copy())

    def made_generator(self, generator: Any) -> None:
        """A sadl ``Generator`` was made during the trace: from an int seed (``rng=7``), it is
        made anew on every replay, as every eager call makes it.
        """
        seed = streams.seed_of(generator)
        if seed is not None and not streams.held_outside(generator, self.arg_generators):
            self._fresh[id(generator)] = (generator, seed)

    def reseeded(self, generator: Any) -> None:
        """``sadl.manual_seed`` inside the call: replayed as itself (the stream starts anew)."""
        self.busy += 1
        try:
            seed = streams.seed_of(generator)
        finally:
            self.busy -= 1
        if seed is None:  # pragma: no cover - manual_seed makes a PCG64 from an int
            raise CompileError("sadl.compile: manual_seed made a generator it cannot replay")
        self.effect("seed", f"manual_seed({seed})", seed=seed)
        self.streams.reseeded(generator)

    def _state_key(self, generator: Any) -> str:
        """A generator's state, read without recording (NumPy makes arrays to hand it out)."""
        self.busy += 1
        try:
            return streams.state_key(generator)
        finally:
            self.busy -= 1

    def restore_stream(self, generator: Any, mark: tuple[Node, str]) -> None:
        """``generator`` was set back to its state before or after an earlier draw of the
        call (``mark``): the replay sets it back to the state it saved at that draw.
        """
        target, when = mark
        target.meta.setdefault("save", set()).add(when)
        default = generator is default_generator()
        self.effect(
            "rng_restore",
            f"generator state = as {when} {target.label} ({source_line(target.where)})",
            generator=None if default else generator,
            target=target,
            when=when,
        )

    def _fresh_seed(self, generator: Any, default: bool) -> int | None:
        """The seed of a generator seeded from an int inside the traced call, else None."""
        found = None if default else self._fresh.get(id(generator))
        return None if found is None or found[0] is not generator else found[1]

    def draw(self, generator: Any, default: bool, method: str, args: Any, kwargs: Any) -> Any:
        """A random draw from ``generator`` (sadl's default one when ``default``, a device's
        generator as ``sadl.random.generator(device)`` hands it out while tracing): recorded.
        """
        on_device = observed_device_generator(generator)
        if on_device is not None:
            generator, where = on_device
            func = getattr(type(generator), method)
        else:
            func, where = getattr(np.random.Generator, method), None
        reads: list[Value] = []
        plains: list[Any] = []
        plain_args, targs = self._unwrap(tuple(args), reads, plains)
        plain_kwargs, tkwargs = self._unwrap(dict(kwargs), reads, plains)
        seed = self._fresh_seed(generator, default or where is not None)
        tracked = where is None and seed is None  # a CPU stream that outlives the call
        node = Node("draw", func, None, targs, tkwargs, reads=tuple(reads))
        node.label, node.where = f"random.{method}", caller()
        if tracked:
            mark = self.streams.jump(generator, source_line(node.where))
            if mark is not None:
                self.restore_stream(generator, mark)
            before = self._state_key(generator)
        self.busy += 1
        try:
            result = func(generator, *plain_args, **plain_kwargs)
        finally:
            self.busy -= 1
        if tracked:
            self.streams.drew(generator, node, before)
        node.meta.update(generator=None if default else generator, method=method)
        if seed is not None:  # made from an int inside the call (rng=7): made anew per replay
            node.meta.update(seed=seed, fresh=id(generator))
        if where is not None:  # drawn from the device's generator of the moment, on each call
            node.meta.update(generator=None, device=where)
        self.nodes.append(node)
        if not _is_result_array(result):
            raise CompileError(
                f"sadl.compile: random.{method}(...) at {source_line(node.where)} returned a "
                "Python value; a compiled function can only replay draws of arrays (pass size=)"
            )
        return self._outputs(result, node, plains, reads)


_TENSOR_FILES = ("_tensor.py", "_methods.py", "_conversions.py")


def _sized_by_values(node: Node, reads: list[Value]) -> list[Value]:
    """The outputs whose size may differ on another call: all of a call whose result size
    depends on values; of a call recorded whole, those shaped unlike every array it read.
    """
    if node.key not in rules.VALUE_DEPENDENT:
        return list(node.outputs)
    shapes = {v.shape for v in reads}
    return [v for v in node.outputs if v.shape not in shapes]


def _has_shape(array: Any, shape: tuple[int, ...]) -> bool:
    """A shape guard's test: ``array`` still has the shape it had while tracing."""
    return tuple(array.shape) == shape


#: Tensor methods that read values, and what the refusal calls them.
_TENSOR_READS = {
    "__bool__": "bool",
    "__float__": "float",
    "__int__": "int",
    "__index__": "index",
    "item": "item",
    "tolist": "tolist",
}
