"""GPT(checkpoint_activations=True) and ``sadl train gpt --checkpoint-activations``: the same
training, bit for bit (dropout included), with each block recomputed in backward."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import sadl
from gpt_training import train_step
from sadl_models.corpus import builtin_corpus
from sadl_models.gpt import GPT
from sadl_models.train import TrainConfig, train

TINY = {"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 8}


def _steps(checkpoint_activations: bool, dropout: float, rng: int | None) -> tuple[list, dict]:
    sadl.manual_seed(3)  # drives dropout when the model has no generator of its own
    model = GPT(**TINY, dropout=dropout, rng=rng, checkpoint_activations=checkpoint_activations)
    if rng is None:
        model.load_state_dict(GPT(**TINY, rng=0).state_dict())
    opt = sadl.optim.AdamW(model.parameters(), lr=1e-2)
    data = np.random.default_rng(1)
    losses = []
    for _ in range(3):
        x = data.integers(0, 11, size=(3, 9))
        _, loss = model(x[:, :-1], x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize(
    "dropout, rng",
    [(0.0, 0), (0.3, 0), (0.3, None)],
    ids=["no-dropout", "dropout-own-generator", "dropout-default-generator"],
)
def test_checkpointed_training_is_bit_identical(dropout, rng):
    plain_losses, plain = _steps(False, dropout, rng)
    losses, params = _steps(True, dropout, rng)
    assert losses == plain_losses
    assert all(np.array_equal(params[k], plain[k]) for k in plain)


def test_checkpointed_gradients_equal_plain_gradients():
    x = np.random.default_rng(0).integers(0, 11, size=(2, 8))
    grads = []
    for flag in (False, True):
        model = GPT(**TINY, rng=0, checkpoint_activations=flag)
        _, loss = model(x, x)
        loss.backward()
        grads.append([p.grad.copy() for p in model.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


def test_generation_and_no_grad_ignore_the_option():
    prompt = np.array([[1, 2, 3]])
    a = GPT(**TINY, rng=0).generate(prompt, 5, temperature=0)
    b = GPT(**TINY, rng=0, checkpoint_activations=True).generate(prompt, 5, temperature=0)
    np.testing.assert_array_equal(a, b)


def test_train_gpt_flag_trains_identically_and_may_change_on_resume(tmp_path):
    text = tmp_path / "small.txt"
    text.write_text(builtin_corpus()[:20_000], encoding="utf-8")
    settings = {
        "steps": 4,
        "batch_size": 4,
        "block_size": 16,
        "n_layer": 1,
        "n_head": 2,
        "n_embd": 16,
        "eval_interval": 2,
        "eval_batches": 1,
        "sample_tokens": 5,
        "dropout": 0.1,
    }
    plain = train(TrainConfig(text=str(text), **settings), tmp_path / "plain", progress=False)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    env = {**os.environ, "SADL_PLUGINS_STRICT": "1"}
    out = tmp_path / "ckpt"
    proc = subprocess.run(
        [sys.executable, "-m", "sadl", "train", "gpt", f"--text={text}", *flags, "--no-progress"]
        + ["--checkpoint-activations", f"--out={out}", "--stop-after=2"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    # The option does not change what a run computes, so a resume may switch it off.
    resumed = train(
        TrainConfig(checkpoint_activations=False),
        out,
        resume=True,
        explicit={"checkpoint_activations"},
        progress=False,
        plot=False,
    )
    assert resumed.step == 4
    assert resumed.history.train == plain.history.train


@pytest.mark.parametrize("rng", [0, None], ids=["own-generator", "default-generator"])
def test_under_sadl_compile_with_dropout_the_same_losses_as_eager(rng):
    """The recomputation reuses the first run's dropout masks, which sadl.compile replays too
    (re-seeding a generator inside backward would not be replayed)."""

    def run(compiled: bool, checkpointed: bool) -> list[float]:
        sadl.manual_seed(5)
        model = GPT(**TINY, dropout=0.3, rng=rng, checkpoint_activations=checkpointed)
        if rng is None:
            model.load_state_dict(GPT(**TINY, rng=0).state_dict())
        opt = sadl.optim.AdamW(model.parameters(), lr=1e-2)

        step = train_step(model, opt)
        fn = sadl.compile(step, fusion=False) if compiled else step
        data = np.random.default_rng(1)
        losses = []
        for _ in range(6):
            x = data.integers(0, 11, size=(3, 9))
            losses.append(fn(x[:, :-1], x[:, 1:]).item())
        return losses

    eager = run(False, False)
    assert run(True, True) == eager
    assert run(False, True) == eager
