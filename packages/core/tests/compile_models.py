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
