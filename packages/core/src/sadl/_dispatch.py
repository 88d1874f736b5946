"""How ``np.exp(t)``, ``np.sum(t, axis=1)`` and ``np.concatenate([a, b])`` reach the registry.

NumPy hands a call that involves a Tensor to ``Tensor.__array_ufunc__`` or
``Tensor.__array_function__``; both land here. Each registered op lists the NumPy callables it
implements (``OpDef.numpy_funcs``); the call's arguments are bound to the op's forward signature
(positional parameters are inputs, keyword-only ones are params) and the op is applied.
NumPy functions that no op implements still work on tensors that need no gradient (the result is a
plain Tensor); on tensors that require grad they raise instead of silently dropping the gradient.

Which op implements which NumPy callable is known only once the plugins are loaded: the plugin host
(a higher layer) hands this module its op table with :func:`install_op_source`, and this module
hands ``Tensor`` its two protocol methods with ``sadl._tensor.install_numpy_dispatch``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sadl import _tensor
from sadl._engine import apply
from sadl._grad_mode import is_grad_enabled
from sadl._ops.nondifferentiable import ALL, ANY
from sadl._ops.reductions import AMAX, AMIN, CUMPROD, CUMSUM, PROD, SUM
from sadl._records import OpDef
from sadl._tensor import Tensor
from sadl.backends import is_array

__all__ = ["array_function", "array_ufunc", "install_op_source", "make_binder"]

Binder = Callable[[tuple[Any, ...], dict[str, Any]], tuple[list[Any], dict[str, Any]]]

_MISSING = object()


OpSource = Callable[[], tuple[int, Mapping[str, OpDef]]]


def _no_source() -> tuple[int, Mapping[str, OpDef]]:
    raise RuntimeError("sadl's plugin host is not loaded; import sadl first")


class _Tables:
    """NumPy callable -> op, rebuilt whenever the registry's generation changes."""

    def __init__(self) -> None:
        self.source: OpSource = _no_source
        self.generation = -1
        self.ufuncs: dict[np.ufunc, OpDef] = {}
        self.functions: dict[Callable[..., Any], tuple[OpDef, Binder | None]] = {}

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
            self.generation = generation
        return self


_tables = _Tables()


def install_op_source(source: OpSource) -> None:
    """Called once by the plugin host: ``source()`` returns ``(generation, ops by name)``.

    It loads the plugins on first use; the tables are rebuilt when the generation changes.
    """
    _tables.source = source


# ufunc methods that are reductions or scans of a core op.
_REDUCE = {
    np.add: SUM,
    np.multiply: PROD,
    np.maximum: AMAX,
    np.minimum: AMIN,
    np.logical_and: ALL,
    np.logical_or: ANY,
}
_ACCUMULATE = {np.add: CUMSUM, np.multiply: CUMPROD}


def make_binder(op: OpDef, func: Any = None) -> Binder:
    """Map a NumPy-style call onto ``op``'s forward: (inputs, params).

    Positional arguments fill the forward's positional parameters (its inputs), then its
    keyword-only parameters in order; a variadic forward (``*arrays``) called with one list takes
    the list's items as its inputs (``np.concatenate([a, b], 1)``).
    """
    forward = op.forward
    label = f"np.{getattr(func, '__name__', op.name)}"
    if isinstance(forward, np.ufunc):
        positional = [f"x{i}" for i in range(forward.nin)]
        variadic = False
        keyword: list[str] = []
        defaults: dict[str, Any] = {}
    else:
        sig = inspect.signature(forward)
        kinds = inspect.Parameter
        positional = [
            p.name
            for p in sig.parameters.values()
            if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        ]
        variadic = any(p.kind is kinds.VAR_POSITIONAL for p in sig.parameters.values())
        keyword = [p.name for p in sig.parameters.values() if p.kind is kinds.KEYWORD_ONLY]
        defaults = {
            p.name: p.default
            for p in sig.parameters.values()
            if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
            and p.default is not p.empty
        }

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        if variadic and not positional and args and isinstance(args[0], list | tuple):
            inputs = list(args[0])
            rest = args[1:]
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
        if not variadic and len(inputs) < len(positional):
            inputs.extend(defaults.get(name, _MISSING) for name in positional[len(inputs) :])
        if any(x is _MISSING for x in inputs):
            raise TypeError(f"{label}: missing a required argument for op {op.name!r}")
        return inputs, {k: _plain(v) for k, v in params.items()}

    return bind


def _plain(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.data
    if isinstance(value, tuple) and any(isinstance(v, Tensor) for v in value):
        return tuple(v.data if isinstance(v, Tensor) else v for v in value)
    return value


def array_ufunc(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``Tensor.__array_ufunc__``: route a ufunc call to its op."""
    out = kwargs.pop("out", None)
    tables = _tables.current()
    if method == "__call__":
        if kwargs:
            raise TypeError(
                f"np.{ufunc.__name__}: keyword arguments {sorted(kwargs)} are not supported on "
                "sadl Tensors"
            )
        op = tables.ufuncs.get(ufunc)
        result = apply(op, inputs, {}) if op is not None else _fallback(ufunc, inputs, {})
    elif method == "reduce" and ufunc in _REDUCE:
        op = _REDUCE[ufunc]
        params = {"axis": kwargs.pop("axis", 0), "keepdims": kwargs.pop("keepdims", False)}
        _no_more(ufunc, method, kwargs)
        result = apply(op, inputs[:1], params)
    elif method == "accumulate" and ufunc in _ACCUMULATE:
        op = _ACCUMULATE[ufunc]
        params = {"axis": kwargs.pop("axis", 0)}
        _no_more(ufunc, method, kwargs)
        result = apply(op, inputs[:1], params)
    elif method == "at":
        return _ufunc_at(ufunc, inputs, kwargs)
    else:
        raise TypeError(
            f"np.{ufunc.__name__}.{method} is not supported on sadl Tensors; convert with "
            ".numpy() first if no gradient is needed"
        )
    if out is None:
        return result
    target = out[0] if isinstance(out, tuple) else out
    if isinstance(target, Tensor):
        target._assign(Ellipsis, result)
        return target
    np.copyto(target, result.data if isinstance(result, Tensor) else result)
    return target


def _ufunc_at(ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    target = inputs[0]
    rest = [x.data if isinstance(x, Tensor) else x for x in inputs[1:]]
    if isinstance(target, Tensor):
        if is_grad_enabled() and (
            target.requires_grad or any(isinstance(x, Tensor) and x.requires_grad for x in inputs)
        ):
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
    entry = _tables.current().functions.get(func)
    if entry is None:
        return _fallback(func, args, kwargs)
    op, binder = entry
    if binder is None:  # composite: written with other ops, runs on the Tensors as given
        return op.forward(*args, **kwargs)
    inputs, params = binder(args, kwargs)
    return apply(op, inputs, params)


def _fallback(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """A NumPy callable no op implements: run it on the arrays, never hide a lost gradient."""
    needs_grad = is_grad_enabled() and _any_requires_grad(args, kwargs)
    result = func(*_unwrap(args), **_unwrap(kwargs))
    if needs_grad and _has_float_array(result):
        name = getattr(func, "__name__", repr(func))
        raise TypeError(
            f"np.{name} is not a registered sadl op, so its result would carry no gradient; "
            f"detach the input (t.detach()) if that is intended, or register an OpDef for "
            f"np.{name} in a plugin"
        )
    return _wrap(result)


def _any_requires_grad(*trees: Any) -> bool:
    stack = list(trees)
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            if item.requires_grad:
                return True
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return False


def _unwrap(tree: Any) -> Any:
    if isinstance(tree, Tensor):
        return tree.data
    if isinstance(tree, list | tuple):
        return type(tree)(_unwrap(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _unwrap(v) for k, v in tree.items()}
    return tree


def _wrap(value: Any) -> Any:
    if is_array(value):
        return Tensor(value)
    if isinstance(value, tuple | list) and any(is_array(v) for v in value):
        return type(value)(_wrap(v) for v in value)
    return value


def _has_float_array(value: Any) -> bool:
    if is_array(value):
        return bool(value.dtype.kind in "fc")
    if isinstance(value, tuple | list):
        return any(_has_float_array(v) for v in value)
    return False


_tensor.install_numpy_dispatch(array_ufunc, array_function)
