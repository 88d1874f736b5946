"""Per-call cost of the NumPy dispatch paths on a small Tensor (µs per call, best of 7 rounds).

These are the paths that paid an in-function import before the core was layered:
``np.exp(t)`` (``__array_ufunc__``), ``np.sum(t)`` (``__array_function__``) and an op record's
call, next to a plain operator (``t * u``), which never did. W1 in bench/core.py times operator
calls, so it does not see the difference; this does.

Usage: python bench/dispatch.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np
import sadl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)  # accepted for bench/run.py; unused
    args = parser.parse_args()
    x = sadl.tensor(np.full((4,), 0.5), requires_grad=True)
    y = sadl.tensor(np.full((4,), 0.25), requires_grad=True)
    exp = sadl.ops.get("exp")
    cases = {
        "np.exp(t) (__array_ufunc__)": lambda: np.exp(x),
        "np.sum(t) (__array_function__)": lambda: np.sum(x),
        "sadl.ops.get('exp')(t) (op record call)": lambda: exp(x),
        "t * u (operator)": lambda: x * y,
    }
    number = 2000 if args.quick else 20000
    print("\n### core: NumPy dispatch paths, µs per call (1 thread)\n")
    print("| call | µs |")
    print("|---|---|")
    for name, call in cases.items():
        best = min(timeit.repeat(call, number=number, repeat=7)) / number * 1e6
        print(f"| {name} | {best:.2f} |")


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
