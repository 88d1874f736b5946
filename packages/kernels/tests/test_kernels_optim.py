"""The flat optimizer kernels: AdamW, Adam and SGD with momentum, bit for bit equal to eager."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_optim import AdamW


def _model(seed, dtype):
    rng = np.random.default_rng(seed)
    return [sadl.Parameter(rng.standard_normal(s).astype(dtype)) for s in ((6, 5), (5,), (5, 3))]


def _train(make_opt, dtype, compiled, steps=6):
    params = _model(0, dtype)
    opt = make_opt(params)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((4, 6)).astype(dtype) for _ in range(steps)]

    def step(x):
        h = sadl.tensor(x) @ params[0] + params[1]
        loss = ((h @ params[2]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = sadl.compile(step) if compiled else step
    for x in xs:
        run(x)
    return params, opt, run


OPTIMIZERS = {
    "adamw": lambda p: AdamW(p, lr=0.01, weight_decay=0.1),
    "adamw_amsgrad": lambda p: AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True),
    "adam_l2": lambda p: sadl.optim.Adam(p, lr=0.01, weight_decay=0.05),
    "adam": lambda p: sadl.optim.Adam(p, lr=0.01, betas=(0.8, 0.9)),
    "sgd_momentum": lambda p: sadl.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda p: sadl.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "sgd_dampening": lambda p: sadl.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.3),
    # torch's switches: the kernel decays as AdamW does, or leaves a maximizing group to the
    # optimizer's own update (which negates the gradient)
    "adam_decoupled": lambda p: sadl.optim.Adam(
        p, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True
    ),
    "adam_maximize": lambda p: sadl.optim.Adam(p, lr=0.01, maximize=True),
    "adamw_maximize": lambda p: AdamW(p, lr=0.01, weight_decay=0.1, maximize=True),
    "sgd_maximize": lambda p: sadl.optim.SGD(p, lr=0.05, momentum=0.9, maximize=True),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_flat_updates_are_bit_for_bit_eager(name, dtype):
    eager, eager_opt, _ = _train(OPTIMIZERS[name], dtype, compiled=False)
    fast, fast_opt, run = _train(OPTIMIZERS[name], dtype, compiled=True)
    assert "sadl_kernels.optimizer: numba updates" in str(run.graph)
    for pe, pc in zip(eager, fast):
        assert pc.data.dtype == dtype
        np.testing.assert_array_equal(pc.data, pe.data)
    for pe, pc in zip(eager, fast):
        se, sc = eager_opt.state[pe], fast_opt.state[pc]
        assert se.keys() == sc.keys()
        for key in se:
            np.testing.assert_array_equal(np.asarray(sc[key]), np.asarray(se[key]))


def test_a_subclass_with_its_own_update_keeps_it():
    class Halved(sadl.optim.SGD):
        def update(self, param, grad, state, group):
            super().update(param, grad * 0.5, state, group)

    make = lambda p: Halved(p, lr=0.05, momentum=0.9)
    eager, _, _ = _train(make, np.float32, compiled=False)
    fast, _, run = _train(make, np.float32, compiled=True)
    assert "sadl_kernels.optimizer" not in str(run.graph)
    for pe, pc in zip(eager, fast):
        np.testing.assert_array_equal(pc.data, pe.data)
