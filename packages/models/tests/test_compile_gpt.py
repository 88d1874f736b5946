"""GPT training under sadl.compile: the same losses as eager, step for step.

The whole step (forward, cross-entropy, backward, AdamW over flat buffers) is traced once and
replayed; with ``fusion=False`` every loss and every parameter is identical to eager, bit for
bit, also with dropout (fresh masks from the model's generator, the eager stream) and a
learning-rate schedule changing between the calls.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import sadl
from gpt_training import train_step
from sadl.data import windows
from sadl_models.corpus import builtin_corpus
from sadl_models.gpt import GPT
from sadl_models.train import TrainConfig, train
from sadl_optim import AdamW, CosineWithWarmup, param_groups_for_weight_decay

STEPS = 200


def tiny_run(compiled: bool, dropout: float):
    model = GPT(65, 16, 2, 2, 32, dropout=dropout, rng=0)
    opt = AdamW(param_groups_for_weight_decay(model, 0.1), lr=3e-3, betas=(0.9, 0.99))
    schedule = CosineWithWarmup(opt, warmup_steps=20, total_steps=STEPS, min_lr=3e-4)

    step = train_step(model, opt)
    run = sadl.compile(step, fusion=False) if compiled else step
    tokens = np.random.default_rng(1).integers(0, 65, 4000)
    rng = np.random.default_rng(2)
    losses = []
    for _ in range(STEPS):
        x, y = windows(tokens, 16, 4, rng=rng)
        losses.append(run(x, y).item())
        schedule.step()
    return losses, model, run


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_200_steps_compiled_and_eager_give_identical_losses(dropout):
    eager, model_e, _ = tiny_run(False, dropout)
    compiled, model_c, run = tiny_run(True, dropout)
    assert compiled == eager
    for (name, p), q in zip(model_e.named_parameters(), model_c.parameters()):
        assert np.array_equal(p.numpy(), q.numpy()), name
    assert run.stats.traces == 1 and run.stats.replays == STEPS - 1
    assert "flat_optimizer: AdamW.step" in str(run.graph)


def test_eval_mode_uses_a_trace_of_its_own():
    model = GPT(65, 16, 1, 2, 16, dropout=0.2, rng=0)
    loss = sadl.compile(lambda x, y: model(x, y)[1].detach())
    x = np.random.default_rng(0).integers(0, 65, (2, 16))
    train_losses = {loss(x, x).item() for _ in range(3)}  # a fresh dropout mask each call
    model.eval()
    with sadl.no_grad():
        eval_losses = {loss(x, x).item() for _ in range(3)}
        expected = model(x, x)[1].item()
    assert len(train_losses) == 3 and eval_losses == {expected}
    assert loss.stats.traces == 2


def test_train_gpt_with_compile_gives_the_eager_run(tmp_path, monkeypatch):
    # Bit for bit: sadl-kernels, when installed, would replace calls by kernels that agree with
    # eager only within their stated tolerances (its own tests check those); switch it off.
    monkeypatch.setenv("SADL_KERNELS", "0")
    text = tmp_path / "small.txt"
    text.write_text(builtin_corpus()[:20_000], encoding="utf-8")
    config = TrainConfig(
        text=str(text),
        steps=12,
        batch_size=4,
        block_size=16,
        n_layer=1,
        n_head=2,
        n_embd=16,
        eval_interval=6,
        eval_batches=2,
        sample_tokens=10,
        dropout=0.1,
    )
    eager_log, compiled_log = io.StringIO(), io.StringIO()
    eager = train(config, tmp_path / "eager", progress=False, plot=False, stream=eager_log)
    compiled = train(
        config, tmp_path / "compiled", progress=False, plot=False, compile=True, stream=compiled_log
    )
    # The header (first line) says how the run goes: compiled, or (not saying so) eager.
    header = compiled_log.getvalue().splitlines()[0]
    assert header.startswith("training GPT: ") and header.endswith(
        "steps on cpu, compiled (sadl.compile: traced once, then replayed)"
    ), header
    assert "compile" not in eager_log.getvalue().splitlines()[0]
    assert compiled.history.train == eager.history.train
    assert compiled.history.evals == eager.history.evals
    assert compiled.sample == eager.sample


def device_run(device, compiled, steps=5):
    """GPT training steps on ``device``, dropout drawn from the device's generator."""
    sadl.manual_seed(0)
    model = GPT(65, 16, 2, 2, 32, dropout=0.1).to(device)
    opt = AdamW(param_groups_for_weight_decay(model, 0.1), lr=3e-3, betas=(0.9, 0.99))

    step = train_step(model, opt)
    run = sadl.compile(step, fusion=False) if compiled else step
    tokens = np.random.default_rng(1).integers(0, 65, 4000)
    rng = np.random.default_rng(2)
    losses = []
    for _ in range(steps):
        x, y = windows(tokens, 16, 4, rng=rng)
        loss = run(sadl.tensor(x, device=device), sadl.tensor(y, device=device))
        assert loss.device.type == device
        losses.append(loss.numpy().item())
    return losses, model, run


def test_gpt_training_steps_on_a_device_are_eager_on_that_device(device):
    eager, model_e, _ = device_run(device, compiled=False)
    compiled, model_c, run = device_run(device, compiled=True)
    assert compiled == eager
    assert len(set(eager)) == len(eager)
    for (name, p), q in zip(model_e.named_parameters(), model_c.parameters()):
        assert q.device.type == device
        assert np.array_equal(p.numpy(), q.numpy()), name
    assert run.stats.traces == 1 and run.stats.fallbacks == 0
    assert "flat_optimizer: AdamW.step" in str(run.graph)


def test_train_gpt_with_compile_replays_clipping_and_the_update(tmp_path, monkeypatch):
    """The whole step is one replay: clipping and AdamW run in Python only while it traces."""
    from sadl_models.train import loop

    calls = []
    clip = loop.clip_grad_norm
    monkeypatch.setattr(loop, "clip_grad_norm", lambda *a, **k: calls.append(1) or clip(*a, **k))
    text = tmp_path / "small.txt"
    text.write_text(builtin_corpus()[:20_000], encoding="utf-8")
    config = TrainConfig(
        text=str(text), steps=6, batch_size=2, block_size=8, n_layer=1, n_head=2, n_embd=8,
        eval_interval=6, eval_batches=1, sample_tokens=4, grad_clip=0.5,
    )  # fmt: skip
    result = train(config, tmp_path / "run", progress=False, plot=False, compile=True,
                   stream=io.StringIO())  # fmt: skip
    assert len(result.history.train) == 6
    assert len(calls) == 1, f"clip_grad_norm ran in Python on {len(calls)} of 6 steps"
