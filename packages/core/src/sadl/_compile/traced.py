"""``TracedArray``: an ndarray whose every NumPy call the tracer sees, and whose values it guards.

While a function is traced, each array it touches is replaced by a ``TracedArray`` view of the
same memory. NumPy hands any ufunc or function call involving one to ``__array_ufunc__`` /
``__array_function__`` (its dispatch protocols), and the ndarray methods that do not go through
them (``reshape``, ``astype``, ``__getitem__``, ``sum`` ...) are overridden here, so the tracer
records each call (with its real result: tracing runs the function for real). Converting one to a
Python value (``bool(a)``, ``a.item()``, ``float(a)``) asks the tracer, which refuses when the value
depends on the inputs (the replay could not reproduce the Python that used it).

Outside a trace (an array that outlived its trace) a ``TracedArray`` behaves like a plain ndarray.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sadl._compile.tracer import Tracer

__all__ = ["ACTIVE", "TracedArray", "plain", "unwrap_plain"]


class _Active(threading.local):
    """The tracer recording in this thread (None when not tracing)."""

    tracer: Tracer | None = None


ACTIVE = _Active()
_ndarray = np.ndarray


def plain(x: TracedArray) -> np.ndarray[Any, Any]:
    """The plain ndarray behind a ``TracedArray`` (same memory)."""
    p = x._p
    return p if p is not None else _ndarray.view(x, _ndarray)


def unwrap_plain(tree: Any) -> Any:
    """``tree`` with every ``TracedArray`` replaced by its plain array (for untraced calls)."""
    if type(tree) is TracedArray:
        return plain(tree)
    if isinstance(tree, tuple):
        return tuple(unwrap_plain(x) for x in tree)
    if isinstance(tree, list):
        return [unwrap_plain(x) for x in tree]
    if isinstance(tree, dict):
        return {k: unwrap_plain(v) for k, v in tree.items()}
    return tree


def _tracer_for(x: TracedArray) -> Tracer | None:
    """The active tracer if ``x`` belongs to it (an array of another trace is a plain array)."""
    tracer = ACTIVE.tracer
    if tracer is None or x._v is None or not tracer.owns(x._v):
        return None
    return tracer


class TracedArray(np.ndarray):  # type: ignore[type-arg]
    """A view of an array whose NumPy calls are recorded by the active tracer."""

    _v: Any  #: the IR value this array is (None for arrays NumPy made behind the tracer's back)
    _p: Any  #: the plain ndarray of the same memory

    def __array_finalize__(self, obj: Any) -> None:
        self._v = None
        self._p = None

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        tracer = ACTIVE.tracer
        if tracer is None:
            return getattr(ufunc, method)(*unwrap_plain(inputs), **unwrap_plain(kwargs))
        return tracer.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        tracer = ACTIVE.tracer
        if tracer is None:
            return func(*unwrap_plain(args), **unwrap_plain(kwargs))
        return tracer.function(func, args, kwargs)

    # ------------------------------------------------------------ attributes with a meaning
    @property  # type: ignore[misc]
    def flags(self) -> Any:
        """The flags of the plain array (whether it owns its memory, as in an eager run)."""
        return plain(self).flags

    @property  # type: ignore[misc]
    def base(self) -> Any:
        """The traced array owning this memory, as ``ndarray.base`` would name it."""
        tracer = _tracer_for(self)
        p = plain(self).base
        if tracer is None or p is None:
            return p
        return tracer.traced_base(self, p)

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
    def __bool__(self) -> bool:
        return bool(_host_read(self, "bool", lambda p: bool(p)))

    def __int__(self) -> int:
        return int(_host_read(self, "int", int))

    def __float__(self) -> float:
        return float(_host_read(self, "float", float))

    def __complex__(self) -> complex:
        return complex(_host_read(self, "complex", complex))

    def __index__(self) -> int:
        return int(_host_read(self, "index", operator.index))

    def item(self, *args: Any) -> Any:  # type: ignore[override]
        """The element as a Python number (refused when it depends on the inputs)."""
        return _host_read(self, "item", lambda p: p.item(*args))

    def tolist(self) -> Any:  # type: ignore[override]
        """The elements as Python lists (refused when they depend on the inputs)."""
        return _host_read(self, "tolist", lambda p: p.tolist())

    def tobytes(self, order: Any = "C") -> bytes:
        """The raw bytes (refused when they depend on the inputs)."""
        return bytes(_host_read(self, "tobytes", lambda p: p.tobytes(order)))

    def __contains__(self, value: Any) -> bool:
        return bool(np.any(self == value))

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __deepcopy__(self, memo: Any) -> Any:
        return _call_method(self, _ndarray.copy, (), {}, "copy")

    def __copy__(self) -> Any:
        return _call_method(self, _ndarray.copy, (), {}, "copy")

    def __repr__(self) -> str:
        return repr(plain(self))

    def __str__(self) -> str:
        return str(plain(self))


def _host_read(x: TracedArray, what: str, convert: Callable[[Any], Any]) -> Any:
    tracer = _tracer_for(x)
    if tracer is None:
        return convert(plain(x))
    return tracer.host_read(x, what, convert)


def _call_method(self: Any, func: Any, args: tuple[Any, ...], kwargs: Any, label: str) -> Any:
    tracer = _tracer_for(self)
    if tracer is None:
        return func(plain(self), *unwrap_plain(args), **unwrap_plain(kwargs))
    return tracer.call(func, func, (self, *args), kwargs, label)


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
