"""Gradient parity with PyTorch for a composite expression of more than 20 ops."""

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch")


def composite(
    x, w, b, *, xp_sum, xp_max, softmax, log_softmax, sigmoid, relu, where, clip, flip, var
):
    # 24 core ops: matmul add tanh multiply exp subtract divide sqrt abs log sum mean max power
    # flip transpose reshape softmax log_softmax sigmoid relu where negative maximum minimum
    # log1p clip var
    h = x @ w + b
    h = h.tanh() * 1.5 - (h * 0.3).exp() / 2.0
    h = (h * h + 1.0).sqrt() + h.abs().log1p()
    s = softmax(h)
    ls = log_softmax(h)
    g = sigmoid(flip(h)) * relu(h - 0.1)
    g = where(h > 0, g, -g)
    t = clip(h, -0.5, 0.5).T.reshape(-1)
    m = xp_max(h, 1)
    return xp_sum(s * ls) + (g**2).mean() + xp_sum(t * 0.25) + m.mean() + var((-h).maximum(h * 0.5))


def test_composite_gradients_match_torch():
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(4, 5)), rng.normal(size=(5, 6)) * 0.5, rng.normal(size=(6,))]
    ours = [sadl.Tensor(a, requires_grad=True) for a in xs]
    theirs = [torch.tensor(a, requires_grad=True) for a in xs]

    out = composite(
        *ours,
        xp_sum=lambda t: t.sum(),
        xp_max=lambda t, d: t.max(d),
        softmax=lambda t: t.softmax(-1),
        log_softmax=lambda t: t.log_softmax(-1),
        sigmoid=lambda t: t.sigmoid(),
        relu=lambda t: t.relu(),
        where=lambda c, a, b: np.where(c, a, b),
        clip=lambda t, lo, hi: t.clip(lo, hi),
        flip=lambda t: t[:, ::-1],
        var=lambda t: t.var(),
    )
    ref = composite(
        *theirs,
        xp_sum=lambda t: t.sum(),
        xp_max=lambda t, d: t.max(d).values,
        softmax=lambda t: t.softmax(-1),
        log_softmax=lambda t: t.log_softmax(-1),
        sigmoid=torch.sigmoid,
        relu=torch.relu,
        where=torch.where,
        clip=lambda t, lo, hi: t.clamp(lo, hi),
        flip=lambda t: t.flip(1),
        var=lambda t: t.var(unbiased=False),
    )
    out.backward()
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-10)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=1e-8, atol=1e-10)
