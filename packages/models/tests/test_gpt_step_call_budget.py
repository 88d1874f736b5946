"""The eager GPT training step's cost in Python calls: forward, loss, backward and AdamW.

A call is about as costly as a NumPy ufunc on a small array, so the per-step calls of the layers'
and the optimizer's wrappers show in the small-model step time (``bench/models.py`` W3-S), and
the call count, unlike time, does not depend on the machine's load. The budget is today's count
(the config of bench/models.py's S step, smaller): lower it when the step gets shorter. (4446 +
24: the tanh GELU's forward and backward each hold an ``np.errstate`` for the exp that stands in
for NumPy's slower tanh, about 6 calls a use.)
"""

from __future__ import annotations

import numpy as np
from sadl_check.calls import count_calls
from sadl_models.gpt import GPT
from sadl_optim import AdamW, param_groups_for_weight_decay


def test_a_small_gpt_training_step_makes_at_most_4470_calls() -> None:
    model = GPT(65, 8, 2, 4, 16, rng=0)  # vocab, block, layers, heads, embedding width
    opt = AdamW(param_groups_for_weight_decay(model, 0.1), lr=1e-3, betas=(0.9, 0.99))
    tokens = np.random.default_rng(0).integers(0, 65, size=(4, 9))
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step() -> None:
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()  # first use: the ops' plugins load outside the count
    calls = count_calls(step)
    assert calls <= 4470, f"{calls} calls for a GPT training step (budget 4470)"
