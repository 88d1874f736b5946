"""The Tensor's method vocabulary, grouped by family; mechanical methods come from small factories.

Every method is a call into an op record, so ``t.exp()``, ``np.exp(t)`` and ``sadl.ops.exp(t)``
are one code path. The families are mixins of ``sadl._tensor.Tensor`` (as tinygrad groups its
method families, and as NumPy's ``NDArrayOperatorsMixin`` writes each dunder once through a
factory). Signatures follow NumPy (``axis=``, ``keepdims=``) and accept torch's ``dim=``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from sadl._engine import apply as _apply
from sadl._engine import is_tensor
from sadl._ops import activations as _act
from sadl._ops import arithmetic as _ar
from sadl._ops import elementwise as _el
from sadl._ops import erf as _erf
from sadl._ops import indexing as _ix
from sadl._ops import layout as _lay
from sadl._ops import linalg as _la
from sadl._ops import nondifferentiable as _nd
from sadl._ops import reductions as _red
from sadl._ops import selection as _sel
from sadl._ops import shapes as _sh
from sadl._ops import take as _tk
from sadl._records import OpDef
from sadl.backends import Device, array_module

if TYPE_CHECKING:
    from sadl._tensor import Tensor

Int = builtins.int  # the class's own int and bool (casts) shadow the builtins in its body
Bool = builtins.bool

__all__ = [
    "ArithmeticMethods",
    "TensorLike",
    "ElementwiseMethods",
    "ReductionMethods",
    "ShapeMethods",
]


class TensorLike(Protocol):
    """What the mixins need from the class they are mixed into (``sadl._tensor.Tensor``)."""

    data: Any

    @property
    def shape(self) -> tuple[Int, ...]: ...
    @property
    def ndim(self) -> Int: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    def item(self) -> Any: ...
    def numpy(self) -> np.ndarray[Any, Any]: ...
    def __getitem__(self, key: Any) -> Tensor: ...
    def _inplace(self, op: OpDef, *others: Any, **params: Any) -> Tensor: ...
    def reshape(self, *shape: Any, order: str = "C") -> Tensor: ...
    def swapaxes(self, axis1: Int, axis2: Int) -> Tensor: ...
    def permute(self, *axes: Any) -> Tensor: ...
    def broadcast_to(self, *shape: Any) -> Tensor: ...
    def diagonal(self, offset: Int = 0, axis1: Int = 0, axis2: Int = 1) -> Tensor: ...
    def clip(self, a_min: Any = None, a_max: Any = None) -> Tensor: ...
    def round(self, decimals: Int = 0) -> Tensor: ...
    def astype(self, dtype: Any, copy: Bool = True) -> Tensor: ...
    def to(self, device: str | Device | None = None, dtype: Any = None) -> Tensor: ...


def _axis(axis: Any, dim: Any, name: str) -> Any:
    """``axis=`` (NumPy) or its synonym ``dim=`` (torch), not both."""
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{name}: give axis= or dim=, not both")
        return dim
    return axis


def _required_axis(axis: Any, dim: Any, name: str) -> Any:
    axis = _axis(axis, dim, name)
    if axis is None:
        raise TypeError(f"{name}: give the axis to scan along (axis= or dim=)")
    return axis


def _plain(value: Any) -> Any:
    """Tensors used as indices are constants (integer or boolean): take their arrays."""
    return value.data if is_tensor(value) else value


def _shape_args(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the shape ``(2, 3)``."""
    if len(shape) == 1 and not isinstance(shape[0], builtins.int | np.integer):
        return tuple(shape[0]) if shape[0] is not None else ()
    return shape


# -------------------------------------------------------------------------------- factories
def _unary(op: OpDef, doc: str) -> Callable[[TensorLike], Tensor]:
    def method(self: TensorLike) -> Tensor:
        return _apply(op, (self,), {})

    method.__doc__ = doc
    return method


def _binary(op: OpDef, doc: str | None = None) -> Callable[[TensorLike, Any], Tensor]:
    def method(self: TensorLike, other: Any) -> Tensor:
        return _apply(op, (self, other), {})

    method.__doc__ = doc
    return method


def _reflected(op: OpDef) -> Callable[[TensorLike, Any], Tensor]:
    def method(self: TensorLike, other: Any) -> Tensor:
        return _apply(op, (other, self), {})

    return method


def _in_place(op: OpDef, doc: str | None = None) -> Callable[[TensorLike, Any], Tensor]:
    def method(self: TensorLike, other: Any) -> Tensor:
        return self._inplace(op, other)

    method.__doc__ = doc
    return method


def _reduction(op: OpDef, doc: str, ddof: Bool = False) -> Callable[..., Tensor]:
    """A reduction method taking NumPy's and torch's spellings (see ``_reduce_params``)."""

    def method(self: TensorLike, axis: Any = None, *args: Any, **kw: Any) -> Tensor:
        params = _reduce_params(op.name, axis, args, kw, ddof)
        return _apply(op, (self,), params)

    method.__name__, method.__qualname__, method.__doc__ = op.name, f"Tensor.{op.name}", doc
    return method


_TORCH_NAMES = {"dim": "axis", "keepdim": "keepdims", "correction": "ddof"}


def _reduce_params(
    name: str, axis: Any, args: tuple[Any, ...], kw: dict[str, Any], ddof: Bool
) -> dict[str, Any]:
    """The op's params from NumPy's ``(axis, [ddof,] keepdims)`` or torch's ``dim``, ``keepdim``
    (and ``correction``, ``unbiased``), each spelling once.
    """
    names = ("ddof", "keepdims") if ddof else ("keepdims",)
    if len(args) > len(names):
        raise TypeError(f"Tensor.{name}() takes at most {len(names) + 1} positional arguments")
    params: dict[str, Any] = {"axis": axis, "keepdims": False, **dict(zip(names, args))}
    given = set(names[: len(args)]) | ({"axis"} if axis is not None else set())
    if ddof and "unbiased" in kw:
        kw["correction"] = builtins.int(builtins.bool(kw.pop("unbiased")))
    for key, value in kw.items():
        if key == "dim" and value is None:
            continue  # torch's default: all axes
        numpy_name = _TORCH_NAMES.get(key, key)
        if numpy_name not in ("axis", *names):
            raise TypeError(f"Tensor.{name}() got an unexpected keyword argument {key!r}")
        if numpy_name in given:
            raise TypeError(f"Tensor.{name}(): give {numpy_name}= or {key}=, not both")
        given.add(numpy_name)
        params[numpy_name] = value
    params["keepdims"] = builtins.bool(params["keepdims"])
    return params


def _along(op: OpDef, doc: str, default: Any) -> Callable[..., Tensor]:
    """A method taking one axis (``softmax``, ``cumsum`` ...)."""

    def method(self: TensorLike, axis: Any = default, *, dim: Any = None) -> Tensor:
        return _apply(op, (self,), {"axis": axis if dim is None else dim})

    method.__name__, method.__qualname__, method.__doc__ = op.name, f"Tensor.{op.name}", doc
    return method


def _extreme(op: OpDef, arg: OpDef, doc: str) -> Callable[..., Any]:
    """``max``/``min``: values over ``axis``; with ``dim=``, torch's ``(values, indices)``."""

    def method(self: TensorLike, axis: Any = None, *args: Any, **kw: Any) -> Any:
        torch = kw.get("dim") is not None
        params = _reduce_params(op.name, axis, args, kw, False)
        if not torch:
            return _apply(op, (self,), params)
        dim = params["axis"]
        at = _apply(arg, (self,), {"axis": dim, "keepdims": True})
        values = _apply(_tk.TAKE_ALONG_AXIS, (self,), {"indices": at.data, "axis": dim})
        if not params["keepdims"]:
            values, at = values.squeeze(dim), at.squeeze(dim)
        return _sel.ValuesIndices(values, at)

    method.__name__, method.__qualname__, method.__doc__ = op.name, f"Tensor.{op.name}", doc
    return method


def _cast(dtype: Any, doc: str) -> Callable[[TensorLike], Tensor]:
    def method(self: TensorLike) -> Tensor:
        return self.astype(dtype)

    method.__doc__ = doc
    return method


# -------------------------------------------------------------------------------- families
def _operator(op: OpDef) -> tuple[Callable[[TensorLike, Any], Tensor], ...]:
    """``x op y``, ``y op x`` and ``x op= y`` (written into ``x``'s memory) for one op."""
    return _binary(op), _reflected(op), _in_place(op)


def _operand(self: TensorLike, other: Any) -> Any:
    """A list or tuple as an array where ``self`` lives (``list @ x`` as NumPy reads it)."""
    return array_module(self.data).asarray(other) if isinstance(other, list | tuple) else other


def _divmod(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """``(a // b, a % b)``, each op applied by the engine."""
    return _apply(_el.FLOOR_DIVIDE, (a, b), {}), _apply(_ar.REMAINDER, (a, b), {})


class ArithmeticMethods:
    """Every Python operator, with its reflected and in-place forms, and the binary methods.

    Each operator is one op applied by the engine, as the methods are: no NumPy dispatch and no
    plugin is involved (``x < y`` costs what ``x * y`` does).
    """

    __slots__ = ()

    __add__, __radd__, __iadd__ = _operator(_ar.ADD)
    __sub__, __rsub__, __isub__ = _operator(_ar.SUBTRACT)
    __mul__, __rmul__, __imul__ = _operator(_ar.MULTIPLY)
    __truediv__, __rtruediv__, __itruediv__ = _operator(_ar.DIVIDE)
    __floordiv__, __rfloordiv__, __ifloordiv__ = _operator(_el.FLOOR_DIVIDE)
    __mod__, __rmod__, __imod__ = _operator(_ar.REMAINDER)
    __pow__, __rpow__, __ipow__ = _operator(_ar.POWER)
    __and__, __rand__, __iand__ = _operator(_nd.BITWISE_AND)
    __or__, __ror__, __ior__ = _operator(_nd.BITWISE_OR)
    __xor__, __rxor__, __ixor__ = _operator(_nd.BITWISE_XOR)
    __lshift__, __rlshift__, __ilshift__ = _operator(_nd.LEFT_SHIFT)
    __rshift__, __rrshift__, __irshift__ = _operator(_nd.RIGHT_SHIFT)
    # Comparisons give boolean tensors (no gradient); ``3 < x`` is Python's ``x > 3``.
    __lt__ = _binary(_nd.LESS)
    __le__ = _binary(_nd.LESS_EQUAL)
    __gt__ = _binary(_nd.GREATER)
    __ge__ = _binary(_nd.GREATER_EQUAL)
    __eq__ = _binary(_nd.EQUAL)  # type: ignore[assignment]
    __ne__ = _binary(_nd.NOT_EQUAL)  # type: ignore[assignment]
    __neg__ = _unary(_el.NEGATIVE, "-x")
    __pos__ = _unary(_el.POSITIVE, "+x")
    __abs__ = _unary(_el.ABSOLUTE, "abs(x)")
    __invert__ = _unary(_nd.INVERT, "~x")

    def __matmul__(self: TensorLike, other: Any) -> Tensor:
        """Matrix product (NumPy's matmul rules)."""
        return _apply(_la.MATMUL, (self, _operand(self, other)), {})

    def __rmatmul__(self: TensorLike, other: Any) -> Tensor:
        return _apply(_la.MATMUL, (_operand(self, other), self), {})

    def __imatmul__(self: TensorLike, other: Any) -> Tensor:  # type: ignore[misc]
        return self._inplace(_la.MATMUL, _operand(self, other))

    def __divmod__(self: TensorLike, other: Any) -> tuple[Tensor, Tensor]:
        return _divmod(self, other)

    def __rdivmod__(self: TensorLike, other: Any) -> tuple[Tensor, Tensor]:
        return _divmod(other, self)

    add_ = _in_place(_ar.ADD, "In-place add.")
    sub_ = _in_place(_ar.SUBTRACT, "In-place subtract.")
    mul_ = _in_place(_ar.MULTIPLY, "In-place multiply.")
    div_ = _in_place(_ar.DIVIDE, "In-place divide.")

    pow = _binary(_ar.POWER, "Elementwise power.")
    maximum = _binary(_ar.MAXIMUM, "Elementwise maximum.")
    minimum = _binary(_ar.MINIMUM, "Elementwise minimum.")

    matmul = __matmul__

    floor_divide = _binary(_el.FLOOR_DIVIDE, "Elementwise floor(self / other) (zero gradient).")

    def div(self: TensorLike, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """``self / other``; ``rounding_mode="trunc"`` or ``"floor"`` rounds (zero gradient)."""
        return _apply(_ar.DIV, (self, other), {"rounding_mode": rounding_mode})

    divide = div

    def dot(self: TensorLike, other: Any) -> Tensor:
        """``np.dot`` semantics."""
        return _la.DOT.forward(self, other)  # type: ignore[no-any-return]

    def clamp_(self: TensorLike, min: Any = None, max: Any = None) -> Tensor:
        """In-place clip to ``[min, max]``."""
        return self._inplace(_el.CLIP, min, max)


class ElementwiseMethods:
    """One value in, one value out: the math functions and activations."""

    __slots__ = ()

    exp = _unary(_el.EXP, "Elementwise e**x.")
    exp2 = _unary(_el.EXP2, "Elementwise 2**x.")
    expm1 = _unary(_el.EXPM1, "Elementwise e**x - 1, accurate near 0.")
    log = _unary(_el.LOG, "Elementwise natural logarithm.")
    log2 = _unary(_el.LOG2, "Elementwise base-2 logarithm.")
    log10 = _unary(_el.LOG10, "Elementwise base-10 logarithm.")
    log1p = _unary(_el.LOG1P, "Elementwise log(1 + x), accurate near 0.")
    sqrt = _unary(_el.SQRT, "Elementwise square root.")
    square = _unary(_el.SQUARE, "Elementwise x**2.")
    reciprocal = _unary(_el.RECIPROCAL, "Elementwise 1 / x.")
    abs = _unary(_el.ABSOLUTE, "Elementwise absolute value.")
    absolute = _unary(_el.ABSOLUTE, "Elementwise absolute value (NumPy's name).")
    negative = _unary(_el.NEGATIVE, "Elementwise -x.")
    sin = _unary(_el.SIN, "Elementwise sine.")
    cos = _unary(_el.COS, "Elementwise cosine.")
    tan = _unary(_el.TAN, "Elementwise tangent.")
    arcsin = _unary(_el.ARCSIN, "Elementwise inverse sine.")
    arccos = _unary(_el.ARCCOS, "Elementwise inverse cosine.")
    arctan = _unary(_el.ARCTAN, "Elementwise inverse tangent.")
    sinh = _unary(_el.SINH, "Elementwise hyperbolic sine.")
    cosh = _unary(_el.COSH, "Elementwise hyperbolic cosine.")
    tanh = _unary(_el.TANH, "Elementwise hyperbolic tangent.")
    arctanh = _unary(_el.ARCTANH, "Elementwise inverse hyperbolic tangent.")
    sigmoid = _unary(_act.SIGMOID, "Elementwise logistic sigmoid, stable for any input.")
    relu = _unary(_act.RELU, "Elementwise max(x, 0).")
    softplus = _unary(_act.SOFTPLUS, "Elementwise log(1 + e**x), stable.")
    sign = _unary(_el.SIGN, "Elementwise sign (zero gradient, as in torch).")
    floor = _unary(_el.FLOOR, "Elementwise floor (zero gradient).")
    ceil = _unary(_el.CEIL, "Elementwise ceiling (zero gradient).")
    trunc = _unary(_el.TRUNC, "Elementwise rounding toward zero (zero gradient).")
    erf = _unary(_erf.ERF, "Elementwise error function.")
    erfc = _unary(_erf.ERFC, "Elementwise 1 - erf(x), accurate where it is tiny.")
    erfinv = _unary(_erf.ERFINV, "Elementwise inverse of erf on [-1, 1].")
    isfinite = _unary(_nd.ISFINITE, "Elementwise finiteness test (no gradient).")
    isnan = _unary(_nd.ISNAN, "Elementwise NaN test (no gradient).")
    softmax = _along(_act.SOFTMAX, "Softmax along ``axis`` (default: last), stable.", -1)
    log_softmax = _along(_act.LOG_SOFTMAX, "Log-softmax along ``axis`` (default: last).", -1)

    def rsqrt(self: TensorLike) -> Tensor:
        """Elementwise 1 / sqrt(x)."""
        return _apply(_el.RECIPROCAL, (_apply(_el.SQRT, (self,), {}),), {})

    def round(self: TensorLike, decimals: Int = 0) -> Tensor:
        """Round half to even (zero gradient)."""
        return _apply(_el.ROUND, (self,), {"decimals": decimals})

    def __round__(self: TensorLike, ndigits: Int | None = None) -> Any:
        if ndigits is None and self.data.size == 1:
            return round(self.item())
        return self.round(ndigits or 0)

    def clip(self: TensorLike, a_min: Any = None, a_max: Any = None) -> Tensor:
        """Limit values to ``[a_min, a_max]``; tensor bounds get their gradient."""
        return _apply(_el.CLIP, (self, a_min, a_max), {})

    def clamp(self: TensorLike, min: Any = None, max: Any = None) -> Tensor:
        """Limit values to ``[min, max]`` (torch's name)."""
        return self.clip(min, max)


class ReductionMethods:
    """Many values in, fewer out: reductions, arg-reductions, sorts and scans."""

    __slots__ = ()

    sum = _reduction(_red.SUM, "Sum over ``axis`` (all axes when None).")
    mean = _reduction(_red.MEAN, "Mean over ``axis``.")
    max = _extreme(_red.MAX, _nd.ARGMAX, "Largest values over ``axis``; ``dim=``: with indices.")
    min = _extreme(_red.MIN, _nd.ARGMIN, "Smallest values over ``axis``; ``dim=``: with indices.")
    amax = _reduction(_red.AMAX, "Largest values over ``axis``.")
    amin = _reduction(_red.AMIN, "Smallest values over ``axis``.")
    argmax = _reduction(_nd.ARGMAX, "Index of the largest value over ``axis``.")
    argmin = _reduction(_nd.ARGMIN, "Index of the smallest value over ``axis``.")
    all = _reduction(_nd.ALL, "True where all elements over ``axis`` are truthy.")
    any = _reduction(_nd.ANY, "True where any element over ``axis`` is truthy.")
    logsumexp = _reduction(_act.LOGSUMEXP, "log(sum(exp(x))) over ``axis``, stable.")
    prod = _reduction(_red.PROD, "Product over ``axis``.")
    count_nonzero = _reduction(_nd.COUNT_NONZERO, "Number of nonzero elements over ``axis``.")
    var = _reduction(_red.VAR, "Variance over ``axis`` (``ddof=0`` as in NumPy).", ddof=True)
    std = _reduction(_red.STD, "Standard deviation (``ddof=0`` as in NumPy).", ddof=True)
    cumsum = _along(_red.CUMSUM, "Running sum along ``axis``.", None)
    cumprod = _along(_red.CUMPROD, "Running product along ``axis``.", None)

    def sort(self: TensorLike, axis: Any = -1, descending: Bool = False, *, dim: Any = None) -> Any:
        """Sorted values along ``axis``, largest first if ``descending``; with torch's ``dim=``,
        torch's ``(values, indices)``.
        """
        params = {"axis": axis if dim is None else dim, "descending": descending}
        values = _apply(_sel.SORT, (self,), params)
        if dim is None:
            return values
        indices = _apply(_nd.ARGSORT, (self,), {**params, "kind": "stable"})
        return _sel.ValuesIndices(values, indices)

    def argsort(
        self: TensorLike, axis: Any = -1, descending: Bool = False, *, dim: Any = None
    ) -> Tensor:
        """Indices that sort along ``axis`` (stable; largest first if ``descending``)."""
        params = {"axis": axis if dim is None else dim, "descending": descending}
        return _apply(_nd.ARGSORT, (self,), params)

    def topk(
        self: TensorLike,
        k: Int,
        axis: Int = -1,
        largest: Bool = True,
        sorted: Bool = True,
        *,
        dim: Any = None,
    ) -> Any:
        """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) values."""
        axis = axis if dim is None else dim
        return _sel.TOPK(self, k, axis=axis, largest=largest, sorted=sorted)

    def cummax(self: TensorLike, axis: Any = None, *, dim: Any = None) -> Any:
        """``(values, indices)`` of the running maximum along ``axis`` (torch's cummax)."""
        return _sel.CUMMAX(self, axis=_required_axis(axis, dim, "cummax"))

    def cummin(self: TensorLike, axis: Any = None, *, dim: Any = None) -> Any:
        """``(values, indices)`` of the running minimum along ``axis`` (torch's cummin)."""
        return _sel.CUMMIN(self, axis=_required_axis(axis, dim, "cummin"))

    norm = _reduction(_la.NORM, "Euclidean (Frobenius) norm over ``axis``.")


class ShapeMethods:
    """Rearranging, selecting and repeating elements: the gradient undoes the rearrangement."""

    __slots__ = ()

    ravel = _unary(_sh.RAVEL, "Flatten to one dimension.")
    copy = _unary(_sh.COPY, "A copy that owns its memory (differentiable).")
    clone = _unary(_sh.COPY, "A copy that owns its memory (torch's name).")

    @property
    def T(self: TensorLike) -> Tensor:
        """The transpose (all axes reversed)."""
        return _apply(_sh.TRANSPOSE, (self,), {})

    @property
    def mT(self: TensorLike) -> Tensor:
        """The last two axes swapped (a batch of transposed matrices)."""
        return _apply(_sh.SWAPAXES, (self,), {"axis1": -1, "axis2": -2})

    def __getitem__(self: TensorLike, key: Any) -> Tensor:
        return _apply(_ix.GETITEM, (self,), {"key": _index_key(key)})

    def reshape(self: TensorLike, *shape: Any, order: str = "C") -> Tensor:
        """Same data with a new shape: ``t.reshape(2, 3)`` or ``t.reshape((2, 3))``.

        >>> import sadl
        >>> sadl.arange(6).reshape(2, 3).shape
        (2, 3)
        """
        return _apply(_sh.RESHAPE, (self,), {"shape": _shape_args(shape), "order": order})

    def flatten(self: TensorLike, start_dim: Int = 0, end_dim: Int = -1) -> Tensor:
        """Merge axes ``start_dim..end_dim`` into one (all of them by default)."""
        nd = max(self.ndim, 1)
        start, end = start_dim % nd, end_dim % nd
        return self.reshape(*self.shape[:start], -1, *self.shape[end + 1 :])

    def transpose(self: TensorLike, *axes: Any) -> Tensor:
        """Permute axes: ``t.transpose()``, ``t.transpose(1, 0, 2)`` or ``t.transpose((1, 0, 2))``.

        With exactly two axes on a tensor of higher rank it swaps them, as in torch.
        """
        axes = _shape_args(axes)
        if not axes:
            return _apply(_sh.TRANSPOSE, (self,), {})
        if len(axes) == 2 and self.ndim != 2:
            return self.swapaxes(axes[0], axes[1])
        return self.permute(*axes)

    def permute(self: TensorLike, *axes: Any) -> Tensor:
        """Reorder all axes (torch's name); negative axes count from the end."""
        nd = self.ndim
        normalized = tuple(int(a) % nd if nd else int(a) for a in _shape_args(axes))
        return _apply(_sh.TRANSPOSE, (self,), {"axes": normalized})

    def swapaxes(self: TensorLike, axis1: Int, axis2: Int) -> Tensor:
        """Exchange two axes."""
        return _apply(_sh.SWAPAXES, (self,), {"axis1": axis1, "axis2": axis2})

    def moveaxis(self: TensorLike, source: Any, destination: Any) -> Tensor:
        """Move axes to new positions."""
        return _apply(_sh.MOVEAXIS, (self,), {"source": source, "destination": destination})

    def squeeze(self: TensorLike, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Drop length-1 axes: all of them, or those of ``axis`` (others stay, as in torch)."""
        axis = _axis(axis, dim, "squeeze")
        if axis is not None:
            axes = (axis,) if isinstance(axis, builtins.int | np.integer) else tuple(axis)
            ndim = max(self.ndim, 1)
            for a in axes:
                if not -ndim <= a < ndim:
                    raise np.exceptions.AxisError(builtins.int(a), ndim, "squeeze")
            axis = tuple(a for a in axes if self.ndim and self.shape[a] == 1)
        return _apply(_sh.SQUEEZE, (self,), {"axis": axis})

    def expand_dims(self: TensorLike, axis: Any) -> Tensor:
        """Insert a length-1 axis at ``axis``."""
        return _apply(_sh.EXPAND_DIMS, (self,), {"axis": axis})

    def unsqueeze(self: TensorLike, dim: Int) -> Tensor:
        """Insert a length-1 axis at ``dim`` (torch's name)."""
        return _apply(_sh.EXPAND_DIMS, (self,), {"axis": dim})

    def broadcast_to(self: TensorLike, *shape: Any) -> Tensor:
        """Broadcast to ``shape``."""
        return _apply(_sh.BROADCAST_TO, (self,), {"shape": _shape_args(shape)})

    def expand(self: TensorLike, *shape: Any) -> Tensor:
        """Broadcast to ``shape``; -1 keeps an axis (torch's name)."""
        shape = _shape_args(shape)
        lead = len(shape) - self.ndim
        full = tuple(self.shape[i - lead] if n == -1 else n for i, n in enumerate(shape))
        return self.broadcast_to(full)

    def flip(self: TensorLike, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Reverse the order of elements along ``axis``."""
        return _apply(_sh.FLIP, (self,), {"axis": _axis(axis, dim, "flip")})

    def roll(self: TensorLike, shift: Any, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Shift elements cyclically."""
        return _apply(_lay.ROLL, (self,), {"shift": shift, "axis": _axis(axis, dim, "roll")})

    def repeat(self: TensorLike, repeats: Any, axis: Any = None, *, dim: Any = None) -> Tensor:
        """Repeat elements (NumPy semantics: ``np.repeat``)."""
        params = {"repeats": repeats, "axis": _axis(axis, dim, "repeat")}
        return _apply(_lay.REPEAT, (self,), params)

    def tile(self: TensorLike, reps: Any) -> Tensor:
        """Repeat the whole tensor ``reps`` times along each axis."""
        return _apply(_lay.TILE, (self,), {"reps": reps})

    def tril(self: TensorLike, k: Int = 0) -> Tensor:
        """Lower triangle of the last two axes."""
        return _apply(_lay.TRIL, (self,), {"k": k})

    def triu(self: TensorLike, k: Int = 0) -> Tensor:
        """Upper triangle of the last two axes."""
        return _apply(_lay.TRIU, (self,), {"k": k})

    def diagonal(self: TensorLike, offset: Int = 0, axis1: Int = 0, axis2: Int = 1) -> Tensor:
        """The diagonal of two axes."""
        params = {"offset": offset, "axis1": axis1, "axis2": axis2}
        return _apply(_lay.DIAGONAL, (self,), params)

    def trace(self: TensorLike, offset: Int = 0, axis1: Int = 0, axis2: Int = 1) -> Tensor:
        """Sum of the diagonal."""
        return self.diagonal(offset, axis1, axis2).sum(axis=-1)

    def take(self: TensorLike, indices: Any, axis: Any = None) -> Tensor:
        """Elements at ``indices`` along ``axis`` (of the flattened tensor when None)."""
        return _tk.TAKE(self, indices=indices, axis=axis)  # type: ignore[no-any-return]

    def take_along_axis(self: TensorLike, indices: Any, axis: Int) -> Tensor:
        """Values picked along ``axis`` by an index array of the same rank."""
        return _tk.TAKE_ALONG_AXIS(self, indices=indices, axis=axis)  # type: ignore[no-any-return]

    def gather(self: TensorLike, dim: Int, index: Any) -> Tensor:
        """Torch's gather: ``out[i][j] = self[index[i][j]][j]`` for ``dim=0``."""
        return _tk.GATHER(self, dim, _plain(index))  # type: ignore[no-any-return]

    def nonzero(self: TensorLike, as_tuple: Bool = True) -> Any:
        """Indices of nonzero elements: one array per axis (NumPy), or rows (``as_tuple=False``)."""
        return _sel.NONZERO(self) if as_tuple else _apply(_sel.ARGWHERE, (self,), {})

    def argwhere(self: TensorLike) -> Tensor:
        """Indices of nonzero elements, one row each: shape ``(count, ndim)``."""
        return _apply(_sel.ARGWHERE, (self,), {})


def _index_key(key: Any) -> Any:
    """An indexing key with Tensors replaced by their arrays (indices are constants)."""
    if isinstance(key, tuple):
        return tuple(_plain(k) for k in key)
    if isinstance(key, list):
        return np.asarray([_plain(k) for k in key])
    return _plain(key)
