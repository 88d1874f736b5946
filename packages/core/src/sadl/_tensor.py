"""``Tensor``: an array with a gradient, reachable through NumPy functions and torch-like methods.

Its state (six slots) is ``sadl._tensor_base.TensorBase``'s; this file adds the protocols
(NumPy's dispatch, Python's conversions), the autograd entry (``backward``) and the in-place
machinery. The method vocabulary (``t.exp()``, ``t.sum(axis)``, ``t + u``, ...) comes from the
mixins of ``sadl._methods``; the graph work from ``sadl._engine``; NumPy's
``__array_ufunc__``/``__array_function__`` land in ``sadl._dispatch``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl import _backward, _dispatch, _engine, _inplace, _tensor_base
from sadl._conversions import ConversionMethods
from sadl._defaults import get_default_dtype
from sadl._engine import new_tensor
from sadl._grad_mode import _state as _grad_state
from sadl._methods import (
    ArithmeticMethods,
    Bool,
    ElementwiseMethods,
    Int,
    ReductionMethods,
    ShapeMethods,
    _index_key,
)
from sadl._ops import indexing as _ix
from sadl._ops import nondifferentiable as _nd
from sadl._tensor_base import TensorBase, seen, told
from sadl._torch_methods import TorchMethods
from sadl.backends import Device, Where, array_module, device_of, is_array, to_device

__all__ = ["Parameter", "Tensor", "tensor"]


class Tensor(
    TensorBase,
    ArithmeticMethods,
    ElementwiseMethods,
    ReductionMethods,
    ShapeMethods,
    ConversionMethods,
    TorchMethods,
    result=True,
):
    """An n-dimensional array that can record the operations applied to it and differentiate them.

    ``Tensor(data, dtype=None, device=None, requires_grad=False)`` wraps ``data`` (an array is
    used as is, other data is converted; Python floats become the default dtype, float32).

    >>> import numpy as np, sadl
    >>> x = sadl.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    array([2., 4.])
    """

    __slots__ = ()  # the state is TensorBase's: _data, _grad, _node, _requires_grad, _version
    __array_priority__ = 1000

    @property
    def data(self) -> Any:
        """The NumPy or CuPy array."""
        return self._data if not _tensor_base.watching else seen(self, "data", self._data)

    @data.setter
    def data(self, value: Any) -> None:
        self._data = value if not _tensor_base.watching else told(self, "data", value)

    @property
    def grad(self) -> Any:
        """The accumulated gradient (an array; a Tensor under create_graph), or None."""
        return self._grad if not _tensor_base.watching else seen(self, "grad", self._grad)

    @grad.setter
    def grad(self, value: Any) -> None:
        self._grad = value if not _tensor_base.watching else told(self, "grad", value)

    def __new__(
        cls, data: Any, dtype: Any = None, device: Where = None, requires_grad: Bool = False
    ) -> Tensor:
        tensor = new_tensor(_as_array(data, dtype, device), cls=cls)
        if requires_grad:
            tensor.requires_grad_(True)
        return tensor

    # ---------------------------------------------------------------- attributes
    @property
    def device(self) -> Device:
        """Where the data lives (``cpu`` or ``cuda:N``)."""
        return device_of(self.data)

    # ---------------------------------------------------------------- autograd
    @property
    def requires_grad(self) -> Bool:
        """Whether operations on this tensor are recorded for differentiation.

        Assigning it validates like ``requires_grad_``: only floating tensors can require grad,
        and only leaves can stop requiring it.
        """
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: Bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: Bool = True) -> Tensor:
        """Set ``requires_grad`` in place (leaves only; floating dtypes only)."""
        if not isinstance(requires_grad, builtins.bool | np.bool_):
            raise TypeError(f"requires_grad must be True or False, got {requires_grad!r}")
        if requires_grad and self.data.dtype.kind not in "fc":
            raise TypeError(
                f"only floating-point tensors can require grad; this one is {self.data.dtype}"
            )
        if not requires_grad and self._node is not None:
            raise RuntimeError(
                "requires_grad can only be turned off on leaf tensors; use .detach() instead"
            )
        self._requires_grad = bool(requires_grad)
        return self

    def backward(
        self, grad: Any = None, retain_graph: Bool = False, create_graph: Bool = False
    ) -> None:
        """Accumulate the gradient of this tensor into every leaf's ``.grad``.

        ``grad`` defaults to 1 for one-element tensors. Without ``retain_graph`` the graph's saved
        arrays are freed, so a second backward through it raises. With ``create_graph`` the
        gradients are Tensors that carry their own graph (higher-order derivatives).

        >>> import sadl
        >>> x = sadl.tensor([3.0], requires_grad=True)
        >>> (x ** 2).sum().backward()
        >>> x.grad
        array([6.], dtype=float32)
        """
        _backward.backward(self, grad, retain_graph, create_graph)

    def register_post_accumulate_grad_hook(
        self, hook: Callable[[Tensor], Any]
    ) -> _backward.RemovableHandle:
        """Run ``hook(self)`` in every backward pass, as soon as ``self.grad`` is final for it.

        For leaf tensors that require grad (Parameters). The hook runs once per ``backward()``
        that reaches this tensor, right after the pass has added its last contribution to
        ``.grad`` and before the pass goes on with the rest of the graph, so work on one
        gradient (communicating it, say) can overlap the backward of the others. It is not
        called for a pass that gives this tensor no gradient, nor by ``sadl.grad`` (which leaves
        ``.grad`` alone). Returns a handle; ``handle.remove()`` unregisters the hook.
        """
        return _backward.register_post_accumulate_grad_hook(self, hook)

    def retain_grad(self) -> Tensor:
        """Keep ``.grad`` for this non-leaf tensor during backward."""
        _engine.retain_grad(self)
        return self

    def detach(self) -> Tensor:
        """The same data, cut from the graph (shares memory and version counter).

        >>> import sadl
        >>> x = sadl.tensor([1.0], requires_grad=True)
        >>> (x * 2).detach().requires_grad
        False
        """
        return new_tensor(self.data, None, self._version)

    def view(self, *shape: Any) -> Tensor:
        """Torch's name for reshape; ``view(dtype)`` reads the same bytes as ``dtype``."""
        if len(shape) == 1 and isinstance(shape[0], type | np.dtype):
            return _engine.apply(_nd.BITCAST, (self,), {"dtype": np.dtype(shape[0])})
        return self.reshape(*shape)

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place."""
        self._node = None
        self._requires_grad = False
        return self

    # ---------------------------------------------------------------- in place
    def zero_(self) -> Tensor:
        """Fill with zeros in place."""
        return self._assign(Ellipsis, 0)

    def fill_(self, value: Any) -> Tensor:
        """Fill with ``value`` in place."""
        return self._assign(Ellipsis, value)

    def copy_(self, source: Any) -> Tensor:
        """Overwrite the values with ``source`` (broadcast, cast to this dtype) in place."""
        return self._assign(Ellipsis, source)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._assign(_index_key(key), value)

    def _records_inplace(self, *others: Any) -> Bool:
        """Whether an in-place op on this tensor must be recorded on the graph.

        A leaf that requires grad may not be overwritten while recording (its gradient would
        describe a value that no longer exists); optimizers update under ``no_grad``.
        """
        if not _grad_state.enabled:
            return False
        if self.requires_grad and self._node is None:
            raise RuntimeError(
                "a leaf tensor that requires grad is used in an in-place operation; do the "
                "update under sadl.no_grad() (as optimizers do) or use an out-of-place op"
            )
        return self.requires_grad or any(isinstance(o, Tensor) and o.requires_grad for o in others)

    def inplace(self, op: Any, *others: Any, **params: Any) -> Tensor:
        """``self = op(self, *others, **params)`` in place, for a registered op (an ``OpDef``):
        written into this tensor's memory and, while recording, on the graph as torch's in-place
        methods are (the old value kept for the backwards that saved it, the version bumped).
        What a plugin's ``inplace=True`` uses (sadl-layers' activations).
        """
        return self._inplace(op, *others, **params)

    def _inplace(self, op: Any, *others: Any, **params: Any) -> Tensor:
        """``self = op(self, *others)`` in place: written into memory, recorded when needed."""
        if self._records_inplace(*others):
            return _inplace.rebase_inplace(self, op, others, params)
        datas = [o.data if isinstance(o, Tensor) else o for o in others]
        _engine.write_into(self.data, op.forward(self.data, *datas, **params))
        self._version[0] += 1
        return self

    def _assign(self, key: Any, value: Any) -> Tensor:
        """``self[key] = value`` in place: written into memory, recorded when needed."""
        if self._records_inplace(value):
            view = isinstance(value, Tensor) and _inplace.is_view_at(self.data, key, value.data)
            if view and _inplace.rebase_view_write(self, _ix.SETITEM, _ix.GETITEM, value, key):
                return self  # ``h[0] += 2``: already written through the view
            return _inplace.rebase_inplace(self, _ix.SETITEM, (value,), {"key": key})
        self.data[key] = value.data if isinstance(value, Tensor) else value
        self._version[0] += 1
        return self

    # ---------------------------------------------------------------- protocols
    def __array__(self, dtype: Any = None, copy: Bool | None = None) -> np.ndarray[Any, Any]:
        if type(self.data) is not np.ndarray:
            raise TypeError(
                f"this tensor lives on {self.device}; call .numpy() or .to('cpu') to get a "
                "NumPy array"
            )
        if copy:
            return np.array(self.data, dtype=dtype, copy=True)
        return self.data if dtype is None else self.data.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _dispatch.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _dispatch.array_function(func, types, args, kwargs)

    def __format__(self, spec: str) -> str:
        if spec and self.data.size == 1:
            return format(self.item(), spec)  # f"{loss:.3f}", as for a NumPy scalar
        return super().__format__(spec) if spec else str(self)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        body = np.array2string(
            self.numpy(), separator=", ", prefix="Tensor(", threshold=200, edgeitems=3
        )
        extras = []
        if self.data.dtype != get_default_dtype():
            extras.append(f"dtype={self.data.dtype}")
        if type(self.data) is not np.ndarray:
            extras.append(f"device='{self.device}'")
        if self._node is not None:
            extras.append(f"grad_fn=<{self._node.op.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"{type(self).__name__}({body}{''.join(', ' + e for e in extras)})"

    def __deepcopy__(self, memo: dict[Int, Any]) -> Tensor:
        out = new_tensor(self.data.copy(), cls=type(self))
        out.grad = None if self.grad is None else self.grad.copy()
        out._requires_grad = self._requires_grad
        memo[id(self)] = out
        return out

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.numpy(), self.requires_grad))


class Parameter(Tensor):
    """A Tensor that is a trainable weight: floating dtypes only, requires grad unless frozen.

    ``Parameter(data)`` keeps NumPy float arrays' dtype and turns Python floats into the default
    dtype. Freezing (``p.requires_grad_(False)``, ``p.requires_grad = False`` or, for a whole
    model, ``model.requires_grad = False``) makes it a constant: it gets no gradient and
    optimizers leave it alone. Every way of setting ``requires_grad`` goes through the same check.

    >>> import numpy as np, sadl
    >>> w = sadl.Parameter(np.zeros(3))
    >>> w.requires_grad, w.dtype
    (True, dtype('float64'))
    """

    __slots__ = ()

    def __new__(
        cls, data: Any, dtype: Any = None, device: Where = None, requires_grad: Bool = True
    ) -> Parameter:
        arr = _as_array(data, dtype, device)
        if arr.dtype.kind not in "fc":
            raise TypeError(
                f"Parameter needs a floating dtype, got {arr.dtype}; pass dtype=np.float32 "
                "or float data"
            )
        param = new_tensor(arr, cls=cls)
        param.requires_grad_(requires_grad)
        return param  # type: ignore[return-value]

    def copy_to_device(self, device: str | Device | builtins.int) -> Parameter:
        """A copy on ``device`` that is a Parameter too (py-sadl's name; see ``to``)."""
        return Parameter(to_device(self.data, device), requires_grad=self.requires_grad)


def tensor(
    data: Any, dtype: Any = None, device: Where = None, requires_grad: bool = False
) -> Tensor:
    """A new tensor holding a copy of ``data`` (Python floats become float32).

    >>> import sadl
    >>> sadl.tensor([1.0, 2.0])
    Tensor([1., 2.])
    >>> sadl.tensor([1, 2]).dtype
    dtype('int64')
    """
    if isinstance(data, Tensor):
        data = data.data
    if not isinstance(data, np.ndarray) and is_array(data):  # a device array stays there
        data = array_module(data).array(data, dtype=dtype, copy=True)
    elif isinstance(data, np.ndarray) or hasattr(data, "__array__"):
        data = np.array(data, dtype=dtype, copy=True)
    return Tensor(data, dtype, device, requires_grad)


def _as_array(data: Any, dtype: Any = None, device: Where = None) -> Any:
    """Turn user data into an array of the requested dtype on the requested device."""
    if isinstance(data, Tensor):
        arr = data.data
    elif isinstance(data, np.ndarray) or is_array(data):
        arr = data
    else:
        arr = np.asarray(data)
        # NumPy scalars and array-likes keep their dtype; Python floats take the default dtype.
        if dtype is None and arr.dtype == np.float64 and not hasattr(data, "__array__"):
            arr = arr.astype(get_default_dtype())
    if dtype is not None:
        dtype = np.dtype(dtype)
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
    if arr.dtype == object:  # as torch: a Tensor holds numbers (an object array, or ragged lists)
        raise TypeError(
            f"cannot make a Tensor from {type(data).__name__} of dtype object: the values are "
            "not numeric or the nested lists are ragged; convert it to a numeric dtype first "
            "(e.g. np.asarray(values, dtype=np.float32))"
        )
    if device is not None:
        arr = to_device(arr, device)
    elif isinstance(arr, np.generic):
        arr = np.asarray(arr)
    return arr


def _rebuild(cls: type, data: Any, requires_grad: Bool) -> Tensor:
    return Parameter(data) if cls is Parameter else cls(data, requires_grad=requires_grad)  # type: ignore[no-any-return]
