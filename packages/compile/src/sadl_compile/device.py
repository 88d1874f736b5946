"""Recording the calls a device computation makes (CuPy, the strict stand-in, any backend).

A traced device array (``traced.TracedDeviceArray``) brings three kinds of calls to the tracer:

* NumPy ufuncs and functions called on it (``np.exp(a)``, ``np.sum(a)``, ``a + b``), through
  NumPy's dispatch protocols. What is recorded is the backend's function of the same name
  (``cupy.exp``, ``cupy.sum``): exactly what the backend's own ``__array_ufunc__`` /
  ``__array_function__`` calls in an eager run, without the dispatch on every replay.
* Its methods (``a.reshape``, ``a.sum``, ``a[i]``): the device class's methods.
* The backend's module, reached the one way device code reaches it, ``array_module(a)``: while
  tracing that is a :class:`RecordingModule`, whose functions and ufuncs record their calls
  (``xp.zeros_like``, ``xp.empty``, ``xp.add.at``, ``xp.linalg.norm``).

Each node's ``func`` is what replay calls; its ``key`` is the NumPy function it stands for
(``np.add``, ``np.ndarray.sum``, ``np.empty``), so the passes know a device call as well as a
host one: which calls write into their arguments, which accept ``out=``, which allocate.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from sadl import backends

from sadl_compile import rules
from sadl_compile.traced import ACTIVE, TracedDeviceArray, plain, unwrap_plain

if TYPE_CHECKING:
    from sadl_compile.tracer import Tracer

__all__ = ["RecordingModule", "counterpart", "device_function", "device_ufunc", "module_of_call"]


class RecordingModule:
    """A backend's array module whose functions record their calls into ``tracer``.

    ``twin`` is the NumPy module it mirrors (``numpy``, ``numpy.linalg`` ...): a name that is a
    submodule there is a recording submodule here, a NumPy ufunc a :class:`RecordingUfunc`, a
    function a recording function; classes, dtypes and constants are the module's own.
    """

    def __init__(self, module: Any, tracer: Tracer, twin: ModuleType = np) -> None:
        self._module = module
        self._tracer = tracer
        self._twin = twin
        self._names: dict[str, Any] = {}
        self.__name__ = getattr(module, "__name__", repr(module))

    def __getattr__(self, name: str) -> Any:
        found = self._names.get(name)
        if found is None:
            found = self._names[name] = self._member(name)
        return found

    def _member(self, name: str) -> Any:
        value = _original(getattr(self._module, name))  # AttributeError as the module raises
        twin = _original(getattr(self._twin, name, None))
        if isinstance(twin, ModuleType):
            return RecordingModule(value, self._tracer, twin)
        if isinstance(value, type) or not callable(value):
            return value
        if isinstance(twin, np.ufunc):
            return RecordingUfunc(value, twin, self._tracer)
        key = twin if callable(twin) else value
        return _recording(self._tracer, value, key, name)

    def __repr__(self) -> str:
        return f"<module {self.__name__}, recording>"


class RecordingUfunc:
    """A backend's ufunc whose calls and methods (``at``, ``reduce`` ...) record their calls."""

    def __init__(self, ufunc: Any, twin: np.ufunc, tracer: Tracer) -> None:
        self._ufunc = ufunc
        self._twin = twin
        self._tracer = tracer
        self.__name__ = twin.__name__
        self.nin, self.nout = twin.nin, twin.nout

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._record("__call__", self._ufunc, args, kwargs)

    def _method(self, method: str, args: Any, kwargs: Any) -> Any:
        return self._record(method, getattr(self._ufunc, method), args, kwargs)

    def at(self, *args: Any, **kwargs: Any) -> Any:
        """``ufunc.at`` (writes into its first argument), recorded."""
        return self._method("at", args, kwargs)

    def reduce(self, *args: Any, **kwargs: Any) -> Any:
        """``ufunc.reduce``, recorded."""
        return self._method("reduce", args, kwargs)

    def accumulate(self, *args: Any, **kwargs: Any) -> Any:
        """``ufunc.accumulate``, recorded."""
        return self._method("accumulate", args, kwargs)

    def reduceat(self, *args: Any, **kwargs: Any) -> Any:
        """``ufunc.reduceat``, recorded."""
        return self._method("reduceat", args, kwargs)

    def outer(self, *args: Any, **kwargs: Any) -> Any:
        """``ufunc.outer``, recorded."""
        return self._method("outer", args, kwargs)

    def _record(self, method: str, func: Any, args: Any, kwargs: Any) -> Any:
        tracer = self._tracer
        if ACTIVE.tracer is not tracer:  # the trace is over: the ufunc itself
            return func(*unwrap_plain(args), **unwrap_plain(kwargs))
        label = self.__name__ if method == "__call__" else f"{self.__name__}.{method}"
        return tracer.call(func, (self._twin, method), args, kwargs, label)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ufunc, name)


def _original(found: Any) -> Any:
    """NumPy's own function behind one of ``hooks``' wrappers (``np.zeros`` while tracing)."""
    if getattr(found, "__module__", None) == "sadl_compile.hooks":
        return found.__wrapped__
    return found


def _recording(tracer: Tracer, func: Any, key: Any, label: str) -> Callable[..., Any]:
    """``func`` (a function of a backend's module), recording its calls into ``tracer``."""

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        if ACTIVE.tracer is not tracer or key in rules.METADATA:
            return func(*unwrap_plain(args), **unwrap_plain(kwargs))
        return tracer.call(func, key, args, kwargs, label)

    return call


def module_of(traced: TracedDeviceArray) -> Any:
    """``array_module`` of a traced device array: the recording module while its trace runs."""
    module = backends.array_module(plain(traced))
    tracer = ACTIVE.tracer
    if tracer is None or traced._v is None or not tracer.owns(traced._v):
        return module
    return tracer.recording_module(module)


def module_of_call(trees: Any) -> Any:
    """The array module of the first device array among ``trees`` (nested tuples, lists, dicts)."""
    stack = [trees]
    while stack:
        item = stack.pop()
        if type(item) is TracedDeviceArray:
            return backends.array_module(plain(item))
        if isinstance(item, tuple | list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif not isinstance(item, np.ndarray) and backends.is_array(item):
            return backends.array_module(item)
    return None


def counterpart(module: Any, func: Any) -> Any:
    """The function of ``module`` (a backend's array module) standing for NumPy's ``func``,
    found as CuPy's ``__array_function__`` finds it: the same submodule path and name. None when
    there is none (the call then goes through NumPy's dispatch, as in an eager run).
    """
    path = (getattr(func, "__module__", None) or "numpy").split(".")
    if path[0] != "numpy":
        return None
    target = module
    for part in path[1:]:
        target = getattr(target, part, None)
        if target is None:
            return None
    found = getattr(target, getattr(func, "__name__", ""), None)
    return None if found is None or found is func or not callable(found) else found


def device_ufunc(tracer: Tracer, ufunc: np.ufunc, method: str, inputs: Any, kwargs: Any) -> Any:
    """A NumPy ufunc called on a traced device array: recorded as the backend's ufunc."""
    if rules.has_tensor(inputs) or rules.has_tensor(kwargs.get("out", ())):
        return NotImplemented
    out = kwargs.get("out")
    if isinstance(out, tuple) and len(out) == 1:  # NumPy's protocol passes a tuple; CuPy one
        kwargs = {**kwargs, "out": out[0]}
    module = module_of_call((inputs, kwargs))
    own = getattr(module, ufunc.__name__, None) if module is not None else None
    if own is not None and method != "__call__":
        own = getattr(own, method, None)
    func = own if own is not None else ufunc if method == "__call__" else getattr(ufunc, method)
    label = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
    return tracer.call(func, (ufunc, method), inputs, kwargs, label)


def device_function(tracer: Tracer, func: Any, args: Any, kwargs: Any) -> Any:
    """A NumPy function called on a traced device array: recorded as the backend's function."""
    if rules.has_tensor(args) or rules.has_tensor(tuple(kwargs.values())):
        return NotImplemented
    if func in rules.METADATA:
        return func(*unwrap_plain(args), **unwrap_plain(kwargs))
    module = module_of_call((args, kwargs))
    own = counterpart(module, func) if module is not None else None
    label = getattr(func, "__name__", repr(func))
    return tracer.call(own if own is not None else func, func, args, kwargs, label)
