"""A float16 model of sadl-layers trained with sadl-optim's AdamW stays finite (eager).

Linear, LayerNorm and the tanh GELU accumulate in float32 as torch's CPU kernels do, and AdamW
steps float16 parameters in float32 arithmetic as torch's fused kernel does; in float16 itself
the norm's variance overflows and AdamW's ``sqrt(v) + eps`` is 0, and the loss goes NaN.
"""

import numpy as np
import sadl


def test_float16_linear_layernorm_gelu_model_trains_without_nan():
    nn = sadl.nn

    rng = np.random.default_rng(0)
    x = sadl.tensor((rng.standard_normal((16, 8)) * 3).astype(np.float16))
    y = sadl.tensor(rng.standard_normal((16, 4)).astype(np.float16))
    half = np.float16
    model = nn.Sequential(
        nn.Linear(8, 16, dtype=half, rng=0),
        nn.LayerNorm(16, dtype=half),
        nn.GELU("tanh"),
        nn.Linear(16, 4, dtype=half, rng=1),
    )
    opt = sadl.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = sadl.ops.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.data))
    assert np.isfinite(losses).all(), losses
    assert losses[-1] < 0.5 * losses[0]
    assert all(p.dtype == half for p in model.parameters())
