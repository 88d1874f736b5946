"""Randomness: one seedable generator per device, or an explicit ``numpy.random.Generator``.

sadl's CPU generators are :class:`Generator`, NumPy's ``Generator`` with draws that a trace
(sadl-compile's ``sadl.compile``) can see, so a compiled function draws fresh numbers on every
call from the same stream as an eager run. The values are NumPy's exactly: ``manual_seed(n)``
gives the stream of ``numpy.random.default_rng(n)``.

``manual_seed(n)`` seeds every device's generator too: each device type draws from its own
backend's generator (CuPy's on ``"cuda"``), created on first use from the same seed. Runs are
reproducible on a given device type; a CPU run and a CUDA run of the same seed draw different
numbers (different generators, as in torch), so a dropout mask differs between them. Random
numbers for a tensor on a device are drawn there (``generator(device)``, ``random``,
``standard_normal``, ``integers``): nothing is drawn on the host and copied over unless the
caller passes a NumPy generator of their own.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl import backends as _backends
from sadl.backends import CPU, Device, Where, backend, parse_device, to_device

__all__ = [
    "Generator",
    "default_generator",
    "generator",
    "get_rng_state",
    "integers",
    "manual_seed",
    "observed_device_generator",
    "random",
    "resolve_generator",
    "set_rng_state",
    "standard_normal",
]

Seed = np.random.Generator | int | None  # an explicit NumPy generator, a seed, or sadl's own


class Generator(np.random.Generator):
    """NumPy's ``Generator`` whose draws a tracer sees (same values, same stream).

    While a tracer is installed (``sadl.backends.install_tracer``) each draw is its
    ``on_draw(generator, method, args, kwargs)``, which draws the numbers itself, and is told
    of each one made (``on_generator``).
    """

    def __init__(self, bit_generator: Any, seeded: bool = False) -> None:
        super().__init__(bit_generator)
        if (tracer := _backends.current_tracer()) is not None:
            tracer.on_generator(self, seeded)

    def __reduce__(self) -> Any:
        return (Generator, (self.bit_generator,))


def _observed(name: str) -> Callable[..., Any]:
    draw = getattr(np.random.Generator, name)

    def method(self: Generator, *args: Any, **kwargs: Any) -> Any:
        tracer = _backends.current_tracer()
        if tracer is None:
            return draw(self, *args, **kwargs)
        return tracer.on_draw(self, name, args, kwargs)

    method.__name__ = name
    method.__doc__ = draw.__doc__
    return method


#: The draws a trace sees; others (``bytes``, ``shuffle``) run at trace time only.
OBSERVED_DRAWS = (
    "random standard_normal normal uniform integers choice permutation permuted binomial "
    "exponential standard_exponential gamma standard_gamma beta poisson laplace logistic "
    "lognormal multinomial dirichlet"
).split()
for _name in OBSERVED_DRAWS:
    setattr(Generator, _name, _observed(_name))


_generator: Generator = Generator(np.random.PCG64())
# The last manual_seed, which device generators start from; before any, one entropy drawn per
# process (so a device generator made afresh starts the same stream again).
_seed: int = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
_device_generators: dict[Device, tuple[Any, Any]] = {}  # device -> (backend record, generator)
_lock = threading.Lock()


def manual_seed(seed: int) -> Generator:
    """Seed sadl's generators (factories, dropout, init, data helpers); returns the CPU's.

    Every device's generator is seeded with ``seed`` too (each device type its own stream).
    """
    global _generator, _seed
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative integer, got {seed!r}")
    with _lock:
        _seed = int(seed)
        _generator = Generator(np.random.PCG64(_seed), seeded=True)
        _device_generators.clear()
    return _generator


def default_generator() -> Generator:
    """The CPU's generator, used when no ``rng=`` is passed."""
    return _generator


def generator(device: Where = None) -> Any:
    """The seeded generator of ``device``: the CPU's :class:`Generator`, the backend's elsewhere.

    A device generator offers ``random``, ``standard_normal``, ``integers`` and ``uniform`` with
    NumPy's arguments and returns arrays on that device.
    """
    target = parse_device(device)
    if target.type == "cpu":
        return _generator
    served = backend(target.type)
    with _lock:
        found = _device_generators.get(target)
        if found is None or found[0] is not served.record:
            found = (served.record, served.record.generator(_seed, target.index or 0))
            _device_generators[target] = found
    tracer = _backends.current_tracer()
    return found[1] if tracer is None else _ObservedDevice(found[1], target, tracer.on_draw)


class _ObservedDevice:
    """A device generator whose draws a tracer sees (handed out only while one is installed).

    The tracer's ``on_draw`` is called as ``(generator, method, args, kwargs)`` like for the
    CPU's :class:`Generator`; it finds the device with ``observed_device_generator``.
    """

    __slots__ = ("_device", "_generator", "_observer")

    def __init__(self, gen: Any, device: Device, observer: Callable[..., Any]) -> None:
        self._generator = gen
        self._device = device
        self._observer = observer

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._generator, name)
        if name not in OBSERVED_DRAWS:
            return found

        def draw(*args: Any, **kwargs: Any) -> Any:
            return self._observer(self, name, args, kwargs)

        return draw


def observed_device_generator(gen: Any) -> tuple[Any, Device] | None:
    """``(device generator, its device)`` for a generator :func:`generator` handed out while a
    tracer was installed; None for any other generator.
    """
    return (gen._generator, gen._device) if type(gen) is _ObservedDevice else None


def get_rng_state() -> dict[str, Any]:
    """A snapshot of sadl's generators (``set_rng_state`` brings it back).

    The CPU's state as NumPy gives it, plus, under ``"devices"``, a copy of each device
    generator drawn from so far, so activation checkpointing replays dropout on a GPU too.
    """
    state: dict[str, Any] = dict(_generator.bit_generator.state)
    with _lock:
        state["devices"] = {
            device: (record, copy.deepcopy(gen))
            for device, (record, gen) in _device_generators.items()
        }
    if (tracer := _backends.current_tracer()) is not None:
        tracer.on_rng_state(state, False)
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Put sadl's generators back into a state taken with ``get_rng_state``.

    A device generator first used after the snapshot is dropped: it starts afresh from the
    seed on its next use, exactly as it did the first time.
    """
    if (tracer := _backends.current_tracer()) is not None:
        tracer.on_rng_state(state, True)
    state = dict(state)
    devices = state.pop("devices", {})
    _generator.bit_generator.state = state
    with _lock:
        _device_generators.clear()
        for device, (record, gen) in devices.items():
            _device_generators[device] = (record, copy.deepcopy(gen))


def resolve_generator(rng: Seed) -> np.random.Generator:
    """The default generator (None), a new one seeded with ``rng`` (an int), or ``rng`` itself.

    A plain ``numpy.random.Generator`` comes back as a sadl :class:`Generator` drawing from its
    bit generator: the same stream (both advance together), and draws a trace can see.
    """
    if rng is None:
        return _generator
    if isinstance(rng, Generator):
        return rng
    if isinstance(rng, np.random.Generator):
        return Generator(rng.bit_generator)
    if isinstance(rng, int | np.integer):
        return Generator(np.random.PCG64(int(rng)))
    raise TypeError(f"rng must be a numpy.random.Generator, an int seed or None, got {rng!r}")


def _draw(method: str, device: Where, rng: Any, *args: Any, **kwargs: Any) -> Any:
    target = parse_device(device)
    if rng is None and target.type != "cpu":
        return getattr(generator(target), method)(*args, **kwargs)
    host = getattr(resolve_generator(rng), method)(*args, **kwargs)
    return host if target == CPU else to_device(host, target)


def random(
    shape: tuple[int, ...], dtype: Any = np.float64, device: Where = None, rng: Seed = None
) -> Any:
    """An array of uniform samples in ``[0, 1)`` on ``device``, drawn there.

    With ``rng`` (a NumPy generator or seed) the samples come from it, on the host, and are
    copied to ``device``: the caller chose a host generator.
    """
    return _draw("random", device, rng, tuple(shape), dtype=dtype)


def standard_normal(
    shape: tuple[int, ...], dtype: Any = np.float64, device: Where = None, rng: Seed = None
) -> Any:
    """An array of standard normal samples on ``device`` (drawn as in :func:`random`)."""
    return _draw("standard_normal", device, rng, tuple(shape), dtype=dtype)


def integers(
    low: int,
    high: int,
    shape: tuple[int, ...],
    dtype: Any = np.int64,
    device: Where = None,
    rng: Seed = None,
) -> Any:
    """An array of random integers in ``[low, high)`` on ``device`` (drawn as in :func:`random`)."""
    return _draw("integers", device, rng, low, high, tuple(shape), dtype=dtype)
