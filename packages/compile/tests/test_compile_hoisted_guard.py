"""A guard computed from the arguments alone is tested before anything the step changes.

cross_entropy checks its class ids (a value-dependent branch) after the model ran, and a
BatchNorm in the model has by then counted the batch (``num_batches_tracked += 1``), a change a
failing replay could not undo. The check reads only the targets: the replay tests it first, so
the step compiles, replays exactly as eager, and a bad class id on a replay raises the eager
error from the eager state. A guard that reads a value the step changed is still refused.
"""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl import CompileError

pytest.importorskip("sadl_layers")


def _model_and_step():
    sadl.manual_seed(0)
    nn = sadl.nn
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10)
    )
    opt = sadl.optim.Adam(model.parameters(), lr=1e-2)

    def step(x, y):
        loss = sadl.ops.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return model, step


def _batches(n: int):
    rng = np.random.default_rng(1)
    return [
        (rng.standard_normal((8, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 8))
        for _ in range(n)
    ]


def test_a_batchnorm_step_with_cross_entropy_compiles_and_replays_as_eager() -> None:
    eager_model, eager_step = _model_and_step()
    model, step = _model_and_step()
    compiled = sadl.compile(step)
    for x, y in _batches(4):
        np.testing.assert_array_equal(compiled(x, y).numpy(), eager_step(x, y).numpy())
    assert compiled.stats.traces == 1 and compiled.stats.replays == 3
    assert compiled.stats.fallbacks == 0
    ours, theirs = model.state_dict(), eager_model.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:  # weights, running statistics and num_batches_tracked
        np.testing.assert_array_equal(np.asarray(ours[key]), np.asarray(theirs[key]), key)
    assert int(np.asarray(ours["1.num_batches_tracked"])) == 4


def test_a_bad_class_id_on_a_replay_raises_the_eager_error_from_the_eager_state() -> None:
    eager_model, eager_step = _model_and_step()
    model, step = _model_and_step()
    compiled = sadl.compile(step)
    (x, y), (x2, _) = _batches(2)
    compiled(x, y)
    eager_step(x, y)
    bad = y.copy()
    bad[3] = 10
    with pytest.raises(ValueError, match="holds class id 10") as eager_error:
        eager_step(x2, bad)
    with pytest.raises(ValueError, match="holds class id 10") as replay_error:
        compiled(x2, bad)
    assert str(replay_error.value) == str(eager_error.value)
    assert compiled.stats.fallbacks == 1
    ours, theirs = model.state_dict(), eager_model.state_dict()
    for key in ours:  # the batch counted once, as eager counted it
        np.testing.assert_array_equal(np.asarray(ours[key]), np.asarray(theirs[key]), key)


def test_a_guard_on_a_value_the_step_changed_is_still_refused() -> None:
    counter = sadl.tensor(np.zeros(3))

    def step(x):
        counter.data += x  # changes state that outlives the call
        if (counter.data > 100).any():  # reads what the step just changed
            return x * 2
        return x

    with pytest.raises(CompileError, match="value-dependent branch"):
        sadl.compile(step)(np.ones(3))


def test_a_guard_on_an_argument_written_in_place_first_is_still_refused() -> None:
    counter = sadl.tensor(np.zeros(3))

    def step(x):
        counter.data += 1
        x += 1  # the argument itself changes before the test
        if (x > 100).any():
            return x * 2
        return x

    with pytest.raises(CompileError, match="value-dependent branch"):
        sadl.compile(step)(np.ones(3))
