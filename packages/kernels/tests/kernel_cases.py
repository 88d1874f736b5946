"""Shared helpers of sadl-kernels' tests: a step eagerly and compiled, compared; kernels counted."""

from __future__ import annotations

import numpy as np
import sadl


def kernels_in(compiled, name):
    """How many ``kernel[name]`` calls the compiled graph has."""
    return str(compiled.graph).count(f"kernel[{name}]")


def eager_and_compiled(fn, arrays, grads=True, calls=2, **options):
    """``fn`` on tensors of ``arrays``, eagerly and (the ``calls``-th call: a replay) compiled.

    Returns ``(eager outputs, compiled outputs, eager grads, compiled grads, compiled)``.
    """
    compiled = sadl.compile(fn, **options)
    for _ in range(calls):
        ct = [sadl.tensor(a.copy(), requires_grad=grads) for a in arrays]
        out_c = compiled(*ct)
    et = [sadl.tensor(a.copy(), requires_grad=grads) for a in arrays]
    out_e = fn(*et)
    ge = [t.grad for t in et] if grads else []
    gc = [t.grad for t in ct] if grads else []
    return out_e, out_c, ge, gc, compiled


def assert_close(a, b, tol):
    """``a`` and ``b`` (Tensors or arrays) agree to ``atol = rtol = tol``."""
    a = a.numpy() if hasattr(a, "numpy") else np.asarray(a)
    b = b.numpy() if hasattr(b, "numpy") else np.asarray(b)
    np.testing.assert_allclose(a, b, atol=tol, rtol=tol)


def numerical_gradient(loss, x, h=1e-6, picks=12, seed=0):
    """Central differences of ``loss(x)`` (float64) at ``picks`` random entries of ``x``."""
    rng = np.random.default_rng(seed)
    flat = rng.choice(x.size, size=min(picks, x.size), replace=False)
    out = {}
    for i in flat:
        idx = np.unravel_index(i, x.shape)
        up, down = x.copy(), x.copy()
        up[idx] += h
        down[idx] -= h
        out[idx] = (loss(up) - loss(down)) / (2 * h)
    return out
