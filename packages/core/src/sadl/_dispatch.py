"""How ``np.exp(t)``, ``np.sum(t, axis=1)`` and ``np.concatenate([a, b])`` reach the registry.

NumPy hands a call that involves a Tensor to ``Tensor.__array_ufunc__`` or
``Tensor.__array_function__``; both land here. Each registered op lists the NumPy callables it
implements (``OpDef.numpy_funcs``); the call's arguments are bound to the op's forward signature
(positional parameters are inputs, keyword-only ones are params) and the op is applied.

The contract for everything else (``docs/concepts/tensors.md`` states it for users):

* A NumPy function or ufunc method no op implements runs on the arrays. Its array and NumPy
  scalar results come back as Tensors that need no grad. If an input requires grad (and grad mode
  is on) and a result is floating, it raises instead, naming the function and what to use: the
  gradient is never dropped silently.
* Functions that write into an argument (``np.copyto``, ``np.put``, ``np.place``,
  ``np.putmask``, ``np.fill_diagonal``, ``np.put_along_axis``, ``out=`` of any ufunc or
  function) bump the written Tensor's version counter, so a backward through a value saved
  before the write raises. They refuse a leaf that requires grad, as ``w += 1`` does;
  ``np.copyto`` and ufunc ``out=`` are recorded like ``t[...] = value``, the others raise when
  the write would have to be recorded.

Which op implements which NumPy callable: core's ops are asked first (no plugin may take a
built-in name, so no plugin needs loading for them); for any other callable the op table comes
from the plugin registry (``sadl.backends.plugin_registry``). ``Tensor``'s two protocol
methods call this module's ``array_ufunc`` and ``array_function`` (tensors are ``TensorBase``
here: this module sits below ``sadl._tensor``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from sadl._engine import apply, constant_param, new_tensor, promote_to_default
from sadl._errors import broadcast_error
from sadl._grad_mode import is_grad_enabled
from sadl._known import KNOWN_PROVIDERS
from sadl._ops import CORE_OPS
from sadl._records import OpDef
from sadl._tensor_base import TensorBase
from sadl.backends import is_array, plugin_registry

if TYPE_CHECKING:
    from sadl._tensor import Tensor

__all__ = ["array_function", "array_ufunc", "make_binder"]

Binder = Callable[[tuple[Any, ...], dict[str, Any]], tuple[list[Any], dict[str, Any]]]

_MISSING = object()


def _op_source() -> tuple[int, Mapping[str, OpDef]]:
    """The registry's generation and its ops (loading the plugins on first use)."""
    reg = plugin_registry()
    return reg.generation, reg.records("ops")


class _Tables:
    """NumPy callable -> op, rebuilt whenever its source's generation changes."""

    def __init__(self, source: Callable[[], tuple[int, Mapping[str, OpDef]]]) -> None:
        self.source = source
        self.generation = -1
        self.ufuncs: dict[np.ufunc, OpDef] = {}
        self.functions: dict[Callable[..., Any], tuple[OpDef, Binder | None]] = {}
        self.methods: dict[tuple[str, np.ufunc], OpDef] = {}

    def current(self) -> _Tables:
        generation, ops = self.source()
        if generation != self.generation:
            ufuncs: dict[np.ufunc, OpDef] = {}
            functions: dict[Callable[..., Any], tuple[OpDef, Binder | None]] = {}
            for op in ops.values():
                for func in op.numpy_funcs:
                    if isinstance(func, np.ufunc):
                        ufuncs[func] = op
                    else:
                        functions[func] = (op, None if op.composite else make_binder(op, func))
            self.ufuncs, self.functions = ufuncs, functions
            self.methods = {k: ops[name] for k, name in _METHODS.items() if name in ops}
            self.generation = generation
        return self


# Core's own ops first: a NumPy call that one of them implements (no plugin may take a built-in
# name) never waits for plugin discovery; the registry is asked about every other callable.
_core = _Tables(lambda: (0, {op.name: op for op in CORE_OPS}))
_tables = _Tables(_op_source)


# ufunc methods that are reductions or scans of an op.
_METHODS: dict[tuple[str, np.ufunc], str] = {
    ("reduce", np.add): "sum",
    ("reduce", np.multiply): "prod",
    ("reduce", np.maximum): "amax",
    ("reduce", np.minimum): "amin",
    ("reduce", np.logical_and): "all",
    ("reduce", np.logical_or): "any",
    ("accumulate", np.add): "cumsum",
    ("accumulate", np.multiply): "cumprod",
}


def _parameters(forward: Any) -> tuple[list[str], bool, list[str], dict[str, Any]]:
    """A forward's positional parameters (its inputs), whether it takes ``*inputs``, its
    keyword-only parameters (its params) and the defaults of the positional ones.
    """
    if isinstance(forward, np.ufunc):
        return [f"x{i}" for i in range(forward.nin)], False, [], {}
    params = inspect.signature(forward).parameters.values()
    kinds = inspect.Parameter
    inputs = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    return (
        [p.name for p in inputs],
        any(p.kind is kinds.VAR_POSITIONAL for p in params),
        [p.name for p in params if p.kind is kinds.KEYWORD_ONLY],
        {p.name: p.default for p in inputs if p.default is not p.empty},
    )


def make_binder(op: OpDef, func: Any = None) -> Binder:
    """Map a NumPy-style call onto ``op``'s forward: (inputs, params).

    Positional arguments fill the forward's positional parameters (its inputs), then its
    keyword-only parameters in order; a variadic forward (``*arrays``) called with one list takes
    the list's items as its inputs (``np.concatenate([a, b], 1)``).
    """
    label = f"np.{getattr(func, '__name__', op.name)}"
    positional, variadic, keyword, defaults = _parameters(op.forward)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        if variadic and not positional and args and isinstance(args[0], list | tuple):
            inputs, rest = list(args[0]), args[1:]
        elif variadic:
            inputs, rest = list(args), ()
        else:
            inputs, rest = list(args[: len(positional)]), args[len(positional) :]
        if len(rest) > len(keyword):
            raise TypeError(f"{label}: too many positional arguments for op {op.name!r}")
        params = dict(zip(keyword, rest))
        for name, value in kwargs.items():
            if name in params:
                raise TypeError(f"{label}: got multiple values for argument {name!r}")
            if name in keyword:
                params[name] = value
            elif name in positional:
                index = positional.index(name)
                inputs.extend([_MISSING] * (index + 1 - len(inputs)))
                inputs[index] = value
            else:
                accepted = ", ".join(keyword) or "none"
                raise TypeError(
                    f"{label}: argument {name!r} is not supported on sadl Tensors "
                    f"(op {op.name!r} takes: {accepted})"
                )
        if not variadic:
            inputs += [_MISSING] * (len(positional) - len(inputs))
            inputs = [
                defaults.get(n, v) if v is _MISSING else v for n, v in zip(positional, inputs)
            ]
        if any(x is _MISSING for x in inputs):
            raise TypeError(f"{label}: missing a required argument for op {op.name!r}")
        return inputs, {k: constant_param(v, op, k) for k, v in params.items()}

    return bind


def array_ufunc(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``Tensor.__array_ufunc__``: route a ufunc call to its op."""
    out = kwargs.pop("out", None)
    if out is not None and is_grad_enabled():
        for target in _tensors_in(out):
            if target._requires_grad and target.is_leaf:
                raise RuntimeError(_LEAF_MESSAGE.format(label=f"np.{ufunc.__name__}"))
    tables = _core.current()
    if ufunc not in tables.ufuncs and (method, ufunc) not in tables.methods:
        tables = _tables.current()
    if method == "__call__" and ufunc in tables.ufuncs:
        if kwargs:
            raise TypeError(
                f"np.{ufunc.__name__}: keyword arguments {sorted(kwargs)} are not supported on "
                "sadl Tensors"
            )
        result = apply(tables.ufuncs[ufunc], inputs, {})
    elif (method, ufunc) in tables.methods:
        params = {"axis": kwargs.pop("axis", 0)}
        if method == "reduce":
            params["keepdims"] = kwargs.pop("keepdims", False)
        _no_more(ufunc, method, kwargs)
        result = apply(tables.methods[method, ufunc], inputs[:1], params)
    elif method == "at":
        return _ufunc_at(ufunc, inputs, kwargs)
    else:
        label = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        function = ufunc if method == "__call__" else getattr(ufunc, method)
        name = _METHODS.get((method, ufunc), ufunc.__name__)
        result = _fallback(function, inputs, kwargs, label, name)
    return result if out is None else _write_out(out, result, f"np.{ufunc.__name__}")


def _write_out(out: Any, result: Any, label: str) -> Any:
    """Store a ufunc's result(s) in ``out=``: a Tensor is written like ``t[...] = result``."""
    targets = out if isinstance(out, tuple) else (out,)
    results = result if isinstance(result, tuple) else (result,)
    for target, value in zip(targets, results):
        if isinstance(target, TensorBase):
            cast("Tensor", target)._assign(Ellipsis, value)
        elif target is not None:
            if isinstance(value, TensorBase) and value._requires_grad:
                raise TypeError(
                    f"{label}(..., out=array): the result requires grad, and a NumPy array cannot "
                    "carry it; pass a Tensor as out=, or detach the inputs"
                )
            np.copyto(target, value.data if isinstance(value, TensorBase) else value)
    return out


def _ufunc_at(ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    target = inputs[0]
    rest = [x.data if isinstance(x, TensorBase) else x for x in inputs[1:]]
    if isinstance(target, TensorBase):
        if is_grad_enabled() and _any_requires_grad(inputs):
            if target._requires_grad and target.is_leaf:
                raise RuntimeError(_LEAF_MESSAGE.format(label=f"np.{ufunc.__name__}.at"))
            raise TypeError(
                f"np.{ufunc.__name__}.at on a tensor that requires grad is not differentiable; "
                "use sadl.ops.add_at (or t.scatter_add) or do it under sadl.no_grad()"
            )
        ufunc.at(target.data, *rest, **kwargs)
        target._version[0] += 1
    else:
        ufunc.at(target, *rest, **kwargs)


def _no_more(ufunc: np.ufunc, method: str, kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise TypeError(
            f"np.{ufunc.__name__}.{method}: arguments {sorted(kwargs)} are not supported on "
            "sadl Tensors"
        )


def array_function(func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_function__``: route a NumPy function call to its op."""
    entry = _core.current().functions.get(func) or _tables.current().functions.get(func)
    if entry is None:
        label = f"np.{_name(func)}"
        if func in _WRITES_FIRST_ARGUMENT:
            return _write_in_place(func, args, kwargs, label)
        return _fallback(func, args, kwargs, label, _name(func))
    op, binder = entry
    if binder is None:  # composite: written with other ops, runs on the Tensors as given
        return op.forward(*args, **kwargs)
    inputs, params = binder(args, kwargs)
    return apply(op, inputs, params)


# NumPy functions that write into their first argument (and return None).
_WRITES_FIRST_ARGUMENT = frozenset(
    {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis}
)

# What to use instead of a NumPy function that no op implements, when a gradient is needed.
_INSTEAD = {
    "median": "t.sort(axis) and indexing",
    "average": "(t * w).sum(axis) / w.sum(axis)",
    "ptp": "t.max(axis) - t.min(axis)",
    "vdot": "(a.conj() * b).sum() or a.ravel() @ b.ravel()",
    "nansum": "np.where(t.isnan(), 0, t).sum()",
    "nanmean": "np.where(t.isnan(), 0, t).sum() / (~t.isnan()).sum()",
    "cross": "products of slices, t[..., i] * u[..., j] - ...",
}


def _write_in_place(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], label: str) -> Any:
    """``np.copyto(t, ...)`` and friends: write, bump the version, refuse what would be lost."""
    names = ("dst", "a", "arr")  # the first parameter's name in each of these functions
    target = args[0] if args else next((kwargs[k] for k in names if k in kwargs), None)
    if not isinstance(target, TensorBase):  # writing into an array: tensors are only read
        return func(*_unwrap(args), **_unwrap(kwargs))
    if is_grad_enabled() and _any_requires_grad(args, kwargs):
        if target._requires_grad and target.is_leaf:
            raise RuntimeError(_LEAF_MESSAGE.format(label=label))
        if func is np.copyto:
            bound = {**dict(zip(("dst", "src", "casting", "where"), args)), **kwargs}
            return _copyto_recorded(**bound)
        raise TypeError(
            f"{label} on a tensor that requires grad is not differentiable; write with "
            "t[index] = value (recorded on the graph), or do it under sadl.no_grad()"
        )
    func(*_unwrap(args), **_unwrap(kwargs))
    target._version[0] += 1
    return None


_LEAF_MESSAGE = (
    "{label}: a leaf tensor that requires grad is used in an in-place operation; do the update "
    "under sadl.no_grad() (as optimizers do) or use an out-of-place op"
)


def _copyto_recorded(dst: Tensor, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """``np.copyto`` recorded on the graph: ``dst[...] = src`` (only where ``where`` holds)."""
    if where is True:
        dst._assign(Ellipsis, src)
        return
    mask = np.broadcast_to(_unwrap(where), dst.shape)
    dst._assign(mask, np.broadcast_to(src, dst.shape)[mask])


def _fallback(func: Any, args: Any, kwargs: dict[str, Any], label: str, op: str) -> Any:
    """A NumPy callable no op implements: run it on the arrays, never hide a lost gradient.

    ``op`` is the name of the op that would implement it (a plugin's, maybe not installed).
    """
    contested = plugin_registry().contested_function(func)
    if contested is not None:  # plugins' ops claim it and none serves it: never NumPy's silently
        raise contested
    needs_grad = is_grad_enabled() and _any_requires_grad(args, kwargs)
    written = _tensors_in(kwargs.get("out"))
    if needs_grad and written:
        if any(t.requires_grad and t.is_leaf for t in written):
            raise RuntimeError(_LEAF_MESSAGE.format(label=label))
        raise TypeError(
            f"{label}(..., out=tensor) on tensors that require grad is not recorded on the "
            "graph; assign the result instead (t[...] = result), or detach the inputs"
        )
    arrays = _unwrap(args)
    try:
        result = func(*arrays, **_unwrap(kwargs))
    except ValueError as exc:
        raise broadcast_error(exc, label, _leaves(arrays)) from None
    if func is not np.float_power and not written:  # float64 by definition, as in torch
        result = _promoted(result, _leaves(arrays), kwargs)
    if needs_grad and _has_float(result):
        provider = KNOWN_PROVIDERS["ops"].get(op)
        if provider is not None:  # np.prod(t) without sadl-layers: say how to get its op
            status = plugin_registry().provider_status(provider, op, "ops")
            raise TypeError(f"{label} on a tensor that requires grad needs the op: {status}")
        name = label.removeprefix("np.")
        instead = f"use {_INSTEAD[name]}, " if name in _INSTEAD else ""
        raise TypeError(
            f"{label} is not a registered sadl op, so its result would carry no gradient; "
            f"{instead}detach the input (t.detach()) if no gradient is intended, or register "
            f"an OpDef for {label} in a plugin"
        )
    if written:
        for t in written:
            t._version[0] += 1
        return kwargs["out"]
    return _wrap(result, args)


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, list | tuple):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree]


def _promoted(result: Any, datas: list[Any], kwargs: dict[str, Any]) -> Any:
    """Integers and Python numbers give the default float dtype (float32), as in ops."""
    if is_array(result) and result.dtype.kind == "f":
        return promote_to_default(result, datas, kwargs)
    if isinstance(result, tuple) and not hasattr(result, "_fields"):  # np.divmod, np.modf
        return tuple(_promoted(r, datas, kwargs) for r in result)
    return result


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", repr(func)))


def _tensors_in(tree: Any) -> list[Any]:
    found: list[Any] = []
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, TensorBase):
            found.append(item)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


def _any_requires_grad(*trees: Any) -> bool:
    return any(t.requires_grad for t in _tensors_in(trees))


def _unwrap(tree: Any) -> Any:
    if isinstance(tree, TensorBase):
        return tree.data
    if isinstance(tree, list | tuple):
        return type(tree)(_unwrap(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _unwrap(v) for k, v in tree.items()}
    return tree


def _wrap(value: Any, args: Any) -> Any:
    """Arrays and NumPy scalars as Tensors that need no grad; views share their base's counter."""
    if is_array(value) or isinstance(value, np.generic):
        tensor = new_tensor(value if is_array(value) else np.asarray(value))
        base = getattr(value, "base", None)
        for source in _tensors_in(args):
            data = source.data
            if data is value or (base is not None and (data is base or data.base is base)):
                tensor._version = source._version  # a view: in-place writes show on both
                break
        return tensor
    if isinstance(value, tuple | list) and any(
        is_array(v) or isinstance(v, np.generic) for v in value
    ):
        items = [_wrap(v, args) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def _has_float(value: Any) -> bool:
    if is_array(value) or isinstance(value, np.generic):
        return bool(value.dtype.kind in "fc")
    if isinstance(value, float | complex):
        return True
    return isinstance(value, tuple | list) and any(_has_float(v) for v in value)
