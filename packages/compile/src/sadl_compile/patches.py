"""What tracing changes in the process while it runs, and puts back afterwards.

* ``Tensor.data`` and ``Tensor.grad`` become properties, so the tracer sees the first read of a
  tensor that existed before the call (and swaps in a traced view) and every assignment.
* ``Module.training`` becomes a property, so the flags the function reads become guards.
* ``Optimizer.step`` asks the tracer, which records one optimizer node.
* NumPy's array constructors (``np.zeros``, ``np.asarray`` ...), which take no array to dispatch
  on, are wrapped so a buffer made inside the function is part of the graph.
* sadl's array layer and generators see :data:`TRACER`, installed with
  ``sadl.backends.install_tracer``: it says what a traced device array is
  (``traced.TracedDeviceArray``, whose ``array_module`` is a recording module), and sadl reports
  to it the draws of its generators (the CPU's and each device's), the calls of functions declared
  ``sadl.backends.value_dependent`` (the erf family: each is recorded whole, the branches it
  takes inside are taken again on every replay) and the copies between the host and a device
  (a copy is a call of the graph).
* sadl's generators report being made (one seeded from an int inside the call is made anew on
  every replay; ``sadl.manual_seed`` inside the call is replayed as itself), and
  ``sadl.random.set_rng_state`` refuses a state that no draw of the call had (``streams``).

Everything is installed for the duration of one trace, process-wide but acting only in the
tracing thread (others see the original behaviour); traces run one at a time.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from sadl import Function, Optimizer, Tensor, backends
from sadl import random as sadl_random

from sadl_compile import rules
from sadl_compile.capture import DATA, GRAD, Capture
from sadl_compile.device import module_of
from sadl_compile.traced import ACTIVE, TracedDeviceArray, is_traced, plain
from sadl_compile.where import caller, source_line

__all__ = ["CONSTRUCTORS", "TRACER", "tracing"]

#: NumPy functions that make arrays without an array argument to dispatch on.
CONSTRUCTORS = (
    "array asarray asanyarray ascontiguousarray asfortranarray empty zeros ones full arange "
    "linspace logspace geomspace eye identity tri frombuffer fromiter"
).split()

_LOCK = threading.RLock()
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
_TRAINING_DEFAULT = Function.__dict__["training"]
_STEP = Optimizer.step
_MANUAL_SEED = sadl_random.manual_seed.__code__
_SET_RNG_STATE = sadl_random.set_rng_state


def _capture() -> Capture | None:
    tracer = ACTIVE.tracer
    return tracer if isinstance(tracer, Capture) else None


def _get_data(tensor: Tensor) -> Any:
    data = DATA.__get__(tensor, Tensor)
    capture = _capture()
    if capture is None or is_traced(data):
        return data
    return capture.read_data(tensor, data)


def _set_data(tensor: Tensor, value: Any) -> None:
    capture = _capture()
    if capture is None:
        DATA.__set__(tensor, value)
    else:
        capture.write_data(tensor, value)


def _get_grad(tensor: Tensor) -> Any:
    grad = GRAD.__get__(tensor, Tensor)
    capture = _capture()
    if capture is None:
        return grad
    return capture.read_grad(tensor, grad)


def _set_grad(tensor: Tensor, value: Any) -> None:
    capture = _capture()
    if capture is None:
        GRAD.__set__(tensor, value)
    else:
        capture.write_grad(tensor, value)


def _get_training(module: Any) -> bool:
    flag = module.__dict__.get("training", _TRAINING_DEFAULT)
    capture = _capture()
    if capture is not None:
        capture.read_training(module, flag)
    return bool(flag)


def _set_training(module: Any, flag: bool) -> None:
    module.__dict__["training"] = flag
    capture = _capture()
    if capture is not None:
        capture.write_training(module, flag)


def _step(self: Any, closure: Any = None) -> Any:
    capture = _capture()
    if capture is None:
        return _STEP(self, closure)
    return capture.optimizer_step(self, closure, _STEP)


def _observe_draw(generator: Any, method: str, args: Any, kwargs: Any) -> Any:
    capture = _capture()
    if capture is None:
        on_device = sadl_random.observed_device_generator(generator)
        if on_device is not None:
            return getattr(on_device[0], method)(*args, **kwargs)
        return getattr(np.random.Generator, method)(generator, *args, **kwargs)
    default = generator is sadl_random.default_generator()
    return capture.draw(generator, default, method, args, kwargs)


def _made_generator(self: Any, bit_generator: Any) -> None:
    np.random.Generator.__init__(self, bit_generator)
    capture = _capture()
    if capture is not None:
        if sys._getframe(1).f_code is _MANUAL_SEED:  # the new default generator
            capture.reseeded(self)
        else:
            capture.made_generator(self)


def _set_rng_state(state: dict[str, Any]) -> None:
    capture = _capture()
    if capture is not None:
        capture.streams.setting(state, source_line(caller()))
    _SET_RNG_STATE(state)


def _observe_value_dependent(fn: Any, args: Any, kwargs: Any) -> Any:
    capture = _capture()
    if capture is None or capture.busy:  # not tracing, or inside a call recorded whole
        return fn(*args, **kwargs)
    rules.VALUE_DEPENDENT.add(fn)
    return capture.call(fn, fn, args, kwargs, getattr(fn, "__name__", "fn").lstrip("_"))


def _observe_transfer(copy: Any, data: Any, args: tuple[Any, ...]) -> Any:
    capture = _capture()
    if capture is None or capture.busy:  # not tracing, or inside a recorded call
        return copy(data, *args)
    label = getattr(copy, "__name__", "copy").lstrip("_")
    return capture.call(copy, copy, (data, *args), {}, label)


def _recording(name: str, original: Any) -> Any:
    def constructor(*args: Any, **kwargs: Any) -> Any:
        capture = _capture()
        # NumPy's own Python code calls these too (np.broadcast_to calls np.array): those
        # calls are part of whatever NumPy function is running, not of the traced program.
        if (
            capture is None
            or capture.busy
            or sys._getframe(1).f_code.co_filename.startswith(_NUMPY_DIR)
        ):
            return original(*args, **kwargs)
        return capture.call(original, original, args, kwargs, name)

    constructor.__name__ = name
    constructor.__doc__ = original.__doc__
    return constructor


class _Tracer:
    """What sadl's array layer and generators tell a trace (``sadl.backends.Tracer``)."""

    array_kind = TracedDeviceArray

    def array_of(self, x: Any) -> Any:
        """The device array behind a traced one."""
        return plain(x)

    def module_of(self, x: Any) -> Any:
        """The array module of a traced device array (recording while its trace runs)."""
        return module_of(x)

    def on_transfer(self, copy: Any, data: Any, args: tuple[Any, ...]) -> Any:
        """A copy between the host and a device: a call of the graph."""
        return _observe_transfer(copy, data, args)

    def on_value_dependent(self, fn: Any, args: Any, kwargs: Any) -> Any:
        """A call of a value-dependent function: recorded whole."""
        return _observe_value_dependent(fn, args, kwargs)

    def on_draw(self, generator: Any, method: str, args: Any, kwargs: Any) -> Any:
        """A draw of one of sadl's generators: drawn anew on every replay."""
        return _observe_draw(generator, method, args, kwargs)


#: The tracer sadl-compile installs while it traces (``sadl.backends.install_tracer``).
TRACER = _Tracer()


@contextlib.contextmanager
def tracing(capture: Capture) -> Iterator[None]:
    """Install the patches and make ``capture`` the tracer of this thread, for one trace."""
    with _LOCK:
        saved_numpy = {name: getattr(np, name) for name in CONSTRUCTORS}
        try:
            Tensor.data = property(_get_data, _set_data)  # type: ignore[assignment,misc]
            Tensor.grad = property(_get_grad, _set_grad)  # type: ignore[assignment,misc]
            Function.training = property(_get_training, _set_training)  # type: ignore[assignment]
            Optimizer.step = _step  # type: ignore[method-assign]
            for name, original in saved_numpy.items():
                setattr(np, name, _recording(name, original))
            sadl_random.Generator.__init__ = _made_generator  # type: ignore[method-assign]
            sadl_random.set_rng_state = _set_rng_state
            backends.install_tracer(TRACER)
            ACTIVE.tracer = capture
            yield
        finally:
            ACTIVE.tracer = None
            backends.install_tracer(None)
            sadl_random.set_rng_state = _SET_RNG_STATE
            if "__init__" in vars(sadl_random.Generator):
                del sadl_random.Generator.__init__
            for name, original in saved_numpy.items():
                setattr(np, name, original)
            Optimizer.step = _STEP  # type: ignore[method-assign]
            Function.training = _TRAINING_DEFAULT
            Tensor.grad = GRAD  # type: ignore[misc]
            Tensor.data = DATA  # type: ignore[misc]
