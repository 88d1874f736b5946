"""A fused layers op's eager cost in Python calls: its wrappers stay within a budget.

The count of Python and C calls is deterministic where time on a shared machine is not; a call
added on the path of a fused op (the float16 widening wrapper, the shape helpers) is paid on
every application in every model. The budgets are today's counts: lower them when a path gets
shorter.
"""

from __future__ import annotations

import numpy as np
import sadl
from sadl_check.calls import count_calls


def test_layer_norm_forward_and_backward_make_at_most_377_calls() -> None:
    x = sadl.Tensor(np.ones((4, 8), np.float32), requires_grad=True)
    w = sadl.Parameter(np.ones(8, np.float32))
    b = sadl.Parameter(np.zeros(8, np.float32))

    def step() -> None:
        sadl.ops.layer_norm(x, w, b, normalized_shape=(8,)).sum().backward()

    step()  # first use: the op is looked up and its plugin loaded outside the count
    calls = count_calls(step)
    assert calls <= 377, f"{calls} calls for layer_norm forward and backward (budget 377)"


def test_the_float16_wrapper_costs_a_float32_op_at_most_4_calls() -> None:
    x = np.linspace(-3.0, 3.0, 64, dtype=np.float32).reshape(8, 8)
    gelu = sadl.ops.get("gelu").forward  # wrapped: float16 inputs run in float32
    inner = gelu.__wrapped__
    gelu(x)
    extra = count_calls(lambda: gelu(x)) - count_calls(lambda: inner(x))
    assert extra <= 4, f"the wrapper adds {extra} calls (budget 4)"
    np.testing.assert_array_equal(gelu(x), inner(x))
