"""AdamW on float16 parameters against torch's fused CPU AdamW (skipped without torch).

torch's default (for-each) AdamW does its arithmetic in float16, where eps=1e-8 is 0 and a small
gradient squares to 0: ``sqrt(v) + eps`` is 0 and a step is 0/0, NaN. Its fused kernel keeps the
state in float16 but computes each step in float32, and sadl-optim's AdamW does the same.
"""

from __future__ import annotations

import numpy as np
import pytest
import sadl
import sadl_optim  # noqa: F401  (registers AdamW as sadl.optim.AdamW)

torch = pytest.importorskip("torch", reason="torch is the reference for these parity tests")
pytestmark = pytest.mark.torch


def _grads():
    rng = np.random.default_rng(0)
    grads = [(rng.standard_normal(64) * s).astype(np.float16) for s in (1.0, 1e-5, 0.0, 300, 1e-3)]
    grads[0][:8] = 0.0  # m = v = 0 for these on the first step: 0 / (0 + eps)
    grads[1][8:16] = 1e-6  # squares underflow float16
    return grads


@pytest.mark.parametrize("kwargs", [{}, {"amsgrad": True, "weight_decay": 0.1}])
def test_adamw_on_float16_steps_as_torchs_fused_kernel(kwargs):
    p0 = np.random.default_rng(1).standard_normal(64).astype(np.float16)
    tp = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    topt = torch.optim.AdamW([tp], lr=1e-2, fused=True, **kwargs)
    sp = sadl.Parameter(p0.copy())
    sopt = sadl.optim.AdamW([sp], lr=1e-2, **kwargs)
    for g in _grads():
        tp.grad = torch.from_numpy(g.copy())
        topt.step()
        sp.grad = g.copy()
        sopt.step()
        assert sp.data.dtype == np.float16 and np.isfinite(sp.data).all()
        np.testing.assert_array_equal(sp.data, tp.detach().numpy())
        for key in ("exp_avg", "exp_avg_sq"):
            state = sopt.state[sp][key]
            assert state.dtype == np.float16  # the state stays float16, as torch keeps it
            np.testing.assert_array_equal(state, topt.state[tp][key].numpy())
