"""sadl.checkpoint: the same gradients as without it, for less memory."""

import tracemalloc

import numpy as np
import pytest
import sadl


class Block(sadl.Module):
    """A residual MLP block; its parameters are found by the closure, not passed in."""

    def __init__(self, width, hidden, rng):
        super().__init__()
        self.w1 = sadl.Parameter(rng.normal(size=(width, hidden)) / np.sqrt(width))
        self.w2 = sadl.Parameter(rng.normal(size=(hidden, width)) / np.sqrt(hidden))

    def forward(self, h, keep=None):
        inner = np.tanh(h @ self.w1)
        if keep is not None:
            inner = inner * keep
        return h + (inner @ self.w2) * 0.5


def make_stack(depth=4, width=8, hidden=16, seed=0):
    rng = np.random.default_rng(seed)
    return [Block(width, hidden, rng) for _ in range(depth)]


def run(blocks, x, checkpointed, dropout=0.0):
    h = x
    for block in blocks:

        def step(a, block=block):
            keep = None
            if dropout:
                keep = (sadl.rand(*a.shape[:-1], block.w1.shape[1]).numpy() >= dropout) / (
                    1 - dropout
                )
            return block(a, keep)

        h = sadl.checkpoint(step, h) if checkpointed else step(h)
    return (h * h).mean()


def grads_of(blocks, x, checkpointed, dropout=0.0):
    params = [p for b in blocks for p in b.parameters()]
    loss = run(blocks, x, checkpointed, dropout)
    return [g.numpy() for g in sadl.grad(loss, [x, *params])]


def test_same_gradients_with_parameters_captured_by_the_function():
    blocks = make_stack()
    x = sadl.tensor(np.random.default_rng(1).normal(size=(5, 8)), requires_grad=True)
    for plain, checked in zip(grads_of(blocks, x, False), grads_of(blocks, x, True)):
        np.testing.assert_array_equal(plain, checked)
    # backward() fills .grad the same way
    run(blocks, x, True).backward()
    np.testing.assert_array_equal(blocks[0].w1.grad, grads_of(blocks, x, False)[1])


def test_inputs_that_do_not_require_grad_still_train_the_parameters():
    blocks = make_stack(depth=2)
    x = sadl.tensor(np.random.default_rng(2).normal(size=(3, 8)))
    run(blocks, x, True).backward()
    assert blocks[0].w1.grad is not None and np.abs(blocks[0].w1.grad).sum() > 0


def test_create_graph_gives_the_same_second_derivatives():
    blocks = make_stack(depth=2)
    x0 = np.random.default_rng(3).normal(size=(4, 8))
    results = []
    for checkpointed in (False, True):
        x = sadl.tensor(x0, requires_grad=True)
        (gx,) = sadl.grad(run(blocks, x, checkpointed), [x], create_graph=True)
        penalty = (gx * gx).sum()
        results.append([g.numpy() for g in sadl.grad(penalty, [x, blocks[0].w2])])
    for plain, checked in zip(*results):
        np.testing.assert_allclose(plain, checked, rtol=1e-12, atol=1e-15)


def test_random_numbers_are_replayed_and_the_generator_moves_on_as_without_checkpoint():
    blocks = make_stack(depth=3)
    x = sadl.tensor(np.random.default_rng(4).normal(size=(6, 8)), requires_grad=True)
    outcomes = []
    for checkpointed in (False, True):
        sadl.manual_seed(11)
        grads = grads_of(blocks, x, checkpointed, dropout=0.5)
        outcomes.append((grads, sadl.rand(3).numpy()))
    (plain, after_plain), (checked, after_checked) = outcomes
    for a, b in zip(plain, checked):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(after_plain, after_checked)


def test_a_function_that_does_not_repeat_itself_is_caught():
    w = sadl.Parameter(np.ones((3, 3)))
    own = np.random.default_rng(0)  # not sadl's generator: not replayed

    def noisy(a):
        return (a @ w) * (own.random((2, 3)) >= 0.5)

    out = sadl.checkpoint(noisy, sadl.tensor(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="deterministic"):
        out.sum().backward()


def test_no_grad_and_nothing_to_differentiate_just_call_the_function():
    blocks = make_stack(depth=1)
    x = sadl.tensor(np.ones((2, 8)))
    with sadl.no_grad():
        out = sadl.checkpoint(blocks[0], x)
    assert not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), blocks[0](x).detach().numpy())
    with pytest.raises(TypeError, match="callable"):
        sadl.checkpoint(3, x)


def test_a_tensor_from_outside_the_function_gets_its_gradient_once():
    w = sadl.tensor(np.array([1.5, -0.5]), requires_grad=True)
    for checkpointed in (False, True):
        w.grad = None
        h = w * 2.0  # not a leaf, captured by the closure
        x = sadl.tensor(np.array([0.3, 0.7]), requires_grad=True)

        def f(a, h=h):
            return np.sin(a * h) + h * w

        out = sadl.checkpoint(f, x) if checkpointed else f(x)
        out.sum().backward()
        if not checkpointed:
            expected = w.grad.copy()
    np.testing.assert_allclose(w.grad, expected)


def test_retain_graph_recomputes_again_and_a_freed_graph_still_raises():
    blocks = make_stack(depth=2)
    x = sadl.tensor(np.random.default_rng(5).normal(size=(3, 8)), requires_grad=True)
    loss = run(blocks, x, True)
    loss.backward(retain_graph=True)
    first = x.grad.copy()
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_nested_checkpoints():
    blocks = make_stack(depth=4)
    x = sadl.tensor(np.random.default_rng(6).normal(size=(3, 8)), requires_grad=True)

    def pair(a, first, second):
        return second(sadl.checkpoint(first, a))

    h = sadl.checkpoint(pair, x, blocks[0], blocks[1])
    h = sadl.checkpoint(pair, h, blocks[2], blocks[3])
    (gx,) = sadl.grad((h * h).mean(), [x])
    np.testing.assert_array_equal(gx.numpy(), grads_of(blocks, x, False)[0])


def _peak_bytes(checkpointed):
    blocks = make_stack(depth=8, width=64, hidden=256)
    x = sadl.tensor(np.random.default_rng(7).normal(size=(256, 64)), requires_grad=True)
    tracemalloc.start()
    try:
        run(blocks, x, checkpointed).backward()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_checkpointing_a_deep_stack_lowers_peak_memory():
    plain, checked = _peak_bytes(False), _peak_bytes(True)
    # 8 blocks, each keeping two (256, 256) activations: checkpointing keeps block inputs only.
    assert checked < 0.5 * plain, (plain, checked)
