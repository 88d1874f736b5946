"""How many calls a piece of code makes: a deterministic measure of per-op overhead.

Time depends on the machine and its load; the number of Python and C function calls a step
makes does not. Tests of an engine's or a fused op's overhead hold that number to a budget.

    >>> from sadl_check.calls import count_calls
    >>> count_calls(lambda: len([1, 2])) >= 1
    True
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

__all__ = ["count_calls"]


def count_calls(fn: Callable[[], object]) -> int:
    """Python and C calls made while ``fn()`` runs (``sys.setprofile``'s call events).

    The cyclic garbage collector is off while ``fn()`` runs (and runs once before): a collection
    would run the finalizers and weakref callbacks of whatever garbage earlier code left, and
    bill their calls to ``fn``.
    """
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        if was_enabled:
            gc.enable()
    return count
