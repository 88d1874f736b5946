"""What a trace sees beyond arrays: tensors, modules' training flags and optimizer steps.

A tensor that exists before the call (a parameter, an argument) is *adopted* the first time its
``.data`` is read: its array becomes an external value and its data slot holds a traced view
until the trace ends. Writing ``.grad`` or ``.data`` of such a tensor, setting a module's
``training`` flag and stepping an optimizer are effects: replayed in order on every call. Reading
a module's training flag, or a ``.grad`` that was None, becomes a guard checked before each
replay (a change retraces).

An optimizer step is one node: at replay it runs the optimizer's own update (per parameter, or
over flat buffers once the ``flat_optimizer`` pass has packed them), so learning-rate schedules
and step counts stay live instead of being frozen into the trace.
"""

from __future__ import annotations

import copy
import gc
import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from sadl import CompileError, Function, Optimizer, Tensor, enable_grad
from sadl.backends import is_array
from sadl.plugins import version_counter

from sadl_compile.ir import AsTensor, Graph, ObjectResult, Value, iter_values
from sadl_compile.traced import ACTIVE, is_traced, plain
from sadl_compile.tracer import Tracer, _asarray

__all__ = ["DATA", "GRAD", "Capture", "rebuild"]

#: The slots behind a Tensor's ``data`` and ``grad`` (properties that tell the tracer of each
#: read and write): the trace reads and writes them without telling itself. They are those of
#: Tensor's base class, so they are looked up along the class's MRO.
DATA: Any = inspect.getattr_static(Tensor, "_data")
GRAD: Any = inspect.getattr_static(Tensor, "_grad")


class _Adopted:
    """A tensor that existed before the traced call, and what it held then."""

    __slots__ = ("arg", "grad_known", "ref", "requires_grad", "version", "version_list")

    def __init__(self, tensor: Tensor, arg: int | None) -> None:
        self.ref = weakref.ref(tensor)
        self.requires_grad = tensor.requires_grad  #: guarded for captured tensors
        self.arg = arg  #: its position among the argument tensors, or None when captured
        self.version_list = version_counter(tensor)
        self.version = self.version_list[0]
        self.grad_known = False  #: .grad was read or written during the trace


class Capture(Tracer):
    """A :class:`Tracer` that also records what happens to tensors, modules and optimizers."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.inputs: list[Value] = []
        self.arg_tensors: list[Tensor] = []
        self._adopted: dict[int, _Adopted] = {}
        self._tensors: list[Tensor] = []  # strong refs while tracing, to restore their slots
        self.data_guards: list[tuple[Any, Any]] = []  # (tensor ref, its array)
        self.grad_guards: list[tuple[Any, Any]] = []  # (tensor ref or arg index, None / value)
        self.training_guards: dict[int, tuple[Any, bool]] = {}
        self._training_set: set[int] = set()
        self._optimizer_bumps: dict[int, int] = {}
        self._bound: list[tuple[str, Any, Any, Any, Any]] = []  # names holding traced views
        #: (argument index, array): an argument that is also an array read through a name; a
        #: replay is only valid while that argument is still that array (the graph has one value)
        self.captured_args: list[tuple[int, Any]] = []
        #: id(tensor) -> (the NumPy scalar its .data held, the 0-d array traced in its place)
        self._scalars: dict[int, tuple[Any, Any]] = {}

    # ------------------------------------------------------------------ captured arrays
    def adopt_names(self, names: list[tuple[str, Any, Any, Any]]) -> None:
        """A writable array the function reads through a name (a global, a closure cell, an
        item of a container it reads, a module's attribute) holds a traced view of it while
        tracing: NumPy work on it alone (``np.exp(c)``, ``c * c`` in a backward rule) is then
        recorded and recomputed from its contents of the moment on every replay, instead of
        running once. Read-only arrays stay constants.
        """
        for kind, holder, key, obj in names:
            if type(obj) is not np.ndarray or not obj.flags.writeable or kind == "self":
                continue
            value = self.external(obj, ("const", obj))
            if value.entry is not None and value.entry[0] == "arg":  # passed in as well
                self.captured_args.append((value.entry[1], obj))
            traced = self.traced_of(value, obj)
            if _bind(kind, holder, key, obj, traced):
                self._bound.append((kind, holder, key, obj, traced))

    # ------------------------------------------------------------------ arguments
    def adopt_arguments(self, tree: Any) -> Any:
        """The arguments with each array replaced by its traced view (tensors keep their object,
        their data slot is traced). Leaves are numbered in walking order, as the replay does.
        """
        if isinstance(tree, Tensor):
            if tree.grad_fn is not None and tree.requires_grad:
                raise CompileError(
                    "sadl.compile: an argument is a tensor attached to an autograd graph "
                    "(computed outside the compiled function); a replay cannot extend that "
                    "graph. Pass tree.detach(), or compute it inside the compiled function."
                )
            array = DATA.__get__(tree, Tensor)
            if is_traced(array):  # the same tensor passed twice
                self.inputs.append(array._v)
                self.arg_tensors.append(tree)
                return tree
            value = self._argument(array)
            self._adopt(tree, len(self.arg_tensors))
            self.arg_tensors.append(tree)
            DATA.__set__(tree, self.traced_of(value, array))
            return tree
        if type(tree) is np.ndarray or _device_array(tree):
            return self.traced_of(self._argument(tree), tree)
        if isinstance(tree, tuple | list):
            return type(tree)(self.adopt_arguments(x) for x in tree)
        if isinstance(tree, dict):
            return {k: self.adopt_arguments(v) for k, v in tree.items()}
        if isinstance(tree, np.random.Generator):
            self.arg_generators.append(tree)  # its stream outlives the call
        return tree

    def _argument(self, array: Any) -> Value:
        """The value of the next argument array (an array passed twice is one value: the
        signature records which arguments were the same array).
        """
        index = len(self.inputs)
        value = self.external(array, ("arg", index), f"arg{index}")
        self.inputs.append(value)
        return value

    def _adopt(self, tensor: Tensor, arg: int | None) -> _Adopted:
        record = self._adopted.get(id(tensor))
        if record is None:
            record = self._adopted[id(tensor)] = _Adopted(tensor, arg)
            self._tensors.append(tensor)
        return record

    def _existing(self, tensor: Tensor) -> _Adopted | None:
        """The record of ``tensor`` if it existed before the call (adopted on first touch);
        None for a tensor made during the trace (it holds a traced array, or is being built).
        """
        record = self._adopted.get(id(tensor))
        if record is not None:
            return record
        if not hasattr(tensor, "_version") or is_traced(DATA.__get__(tensor, Tensor)):
            return None
        return self._adopt(tensor, None)

    def _ref(self, record: _Adopted) -> Any:
        """How effects name a tensor: ``("arg", i)`` or a weak reference."""
        return ("arg", record.arg) if record.arg is not None else record.ref

    # ------------------------------------------------------------------ tensor attributes
    def read_data(self, tensor: Tensor, array: Any) -> Any:
        """``tensor.data`` holds a plain array: adopt it (captured by identity), trace it."""
        held = array
        if isinstance(array, np.generic):  # a NumPy scalar (a 0-d update's result): as 0-d array
            array = _asarray(array)  # NumPy's own (its constructors are recorded while tracing)
            DATA.__set__(tensor, array)
            self._scalars[id(tensor)] = (held, array)  # put back when the trace ends
        if not isinstance(array, np.ndarray) and not _device_array(array):
            return array
        self._adopt(tensor, None)
        value = self.external(array, ("data", array))
        self.data_guards.append((weakref.ref(tensor), held))
        traced = self.traced_of(value, array)
        DATA.__set__(tensor, traced)
        return traced

    def write_data(self, tensor: Tensor, new: Any) -> None:
        """``tensor.data = new``: an effect on a tensor that outlives the call."""
        record = self._existing(tensor)  # written before it was read: adopted here
        if record is not None:
            value = self._value_of(new)
            if value is not None:
                node = self.effect("set_data", "set .data", (value,), tensor=self._ref(record))
                self.note_irreversible(node)
        DATA.__set__(tensor, new)

    def read_grad(self, tensor: Tensor, grad: Any) -> Any:
        """``tensor.grad`` read: a guard on what it held at entry, or a value read per call."""
        record = self._existing(tensor)  # first touched through .grad (zero_grad first)
        if record is None or record.grad_known or is_traced(grad):
            return grad
        record.grad_known = True
        if grad is None:
            self.grad_guards.append((self._ref(record), None))
            return None
        if isinstance(grad, Tensor) or not is_array(grad):
            raise CompileError(
                "sadl.compile: a .grad holding a Tensor (left by backward(create_graph=True)) "
                "cannot be read in a compiled function"
            )
        value = self.external(grad, ("grad", self._ref(record)))
        self.grad_guards.append((self._ref(record), value))
        traced = self.traced_of(value, grad)
        GRAD.__set__(tensor, traced)
        return traced

    def write_grad(self, tensor: Tensor, grad: Any) -> None:
        """``tensor.grad = grad``: replayed in order (None, or an array of the graph)."""
        record = self._existing(tensor)
        if record is not None:
            record.grad_known = True
            if grad is None:
                self.effect("set_grad", "set .grad = None", (), tensor=self._ref(record))
            else:
                value = self._value_of(grad)
                if value is None:
                    raise CompileError(
                        "sadl.compile: .grad was set to a Tensor (backward(create_graph=True)); "
                        "a compiled function can only hand out array gradients"
                    )
                node = self.effect("set_grad", "set .grad", (value,), tensor=self._ref(record))
                self.note_irreversible(node)
        GRAD.__set__(tensor, grad)

    def _value_of(self, array: Any) -> Value | None:
        if is_traced(array) and array._v is not None and self.owns(array._v):
            return array._v  # type: ignore[no-any-return]
        if type(array) is np.ndarray or _device_array(array):
            return self.external(array, ("const", array))
        return None

    # ------------------------------------------------------------------ modules
    def read_training(self, module: Any, flag: bool) -> None:
        """A module's ``training`` flag was read: replay only while it still holds ``flag``."""
        key = id(module)
        if key not in self._training_set and key not in self.training_guards:
            self.training_guards[key] = (weakref.ref(module), bool(flag))

    def write_training(self, module: Any, flag: bool) -> None:
        """``module.training = flag`` inside the function: replayed as an effect."""
        self._training_set.add(id(module))
        self.effect("set_training", f"{type(module).__name__}.training = {flag}", module=module)

    # ------------------------------------------------------------------ optimizers
    def optimizer_step(self, optimizer: Any, closure: Any, step: Callable[..., Any]) -> Any:
        """``optimizer.step()``: one node that runs the optimizer's own update at replay."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        params: list[Any] = []
        grads: list[Value] = []
        datas: list[Value] = []
        for group in optimizer.param_groups:
            for p in group["params"]:
                grad = p.grad  # through the traced property: guards a None that was there
                if grad is None:
                    continue
                value = self._value_of(grad)
                if value is None:
                    raise CompileError(
                        "sadl.compile: optimizer.step() found a Tensor in .grad "
                        "(backward(create_graph=True)); step outside the compiled function"
                    )
                data = self._value_of(p.data)
                assert data is not None
                params.append(p)
                grads.append(value)
                datas.append(data)
        node = self.effect(
            "optimizer",
            f"{type(optimizer).__name__}.step",
            (*grads, *datas),
            optimizer=optimizer,
            params=params,
            step=step,
        )
        node.writes = tuple(datas)
        for v in datas:
            self._set_nonconst(v.storage)
        self.note_irreversible(node)
        self._run_untraced(step, optimizer, params)
        return loss

    def _run_untraced(self, step: Callable[..., Any], optimizer: Any, params: list[Any]) -> None:
        """Run the real step on plain arrays (so the trace's own call updates for real)."""
        saved = [(p, DATA.__get__(p, Tensor), GRAD.__get__(p, Tensor)) for p in params]
        for p, data, grad in saved:
            DATA.__set__(p, plain(data) if is_traced(data) else data)
            GRAD.__set__(p, plain(grad) if is_traced(grad) else grad)
        tracer, ACTIVE.tracer = ACTIVE.tracer, None
        try:
            before = {id(version_counter(p)): version_counter(p)[0] for p in params}
            step(optimizer)
            for p in params:
                key = id(version_counter(p))
                if key in before:
                    bumps = version_counter(p)[0] - before.pop(key)
                    self._optimizer_bumps[key] = self._optimizer_bumps.get(key, 0) + bumps
        finally:
            ACTIVE.tracer = tracer
            for p, data, grad in saved:
                DATA.__set__(p, data)
                GRAD.__set__(p, grad)

    # ------------------------------------------------------------------ the end
    def finish(self, result: Any) -> tuple[Graph, Any]:
        """Restore every adopted tensor, add the version effects, and build the graph.

        Returns the graph and the call's result (tensors detached, arrays plain).
        """
        outputs = self._output_template(result)
        first = _plain_result(result)
        self.restore()
        seen: set[int] = set()
        for record in self._adopted.values():
            key = id(record.version_list)
            if key in seen:
                continue
            seen.add(key)
            delta = record.version_list[0] - record.version - self._optimizer_bumps.get(key, 0)
            if delta:
                self.effect("version", f"version += {delta}", versions=record.version_list, n=delta)
        for generator, mark in self.streams.moved_at_end():  # set back after its last draw
            self.restore_stream(generator, mark)
        for v in iter_values(outputs):
            v.storage.escapes = True
        for node in self.nodes:
            if node.kind in ("set_grad", "set_data"):
                for v in node.reads:
                    v.storage.escapes = True
        graph = Graph(self.name, self.inputs, self.nodes, outputs, self.values, self.storages)
        graph.meta["resets"] = self._temporaries()
        graph.meta.update(
            data_guards=[(t, a) for t, a in self.data_guards if t() is not None],
            grad_guards=self.grad_guards,
            captured_args=self.captured_args,
            training_guards=[g for g in self.training_guards.values() if g[0]() is not None],
            requires_grad_guards=[
                (r.ref, r.requires_grad)
                for r in self._adopted.values()
                if r.arg is None and r.ref() is not None
            ],
        )
        return graph, first

    def _temporaries(self) -> list[tuple[Any, Any]]:
        """Written arrays the trace did not make and nothing outside it holds (made by NumPy
        behind the tracer's back: a scatter seed): each replay starts them from their contents
        before the first write, as each eager call makes them anew. Arrays held elsewhere (a
        global buffer written in place) keep what the previous call left, as in eager.
        """
        self._known.clear()
        self._traced.clear()
        if not self.snapshots:
            return []  # a full collection costs ~80 ms at a GPT's object count: skip it
        gc.collect()
        internal = {id(self.snapshots), id(self.values), id(self.nodes)}
        found = []
        for array, before in list(self.snapshots.values()):
            held = False
            for r in gc.get_referrers(array):
                held = held or (id(r) not in internal and not _internal_holder(r, array))
            if not held:
                found.append((array, before))
        return found

    def restore(self) -> None:
        """Put plain arrays back into every adopted tensor (also when the trace failed)."""
        for tensor in self._tensors:
            data = DATA.__get__(tensor, Tensor)
            if is_traced(data):
                DATA.__set__(tensor, self._held_scalar(tensor, data))
            grad = GRAD.__get__(tensor, Tensor)
            if is_traced(grad):
                GRAD.__set__(tensor, plain(grad))
        self._tensors.clear()
        for kind, holder, key, obj, traced in reversed(self._bound):
            _bind(kind, holder, key, traced, obj)
        self._bound.clear()

    def _held_scalar(self, tensor: Tensor, data: Any) -> Any:
        """What an adopted tensor's ``.data`` holds after the trace: a NumPy scalar it held
        before stays that scalar (as in eager: the trace read it as a 0-d array), with the
        values of the writes the call made into it; otherwise the plain array.
        """
        found = self._scalars.get(id(tensor))
        if found is None or plain(data) is not found[1]:
            return _untraced(data)
        scalar, array = found
        storage = data._v.storage
        written = any(w.storage is storage for node in self.nodes for w in node.writes)
        return array[()] if written else scalar

    def _output_template(self, tree: Any) -> Any:
        if isinstance(tree, Tensor):
            node = tree.grad_fn
            if node is not None and node.datas is not None:
                raise CompileError(
                    "sadl.compile: the function returns a tensor that requires grad and still "
                    "has its autograd graph; a replay hands back arrays without a graph. Call "
                    "backward() inside the compiled function, return .detach(), or compile "
                    "under sadl.no_grad()."
                )
            inner = self._output_template(DATA.__get__(tree, Tensor))
            return AsTensor(inner) if type(inner) is Value else inner
        if is_traced(tree) or type(tree) is np.ndarray or _device_array(tree):
            return self._value_of(tree)
        if isinstance(tree, tuple | list):
            items = [self._output_template(x) for x in tree]
            return _rebuilt(tree, items)
        if isinstance(tree, dict):
            return {k: self._output_template(v) for k, v in tree.items()}
        fields = _result_fields(tree)
        if fields is not None:  # a dataclass or plain object: rebuilt with fresh values
            return ObjectResult(tree, {k: self._output_template(v) for k, v in fields.items()})
        return tree


def _bind(kind: str, holder: Any, key: Any, old: Any, new: Any) -> bool:
    """Make the name ``(kind, holder, key)`` hold ``new`` if it still holds ``old``."""
    if kind == "cell":
        if holder.cell_contents is not old:
            return False
        holder.cell_contents = new
        return True
    scope = vars(holder) if kind == "attr" else holder
    if kind == "item" and isinstance(holder, list):
        if not (0 <= key < len(holder)) or holder[key] is not old:
            return False
    elif scope.get(key) is not old:
        return False
    scope[key] = new
    return True


def _untraced(array: Any) -> Any:
    """The plain array behind a traced one; a NumPy scalar where the traced call returned one
    (``p.data = p.data * 1.25`` on a 0-d parameter holds a scalar in eager too).
    """
    value = getattr(array, "_v", None)
    found = plain(array)
    return found[()] if value is not None and value.scalar else found


def _plain_result(tree: Any) -> Any:
    """The traced call's result as an eager call returns it: plain arrays, detached tensors."""
    if isinstance(tree, Tensor):
        data = DATA.__get__(tree, Tensor)
        return Tensor(plain(data) if is_traced(data) else data)
    if is_traced(tree):
        return plain(tree)
    if isinstance(tree, tuple | list):
        return _rebuilt(tree, [_plain_result(x) for x in tree])
    if isinstance(tree, dict):
        return {k: _plain_result(v) for k, v in tree.items()}
    fields = _result_fields(tree)
    if fields is not None:
        return rebuild(tree, {k: _plain_result(v) for k, v in fields.items()})
    return tree


def _rebuilt(tree: Any, items: list[Any]) -> Any:
    """A tuple or list of ``tree``'s type with ``items`` (a namedtuple takes them positionally)."""
    if type(tree) is tuple or type(tree) is list:
        return type(tree)(items)
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*items)
    return type(tree)(items)


def _holds_arrays(tree: Any) -> bool:
    if isinstance(tree, Tensor) or is_traced(tree) or is_array(tree):
        return True
    if isinstance(tree, tuple | list):
        return any(_holds_arrays(x) for x in tree)
    if isinstance(tree, dict):
        return any(_holds_arrays(x) for x in tree.values())
    return False


def _result_fields(tree: Any) -> dict[str, Any] | None:
    """The attributes of a result object that holds tensors or arrays (None for other objects:
    they are returned as they are). Modules and optimizers are state, not results.
    """
    fields = getattr(tree, "__dict__", None)
    if type(fields) is not dict or isinstance(tree, Function | Optimizer | type):
        return None
    if not any(_holds_arrays(v) for v in fields.values()):
        return None
    if getattr(type(tree), "__slots__", ()):
        raise CompileError(
            f"sadl.compile: the result {type(tree).__name__} holds arrays in __slots__; a replay "
            "could not hand back fresh values. Return a tuple, dict or dataclass instead."
        )
    return dict(fields)


def rebuild(proto: Any, fields: dict[str, Any]) -> Any:
    """A shallow copy of ``proto`` with ``fields`` set (a replay's result object)."""
    new = copy.copy(proto)
    vars(new).update(fields)
    return new


def _internal_holder(holder: Any, array: Any) -> bool:
    """A reference to ``array`` from the trace's own records (an entry tuple, a traced view)."""
    if type(holder) is tuple:
        return bool(holder) and (holder[0] in ("const", "data", "grad") or holder[0] is array)
    return is_traced(holder) or isinstance(holder, types.FrameType | Value)


def _device_array(x: Any) -> bool:
    """An array of a device backend (not a host array, not a traced one)."""
    return not isinstance(x, np.ndarray) and not is_traced(x) and is_array(x)
