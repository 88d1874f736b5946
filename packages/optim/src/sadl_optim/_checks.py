"""Argument checks shared by the optimizers, schedulers and utilities.

Every failure is a ``ValueError`` whose message names the owner (optimizer, scheduler or
function), the argument, the value received and what was expected, in core's wording:
``"AdamW: invalid betas=(0.9, 1.5) (need two numbers in [0, 1))"``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["check_bool", "check_int", "check_number", "is_number"]


def is_number(value: Any) -> bool:
    """True for a real, non-boolean, non-NaN number (Python or NumPy scalar)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        return False
    return not math.isnan(float(value))


def check_number(
    owner: str,
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """``float(value)`` if it is a number inside the interval, else a ``ValueError``.

    ``low``/``high`` are inclusive unless ``low_open``/``high_open``; None means unbounded.
    Infinite values are rejected unless ``allow_inf``.
    """
    ok = is_number(value)
    if ok:
        v = float(value)
        if low is not None and (v < low or (low_open and v == low)):
            ok = False
        if high is not None and (v > high or (high_open and v == high)):
            ok = False
        if math.isinf(v) and not allow_inf:
            ok = False
    if not ok:
        need = _interval(low, high, low_open, high_open)
        raise ValueError(
            f"{owner}: invalid {name}={value!r} (need {'a' if allow_inf else 'a finite'} {need})"
        )
    return float(value)


def check_int(owner: str, name: str, value: Any, *, low: int = 0) -> int:
    """``int(value)`` if it is an integer (not a bool) ``>= low``, else a ``ValueError``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{owner}: invalid {name}={value!r} (need an integer >= {low})")
    return int(value)


def check_bool(owner: str, name: str, value: Any) -> bool:
    """``bool(value)`` if it is True or False, else a ``ValueError``."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{owner}: invalid {name}={value!r} (need True or False)")
    return bool(value)


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"number {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"number {'<' if high_open else '<='} {high:g}"
    return "number"
