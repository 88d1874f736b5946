"""The autograd engine: accumulation, broadcasting, freed graphs, higher order, sadl.grad."""

import numpy as np
import pytest
import sadl
from sadl.testing import gradcheck, gradgradcheck


def T(a, grad=True):
    return sadl.Tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def test_backward_accumulates_into_leaves(rng):
    x = T(rng.normal(size=(3,)))
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad, np.full(3, 5.0))


def test_reused_input_sums_both_paths():
    x = T([1.0, 2.0])
    y = x * x + x
    y.sum().backward()
    np.testing.assert_allclose(x.grad, 2 * x.data + 1)


@pytest.mark.parametrize(
    ("shape_a", "shape_b"),
    [((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 1)), ((1,), (2, 3)), ((), (2, 2))],
)
def test_broadcasting_in_both_directions(rng, shape_a, shape_b):
    a, b = rng.normal(size=shape_a), rng.normal(size=shape_b)
    gradcheck(lambda x, y: x * y + x / (1 + y * y), a, b)


@pytest.mark.parametrize(
    ("shape_a", "shape_b"),
    [((2, 3, 4), (4, 5)), ((5, 4), (4,)), ((4,), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4,))],
)
def test_matmul_shapes(rng, shape_a, shape_b):
    a, b = rng.normal(size=shape_a), rng.normal(size=shape_b)
    gradcheck(lambda x, y: x @ y, a, b)
    gradgradcheck(lambda x, y: (x @ y) ** 2, a, b)


def test_repeated_indices_accumulate(rng):
    x = rng.normal(size=(5, 3))
    idx = np.array([0, 2, 0, 0, 4])
    gradcheck(lambda t: t[idx] * 2.0, x)
    t = T(x)
    t[idx].sum().backward()
    np.testing.assert_allclose(t.grad[0], np.full(3, 3.0))


def test_float32_in_float32_gradients():
    x = sadl.Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    w = sadl.Tensor(np.ones((3,), np.float32), requires_grad=True)
    ((x * w).sum(axis=1) ** 2).mean().backward()
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float32


def test_hundred_thousand_op_chain_has_no_recursion_limit():
    x = T(1.0)
    y = x
    for _ in range(100_000):
        y = y + 1e-6
    y.backward()
    assert float(x.grad) == 1.0


def test_second_backward_through_freed_graph_raises():
    x = T([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_retain_graph_allows_exact_second_backward():
    x = T([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.copy()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * first, rtol=0, atol=0)


def test_backward_needs_explicit_grad_for_non_scalar():
    x = T([1.0, 2.0])
    with pytest.raises(RuntimeError, match="one element"):
        (x * 2).backward()
    (x * 2).backward(np.array([1.0, 10.0]))
    np.testing.assert_allclose(x.grad, [2.0, 20.0])


def test_backward_on_tensor_not_requiring_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        sadl.tensor([1.0]).sum().backward()


def test_grad_does_not_touch_dot_grad():
    x = T([1.0, 2.0, 3.0])
    y = (x**3).sum()
    (g,) = sadl.grad(y, x)
    np.testing.assert_allclose(g.data, 3 * x.data**2)
    assert x.grad is None


def test_grad_of_intermediate_tensor():
    x = T([1.0, 2.0])
    h = x * 3
    y = (h * h).sum()
    (gh,) = sadl.grad(y, h)
    np.testing.assert_allclose(gh.data, 2 * h.data)


def test_grad_unused_input():
    x, z = T([1.0]), T([2.0])
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="not used"):
        sadl.grad(y, [x, z])
    y = (x * 2).sum()
    gx, gz = sadl.grad(y, [x, z], allow_unused=True)
    assert gz is None and float(gx.data[0]) == 2.0


def test_create_graph_gives_differentiable_gradients():
    x = T([0.3, -0.7])
    y = (x.tanh() * x**2).sum()
    (g,) = sadl.grad(y, x, create_graph=True)
    assert g.requires_grad
    (gg,) = sadl.grad(g.sum(), x)
    t = np.tanh(x.data)
    sech2 = 1 - t**2
    expected = -2 * t * sech2 * x.data**2 + 4 * x.data * sech2 + 2 * t
    np.testing.assert_allclose(gg.data, expected, rtol=1e-10)


def test_backward_create_graph_keeps_graph_in_dot_grad():
    x = T([1.5])
    (x**3).sum().backward(create_graph=True)
    assert isinstance(x.grad, sadl.Tensor) and x.grad.requires_grad
    (second,) = sadl.grad(x.grad.sum(), x)
    np.testing.assert_allclose(second.data, [6 * 1.5])


def test_third_order():
    x = T([0.4])
    y = (x**4).sum()
    (g1,) = sadl.grad(y, x, create_graph=True)
    (g2,) = sadl.grad(g1.sum(), x, create_graph=True)
    (g3,) = sadl.grad(g2.sum(), x)
    np.testing.assert_allclose(g3.data, [24 * 0.4])


def test_no_grad_records_nothing_and_is_thread_local():
    import threading

    x = T([1.0])
    with sadl.no_grad():
        y = x * 2
        seen = []
        t = threading.Thread(target=lambda: seen.append(sadl.is_grad_enabled()))
        t.start()
        t.join()
    assert not y.requires_grad and y.grad_fn is None
    assert seen == [True]
    assert sadl.is_grad_enabled()


def test_no_grad_as_decorator_and_enable_grad_inside():
    @sadl.no_grad()
    def f(t):
        with sadl.enable_grad():
            inner = t * 2
        return t * 2, inner

    outer, inner = f(T([1.0]))
    assert not outer.requires_grad and inner.requires_grad


def test_retain_grad_on_intermediate():
    x = T([1.0, 2.0])
    h = x * 2
    h.retain_grad()
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad, 2 * h.data)


def test_op_without_backward_raises_before_forward():
    ran = []

    def forward(x):
        ran.append(True)
        return x

    op = sadl.plugins.OpDef("no_rule", forward)
    with pytest.raises(sadl.MissingGradientError, match="no_rule"):
        op(T([1.0]))
    assert ran == []
    assert op(sadl.tensor([1.0])).requires_grad is False  # fine without grad


def test_wrong_number_of_gradients_is_reported():
    op = sadl.plugins.OpDef("bad_rule", lambda x, y: x + y, lambda g, out, x, y: (g,))
    out = op(T([1.0]), T([2.0])).sum()
    with pytest.raises(RuntimeError, match="one gradient"):
        out.backward()


def test_integer_results_never_require_grad():
    x = T([1.7, 2.2])
    assert not x.astype(np.int64).requires_grad
    assert not (x > 2).requires_grad


def test_gradient_shapes_of_reductions_with_keepdims(rng):
    x = rng.normal(size=(2, 3, 4))
    gradcheck(lambda t: t.sum(axis=(0, 2), keepdims=True) * t.mean(dim=1, keepdims=True), x)


def test_numerically_extreme_log_softmax_and_sigmoid():
    x = T([[1000.0, -1000.0, 0.0]])
    y = x.log_softmax(-1)
    s = x.sigmoid()
    (y.sum() + s.sum()).backward()
    assert np.isfinite(y.data).all() and np.isfinite(x.grad).all()
    np.testing.assert_allclose(y.data, [[0.0, -2000.0, -1000.0]])


def test_backward_told_which_inputs_need_a_gradient():
    seen = []

    def backward(g, out, x, w, *, needs_input_grad):
        seen.append(needs_input_grad)
        return (g * w if needs_input_grad[0] else None, g * x if needs_input_grad[1] else None)

    op = sadl.plugins.OpDef("masked_mul", lambda x, w: x * w, backward)
    assert op.accepts_needs_input_grad
    x, w = T([2.0]), sadl.tensor([3.0], dtype=np.float64)
    op(x, w).sum().backward()
    assert seen == [(True, False)] and float(x.grad[0]) == 3.0


def test_per_input_rules_may_cover_optional_trailing_inputs():
    rules = (lambda g, out, x, b=None: g, lambda g, out, x, b=None: g)
    op = sadl.plugins.OpDef("plus_optional", lambda x, b=None: x if b is None else x + b, rules)
    x = T([1.0])
    op(x).sum().backward()
    assert float(x.grad[0]) == 1.0
