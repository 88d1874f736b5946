"""sadl.checkpoint around sadl-layers modules (reached through sadl.nn): Dropout is replayed."""

import numpy as np
import sadl


def test_checkpointed_layers_with_dropout_match_the_plain_run():
    sadl.manual_seed(0)
    blocks = [
        sadl.nn.Sequential(sadl.nn.Linear(16, 32), sadl.nn.Dropout(0.3), sadl.nn.Linear(32, 16))
        for _ in range(3)
    ]
    params = [p for b in blocks for p in b.parameters()]
    x = sadl.tensor(np.random.default_rng(1).normal(size=(8, 16)).astype(np.float32))
    results = []
    for checkpointed in (False, True):
        sadl.manual_seed(5)
        h = x
        for block in blocks:
            h = h + (sadl.checkpoint(block, h) if checkpointed else block(h))
        grads = sadl.grad((h * h).mean(), params)
        results.append([g.numpy() for g in grads])
    for plain, checked in zip(*results):
        np.testing.assert_array_equal(plain, checked)
