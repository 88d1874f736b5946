"""In-place updates really write the memory, and version counters catch stale saved arrays."""

import numpy as np
import pytest
import sadl


def test_inplace_updates_memory_and_views():
    base = np.zeros(4)
    t = sadl.Tensor(base)
    t += 1
    t[0] = 5
    np.testing.assert_array_equal(base, [5, 1, 1, 1])
    assert t._version[0] == 2


def test_inplace_on_leaf_requiring_grad_raises():
    w = sadl.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        w += 1
    with pytest.raises(RuntimeError, match="leaf"):
        w[0] = 2.0
    with sadl.no_grad():
        w -= 0.5
    np.testing.assert_array_equal(w.data, np.full(3, 0.5))


def test_mutating_saved_input_raises_naming_the_op():
    x = sadl.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    h = x * 1.0
    y = (h * h).sum()
    with sadl.no_grad():
        h += 1
    with pytest.raises(RuntimeError, match="multiply.*in-place"):
        y.backward()


def test_mutating_through_a_view_is_caught():
    x = sadl.Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    h = x * 1.0
    v = h[:2]
    y = (h.exp()).sum()
    with sadl.no_grad():
        v[0] = 10.0
    with pytest.raises(RuntimeError, match="in-place"):
        y.backward()


def test_inplace_on_graph_tensor_is_recorded():
    x = sadl.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x * 3
    y += x  # y = 4x, recorded on the graph
    y *= y  # y = 16 x^2
    y.sum().backward()
    np.testing.assert_allclose(x.grad, 32 * x.data)


def test_setitem_with_grad_requiring_value():
    x = sadl.Tensor(np.zeros(3), requires_grad=True)
    v = sadl.Tensor(np.array(2.0), requires_grad=True)
    y = x * 1.0
    y[1] = v * 3
    (y * np.array([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(x.grad, [1.0, 0.0, 100.0])
    np.testing.assert_allclose(v.grad, 30.0)


def test_producer_of_overwritten_tensor_still_correct():
    x = sadl.Tensor(np.array([0.5, 1.0]), requires_grad=True)
    y = x.exp()
    y[0] = 0.0
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [0.0, np.exp(1.0)])


def test_numpy_out_argument_writes_into_tensor():
    t = sadl.Tensor(np.zeros(3))
    np.add(sadl.Tensor(np.ones(3)), 2.0, out=t)
    np.testing.assert_array_equal(t.data, [3.0, 3.0, 3.0])


def test_ufunc_at_on_tensor():
    t = sadl.Tensor(np.zeros(3))
    np.add.at(t, [0, 0, 2], 1.0)
    np.testing.assert_array_equal(t.data, [2.0, 0.0, 1.0])
