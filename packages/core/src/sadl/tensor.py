"""``Tensor``: an array with a gradient, reachable through NumPy functions and torch-like methods.

A Tensor wraps ``.data`` (a NumPy or CuPy array). Every method is a one-line call into an op of
the grad-op registry, so ``t.exp()``, ``np.exp(t)`` and ``sadl.ops.exp(t)`` are one code path.
NumPy functions reach the registry through ``__array_ufunc__`` / ``__array_function__``
(see ``sadl.numpy_dispatch``).
"""

from __future__ import annotations

import builtins
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from sadl.backend import Device, array_module, device_of, is_array, parse_device, to_device
from sadl.grad_mode import _state as _grad_state
from sadl.ops import activations as _act
from sadl.ops import arithmetic as _ar
from sadl.ops import elementwise as _el
from sadl.ops import indexing as _ix
from sadl.ops import linalg as _la
from sadl.ops import nondifferentiable as _nd
from sadl.ops import reductions as _red
from sadl.ops import shapes as _sh
from sadl.ops import special as _sp

__all__ = ["Parameter", "Tensor", "get_default_dtype", "set_default_dtype"]

_default_dtype = np.dtype(np.float32)


def get_default_dtype() -> np.dtype[Any]:
    """The dtype given to tensors made from Python floats (float32, as in torch)."""
    return _default_dtype


def set_default_dtype(dtype: Any) -> None:
    """Set the dtype for tensors made from Python floats (``float32`` or ``float64``)."""
    global _default_dtype
    d = np.dtype(dtype)
    if d.kind != "f":
        raise TypeError(f"default dtype must be a floating dtype, got {d}")
    _default_dtype = d


def _as_array(data: Any, dtype: Any = None, device: str | Device | None = None) -> Any:
    """Turn user data into an array of the requested dtype on the requested device."""
    if isinstance(data, Tensor):
        arr = data.data
    elif is_array(data):
        arr = data
    else:
        if hasattr(data, "__array__") or isinstance(data, np.generic):
            arr = np.asarray(data)
        else:
            arr = np.asarray(data)
            if dtype is None and arr.dtype == np.float64:
                arr = arr.astype(_default_dtype)
        if arr.dtype == object:
            raise TypeError(
                f"cannot make a Tensor from {type(data).__name__}: the values are not numeric "
                "or the nested lists are ragged"
            )
    if dtype is not None:
        dtype = np.dtype(dtype)
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
    if device is not None:
        arr = to_device(arr, device)
    elif isinstance(arr, np.generic):
        arr = np.asarray(arr)
    return arr


def _axis(axis: Any, dim: Any, name: str) -> Any:
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{name}: give axis= or dim=, not both")
        return dim
    return axis


class Tensor(NDArrayOperatorsMixin):
    """An n-dimensional array that can record the operations applied to it and differentiate them.

    ``Tensor(data, dtype=None, device=None, requires_grad=False)`` wraps ``data`` (an array is
    used as is, other data is converted; Python floats become the default dtype, float32).
    """

    __slots__ = ("__weakref__", "_node", "_version", "data", "grad", "requires_grad")
    __array_priority__ = 1000

    data: Any
    grad: Any
    requires_grad: builtins.bool
    _node: Any
    _version: list[builtins.int]

    def __init__(
        self,
        data: Any,
        dtype: Any = None,
        device: str | Device | None = None,
        requires_grad: builtins.bool = False,
    ) -> None:
        self.data = _as_array(data, dtype, device)
        self.grad = None
        self._node = None
        self._version = [0]
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    # ---------------------------------------------------------------- attributes
    @property
    def shape(self) -> tuple[builtins.int, ...]:
        """The shape of the data."""
        return self.data.shape  # type: ignore[no-any-return]

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of the data."""
        return self.data.dtype  # type: ignore[no-any-return]

    @property
    def ndim(self) -> builtins.int:
        """Number of axes."""
        return self.data.ndim  # type: ignore[no-any-return]

    @property
    def size(self) -> builtins.int:
        """Number of elements."""
        return self.data.size  # type: ignore[no-any-return]

    @property
    def device(self) -> Device:
        """Where the data lives (``cpu`` or ``cuda:N``)."""
        return device_of(self.data)

    @property
    def is_leaf(self) -> builtins.bool:
        """True unless the tensor is the recorded result of an op."""
        return self._node is None

    @property
    def grad_fn(self) -> Any:
        """The graph node that produced this tensor (None for leaves)."""
        return self._node

    @property
    def T(self) -> Tensor:
        """The transpose (all axes reversed)."""
        return _apply(_sh.TRANSPOSE, (self,), {})

    @property
    def mT(self) -> Tensor:
        """The last two axes swapped (a batch of transposed matrices)."""
        return _apply(_sh.SWAPAXES, (self,), {"axis1": -1, "axis2": -2})

    def requires_grad_(self, requires_grad: builtins.bool = True) -> Tensor:
        """Set ``requires_grad`` in place (leaves only; floating dtypes only)."""
        if requires_grad and self.data.dtype.kind not in "fc":
            raise TypeError(
                f"only floating-point tensors can require grad; this one is {self.data.dtype}"
            )
        if not requires_grad and self._node is not None:
            raise RuntimeError(
                "requires_grad can only be turned off on leaf tensors; use .detach() instead"
            )
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self) -> Tensor:
        """Keep ``.grad`` for this non-leaf tensor during backward."""
        if self._node is not None:
            self._node.retained = weakref.ref(self)
        elif not self.requires_grad:
            raise RuntimeError("retain_grad() on a tensor that does not require grad")
        return self

    # ---------------------------------------------------------------- conversion
    def item(self) -> Any:
        """The single value as a Python number."""
        if self.data.size != 1:
            raise ValueError(
                f"item(): only one-element tensors can become a Python number, shape {self.shape}"
            )
        return self.data.item()

    def numpy(self) -> np.ndarray[Any, Any]:
        """The data as a NumPy array (copied to the host from a GPU; shared on the CPU)."""
        return to_device(self.data, "cpu")  # type: ignore[no-any-return]

    def tolist(self) -> Any:
        """The data as nested Python lists."""
        return self.numpy().tolist()

    def detach(self) -> Tensor:
        """The same data, cut from the graph (shares memory and version counter)."""
        out = Tensor.__new__(Tensor)
        out.data = self.data
        out.grad = None
        out._node = None
        out._version = self._version
        out.requires_grad = False
        return out

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place."""
        self._node = None
        self.requires_grad = False
        return self

    def to(self, device: str | Device | None = None, dtype: Any = None) -> Tensor:
        """A copy on ``device`` and/or as ``dtype``; differentiable."""
        out = self
        if dtype is not None and np.dtype(dtype) != self.dtype:
            out = out.astype(dtype)
        if device is not None and device_of(out.data) != parse_device(device):
            out = _apply(_sp.TO_DEVICE, (out,), {"device": str(parse_device(device))})
        return out

    def cpu(self) -> Tensor:
        """This tensor on the CPU."""
        return self.to("cpu")

    def cuda(self, index: builtins.int = 0) -> Tensor:
        """This tensor on CUDA device ``index``."""
        return self.to(f"cuda:{index}")

    def astype(self, dtype: Any, copy: builtins.bool = True) -> Tensor:
        """The values as ``dtype`` (differentiable between float dtypes)."""
        dtype = np.dtype(dtype)
        if not copy and dtype == self.dtype:
            return self
        return _apply(_sp.ASTYPE, (self,), {"dtype": dtype})

    def float(self) -> Tensor:
        """Cast to float32."""
        return self.astype(np.float32)

    def double(self) -> Tensor:
        """Cast to float64."""
        return self.astype(np.float64)

    def half(self) -> Tensor:
        """Cast to float16."""
        return self.astype(np.float16)

    def long(self) -> Tensor:
        """Cast to int64."""
        return self.astype(np.int64)

    def int(self) -> Tensor:
        """Cast to int32."""
        return self.astype(np.int32)

    def bool(self) -> Tensor:
        """Cast to bool."""
        return self.astype(np.bool_)

    def copy(self) -> Tensor:
        """A copy that owns its memory (differentiable)."""
        return _apply(_sh.COPY, (self,), {})

    def clone(self) -> Tensor:
        """A copy that owns its memory (torch's name)."""
        return _apply(_sh.COPY, (self,), {})

    def __array__(
        self, dtype: Any = None, copy: builtins.bool | None = None
    ) -> np.ndarray[Any, Any]:
        if type(self.data) is not np.ndarray:
            raise TypeError(
                f"this tensor lives on {self.device}; call .numpy() or .to('cpu') to get a "
                "NumPy array"
            )
        if copy:
            return np.array(self.data, dtype=dtype, copy=True)
        return self.data if dtype is None else self.data.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from sadl.numpy_dispatch import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from sadl.numpy_dispatch import array_function

        return array_function(func, types, args, kwargs)

    def __len__(self) -> builtins.int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return len(self.data)

    def __iter__(self) -> Iterator[Tensor]:
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self.data)))

    def __float__(self) -> builtins.float:
        return float(self.item())

    def __int__(self) -> builtins.int:
        return int(self.item())

    def __index__(self) -> builtins.int:
        if self.data.dtype.kind not in "iub":
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return int(self.item())

    def __bool__(self) -> builtins.bool:
        if self.data.size != 1:
            raise ValueError(
                f"the truth value of a tensor with {self.data.size} elements is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.data.item())

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        body = np.array2string(
            self.numpy(), separator=", ", prefix="Tensor(", threshold=200, edgeitems=3
        )
        extras = []
        if self.data.dtype != _default_dtype:
            extras.append(f"dtype={self.data.dtype}")
        if type(self.data) is not np.ndarray:
            extras.append(f"device='{self.device}'")
        if self._node is not None:
            extras.append(f"grad_fn=<{self._node.op.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"Tensor({body}{''.join(', ' + e for e in extras)})"

    def __deepcopy__(self, memo: dict[builtins.int, Any]) -> Tensor:
        out = type(self).__new__(type(self))
        out.data = self.data.copy()
        out.grad = None if self.grad is None else self.grad.copy()
        out._node = None
        out._version = [0]
        out.requires_grad = self.requires_grad
        memo[id(self)] = out
        return out

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.numpy(), self.requires_grad))

    # ---------------------------------------------------------------- autograd
    def backward(
        self,
        grad: Any = None,
        retain_graph: builtins.bool = False,
        create_graph: builtins.bool = False,
    ) -> None:
        """Accumulate the gradient of this tensor into every leaf's ``.grad``.

        ``grad`` defaults to 1 for one-element tensors. Without ``retain_graph`` the graph's saved
        arrays are freed, so a second backward through it raises. With ``create_graph`` the
        gradients are Tensors that carry their own graph (higher-order derivatives).
        """
        from sadl.engine import _seed_grad, run_backward

        seed = _seed_grad(self, grad, create_graph, "backward()")
        run_backward(
            [self], [seed], retain_graph=retain_graph or create_graph, create_graph=create_graph
        )

    def zero_(self) -> Tensor:
        """Fill with zeros in place."""
        return self._assign(Ellipsis, 0)

    def fill_(self, value: Any) -> Tensor:
        """Fill with ``value`` in place."""
        return self._assign(Ellipsis, value)

    def copy_(self, source: Any) -> Tensor:
        """Overwrite the values with ``source`` (broadcast, cast to this dtype) in place."""
        return self._assign(Ellipsis, source)

    # ---------------------------------------------------------------- arithmetic operators
    def __add__(self, other: Any) -> Tensor:
        return _apply(_ar.ADD, (self, other), {})

    def __radd__(self, other: Any) -> Tensor:
        return _apply(_ar.ADD, (other, self), {})

    def __sub__(self, other: Any) -> Tensor:
        return _apply(_ar.SUBTRACT, (self, other), {})

    def __rsub__(self, other: Any) -> Tensor:
        return _apply(_ar.SUBTRACT, (other, self), {})

    def __mul__(self, other: Any) -> Tensor:
        return _apply(_ar.MULTIPLY, (self, other), {})

    def __rmul__(self, other: Any) -> Tensor:
        return _apply(_ar.MULTIPLY, (other, self), {})

    def __truediv__(self, other: Any) -> Tensor:
        return _apply(_ar.DIVIDE, (self, other), {})

    def __rtruediv__(self, other: Any) -> Tensor:
        return _apply(_ar.DIVIDE, (other, self), {})

    def __pow__(self, other: Any) -> Tensor:
        return _apply(_ar.POWER, (self, other), {})

    def __rpow__(self, other: Any) -> Tensor:
        return _apply(_ar.POWER, (other, self), {})

    def __matmul__(self, other: Any) -> Tensor:
        return _apply(_la.MATMUL, (self, other), {})

    def __rmatmul__(self, other: Any) -> Tensor:
        return _apply(_la.MATMUL, (other, self), {})

    def __neg__(self) -> Tensor:
        return _apply(_el.NEGATIVE, (self,), {})

    def __pos__(self) -> Tensor:
        return _apply(_el.POSITIVE, (self,), {})

    def __abs__(self) -> Tensor:
        return _apply(_el.ABSOLUTE, (self,), {})

    # In-place operators really write into .data (views and aliases see the change).
    def __iadd__(self, other: Any) -> Tensor:
        return self._inplace(_ar.ADD, other)

    def __isub__(self, other: Any) -> Tensor:
        return self._inplace(_ar.SUBTRACT, other)

    def __imul__(self, other: Any) -> Tensor:
        return self._inplace(_ar.MULTIPLY, other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self._inplace(_ar.DIVIDE, other)

    def __ipow__(self, other: Any) -> Tensor:
        return self._inplace(_ar.POWER, other)

    def __imatmul__(self, other: Any) -> Tensor:
        return self._inplace(_la.MATMUL, other)

    def add_(self, other: Any) -> Tensor:
        """In-place add."""
        return self._inplace(_ar.ADD, other)

    def sub_(self, other: Any) -> Tensor:
        """In-place subtract."""
        return self._inplace(_ar.SUBTRACT, other)

    def mul_(self, other: Any) -> Tensor:
        """In-place multiply."""
        return self._inplace(_ar.MULTIPLY, other)

    def div_(self, other: Any) -> Tensor:
        """In-place divide."""
        return self._inplace(_ar.DIVIDE, other)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
        """In-place clip."""
        return self._inplace(_ix.CLIP, a_min=min, a_max=max)

    def _check_inplace_allowed(self) -> builtins.bool:
        """True when the in-place op must be recorded on the graph."""
        if not _grad_state.enabled:
            return False
        if self.requires_grad and self._node is None:
            raise RuntimeError(
                "a leaf tensor that requires grad is used in an in-place operation; do the "
                "update under sadl.no_grad() (as optimizers do) or use an out-of-place op"
            )
        return self.requires_grad

    def _inplace(self, op: Any, *others: Any, **params: Any) -> Tensor:
        on_graph = self._check_inplace_allowed()
        if not on_graph and _grad_state.enabled:
            on_graph = any(isinstance(o, Tensor) and o.requires_grad for o in others)
        if not on_graph:
            datas = [o.data if isinstance(o, Tensor) else o for o in others]
            result = op.forward(self.data, *datas, **params)
            _write_into(self.data, result)
            self._version[0] += 1
            return self
        return self._rebase(op, others, params)

    def _rebase(self, op: Any, others: Sequence[Any], params: dict[str, Any]) -> Tensor:
        """Record ``self = op(self, *others)`` on the graph, then overwrite self's memory."""
        before = Tensor.__new__(Tensor)  # the value self had, kept for every backward that needs it
        before.data = self.data.copy()
        before.grad = None
        before._node = self._node
        before._version = [0]
        before.requires_grad = self.requires_grad
        if self._node is not None:
            # The node that produced self must see the value it produced, not the overwritten one.
            producer = self._node
            producer.out = before.data
            producer.counters = (*producer.counters[:-1], before._version)
            producer.versions = (*producer.versions[:-1], 0)
        # `y *= y` reads the old value twice: both operands are the snapshot.
        others = tuple(before if o is self else o for o in others)
        result = _apply(op, (before, *others), params)
        _write_into(self.data, result.data)
        self._version[0] += 1
        node = result._node
        if node is not None:
            node.out = self.data
            node.counters = (*node.counters[:-1], self._version)
            node.versions = (*node.versions[:-1], self._version[0])
        self._node = node
        self.requires_grad = node is not None
        return self

    # ---------------------------------------------------------------- indexing
    def __getitem__(self, key: Any) -> Tensor:
        return _apply(_ix.GETITEM, (self,), {"key": _index_key(key)})

    def __setitem__(self, key: Any, value: Any) -> None:
        self._assign(_index_key(key), value)

    def _assign(self, key: Any, value: Any) -> Tensor:
        on_graph = self._check_inplace_allowed()
        if not on_graph and _grad_state.enabled:
            on_graph = isinstance(value, Tensor) and value.requires_grad
        if not on_graph:
            self.data[key] = value.data if isinstance(value, Tensor) else value
            self._version[0] += 1
            return self
        return self._rebase(_ix.SETITEM, (value,), {"key": key})

    # ---------------------------------------------------------------- reductions
    def sum(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Sum over ``axis`` (all axes when None)."""
        return _apply(_red.SUM, (self,), {"axis": _axis(axis, dim, "sum"), "keepdims": keepdims})

    def mean(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Mean over ``axis``."""
        return _apply(_red.MEAN, (self,), {"axis": _axis(axis, dim, "mean"), "keepdims": keepdims})

    def prod(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Product over ``axis``."""
        return _apply(_red.PROD, (self,), {"axis": _axis(axis, dim, "prod"), "keepdims": keepdims})

    def var(
        self,
        axis: Any = None,
        ddof: builtins.int = 0,
        keepdims: builtins.bool = False,
        *,
        dim: Any = None,
    ) -> Tensor:
        """Variance over ``axis`` (``ddof=0`` as in NumPy)."""
        params = {"axis": _axis(axis, dim, "var"), "ddof": ddof, "keepdims": keepdims}
        return _apply(_red.VAR, (self,), params)

    def std(
        self,
        axis: Any = None,
        ddof: builtins.int = 0,
        keepdims: builtins.bool = False,
        *,
        dim: Any = None,
    ) -> Tensor:
        """Standard deviation over ``axis`` (``ddof=0`` as in NumPy)."""
        params = {"axis": _axis(axis, dim, "std"), "ddof": ddof, "keepdims": keepdims}
        return _apply(_red.STD, (self,), params)

    def max(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Largest values over ``axis`` (values only, as in NumPy)."""
        return _apply(_red.MAX, (self,), {"axis": _axis(axis, dim, "max"), "keepdims": keepdims})

    def min(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Smallest values over ``axis`` (values only, as in NumPy)."""
        return _apply(_red.MIN, (self,), {"axis": _axis(axis, dim, "min"), "keepdims": keepdims})

    def amax(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Largest values over ``axis``."""
        params = {"axis": _axis(axis, dim, "amax"), "keepdims": keepdims}
        return _apply(_red.AMAX, (self,), params)

    def amin(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Smallest values over ``axis``."""
        params = {"axis": _axis(axis, dim, "amin"), "keepdims": keepdims}
        return _apply(_red.AMIN, (self,), params)

    def argmax(
        self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None
    ) -> Tensor:
        """Index of the largest value over ``axis``."""
        params = {"axis": _axis(axis, dim, "argmax"), "keepdims": keepdims}
        return _apply(_nd.ARGMAX, (self,), params)

    def argmin(
        self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None
    ) -> Tensor:
        """Index of the smallest value over ``axis``."""
        params = {"axis": _axis(axis, dim, "argmin"), "keepdims": keepdims}
        return _apply(_nd.ARGMIN, (self,), params)

    def argsort(self, axis: builtins.int = -1, *, dim: Any = None) -> Tensor:
        """Indices that sort along ``axis``."""
        return _apply(_nd.ARGSORT, (self,), {"axis": _axis(axis, dim, "argsort")})

    def sort(self, axis: builtins.int = -1, *, dim: Any = None) -> Tensor:
        """Sorted values along ``axis`` (differentiable)."""
        return _apply(_ix.SORT, (self,), {"axis": _axis(axis, dim, "sort")})

    def cumsum(self, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Running sum along ``axis``."""
        return _apply(_red.CUMSUM, (self,), {"axis": _axis(axis, dim, "cumsum")})

    def cumprod(self, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Running product along ``axis``."""
        return _apply(_red.CUMPROD, (self,), {"axis": _axis(axis, dim, "cumprod")})

    def logsumexp(
        self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None
    ) -> Tensor:
        """log(sum(exp(x))) over ``axis``, stable."""
        params = {"axis": _axis(axis, dim, "logsumexp"), "keepdims": keepdims}
        return _apply(_act.LOGSUMEXP, (self,), params)

    def all(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """True where all elements over ``axis`` are truthy."""
        return _apply(_nd.ALL, (self,), {"axis": _axis(axis, dim, "all"), "keepdims": keepdims})

    def any(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """True where any element over ``axis`` is truthy."""
        return _apply(_nd.ANY, (self,), {"axis": _axis(axis, dim, "any"), "keepdims": keepdims})

    def norm(self, axis: Any = None, keepdims: builtins.bool = False, *, dim: Any = None) -> Tensor:
        """Euclidean (Frobenius) norm over ``axis``."""
        return _la.NORM.forward(self, axis=_axis(axis, dim, "norm"), keepdims=keepdims)  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- shape
    def reshape(self, *shape: Any, order: str = "C") -> Tensor:
        """Same data with a new shape: ``t.reshape(2, 3)`` or ``t.reshape((2, 3))``."""
        if len(shape) == 1 and not isinstance(shape[0], builtins.int | np.integer):
            shape = tuple(shape[0])
        return _apply(_sh.RESHAPE, (self,), {"shape": shape, "order": order})

    def view(self, *shape: Any) -> Tensor:
        """Torch's name for reshape."""
        return self.reshape(*shape)

    def flatten(self, start_dim: builtins.int = 0, end_dim: builtins.int = -1) -> Tensor:
        """Merge axes ``start_dim..end_dim`` into one (all of them by default)."""
        nd = max(self.ndim, 1)
        start, end = start_dim % nd, end_dim % nd
        shape = self.shape
        return self.reshape(*shape[:start], -1, *shape[end + 1 :])

    def ravel(self) -> Tensor:
        """Flatten to one dimension."""
        return _apply(_sh.RAVEL, (self,), {})

    def transpose(self, *axes: Any) -> Tensor:
        """Permute axes: ``t.transpose()``, ``t.transpose(1, 0, 2)`` or ``t.transpose((1, 0, 2))``.

        With exactly two axes on a tensor of higher rank it swaps them, as in torch.
        """
        if len(axes) == 1 and not isinstance(axes[0], builtins.int | np.integer):
            axes = tuple(axes[0]) if axes[0] is not None else ()
        if not axes:
            return _apply(_sh.TRANSPOSE, (self,), {})
        if len(axes) == 2 and self.ndim != 2:
            return self.swapaxes(axes[0], axes[1])
        return _apply(_sh.TRANSPOSE, (self,), {"axes": tuple(axes)})

    def permute(self, *axes: Any) -> Tensor:
        """Reorder all axes (torch's name)."""
        if len(axes) == 1 and not isinstance(axes[0], builtins.int | np.integer):
            axes = tuple(axes[0])
        return _apply(_sh.TRANSPOSE, (self,), {"axes": tuple(axes)})

    def swapaxes(self, axis1: builtins.int, axis2: builtins.int) -> Tensor:
        """Exchange two axes."""
        return _apply(_sh.SWAPAXES, (self,), {"axis1": axis1, "axis2": axis2})

    def moveaxis(self, source: Any, destination: Any) -> Tensor:
        """Move axes to new positions."""
        return _apply(_sh.MOVEAXIS, (self,), {"source": source, "destination": destination})

    def squeeze(self, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Drop length-1 axes."""
        return _apply(_sh.SQUEEZE, (self,), {"axis": _axis(axis, dim, "squeeze")})

    def expand_dims(self, axis: Any) -> Tensor:
        """Insert a length-1 axis at ``axis``."""
        return _apply(_sh.EXPAND_DIMS, (self,), {"axis": axis})

    def unsqueeze(self, dim: builtins.int) -> Tensor:
        """Insert a length-1 axis at ``dim`` (torch's name)."""
        return _apply(_sh.EXPAND_DIMS, (self,), {"axis": dim})

    def broadcast_to(self, *shape: Any) -> Tensor:
        """Broadcast to ``shape``."""
        if len(shape) == 1 and not isinstance(shape[0], builtins.int | np.integer):
            shape = tuple(shape[0])
        return _apply(_sh.BROADCAST_TO, (self,), {"shape": shape})

    def expand(self, *shape: Any) -> Tensor:
        """Broadcast to ``shape``; -1 keeps an axis (torch's name)."""
        if len(shape) == 1 and not isinstance(shape[0], builtins.int | np.integer):
            shape = tuple(shape[0])
        lead = len(shape) - self.ndim
        full = tuple(self.shape[i - lead] if n == -1 else n for i, n in enumerate(shape))
        return self.broadcast_to(full)

    def flip(self, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Reverse the order of elements along ``axis``."""
        return _apply(_sh.FLIP, (self,), {"axis": _axis(axis, dim, "flip")})

    def roll(self, shift: Any, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Shift elements cyclically."""
        return _apply(_sh.ROLL, (self,), {"shift": shift, "axis": _axis(axis, dim, "roll")})

    def repeat(self, repeats: Any, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Repeat elements (NumPy semantics: ``np.repeat``)."""
        params = {"repeats": repeats, "axis": _axis(axis, dim, "repeat")}
        return _apply(_sh.REPEAT, (self,), params)

    def tile(self, reps: Any) -> Tensor:
        """Repeat the whole tensor ``reps`` times along each axis."""
        return _apply(_sh.TILE, (self,), {"reps": reps})

    def tril(self, k: builtins.int = 0) -> Tensor:
        """Lower triangle of the last two axes."""
        return _apply(_sh.TRIL, (self,), {"k": k})

    def triu(self, k: builtins.int = 0) -> Tensor:
        """Upper triangle of the last two axes."""
        return _apply(_sh.TRIU, (self,), {"k": k})

    def diagonal(
        self, offset: builtins.int = 0, axis1: builtins.int = 0, axis2: builtins.int = 1
    ) -> Tensor:
        """The diagonal of two axes."""
        params = {"offset": offset, "axis1": axis1, "axis2": axis2}
        return _apply(_sh.DIAGONAL, (self,), params)

    def trace(
        self, offset: builtins.int = 0, axis1: builtins.int = 0, axis2: builtins.int = 1
    ) -> Tensor:
        """Sum of the diagonal."""
        return self.diagonal(offset, axis1, axis2).sum(axis=-1)

    def take(self, indices: Any, axis: Any = None) -> Tensor:
        """Elements at ``indices`` along ``axis``."""
        return _apply(_ix.TAKE, (self,), {"indices": _plain(indices), "axis": axis})

    def take_along_axis(self, indices: Any, axis: builtins.int) -> Tensor:
        """Values picked along ``axis`` by an index array of the same rank."""
        params = {"indices": _plain(indices), "axis": axis}
        return _apply(_ix.TAKE_ALONG_AXIS, (self,), params)

    def gather(self, dim: builtins.int, index: Any) -> Tensor:
        """Torch's gather: values picked along ``dim`` by ``index``."""
        return self.take_along_axis(index, dim)

    # ---------------------------------------------------------------- elementwise
    def exp(self) -> Tensor:
        """Elementwise e**x."""
        return _apply(_el.EXP, (self,), {})

    def exp2(self) -> Tensor:
        """Elementwise 2**x."""
        return _apply(_el.EXP2, (self,), {})

    def expm1(self) -> Tensor:
        """Elementwise e**x - 1, accurate near 0."""
        return _apply(_el.EXPM1, (self,), {})

    def log(self) -> Tensor:
        """Elementwise natural logarithm."""
        return _apply(_el.LOG, (self,), {})

    def log2(self) -> Tensor:
        """Elementwise base-2 logarithm."""
        return _apply(_el.LOG2, (self,), {})

    def log10(self) -> Tensor:
        """Elementwise base-10 logarithm."""
        return _apply(_el.LOG10, (self,), {})

    def log1p(self) -> Tensor:
        """Elementwise log(1 + x), accurate near 0."""
        return _apply(_el.LOG1P, (self,), {})

    def sqrt(self) -> Tensor:
        """Elementwise square root."""
        return _apply(_el.SQRT, (self,), {})

    def rsqrt(self) -> Tensor:
        """Elementwise 1 / sqrt(x)."""
        return _apply(_el.RECIPROCAL, (_apply(_el.SQRT, (self,), {}),), {})

    def square(self) -> Tensor:
        """Elementwise x**2."""
        return _apply(_el.SQUARE, (self,), {})

    def reciprocal(self) -> Tensor:
        """Elementwise 1 / x."""
        return _apply(_el.RECIPROCAL, (self,), {})

    def abs(self) -> Tensor:
        """Elementwise absolute value."""
        return _apply(_el.ABSOLUTE, (self,), {})

    def absolute(self) -> Tensor:
        """Elementwise absolute value (NumPy's name)."""
        return _apply(_el.ABSOLUTE, (self,), {})

    def negative(self) -> Tensor:
        """Elementwise -x."""
        return _apply(_el.NEGATIVE, (self,), {})

    def sign(self) -> Tensor:
        """Elementwise sign (no gradient)."""
        return _apply(_nd.SIGN, (self,), {})

    def floor(self) -> Tensor:
        """Elementwise floor (no gradient)."""
        return _apply(_nd.FLOOR, (self,), {})

    def ceil(self) -> Tensor:
        """Elementwise ceiling (no gradient)."""
        return _apply(_nd.CEIL, (self,), {})

    def round(self, decimals: builtins.int = 0) -> Tensor:
        """Round half to even (no gradient)."""
        return _apply(_nd.ROUND, (self,), {"decimals": decimals})

    def __round__(self, ndigits: builtins.int | None = None) -> Any:
        if ndigits is None and self.data.size == 1:
            return round(self.item())
        return self.round(ndigits or 0)

    def sin(self) -> Tensor:
        """Elementwise sine."""
        return _apply(_el.SIN, (self,), {})

    def cos(self) -> Tensor:
        """Elementwise cosine."""
        return _apply(_el.COS, (self,), {})

    def tan(self) -> Tensor:
        """Elementwise tangent."""
        return _apply(_el.TAN, (self,), {})

    def arcsin(self) -> Tensor:
        """Elementwise inverse sine."""
        return _apply(_el.ARCSIN, (self,), {})

    def arccos(self) -> Tensor:
        """Elementwise inverse cosine."""
        return _apply(_el.ARCCOS, (self,), {})

    def arctan(self) -> Tensor:
        """Elementwise inverse tangent."""
        return _apply(_el.ARCTAN, (self,), {})

    def sinh(self) -> Tensor:
        """Elementwise hyperbolic sine."""
        return _apply(_el.SINH, (self,), {})

    def cosh(self) -> Tensor:
        """Elementwise hyperbolic cosine."""
        return _apply(_el.COSH, (self,), {})

    def tanh(self) -> Tensor:
        """Elementwise hyperbolic tangent."""
        return _apply(_el.TANH, (self,), {})

    def arctanh(self) -> Tensor:
        """Elementwise inverse hyperbolic tangent."""
        return _apply(_el.ARCTANH, (self,), {})

    def sigmoid(self) -> Tensor:
        """Elementwise logistic sigmoid, stable for any input."""
        return _apply(_act.SIGMOID, (self,), {})

    def relu(self) -> Tensor:
        """Elementwise max(x, 0)."""
        return _apply(_act.RELU, (self,), {})

    def softplus(self) -> Tensor:
        """Elementwise log(1 + e**x), stable."""
        return _apply(_act.SOFTPLUS, (self,), {})

    def softmax(self, axis: builtins.int = -1, *, dim: Any = None) -> Tensor:
        """Softmax along ``axis`` (default: last), stable for any input."""
        return _apply(_act.SOFTMAX, (self,), {"axis": _axis(axis, dim, "softmax")})

    def log_softmax(self, axis: builtins.int = -1, *, dim: Any = None) -> Tensor:
        """Log-softmax along ``axis`` (default: last), stable for any input."""
        return _apply(_act.LOG_SOFTMAX, (self,), {"axis": _axis(axis, dim, "log_softmax")})

    def clip(self, a_min: Any = None, a_max: Any = None) -> Tensor:
        """Limit values to ``[a_min, a_max]``."""
        return _apply(_ix.CLIP, (self,), {"a_min": _plain(a_min), "a_max": _plain(a_max)})

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        """Limit values to ``[min, max]`` (torch's name)."""
        return self.clip(min, max)

    def pow(self, exponent: Any) -> Tensor:
        """Elementwise power."""
        return _apply(_ar.POWER, (self, exponent), {})

    def maximum(self, other: Any) -> Tensor:
        """Elementwise maximum."""
        return _apply(_ar.MAXIMUM, (self, other), {})

    def minimum(self, other: Any) -> Tensor:
        """Elementwise minimum."""
        return _apply(_ar.MINIMUM, (self, other), {})

    def matmul(self, other: Any) -> Tensor:
        """Matrix product (NumPy's matmul rules)."""
        return _apply(_la.MATMUL, (self, other), {})

    def dot(self, other: Any) -> Tensor:
        """np.dot semantics."""
        return _la.DOT.forward(self, other)  # type: ignore[no-any-return]

    def isfinite(self) -> Tensor:
        """Elementwise finiteness test (no gradient)."""
        return _apply(_nd.ISFINITE, (self,), {})

    def isnan(self) -> Tensor:
        """Elementwise NaN test (no gradient)."""
        return _apply(_nd.ISNAN, (self,), {})


class Parameter(Tensor):
    """A Tensor that is a trainable weight: always requires grad, floating dtypes only.

    ``Parameter(data)`` keeps NumPy float arrays' dtype and turns Python floats into float32.
    """

    __slots__ = ()

    def __init__(
        self,
        data: Any,
        dtype: Any = None,
        device: str | Device | None = None,
        requires_grad: builtins.bool = True,
    ) -> None:
        arr = _as_array(data, dtype, device)
        if arr.dtype.kind not in "fc":
            raise TypeError(
                f"Parameter needs a floating dtype, got {arr.dtype}; pass dtype=np.float32 "
                "or float data"
            )
        super().__init__(arr, requires_grad=True)

    def requires_grad_(self, requires_grad: builtins.bool = True) -> Tensor:
        """Parameters always require grad; freezing is done by leaving them out of optimizers."""
        if not requires_grad:
            raise RuntimeError(
                "a Parameter always requires grad; to freeze it, detach it or leave it out of "
                "the optimizer"
            )
        return super().requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("Tensor") :]


def _rebuild(cls: type, data: Any, requires_grad: builtins.bool) -> Tensor:
    return cls(data, requires_grad=requires_grad) if cls is not Parameter else cls(data)


def _plain(value: Any) -> Any:
    """Tensors used as indices or bounds are constants: take their arrays."""
    return value.data if isinstance(value, Tensor) else value


def _index_key(key: Any) -> Any:
    if isinstance(key, Tensor):
        return key.data
    if isinstance(key, tuple):
        return tuple(k.data if isinstance(k, Tensor) else k for k in key)
    if isinstance(key, list):
        return np.asarray([k.data if isinstance(k, Tensor) else k for k in key])
    return key


def _write_into(target: Any, value: Any) -> None:
    xp = array_module(target)
    xp.copyto(target, value, casting="same_kind")


# The engine imports Tensor, so it is imported last.
from sadl.engine import apply as _apply  # noqa: E402
