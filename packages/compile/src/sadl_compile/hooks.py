"""How a trace hears what the traced function does: sadl's tracer protocol; NumPy's constructors.

Nothing of sadl or of a plugin is replaced while tracing. :data:`TRACER` is installed in the
tracing thread with ``sadl.backends.install_tracer`` (its protocol: ``sadl.backends.Tracer``);
sadl then tells it, in that thread only:

* every read and write of a Tensor's ``data`` and ``grad``: the first read of a tensor that
  existed before the call swaps in a traced view, and writes are effects;
* every read and write of a Module's ``training``: the flags the function reads become guards;
* ``optimizer.step()``, which records one optimizer node;
* what a traced device array is (``traced.TracedDeviceArray``, whose ``array_module`` is a
  recording module), the draws of sadl's generators (the CPU's and each device's), the calls
  of functions declared ``sadl.backends.value_dependent`` (the erf family: each is recorded
  whole, the branches it takes inside are taken again on every replay) and the copies between
  the host and a device (a copy is a call of the graph);
* the generators made (one seeded from an int inside the call is made anew on every replay;
  ``sadl.manual_seed`` inside the call is replayed as itself), and the calls of
  ``sadl.random.get_rng_state`` and ``set_rng_state`` (a state set is refused unless a draw of
  the call had it or it was taken inside the call and moves nothing, ``streams``).

What op code allocates goes through ``sadl.backends.array_module``, which in the tracing thread
asks the tracer's ``module_of`` for host data too: the recording NumPy it hands out makes each
``xp.zeros``, ``xp.empty``, ``xp.arange`` a call of the graph. NumPy's conversions
(``np.asarray``, ``np.array``) and the constructor user code fills by assignment most
(``np.zeros``) take no array that NumPy's dispatch protocols could hand to a traced array, and
no hook sees them; they are the one thing wrapped: the six functions of
:data:`CONSTRUCTORS` (``np.array``, ``np.asarray``, ``np.zeros``, ``np.empty``, ``np.ones``,
``np.full``; why each, docs/compile.md), from the first trace that starts until the last one
running ends. A wrapper is NumPy's function itself for every thread that is not tracing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from sadl import backends
from sadl import random as sadl_random

from sadl_compile import rules
from sadl_compile.capture import Capture
from sadl_compile.device import module_of
from sadl_compile.traced import ACTIVE, TracedDeviceArray, is_traced, plain
from sadl_compile.where import caller, source_line

__all__ = ["CONSTRUCTORS", "TRACER", "tracing"]

#: What NumPy does not dispatch: conversions (plain arrays of traced ones), user code's buffers.
CONSTRUCTORS = ("array", "asarray", "zeros", "empty", "ones", "full")

_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
_WRAPPED = threading.Lock()  # guards the count of running traces and NumPy's originals
_running = [0]  # traces running (a list: tracing rebinds no name of this module either)
_originals: dict[str, Any] = {}


def _capture() -> Capture | None:
    tracer = ACTIVE.tracer
    return tracer if isinstance(tracer, Capture) else None


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
    constructor.__wrapped__ = original  # type: ignore[attr-defined]
    return constructor


class _Tracer:
    """What sadl reports to a trace (``sadl.backends.Tracer``); the thread's trace is
    ``ACTIVE.tracer`` (None while the trace runs something for real: then sadl's defaults).
    """

    array_kind = TracedDeviceArray

    def array_of(self, x: Any) -> Any:
        """The device array behind a traced one."""
        return plain(x)

    def module_of(self, x: Any) -> Any:
        """The array module of a traced device array, or of host data (None included) in the
        tracing thread: recording while its trace runs, so what op code makes is seen.
        """
        if type(x) is TracedDeviceArray:
            return module_of(x)
        capture = _capture()
        return np if capture is None or capture.busy else capture.recording_module(np)

    def on_read(self, obj: Any, name: str, value: Any) -> Any:
        """A tensor's ``data`` / ``grad`` or a module's ``training`` read: adopted, guarded."""
        capture = _capture()
        if capture is None:
            return value
        if name == "data":
            return value if is_traced(value) else capture.read_data(obj, value)
        if name == "grad":
            return capture.read_grad(obj, value)
        capture.read_training(obj, value)
        return value

    def on_write(self, obj: Any, name: str, value: Any) -> None:
        """A tensor's ``data`` / ``grad`` or a module's ``training`` written: an effect."""
        capture = _capture()
        if capture is not None:
            write = {"data": capture.write_data, "grad": capture.write_grad}
            write.get(name, capture.write_training)(obj, value)

    def on_step(self, optimizer: Any, closure: Any, step: Callable[..., Any]) -> Any:
        """``optimizer.step()``: one optimizer node."""
        capture = _capture()
        if capture is None:
            return step(optimizer, closure)
        return capture.optimizer_step(optimizer, closure, step)

    def on_generator(self, generator: Any, seeded: bool) -> None:
        """A generator made: from an int seed, made anew on every replay."""
        capture = _capture()
        if capture is not None:
            (capture.reseeded if seeded else capture.made_generator)(generator)

    def on_rng_state(self, state: Any, setting: bool) -> None:
        """``get_rng_state`` (a state taken inside the call), ``set_rng_state`` (only to a state
        a draw of the call had, or one taken inside the call that moves nothing).
        """
        capture = _capture()
        if capture is not None:
            if setting:
                capture.streams.setting(state, source_line(caller()))
            else:
                capture.streams.taken(state)

    def on_transfer(self, copy: Any, data: Any, args: tuple[Any, ...]) -> Any:
        """A copy between the host and a device: a call of the graph."""
        capture = _capture()
        if capture is None or capture.busy:  # not tracing, or inside a recorded call
            return copy(data, *args)
        label = getattr(copy, "__name__", "copy").lstrip("_")
        return capture.call(copy, copy, (data, *args), {}, label)

    def on_value_dependent(self, fn: Any, args: Any, kwargs: Any) -> Any:
        """A call of a value-dependent function: recorded whole."""
        capture = _capture()
        if capture is None or capture.busy:  # not tracing, or inside a call recorded whole
            return fn(*args, **kwargs)
        rules.VALUE_DEPENDENT.add(fn)
        return capture.call(fn, fn, args, kwargs, getattr(fn, "__name__", "fn").lstrip("_"))

    def on_draw(self, generator: Any, method: str, args: Any, kwargs: Any) -> Any:
        """A draw of one of sadl's generators: drawn anew on every replay."""
        capture = _capture()
        if capture is None:
            on_device = sadl_random.observed_device_generator(generator)
            if on_device is not None:
                return getattr(on_device[0], method)(*args, **kwargs)
            return getattr(np.random.Generator, method)(generator, *args, **kwargs)
        default = generator is sadl_random.default_generator()
        return capture.draw(generator, default, method, args, kwargs)


#: The tracer sadl-compile installs in a thread while it traces there.
TRACER = _Tracer()


def _wrap_constructors(delta: int) -> None:
    """Count a trace starting (+1) or ending (-1); wrap NumPy's constructors while any runs."""
    with _WRAPPED:
        _running[0] += delta
        if delta > 0 and _running[0] == 1:
            _originals.update({name: getattr(np, name) for name in CONSTRUCTORS})
            for name, original in _originals.items():
                setattr(np, name, _recording(name, original))
        elif delta < 0 and _running[0] == 0:
            for name, original in _originals.items():
                setattr(np, name, original)
            _originals.clear()


@contextlib.contextmanager
def tracing(capture: Capture) -> Iterator[None]:
    """Make ``capture`` the trace of this thread, for one trace (others may trace meanwhile)."""
    previous = backends.current_tracer()
    _wrap_constructors(+1)
    try:
        backends.install_tracer(TRACER)
        ACTIVE.tracer = capture
        yield
    finally:
        ACTIVE.tracer = None
        backends.install_tracer(previous)
        _wrap_constructors(-1)
