"""Randomness: one seedable generator, or an explicit ``numpy.random.Generator`` per call."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "default_generator",
    "get_rng_state",
    "manual_seed",
    "resolve_generator",
    "set_rng_state",
]

_generator = np.random.default_rng()


def manual_seed(seed: int) -> np.random.Generator:
    """Seed sadl's default generator (factories, dropout, init, data helpers); returns it."""
    global _generator
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative integer, got {seed!r}")
    _generator = np.random.default_rng(int(seed))
    return _generator


def default_generator() -> np.random.Generator:
    """The generator used when no ``rng=`` is passed."""
    return _generator


def get_rng_state() -> dict[str, Any]:
    """A snapshot of the default generator's state (``set_rng_state`` brings it back)."""
    return dict(_generator.bit_generator.state)


def set_rng_state(state: dict[str, Any]) -> None:
    """Put the default generator back into a state taken with ``get_rng_state``."""
    _generator.bit_generator.state = state


def resolve_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """``rng`` itself, a new generator seeded with it (an int), or the default generator."""
    if rng is None:
        return _generator
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, int | np.integer):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be a numpy.random.Generator, an int seed or None, got {rng!r}")
