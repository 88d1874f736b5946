"""Ops that allocate a buffer and then fill it in place, compiled against eager.

Op code makes its arrays with ``sadl.backends.array_module(x)`` (``xp.zeros``, ``xp.empty``
...), which in a tracing thread is the tracer's recording module: the allocation is a call of
the graph, made anew on every replay, so a buffer filled in place (a scatter, a pooling
gradient, ``buf[i] = ...``) is never a constant frozen at trace time nor one array shared by
every replay. Each case is a training step run eagerly and compiled on the same state, with
new values on every call; results, parameters and gradients must agree bit for bit.
"""

import numpy as np
import pytest
import sadl
from sadl.backends import array_module

pytest.importorskip("sadl_layers")
ops = sadl.ops


def _index_grad(w, x):  # core: fancy indexing, its gradient scattered into zeros
    return (w[np.array([0, 2, 2, 1])] * x[:4]).sum()


def _repeat(w, x):  # core: repeat, its gradient summed into a new buffer
    return (np.repeat(w, 2) * x[:12]).sum()


def _diagonal(w, x):  # core: diagonal, its gradient written into zeros
    return (np.diagonal(w.reshape(2, 3)) * x[:2]).sum()


def _take_along(w, x):  # core: take_along_axis, its gradient scattered into zeros
    idx = np.array([[2, 0], [1, 1]])
    return (ops.take_along_axis(w.reshape(2, 3), indices=idx, axis=1) * x[:4].reshape(2, 2)).sum()


def _factories(w, x):  # core: sadl's factories, then a slice assigned and a scatter
    buf = sadl.zeros(8, dtype=np.float64)
    buf[2:8] = w * x[:6]
    return (buf * sadl.arange(8.0, dtype=np.float64) + sadl.ones(8, dtype=np.float64)).sum()


def _max_pool(w, x):  # layers: max pooling (indices and gradient made by the op)
    img = (w.reshape(1, 1, 2, 3) * x[:6].reshape(1, 1, 2, 3)).reshape(1, 1, 2, 3)
    return ops.max_pool2d(img, kernel_size=2, stride=1).sum()


def _avg_pool(w, x):  # layers: average pooling, its gradient accumulated into zeros
    img = w.reshape(1, 1, 2, 3) * x[:6].reshape(1, 1, 2, 3)
    return (ops.avg_pool2d(img, kernel_size=2, stride=1, padding=1) ** 2).sum()


def _embedding(w, x):  # layers: embedding, its gradient scattered into zeros
    ids = (x[:4] > 0.5).astype(np.int64)
    return (ops.embedding(w.reshape(3, 2), ids) ** 2).sum()


def _scatter_add(w, x):  # layers: scatter_add into a buffer the op makes
    index = np.array([0, 2, 2, 1, 0, 1])
    return (ops.scatter_add(w * 0.0, 0, index, x[:6] * w) ** 2).sum()


def _xp_buffer(w, x):  # op-style code: xp.zeros from the array module, filled in place
    xp = array_module(w.data)
    buf = xp.zeros((2, 3))
    buf[1] = (w.data * x[:6].data)[:3]
    return (w * sadl.tensor(buf).reshape(-1)).sum()


CASES = [
    _index_grad,
    _repeat,
    _diagonal,
    _take_along,
    _factories,
    _max_pool,
    _avg_pool,
    _embedding,
    _scatter_add,
    _xp_buffer,
]


def _step(body, w):
    opt = sadl.SGD([w], lr=0.1)

    def step(x):
        loss = body(w, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), w.grad

    return step


@pytest.mark.parametrize("body", CASES, ids=[c.__name__.strip("_") for c in CASES])
def test_an_op_that_allocates_and_fills_replays_as_eager(body):
    rng = np.random.default_rng(0)
    start = rng.standard_normal(6)
    w_eager, w_compiled = sadl.Parameter(start.copy()), sadl.Parameter(start.copy())
    eager, compiled = _step(body, w_eager), sadl.compile(_step(body, w_compiled), fusion=False)
    results = []
    for _ in range(4):
        x = sadl.tensor(rng.random(12))
        (want_loss, want_grad), (got_loss, got_grad) = eager(x), compiled(x)
        assert want_loss.numpy().tobytes() == got_loss.numpy().tobytes()
        assert np.asarray(want_grad).tobytes() == np.asarray(got_grad).tobytes()
        assert w_eager.data.tobytes() == w_compiled.data.tobytes()
        results.append(got_loss)
    assert compiled.stats.traces == 1 and compiled.stats.replays == 3
    # every replay handed out its own result: none is a buffer shared across calls
    assert len({id(r.data) for r in results}) == len(results)
    assert len({r.item() for r in results}) == len(results)


@pytest.mark.parametrize(
    "make",
    # looked up at call time, as `np.zeros(...)` in a function body is
    [lambda s: np.zeros(s), lambda s: np.empty(s), lambda s: np.ones(s), lambda s: np.full(s, 7.0)],
    ids=["zeros", "empty", "ones", "full"],
)
def test_a_buffer_of_the_function_filled_by_assignment_is_seen(make):
    # The constructors your own code fills by assignment (`buf[i] = ...`, which NumPy does not
    # dispatch) are wrapped while tracing: the buffer is recorded, filled anew on every replay.
    def one_hot(labels, logits):
        target = make(logits.shape)
        target[...] = 0.0
        target[np.arange(len(labels.data)), labels.data] = 1.0
        return (logits * sadl.tensor(target)).sum()

    compiled = sadl.compile(one_hot)
    rng = np.random.default_rng(1)
    for _ in range(3):
        labels, logits = sadl.tensor(rng.integers(0, 4, 5)), sadl.tensor(rng.random((5, 4)))
        assert one_hot(labels, logits).item() == compiled(labels, logits).item()


def test_a_plain_view_of_traced_memory_reaching_a_numpy_call_is_refused():
    compiled = sadl.compile(lambda x: x * np.ascontiguousarray((x * 2).data))
    with pytest.raises(sadl.CompileError, match="plain NumPy array viewing memory"):
        compiled(sadl.ones(3))
