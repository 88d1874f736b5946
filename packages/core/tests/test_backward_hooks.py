"""Post-accumulate-grad hooks and backward-finished callbacks (what distributed training uses)."""

import numpy as np
import pytest
import sadl


def P(a):
    return sadl.Parameter(np.asarray(a, dtype=np.float64))


def test_hook_sees_the_final_gradient_once_per_pass():
    w = P([1.0, 2.0])
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.copy()))
    x = sadl.tensor(np.array([3.0, 4.0]))
    # w is used by three ops: the hook runs once, after the last contribution.
    (x * w + w * w + w.exp()).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], x.data + 2 * w.data + np.exp(w.data))


def test_hook_runs_after_accumulation_into_an_existing_grad():
    w = P([1.0])
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.copy()))
    (w * 2).sum().backward()
    (w * 3).sum().backward()
    np.testing.assert_allclose(seen[0], [2.0])
    np.testing.assert_allclose(seen[1], [5.0])


def test_hooks_fire_as_gradients_become_final_not_at_the_end():
    # x -> layer 1 -> layer 2 -> loss: backward reaches w2 first; its hook must run while
    # w1's gradient is still being computed (this is what lets communication overlap).
    w1, w2 = P(np.full((3, 3), 0.5)), P(np.full((3, 3), 0.25))
    order = []
    w1.register_post_accumulate_grad_hook(lambda p: order.append(("w1", w2.grad is not None)))
    w2.register_post_accumulate_grad_hook(lambda p: order.append(("w2", w1.grad is not None)))
    x = sadl.tensor(np.ones((2, 3)))
    ((x @ w1).tanh() @ w2).sum().backward()
    assert order == [("w2", False), ("w1", True)]


def test_every_hook_runs_in_registration_order_and_remove_unregisters():
    w = P([1.0])
    calls = []
    first = w.register_post_accumulate_grad_hook(lambda p: calls.append("first"))
    w.register_post_accumulate_grad_hook(lambda p: calls.append("second"))
    (w * 2).sum().backward()
    assert calls == ["first", "second"]
    first.remove()
    first.remove()  # a second remove does nothing
    (w * 2).sum().backward()
    assert calls == ["first", "second", "second"]


def test_handle_is_a_context_manager():
    w = P([1.0])
    calls = []
    with w.register_post_accumulate_grad_hook(lambda p: calls.append(1)):
        (w * 2).sum().backward()
    (w * 2).sum().backward()
    assert calls == [1]


def test_no_call_without_a_gradient_and_none_from_sadl_grad():
    used, unused = P([1.0]), P([2.0])
    calls = []
    used.register_post_accumulate_grad_hook(lambda p: calls.append("used"))
    unused.register_post_accumulate_grad_hook(lambda p: calls.append("unused"))
    (used * 2).sum().backward()
    assert calls == ["used"]
    # sadl.grad leaves .grad alone, so no post-accumulate hook runs.
    (g,) = sadl.grad((used * 3).sum(), used)
    np.testing.assert_allclose(g.numpy(), [3.0])
    assert calls == ["used"]
    # A parameter that is used but gets no gradient through the ops (a constant path) is not
    # called either.
    (unused.detach() * 2 + used).sum().backward()
    assert calls == ["used", "used"]


def test_hook_on_a_leaf_that_is_the_root():
    w = P([1.0, 2.0])
    calls = []
    w.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad.copy()))
    w.backward(np.array([1.0, 1.0]))
    np.testing.assert_allclose(calls[0], [1.0, 1.0])


def test_hooked_gradients_get_their_own_writable_arrays():
    # add's rule hands the same array to both inputs: each leaf must still own its .grad,
    # whether it is written early (hooked) or at the end of the pass.
    a, b = P([1.0, 2.0]), P([3.0, 4.0])
    a.register_post_accumulate_grad_hook(lambda p: None)
    (a + b).sum().backward()
    assert a.grad is not b.grad
    a.grad += 1
    np.testing.assert_allclose(b.grad, [1.0, 1.0])


def test_hook_under_create_graph_sees_a_tensor():
    w = P([2.0])
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append(type(p.grad)))
    (w**3).sum().backward(create_graph=True)
    assert seen == [sadl.Tensor]
    np.testing.assert_allclose(w.grad.numpy(), [12.0])


def test_registering_on_a_non_leaf_or_a_constant_or_a_non_callable_raises():
    w = P([1.0])
    with pytest.raises(RuntimeError, match="leaf tensors that require grad"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="leaf tensors that require grad"):
        sadl.tensor([1.0]).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(TypeError, match="callable"):
        w.register_post_accumulate_grad_hook("not a function")


def test_callback_runs_once_after_every_leaf_has_its_grad():
    w1, w2 = P([1.0]), P([2.0])
    state = []

    def hook(p):
        if not state:
            sadl.queue_backward_callback(lambda: state.append((w1.grad.copy(), w2.grad.copy())))
        state.append("queued")

    w2.register_post_accumulate_grad_hook(hook)
    ((w1 * 3).exp() * w2).sum().backward()
    assert state[0] == "queued"
    g1, g2 = state[1]
    np.testing.assert_allclose(g1, 3 * np.exp(3.0) * 2.0)
    np.testing.assert_allclose(g2, np.exp(3.0))


def test_callbacks_run_in_order_and_may_queue_more():
    w = P([1.0])
    calls = []

    def second():
        calls.append("second")
        sadl.queue_backward_callback(lambda: calls.append("third"))

    def hook(p):
        sadl.queue_backward_callback(lambda: calls.append("first"))
        sadl.queue_backward_callback(second)

    w.register_post_accumulate_grad_hook(hook)
    (w * 2).sum().backward()
    assert calls == ["first", "second", "third"]
    (w * 2).sum().backward()  # each pass has its own queue
    assert calls == ["first", "second", "third"] * 2


def test_queue_outside_a_backward_pass_raises():
    with pytest.raises(RuntimeError, match="no backward pass is running"):
        sadl.queue_backward_callback(lambda: None)
    with pytest.raises(TypeError, match="callable"):
        sadl.queue_backward_callback(42)


def test_callbacks_of_a_failed_pass_are_dropped():
    w = P([1.0])
    calls = []

    def hook(p):
        sadl.queue_backward_callback(lambda: calls.append("ran"))
        raise ValueError("hook failed")

    handle = w.register_post_accumulate_grad_hook(hook)
    with pytest.raises(ValueError, match="hook failed"):
        (w * 2).sum().backward()
    handle.remove()
    assert calls == []
    # The failed pass left nothing behind: outside a pass, queueing raises again.
    with pytest.raises(RuntimeError, match="no backward pass is running"):
        sadl.queue_backward_callback(lambda: None)


def test_gradients_are_unchanged_by_hooks(rng):
    # Same graph with and without hooks: identical gradients, bit for bit.
    def run(with_hooks):
        w1 = P(np.random.default_rng(1).normal(size=(4, 5)))
        w2 = P(np.random.default_rng(2).normal(size=(5,)))
        if with_hooks:
            for p in (w1, w2):
                p.register_post_accumulate_grad_hook(lambda p: None)
        x = sadl.tensor(np.random.default_rng(3).normal(size=(6, 4)))
        h = (x @ w1).tanh()
        ((h @ w2) ** 2 + (h * h).sum(axis=1)).mean().backward()
        return w1.grad, w2.grad

    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)
