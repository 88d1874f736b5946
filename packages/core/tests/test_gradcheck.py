"""``sadl.testing``'s checks find what is wrong: a first derivative, a second derivative, and a
gradient whose value depends on ``create_graph`` (the second-order check's central differences
evaluate the gradient without a graph, so it must be the same one)."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl.testing import GradcheckError, gradcheck, gradgradcheck


def _cube(rule):
    """``x**3`` with the backward ``rule(ctx, grad)``."""

    class Cube(sadl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        backward = staticmethod(rule)

    return Cube.apply


def _right(ctx, grad):
    (x,) = ctx.saved_tensors
    return 3 * grad * x**2


def _constant_in_x(ctx, grad):  # the right value, but x enters as a constant: no graph
    (x,) = ctx.saved_tensors
    return 3 * grad * sadl.tensor(np.asarray(x.data) ** 2)


def _half_in_the_graph(ctx, grad):  # the right value, one factor x of two in the graph
    (x,) = ctx.saved_tensors
    return 3 * grad * x * sadl.tensor(np.asarray(x.data))


def _other_value_with_a_graph(ctx, grad):  # 3x^2 without a graph, 3x^2 + x with one
    (x,) = ctx.saved_tensors
    return 3 * grad * x**2 + (grad * x if sadl.is_grad_enabled() else 0)


X = np.array([0.5, -1.2, 2.0])


def test_a_right_rule_passes_both_checks():
    assert gradcheck(_cube(_right), X)
    assert gradgradcheck(_cube(_right), X)


def test_a_wrong_first_derivative_is_found():
    with pytest.raises(GradcheckError, match="analytic"):
        gradcheck(_cube(lambda ctx, grad: 2 * _right(ctx, grad)), X)


def test_a_wrong_second_derivative_is_found():
    assert gradcheck(_cube(_half_in_the_graph), X)  # the first derivative is right
    with pytest.raises(GradcheckError, match="analytic"):
        gradgradcheck(_cube(_half_in_the_graph), X)


def test_a_gradient_that_lost_its_graph_is_found():
    assert gradcheck(_cube(_constant_in_x), X)
    with pytest.raises(GradcheckError, match="has no graph .* use an input as a constant"):
        gradgradcheck(_cube(_constant_in_x), X)
    assert gradgradcheck(lambda x: 2.0 * x, X)  # a gradient with no graph that is constant


def test_a_jump_of_the_gradient_at_a_tie_is_not_taken_for_a_lost_graph():
    ties = np.array([[1.0, 1.0, 0.5], [2.0, -1.0, 2.0]])  # max splits its gradient at a tie
    assert gradgradcheck(lambda x: np.amax(x, axis=1), ties)


def test_a_gradient_that_changes_with_create_graph_is_found():
    with pytest.raises(GradcheckError, match="create_graph=True differs from the one without"):
        gradgradcheck(_cube(_other_value_with_a_graph), X)
    assert not gradgradcheck(_cube(_other_value_with_a_graph), X, raise_exception=False)
