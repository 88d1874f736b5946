"""The small model and data sadl.compile's tests train, from core ops only (core's tests have no
sadl-layers)."""

import numpy as np
import sadl


class MLP(sadl.nn.Module):
    """Two dense layers and a ReLU; with ``dropout`` the hidden layer gets a fresh mask each call
    (p = 0.25), drawn on the device the hidden layer is on."""

    def __init__(self, seed=0, n_in=12, n_hidden=16, n_out=5, dropout=False):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.w1 = sadl.Parameter(rng.standard_normal((n_in, n_hidden)).astype(np.float32) / 4)
        self.b1 = sadl.Parameter(np.zeros(n_hidden, np.float32))
        self.w2 = sadl.Parameter(rng.standard_normal((n_hidden, n_out)).astype(np.float32) / 4)
        self.b2 = sadl.Parameter(np.zeros(n_out, np.float32))
        self.dropout = dropout

    def forward(self, x):
        h = (x @ self.w1 + self.b1).relu()
        if self.dropout:
            keep = sadl.rand(*h.shape, device=h.device) >= 0.25
            h = h * keep.astype(np.float32) / 0.75
        return h @ self.w2 + self.b2


def cross_entropy(logits, targets):
    """Mean softmax cross-entropy of logits (B, C) against class ids (B,)."""
    return -logits.log_softmax(-1).take_along_axis(targets[:, None], 1).mean()


def batches(n, seed=1, batch=8, n_in=12, n_out=5):
    """``n`` pairs (inputs (batch, n_in) float32, class ids (batch,) below n_out)."""
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((batch, n_in)).astype(np.float32), rng.integers(0, n_out, batch))
        for _ in range(n)
    ]


def assert_draws_replay_as_in_eager(noisy, x, calls=4):
    """``noisy(x)`` draws random numbers: compiled from the same seed, its replays give eager's
    values call for call, fresh numbers each call, from one trace."""
    compiled = sadl.compile(noisy)
    sadl.manual_seed(7)
    eager = [noisy(x).numpy() for _ in range(calls)]
    sadl.manual_seed(7)  # a new seed renews the generators: replays draw from the new stream
    replayed = [compiled(x).numpy() for _ in range(calls)]
    for e, r in zip(eager, replayed):
        assert np.array_equal(e, r)
    assert not np.array_equal(replayed[1], replayed[2])
    assert compiled.stats.traces == 1


def grad_of_prod(x):
    """``x.prod()`` and its backward: prod's backward rule asks ``np.any(x == 0)`` to pick its
    zero-safe formula, a branch on an array in op code (a guard under sadl.compile)."""
    out = x.prod()
    out.backward()
    return out


def assert_prod_guard_falls_back_once(device="cpu"):
    """``grad_of_prod`` compiled on ``device`` gives eager's values and gradients; the input with
    a zero fails the guard and runs eagerly once, without a new trace. Returns the compiled
    function."""
    compiled = sadl.compile(grad_of_prod)
    for values in ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [2.0, 0.0, 3.0]):
        xe = sadl.tensor(values, requires_grad=True, device=device)
        xc = sadl.tensor(values, requires_grad=True, device=device)
        assert grad_of_prod(xe).numpy() == compiled(xc).numpy()
        assert sadl.backends.device_of(xc.grad).type == device
        expected, got = (sadl.backends.to_device(g, "cpu") for g in (xe.grad, xc.grad))
        assert np.array_equal(expected, got)
    assert compiled.stats.traces == 1 and compiled.stats.fallbacks == 1
    return compiled
