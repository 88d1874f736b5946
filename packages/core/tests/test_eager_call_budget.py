"""The eager hot path's cost in Python calls: an op and its backward stay within a budget.

Time is too noisy to test on a shared machine; the number of Python-level calls (functions,
C functions and methods) the profiler sees is not. Each call costs about as much as a NumPy
ufunc on a small array, so a call added to the per-op path shows up in every eager benchmark
(``bench/core.py`` W1). The budgets are today's counts: lower them when the path gets shorter.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import sadl
from sadl_check.calls import count_calls


def _chain(ops: int) -> Callable[[], None]:
    """``y = y * c + d`` ``ops / 2`` times on a small float32 tensor, then sum and backward."""

    def run() -> None:
        x = sadl.Tensor(np.full((4, 4), 0.5, np.float32), requires_grad=True)
        y = x
        for _ in range(ops // 2):
            y = y * 1.0001 + 0.0001
        y.sum().backward()

    return run


def test_a_recorded_binary_op_and_its_backward_make_at_most_31_calls() -> None:
    _chain(20)()  # first use: nothing lazily loaded is counted
    # The difference of two chains: the fixed cost (the tensor, sum, backward's set-up) cancels.
    per_op = (count_calls(_chain(120)) - count_calls(_chain(20))) / 100
    assert per_op <= 31, f"{per_op} calls per op and its backward (budget 31)"


def test_an_unrecorded_binary_op_makes_at_most_8_calls() -> None:
    def run(ops: int) -> Callable[[], None]:
        def chain() -> None:
            y = sadl.Tensor(np.full((4, 4), 0.5, np.float32))
            for _ in range(ops // 2):
                y = y * 1.0001 + 0.0001

        return chain

    run(20)()
    per_op = (count_calls(run(120)) - count_calls(run(20))) / 100
    assert per_op <= 8, f"{per_op} calls per op without a graph (budget 8)"
