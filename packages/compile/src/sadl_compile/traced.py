"""Traced arrays: arrays whose every call the tracer sees, and whose values it guards.

``TracedArray`` stands for a NumPy array, ``TracedDeviceArray`` for an array of a device backend
(CuPy, the strict stand-in, any registered one).

While a function is traced, each array it touches is replaced by a ``TracedArray`` view of the
same memory. NumPy hands any ufunc or function call involving one to ``__array_ufunc__`` /
``__array_function__`` (its dispatch protocols), and the ndarray methods that do not go through
them (``reshape``, ``astype``, ``__getitem__``, ``sum`` ...) are overridden here, so the tracer
records each call (with its real result: tracing runs the function for real). Converting one to a
Python value (``bool(a)``, ``a.item()``, ``float(a)``) asks the tracer, which refuses when the value
depends on the inputs (the replay could not reproduce the Python that used it).

A device array's class belongs to its library, so it cannot be subclassed the same way: a
``TracedDeviceArray`` wraps it instead. It has the device array's attributes; NumPy's protocols
bring ufuncs and functions to it, its operators are those ufuncs (``NDArrayOperatorsMixin``), its
methods are recorded as calls of the device class's own methods, and ``array_module`` of one
(``sadl.backends``) is a recording module (``sadl_compile.device``).

Outside a trace (an array that outlived its trace) a traced array behaves like its plain array.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

if TYPE_CHECKING:
    from sadl_compile.tracer import Tracer

__all__ = ["ACTIVE", "TracedArray", "TracedDeviceArray", "is_traced", "plain", "unwrap_plain"]


class _Active(threading.local):
    """The tracer recording in this thread (None when not tracing)."""

    tracer: Tracer | None = None


ACTIVE = _Active()
_ndarray = np.ndarray


def plain(x: Any) -> Any:
    """The plain array behind a traced array (same memory)."""
    p = x._p
    return p if p is not None else _ndarray.view(x, _ndarray)


def is_traced(x: Any) -> bool:
    """Whether ``x`` is a traced array (of the host or of a device)."""
    kind = type(x)
    return kind is TracedArray or kind is TracedDeviceArray


def unwrap_plain(tree: Any) -> Any:
    """``tree`` with every traced array replaced by its plain array (for untraced calls)."""
    kind = type(tree)
    if kind is TracedArray or kind is TracedDeviceArray:
        return plain(tree)
    if isinstance(tree, tuple):
        return tuple(unwrap_plain(x) for x in tree)
    if isinstance(tree, list):
        return [unwrap_plain(x) for x in tree]
    if isinstance(tree, dict):
        return {k: unwrap_plain(v) for k, v in tree.items()}
    return tree


def _tracer_for(x: Any) -> Tracer | None:
    """The active tracer if ``x`` belongs to it (an array of another trace is a plain array)."""
    tracer = ACTIVE.tracer
    if tracer is None or x._v is None or not tracer.owns(x._v):
        return None
    return tracer


class _Traced:
    """What both traced arrays share: NumPy's protocols bring every ufunc and function call to
    the active tracer, which records it through its method named by ``_record_ufunc`` /
    ``_record_function`` (as a NumPy call, or as the device backend's); outside a trace the call
    runs on the plain arrays. ``base`` names the traced array owning the memory, and reading a
    value into Python (``bool``, ``item`` ...) asks the tracer, which refuses it when the value
    depends on the inputs.
    """

    __slots__ = ()
    _record_ufunc: str
    _record_function: str

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        tracer = ACTIVE.tracer
        if tracer is None:
            return getattr(ufunc, method)(*unwrap_plain(inputs), **unwrap_plain(kwargs))
        return getattr(tracer, self._record_ufunc)(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        tracer = ACTIVE.tracer
        if tracer is None:
            return func(*unwrap_plain(args), **unwrap_plain(kwargs))
        return getattr(tracer, self._record_function)(func, args, kwargs)

    @property
    def base(self) -> Any:
        """The traced array owning this memory, as the plain array's ``base`` names it."""
        tracer = _tracer_for(self)
        p = plain(self).base
        if tracer is None or p is None:
            return p
        return tracer.traced_base(self, p)

    # ------------------------------------------------------------ values read into Python
    def __bool__(self) -> bool:
        return bool(_host_read(self, "bool", lambda p: bool(p)))

    def __int__(self) -> int:
        return int(_host_read(self, "int", int))

    def __float__(self) -> float:
        return float(_host_read(self, "float", float))

    def __complex__(self) -> complex:
        return complex(_host_read(self, "complex", complex))

    def item(self, *args: Any) -> Any:
        """The element as a Python number (refused when it depends on the inputs)."""
        return _host_read(self, "item", lambda p: p.item(*args))

    def tolist(self) -> Any:
        """The elements as Python lists (refused when they depend on the inputs)."""
        return _host_read(self, "tolist", lambda p: p.tolist())

    def tobytes(self, order: Any = "C") -> bytes:
        """The raw bytes (refused when they depend on the inputs)."""
        return bytes(_host_read(self, "tobytes", lambda p: p.tobytes(order)))

    def __iter__(self) -> Iterator[Any]:
        array: Any = self  # each class brings its own len and indexing
        for i in range(len(array)):
            yield array[i]


class TracedArray(_Traced, np.ndarray):  # type: ignore[type-arg]
    """A view of an array whose NumPy calls are recorded by the active tracer."""

    _record_ufunc = "ufunc"
    _record_function = "function"
    _v: Any  #: the IR value this array is (None for arrays NumPy made behind the tracer's back)
    _p: Any  #: the plain ndarray of the same memory

    def __array_finalize__(self, obj: Any) -> None:
        self._v = None
        self._p = None

    # ------------------------------------------------------------ attributes with a meaning
    @property  # type: ignore[misc]
    def flags(self) -> Any:
        """The flags of the plain array (whether it owns its memory, as in an eager run)."""
        return plain(self).flags

    @property  # type: ignore[misc]
    def T(self) -> Any:
        """The transpose (recorded)."""
        return np.transpose(self)

    @property  # type: ignore[misc]
    def mT(self) -> Any:
        """The last two axes swapped (recorded)."""
        return np.swapaxes(self, -1, -2)

    @property  # type: ignore[misc]
    def real(self) -> Any:
        """The real part (recorded)."""
        return _call_method(self, _REAL, (), {}, "real")

    @property  # type: ignore[misc]
    def imag(self) -> Any:
        """The imaginary part (recorded)."""
        return _call_method(self, _IMAG, (), {}, "imag")

    @property  # type: ignore[misc]
    def flat(self) -> Any:
        """Not supported while tracing: iterate over ``ravel()`` instead."""
        raise TypeError("ndarray.flat is not supported in a compiled function; use .ravel()")

    # ------------------------------------------------------------ values read into Python
    def __index__(self) -> int:
        return int(_host_read(self, "index", operator.index))

    def __contains__(self, value: Any) -> bool:
        return bool(np.any(self == value))

    def __deepcopy__(self, memo: Any) -> Any:
        return _call_method(self, _ndarray.copy, (), {}, "copy")

    def __copy__(self) -> Any:
        return _call_method(self, _ndarray.copy, (), {}, "copy")

    def __repr__(self) -> str:
        return repr(plain(self))

    def __str__(self) -> str:
        return str(plain(self))


def _host_read(x: Any, what: str, convert: Callable[[Any], Any]) -> Any:
    tracer = _tracer_for(x)
    if tracer is None:
        return convert(plain(x))
    return tracer.host_read(x, what, convert)


def _call_method(
    self: Any, func: Any, args: tuple[Any, ...], kwargs: Any, label: str, key: Any = None
) -> Any:
    """``func(self, *args, **kwargs)``, recorded (``key``: what the passes know it as)."""
    tracer = _tracer_for(self)
    if tracer is None:
        return func(plain(self), *unwrap_plain(args), **unwrap_plain(kwargs))
    return tracer.call(func, func if key is None else key, (self, *args), kwargs, label)


def _real(a: Any) -> Any:
    return a.real


def _imag(a: Any) -> Any:
    return a.imag


_REAL, _IMAG = _real, _imag

#: ndarray methods that neither dispatch through NumPy's protocols nor read values into Python:
#: each is recorded as a call of the unbound method (``np.ndarray.sum(a, axis=1)``).
RECORDED_METHODS = (
    "all any argmax argmin argpartition argsort astype byteswap choose clip compress conj "
    "conjugate copy cumprod cumsum diagonal dot fill flatten getfield max mean min nonzero "
    "partition prod put ravel repeat reshape resize round searchsorted setfield sort squeeze std "
    "sum swapaxes take trace transpose var view __getitem__ __setitem__"
).split()

#: Methods that write into the array they are called on.
WRITING_METHODS = frozenset(
    getattr(_ndarray, name)
    for name in ("fill", "put", "resize", "setfield", "sort", "partition", "__setitem__")
)


def _recorded(name: str) -> Callable[..., Any]:
    func = getattr(_ndarray, name)

    def method(self: TracedArray, *args: Any, **kwargs: Any) -> Any:
        return _call_method(self, func, args, kwargs, name)

    method.__name__ = name
    method.__doc__ = f"``ndarray.{name}``, recorded by the tracer."
    return method


for _name in RECORDED_METHODS:
    setattr(TracedArray, _name, _recorded(_name))


def _said(name: str, convert: Callable[[Any], Any] | None = None) -> Any:
    """A read-only property: what the wrapped device array says its ``name`` is (converted to
    a plain Python value by ``convert`` when given).
    """

    def get(self: TracedDeviceArray) -> Any:
        value = getattr(self._p, name)
        return value if convert is None else convert(value)

    return property(get, doc=f"The device array's ``{name}``.")


class TracedDeviceArray(_Traced, NDArrayOperatorsMixin):
    """A device array whose calls are recorded by the active tracer (its stand-in while tracing)."""

    __slots__ = ("__weakref__", "_p", "_v")
    _record_ufunc = "device_ufunc"
    _record_function = "device_function"

    def __init__(self, array: Any, value: Any) -> None:
        self._p = array  #: the device array
        self._v = value  #: the IR value it is

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self._p.__array__(dtype)  # refused as the device array refuses it (CuPy)

    # ------------------------------------------------------------ what the device array says
    shape = _said("shape", tuple)
    dtype = _said("dtype")
    ndim = _said("ndim", int)
    size = _said("size", int)
    itemsize = _said("itemsize", int)
    nbytes = _said("nbytes", int)
    strides = _said("strides", tuple)
    flags = _said("flags")
    device = _said("device")

    @property
    def T(self) -> Any:
        """The transpose (recorded)."""
        return _call_method(self, _transposed, (), {}, "T")

    @property
    def mT(self) -> Any:
        """The last two axes swapped (recorded)."""
        return _call_method(self, _swapped, (), {}, "mT")

    @property
    def real(self) -> Any:
        """The real part (recorded)."""
        return _call_method(self, _REAL, (), {}, "real")

    @property
    def imag(self) -> Any:
        """The imaginary part (recorded)."""
        return _call_method(self, _IMAG, (), {}, "imag")

    def __getattr__(self, name: str) -> Any:
        """Any other method of the device array, recorded; other attributes as they are."""
        found = getattr(self._p, name)
        if not callable(found):
            return found
        method = getattr(type(self._p), name)
        key = getattr(_ndarray, name, method)  # what the passes know it as (np.ndarray.sum)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            return _call_method(self, method, args, kwargs, name, key)

        recorded.__name__ = name
        return recorded

    def __getitem__(self, key: Any) -> Any:
        return _call_method(self, type(self._p).__getitem__, (key,), {}, "__getitem__", _GETITEM)

    def __setitem__(self, key: Any, value: Any) -> None:
        method = type(self._p).__setitem__
        _call_method(self, method, (key, value), {}, "__setitem__", _SETITEM)

    def __len__(self) -> int:
        return len(self._p)

    def __copy__(self) -> Any:
        return self.copy()

    def __deepcopy__(self, memo: Any) -> Any:
        return self.copy()

    def __repr__(self) -> str:
        return repr(self._p)

    def __str__(self) -> str:
        return str(self._p)


def _transposed(a: Any) -> Any:
    return a.T


def _swapped(a: Any) -> Any:
    return a.mT


_GETITEM, _SETITEM = _ndarray.__getitem__, _ndarray.__setitem__
