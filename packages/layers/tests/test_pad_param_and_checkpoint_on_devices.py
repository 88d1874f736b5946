"""sadl-layers' ``pad`` refuses a Tensor that requires grad given as a constant param; and
sadl.checkpoint (sadl-layers' activation checkpointing) on every device of the matrix."""

import numpy as np
import pytest
import sadl
from sadl.testing import assert_close


def test_a_tensor_that_requires_grad_given_as_a_constant_param_is_refused():
    x = sadl.tensor(np.array([0.0, 1.0]), requires_grad=True)
    w = sadl.tensor(np.array(0.5), requires_grad=True)
    with pytest.raises(TypeError, match=r"constant parameter.*requires grad.*detach"):
        sadl.ops.pad(x, pad_width=1, constant_values=w)
    sadl.ops.pad(x, pad_width=1, constant_values=w.detach())


def test_checkpoint_replays_the_random_numbers_drawn_on_the_device(device):
    rng = np.random.default_rng(0)
    w = sadl.Parameter(rng.normal(size=(8, 16)), device=device)
    x = sadl.tensor(rng.normal(size=(5, 8)), device=device, requires_grad=True)

    def block(a):
        keep = sadl.rand(5, 16, device=device) >= 0.3  # drawn on the device, twice if recomputed
        return (np.tanh(a @ w) * keep).sum()

    results = []
    for checkpointed in (False, True):
        sadl.manual_seed(1)
        sadl.rand(2, device=device)  # the device generator exists before the checkpoint
        out = sadl.checkpoint(block, x) if checkpointed else block(x)
        results.append((sadl.grad(out, [x, w]), sadl.rand(3, device=device)))
    assert_close(results[1], results[0], device=device, rtol=0, atol=0)
