"""sadl.checkpoint over bodies that write in place on a slice of a non-leaf (``h[0] += 1``).

Such a write rebases the graph (core's ``_inplace.py``) from arrays of nodes recorded earlier in
the body; checkpointing used to drop those arrays at record time, so its forward recorded another
graph than its recomputation and backward refused ("the first run recorded 6 ops, the
recomputation 7"). Each body gives the gradient it gives without checkpointing, and torch's
(``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``).
"""

import numpy as np
import pytest
import sadl


def add_to_a_row(a, x):
    h = a * 1.0
    h[0] += 1
    return (h * h).sum()


def scale_a_slice(a, x):
    h = a * 1.0
    h[1:] *= 2
    return (h * h).sum()


def assign_a_row(a, x):
    h = a * 1.0
    h[0] = x[0] * 3
    return (h * h).sum()


def two_writes(a, x):
    h = a * 1.0
    h[0] += 1
    h[:, 1] *= x[:, 1]
    return (h * h).sum()


def view_of_a_view(a, x):
    h = a * 1.0
    g = h[1:]
    k = g[0]
    k[1:] *= x[0, 1:]
    g[0] = k
    h[1:] = g
    return (h * h * h).sum()


def write_then_reuse(a, x):
    h = a * a
    h[1:] += x[1:]
    return (h.sin() * a).sum() + h[0].sum()


def write_on_a_saved_output(a, x):
    h = a.exp()  # exp's backward reads its output, which the write below changes
    h[1:] += x[1:]
    return (h.tanh() * a).sum() + h[0].sum()


BODIES = [add_to_a_row, scale_a_slice, assign_a_row, two_writes, view_of_a_view, write_then_reuse]
A = np.random.default_rng(0).standard_normal((3, 4))
X = np.random.default_rng(1).standard_normal((3, 4))


def sadl_grads(body, how):
    a, x = sadl.Parameter(A.copy()), sadl.Parameter(X.copy())
    if how == "plain":
        loss = body(a, x)
    else:
        loss = sadl.checkpoint(body, a, x, determinism_check=how)
    loss.backward()
    return [np.zeros_like(A) if p.grad is None else np.asarray(p.grad) for p in (a, x)]


@pytest.mark.parametrize("check", ["default", "none"])
@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.__name__)
def test_checkpointed_inplace_slice_writes_give_the_plain_gradient(body, check):
    for plain, checked in zip(sadl_grads(body, "plain"), sadl_grads(body, check)):
        np.testing.assert_array_equal(checked, plain)


@pytest.mark.parametrize("check", ["default", "none"])
@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.__name__)
def test_checkpointed_inplace_slice_writes_match_torch(body, check):
    torch = pytest.importorskip("torch", reason="PyTorch is the reference here")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    a = torch.tensor(A, requires_grad=True)
    x = torch.tensor(X, requires_grad=True)
    torch_checkpoint(body, a, x, use_reentrant=False).backward()
    expected = [np.zeros_like(A) if t.grad is None else t.grad.numpy() for t in (a, x)]
    for got, want in zip(sadl_grads(body, check), expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("check", ["default", "none"])
def test_a_write_on_an_output_backward_reads_gives_the_exact_gradient(check):
    # The rebase keeps exp's output as it was for exp's backward. Here torch's own checkpoint
    # returns a wrong gradient (its recomputation saves the overwritten output; without
    # checkpointing torch refuses), so the reference is the gradient worked out by hand.
    h = np.exp(A)
    h[1:] += X[1:]
    exact = np.tanh(h) + A * (1 - np.tanh(h) ** 2) * np.exp(A)
    exact[0] += np.exp(A[0])
    for how in ("plain", check):
        grad_a, grad_x = sadl_grads(write_on_a_saved_output, how)
        np.testing.assert_allclose(grad_a, exact, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grad_x[1:], (A * (1 - np.tanh(h) ** 2))[1:], rtol=1e-12)


def test_the_nodes_of_a_checkpointed_body_hold_no_arrays_once_it_returns():
    a = sadl.Parameter(A.copy())
    out = sadl.checkpoint(lambda t: add_to_a_row(t, None) * 2.0, a)
    seen, stack = set(), [out.grad_fn]
    while stack:  # every node recorded in the body, down to ``a * 1.0``
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            assert node.datas is None and node.out is None and node.refill is not None, node
            stack.extend(p for p in node.parents if p is not None and hasattr(p, "op"))
    assert len(seen) == 7, len(seen)  # a * 1.0, h[0], += 1, h[0] = ..., h * h, sum, * 2.0
    out.backward()
    h = A.copy()
    h[0] += 1
    np.testing.assert_array_equal(a.grad, 4 * h)


def test_a_write_on_a_view_of_a_view_not_written_back_is_refused_as_without_checkpoint():
    # ``h[1:][0] += 1`` changes h's memory behind h's graph: sadl refuses it (torch rebases h);
    # checkpointing gives the same refusal, not another error and never a wrong gradient.
    def body(a):
        h = a * 1.0
        h[1:][0] += 1
        return (h * h).sum()

    for how in ("plain", "default", "none"):
        a = sadl.Parameter(A.copy())
        loss = body(a) if how == "plain" else sadl.checkpoint(body, a, determinism_check=how)
        with pytest.raises(RuntimeError, match="modified by an in-place operation"):
            loss.backward()


def _inner_grad_body(w):
    def body(a):
        h = (a * w).sin()
        (g,) = sadl.grad(h.sum(), [a])  # a backward inside fn: it frees h's graph
        return (a * w * g.detach()).sum()

    return body


@pytest.mark.parametrize("check", ["default", "none"])
def test_a_backward_inside_the_body_gives_the_plain_gradient(check):
    # The backward inside fn used to meet nodes whose arrays were already dropped, and the
    # recomputation's check read the output of a node that backward had freed.
    results = []
    for how in ("plain", check):
        w = sadl.Parameter(np.array([1.0, -0.5, 2.0]))
        a = sadl.Parameter(np.arange(3.0))
        body = _inner_grad_body(w)
        loss = body(a) if how == "plain" else sadl.checkpoint(body, a, determinism_check=how)
        loss.backward()
        results.append((a.grad.copy(), w.grad.copy()))
    for plain, checked in zip(*results):
        np.testing.assert_array_equal(checked, plain)


@pytest.mark.parametrize("check", ["plain", "default", "none"])
def test_an_output_whose_graph_a_backward_inside_freed_is_refused_as_without_checkpoint(check):
    w = sadl.Parameter(np.ones(3))

    def body(a):
        out = (a * w).sin()
        sadl.grad(out.sum(), [a])
        return out

    a = sadl.Parameter(np.arange(3.0))
    out = body(a) if check == "plain" else sadl.checkpoint(body, a, determinism_check=check)
    with pytest.raises(RuntimeError, match="second time"):
        out.sum().backward()
