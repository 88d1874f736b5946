"""``sadl.autograd.Function``: PyTorch's custom-gradient contract; the Module that mimics it."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl.testing import gradcheck, gradgradcheck


class RoundSTE(sadl.autograd.Function):
    """Straight-through rounding: forward rounds, backward passes the gradient unchanged."""

    @staticmethod
    def forward(ctx, x):
        return np.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class ScaledCube(sadl.autograd.Function):
    """``k * x**3`` with ``k`` a plain number: saved tensors, attributes, one None gradient."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return k * x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * ctx.k * grad * x**2, None


def test_straight_through_round_passes_the_gradient_through():
    x = sadl.tensor([0.6, 1.4], requires_grad=True)
    y = RoundSTE.apply(x)
    np.testing.assert_array_equal(y.numpy(), [1.0, 1.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])


def test_straight_through_round_passes_gradcheck():
    # The straight-through gradient is the identity's; gradcheck compares the rule with the
    # numerical derivative of forward, so check it on the identity-like part (away from .5).
    class Identity(sadl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x + np.round(x) * 0

        @staticmethod
        def backward(ctx, grad):
            return grad

    assert gradcheck(Identity.apply, sadl.tensor(np.array([0.2, 1.3]), requires_grad=True))


def test_saved_tensors_give_gradcheck_and_double_backward():
    x = sadl.tensor(np.array([0.5, -1.2, 2.0]), requires_grad=True)
    assert gradcheck(lambda t: ScaledCube.apply(t, 2.0), x)
    assert gradgradcheck(lambda t: ScaledCube.apply(t, 2.0), x)
    (g,) = sadl.grad(ScaledCube.apply(x, 2.0).sum(), [x], create_graph=True)
    (gg,) = sadl.grad(g.sum(), [x])
    np.testing.assert_allclose(gg.numpy(), 12 * x.numpy())


def test_needs_input_grad_has_one_flag_per_argument():
    seen = []

    class Mul(sadl.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            seen.append(ctx.needs_input_grad)
            ctx.save_for_backward(a, b)
            return a * b * c

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b * 3.0, grad * a * 3.0, None

    a = sadl.tensor(np.array([1.0, 2.0]), requires_grad=True)
    b = sadl.tensor(np.array([3.0, 4.0]))
    Mul.apply(a, b, 3.0).sum().backward()
    assert seen == [(True, False, False)]
    np.testing.assert_allclose(a.grad, [9.0, 12.0])
    assert b.grad is None


def test_torch2_setup_context_form():
    class Square(sadl.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * grad * x

    x = sadl.tensor(np.array([1.5, -2.0]), requires_grad=True)
    assert gradcheck(Square.apply, x)


def test_function_contract_errors_are_clear():
    with pytest.raises(TypeError, match="staticmethod"):

        class NotStatic(sadl.autograd.Function):
            def forward(self, ctx, x):
                return x

    with pytest.raises(TypeError, match="positional"):
        RoundSTE.apply(x=sadl.tensor([1.0]))
    with pytest.raises(TypeError, match="apply"):
        RoundSTE()

    class WrongCount(sadl.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return grad

    x = sadl.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="one per argument"):
        WrongCount.apply(x, x).sum().backward()


def test_a_module_that_defines_backward_is_refused_at_class_creation():
    # py-sadl's habit from torch: a Module (sadl.Function) with a backward method. The engine
    # would never call it, so the gradient would silently be the ops' one ([0, 0] for round).
    with pytest.raises(TypeError, match=r"sadl\.autograd\.Function"):

        class RoundLayer(sadl.Function):
            def __call__(self, x):
                return np.round(x)

            def backward(self, grad):
                return grad
