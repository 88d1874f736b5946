"""Randomness: one seedable generator, or an explicit ``numpy.random.Generator`` per call.

sadl's generators are :class:`Generator`, NumPy's ``Generator`` with draws that a trace
(``sadl.compile``) can see, so a compiled function draws fresh numbers on every call from the
same stream as an eager run. The values are NumPy's exactly: ``manual_seed(n)`` gives the stream
of ``numpy.random.default_rng(n)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "Generator",
    "default_generator",
    "get_rng_state",
    "install_draw_observer",
    "manual_seed",
    "resolve_generator",
    "set_rng_state",
]

#: Called as ``observer(generator, method, args, kwargs)`` for every draw while installed.
DrawObserver = Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any]
_observer: DrawObserver | None = None


class Generator(np.random.Generator):
    """NumPy's ``Generator`` whose draws ``sadl.compile`` records (same values, same stream)."""

    def __reduce__(self) -> Any:
        return (Generator, (self.bit_generator,))


def _observed(name: str) -> Callable[..., Any]:
    draw = getattr(np.random.Generator, name)

    def method(self: Generator, *args: Any, **kwargs: Any) -> Any:
        observer = _observer
        if observer is None:
            return draw(self, *args, **kwargs)
        return observer(self, name, args, kwargs)

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


def install_draw_observer(observer: DrawObserver | None) -> None:
    """Route every :class:`Generator` draw through ``observer`` (None: draw directly).

    ``sadl.compile`` installs one while it traces; it must draw the numbers itself.
    """
    global _observer
    _observer = observer


_generator: Generator = Generator(np.random.PCG64())


def manual_seed(seed: int) -> Generator:
    """Seed sadl's default generator (factories, dropout, init, data helpers); returns it."""
    global _generator
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative integer, got {seed!r}")
    _generator = Generator(np.random.PCG64(int(seed)))
    return _generator


def default_generator() -> Generator:
    """The generator used when no ``rng=`` is passed."""
    return _generator


def get_rng_state() -> dict[str, Any]:
    """A snapshot of the default generator's state (``set_rng_state`` brings it back)."""
    return dict(_generator.bit_generator.state)


def set_rng_state(state: dict[str, Any]) -> None:
    """Put the default generator back into a state taken with ``get_rng_state``."""
    _generator.bit_generator.state = state


def resolve_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
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
