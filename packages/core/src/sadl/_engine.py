"""The autograd engine, forward half: apply an op and record it on the graph.

``apply`` runs an op's forward on the tensors' arrays and, when a gradient will be needed, records
a :class:`Node` (which op, what it saw, who its parents are). ``sadl._backward`` walks those
records back. All per-op knowledge lives in the ``OpDef`` records, none of it here.

Tensors are ``sadl._tensor_base.TensorBase`` here (the class below this module); every Tensor is
made by ``new_tensor``. This module hands ``OpDef.__call__`` its implementation (``call_op``).
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from sadl import _defaults, _records, _tensor_base
from sadl._errors import MissingGradientError, broadcast_error
from sadl._grad_mode import _state as _grad_state
from sadl._known import KNOWN_PROVIDERS
from sadl._records import OpDef
from sadl._tensor_base import TensorBase
from sadl.backends import array_module, ensure_same_device, is_array

if TYPE_CHECKING:
    from sadl._tensor import Tensor

__all__ = [
    "Node",
    "application_hook",
    "apply",
    "call_op",
    "constant_param",
    "is_tensor",
    "new_tensor",
    "recording_hook",
    "retain_grad",
    "write_into",
]

_ndarray = np.ndarray
_new = object.__new__


def new_tensor(
    data: Any, node: Node | None = None, version: list[int] | None = None, cls: type | None = None
) -> Tensor:
    """The one way a Tensor's slots are filled: its data, its producer node, its version counter.

    A tensor with a node requires grad (it is on the graph); ``version`` is shared between
    tensors that view the same memory. ``cls`` is a Tensor subclass (``Parameter``); the default
    is the class of op results, ``sadl.Tensor``.
    """
    t: Any = _new(_tensor_base._result if cls is None else cls)
    t._data = data
    t._grad = None
    t._node = node
    t._requires_grad = node is not None
    t._version = [0] if version is None else version
    return t  # type: ignore[no-any-return]


def is_tensor(value: Any) -> bool:
    """True for a Tensor."""
    return isinstance(value, TensorBase)


class Node:
    """One recorded op application: everything its backward rule will need.

    ``datas`` are the input arrays (constants included), ``parents`` the producer of each input
    (a Node, a leaf Tensor that requires grad, or None), ``counters``/``versions`` the version
    counters of the tensor inputs and of the output as they were, so an in-place change made
    afterwards is caught instead of silently corrupting the gradient.

    ``refill`` is None except for nodes whose arrays were dropped after the forward (activation
    checkpointing, see :func:`recording_hook`): backward then calls ``refill(node)`` to put
    ``datas`` and ``out`` back (by recomputing them) before it needs them.
    """

    __slots__ = (
        "counters",
        "datas",
        "op",
        "out",
        "params",
        "parents",
        "refill",
        "retained",
        "versions",
    )

    def __init__(
        self,
        op: OpDef,
        params: dict[str, Any],
        datas: tuple[Any, ...],
        parents: tuple[Any, ...],
        counters: tuple[Any, ...],
        versions: tuple[Any, ...],
        out: Any,
    ) -> None:
        self.op = op
        self.params = params
        self.datas: tuple[Any, ...] | None = datas
        self.parents = parents
        self.counters = counters
        self.versions = versions
        self.out = out
        self.retained: Any = None
        self.refill: Callable[[Node], None] | None = None

    def __repr__(self) -> str:
        return f"<Node {self.op.name}>"


# --------------------------------------------------------------------------------------------
# Forward: apply an op, record it
# --------------------------------------------------------------------------------------------


def apply(op: OpDef, args: Sequence[Any], params: dict[str, Any]) -> Tensor:
    """Run ``op`` on ``args`` (Tensors or constants) and record it when a gradient is needed."""
    datas = []
    record = off_cpu = False
    traced = _tensor_base.watching  # a tracer sees reads through .data; eager reads the slot
    for a in args:
        if isinstance(a, TensorBase):
            d = a.data if traced else a._data
            if a._requires_grad:
                record = True
            if type(d) is not _ndarray:
                off_cpu = True
            datas.append(d)
        else:
            datas.append(a)
    if off_cpu:
        ensure_same_device(datas, f"op {op.name!r}")
    record = record and _grad_state.enabled and op.differentiable
    if record and op.backward is None:
        raise MissingGradientError(_missing_backward_message(op))

    try:
        hook = _hooks.on_apply if _active else None
        if hook is None:
            out = op.forward(*datas, **params)
        else:
            out = hook(op, "forward", lambda: op.forward(*datas, **params), datas, params)
    except ValueError as exc:
        raise broadcast_error(exc, f"op {op.name!r}", datas) from None
    if type(out) is not _ndarray:
        out = _as_array_like(out, datas)
    dtype = out.dtype
    if dtype is not _defaults._default_dtype and dtype.kind == "f":
        out = promote_to_default(out, datas, params)
    base = out.base
    version = _shared_counter(base, args) if base is not None else [0]
    if not (record and out.dtype.kind in "fc"):
        return new_tensor(out, None, version)
    parents: list[Any] = []
    counters: list[Any] = []
    versions: list[Any] = []
    for a in args:
        if isinstance(a, TensorBase):
            parents.append((a._node or a) if a._requires_grad else None)  # producer, or leaf
            c = a._version
            counters.append(c)
            versions.append(c[0])
        else:
            parents.append(None)
            counters.append(None)
            versions.append(None)
    counters.append(version)
    versions.append(version[0])
    node = Node(op, params, tuple(datas), tuple(parents), tuple(counters), tuple(versions), out)
    hook = _hooks.on_record if _active else None
    if hook is not None:
        hook(node)
    return new_tensor(out, node, version)


class _RecordHooks(threading.local):
    on_record: Callable[[Node], None] | None = None
    on_apply: Callable[..., Any] | None = None


_hooks = _RecordHooks()
_active: list[str] = []  # one entry per block with a hook, any thread: none, no _hooks lookup


@contextmanager
def _installed(slot: str, hook: Callable[..., Any]) -> Iterator[None]:
    """Set ``_hooks.<slot>`` to ``hook`` for this thread inside the block (innermost wins)."""
    previous = getattr(_hooks, slot)
    setattr(_hooks, slot, hook)
    _active.append(slot)  # (atomic, as remove is: no lock for threads installing hooks at once)
    try:
        yield
    finally:
        _active.remove(slot)
        setattr(_hooks, slot, previous)


def recording_hook(hook: Callable[[Node], None]) -> AbstractContextManager[None]:
    """Call ``hook(node)`` on every node this thread records inside the block (innermost wins).

    This is the engine's one extension point for saved arrays: activation checkpointing
    (``sadl.checkpoint``) drops a node's ``datas``/``out`` there and sets its ``refill``, and
    collects the nodes of the recomputation the same way.
    """
    return _installed("on_record", hook)


def application_hook(hook: Callable[..., Any]) -> AbstractContextManager[None]:
    """Run each op application this thread makes inside the block through ``hook`` (innermost wins).

    ``hook(op, phase, run, args, params)`` must return ``run()``, which performs the
    application. ``phase`` is ``"forward"`` (``op.forward`` on the input arrays ``args``, on
    the graph or on plain arrays, as a backward rule calls an op) or ``"backward"`` (the op's
    backward rule: ``args`` are the upstream gradient, the output and the inputs; ``run()``
    returns one gradient or None per input). A compiler tracing the function brackets each
    application to know which op made which calls. With no hook the engine pays one None check.
    """
    return _installed("on_apply", hook)


def call_op(op: OpDef, args: Sequence[Any], params: dict[str, Any]) -> Any:
    """Apply ``op`` the way user code calls it: Tensors in, Tensor out; arrays in, array out."""
    if op.composite:
        return op.forward(*args, **params)
    if params:
        names = op.input_names  # an input given by name (mask=m) is an input, as in torch
        while len(args) < len(names) and names[len(args)] in params:
            params = dict(params)
            args = (*args, params.pop(names[len(args)]))
        params = {
            k: v if type(v) in _PLAIN else constant_param(v, op, k) for k, v in params.items()
        }
    for a in args:
        if isinstance(a, TensorBase):
            return apply(op, args, params)
    hook = _hooks.on_apply if _active else None
    if hook is None:
        return op.forward(*args, **params)
    return hook(op, "forward", lambda: op.forward(*args, **params), args, params)


_PLAIN = {int, float, bool, str, type(None)}  # constants as they are: no constant_param call


def constant_param(value: Any, op: OpDef, name: str) -> Any:
    """A value given for one of an op's params (never differentiated), with Tensors unwrapped.

    A Tensor that requires grad given as a param would silently get no gradient, so it is
    refused (as a tuple or list item too); pass it as an input, or ``.detach()`` it.
    """
    if isinstance(value, TensorBase):
        if value._requires_grad and _grad_state.enabled:
            raise TypeError(_constant_message(op, name))
        return value.data
    if isinstance(value, tuple | list) and any(isinstance(v, TensorBase) for v in value):
        return type(value)(constant_param(v, op, name) for v in value)
    return value


def _constant_message(op: OpDef, name: str) -> str:
    message = (
        f"op {op.name!r}: {name}= is a constant parameter, but the Tensor given for it requires "
        "grad and would get no gradient"
    )
    try:
        parameters = inspect.signature(op.forward).parameters.values()
    except (TypeError, ValueError):
        parameters = []  # type: ignore[assignment]
    # POSITIONAL_ONLY < POSITIONAL_OR_KEYWORD < VAR_POSITIONAL < ... (an IntEnum)
    positional = [p.name for p in parameters if p.kind <= p.POSITIONAL_OR_KEYWORD]
    if name in positional:
        return (
            f"{message}; it is the op's input {positional.index(name) + 1}: pass it positionally "
            "to get its gradient, or pass value.detach() if a constant is meant"
        )
    return f"{message}; pass value.detach() if a constant is meant"


def promote_to_default(out: Any, datas: Sequence[Any], params: Mapping[str, Any]) -> Any:
    """A float result computed from integers and Python numbers takes the default dtype.

    NumPy makes ``int_array * 1.5`` or ``np.sqrt(int_array)`` float64; torch (and sadl) give
    the default dtype, float32 unless changed. A float input, or an explicit ``dtype=``, decides.
    """
    for d in datas:
        if type(d) is _ndarray:
            if d.dtype.kind in "fc":
                return out
        elif getattr(getattr(d, "dtype", None), "kind", "") in ("f", "c"):
            return out
    if "dtype" in params or out.dtype == _defaults._default_dtype:
        return out
    return out.astype(_defaults._default_dtype)


def _shared_counter(base: Any, args: Sequence[Any]) -> list[int]:
    # An output that views an input's memory shares that input's version counter, so an
    # in-place write through either one is seen by every node that saved the other.
    for a in args:
        if isinstance(a, TensorBase) and (a._data is base or a._data.base is base):
            return a._version
    return [0]


def _as_array_like(value: Any, datas: list[Any]) -> Any:
    """A result that is no ndarray: a device array as it is, a scalar as its inputs' array."""
    if not isinstance(value, np.generic) and is_array(value):
        return value
    for d in datas:
        if type(d) is _ndarray:
            return np.asarray(value)
        if is_array(d):
            return array_module(d).asarray(value)
    return np.asarray(value)


def _missing_backward_message(op: OpDef) -> str:
    package = KNOWN_PROVIDERS["ops"].get(op.name)
    hint = f" (its gradient comes with {package})" if package else ""
    return (
        f"op {op.name!r} has no backward rule, so it cannot be used on a tensor that requires "
        f"grad{hint}. Detach the input (t.detach()) or wrap the call in sadl.no_grad()."
    )


def write_into(target: Any, value: Any) -> None:
    """Copy ``value`` into the array ``target`` (same device), casting within a dtype kind."""
    array_module(target).copyto(target, value, casting="same_kind")


def retain_grad(tensor: Tensor) -> None:
    """Keep ``.grad`` for a non-leaf tensor during backward (a weak reference on its node)."""
    if tensor._node is not None:
        tensor._node.retained = weakref.ref(tensor)
    elif not tensor.requires_grad:
        raise RuntimeError("retain_grad() on a tensor that does not require grad")


_records.install_op_caller(call_op)
