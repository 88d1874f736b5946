"""The device matrix for sadl-models: the GPT training step, KV-cache generation, the MLP model,
checkpoints, and ``sadl train gpt --device cuda`` / ``sadl generate --device cuda``.

``device`` is "cpu", "strict" (the strict CuPy stand-in) or "cuda" (where a GPU is). The
``cuda_device`` fixture is "cuda": a real GPU where there is one, else the stand-in posing as
CUDA, so the code paths that ask for CUDA by name run in every CI run.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import sadl
import sadl_optim
from sadl.backends import device_of
from sadl.cli import main as sadl_main
from sadl.testing import assert_close
from sadl_models.corpus import builtin_corpus
from sadl_models.gpt import GPT
from sadl_models.train import TrainConfig, load_model, train

TINY = {"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 8}


def ids(shape, vocab=11, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=shape)


def tiny(**kw):
    return GPT(**{**TINY, **kw}, rng=0)


def step(model, opt, x, y):
    opt.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    grads = {n: p.grad.copy() for n, p in model.named_parameters()}
    opt.step()
    return loss, grads


def test_gpt_training_step_on_device_matches_the_cpu(device):
    cpu = tiny().to(dtype=np.float64)
    there = copy.deepcopy(cpu).to(device)
    assert all(p.device.type == device for p in there.parameters())
    opts = [sadl_optim.AdamW(m.parameters(), lr=1e-2) for m in (cpu, there)]
    x, y = ids((3, 8)), ids((3, 8), seed=1)
    for _ in range(2):
        loss_cpu, grads_cpu = step(cpu, opts[0], x, y)
        # Token ids from the host follow the weights to the device; device ids work too.
        loss_dev, grads_dev = step(there, opts[1], sadl.tensor(x, device=device).data, y)
        assert loss_dev.device.type == device
        assert_close(loss_dev, loss_cpu, device=device)
        assert_close(grads_dev, grads_cpu, device=device)
    assert_close(there.state_dict(), cpu.state_dict(), device=device)


def test_gpt_with_dropout_trains_on_the_device(device):
    model = tiny(dropout=0.2).to(device)
    opt = sadl_optim.AdamW(model.parameters(), lr=1e-2)
    sadl.manual_seed(0)
    loss, grads = step(model, opt, ids((2, 8)), ids((2, 8), seed=1))
    assert np.isfinite(loss.item())
    assert all(device_of(g).type == device for g in grads.values())


@pytest.mark.parametrize("use_cache", [True, False], ids=["kv-cache", "no-cache"])
def test_generation_on_device_gives_the_cpu_tokens(device, use_cache):
    cpu = tiny().to(dtype=np.float64)
    there = copy.deepcopy(cpu).to(device)
    prompt = ids((2, 3))
    # 12 new tokens from a 3-token prompt slide the 8-token window (the cache is rebuilt).
    greedy_cpu = cpu.generate(prompt, 12, temperature=0, use_cache=use_cache)
    greedy_dev = there.generate(prompt, 12, temperature=0, use_cache=use_cache)
    np.testing.assert_array_equal(greedy_dev, greedy_cpu)
    sampled_cpu = cpu.generate(prompt, 12, top_k=5, rng=3, use_cache=use_cache)
    sampled_dev = there.generate(sadl.tensor(prompt, device=device), 12, top_k=5, rng=3)
    np.testing.assert_array_equal(sampled_dev, sampled_cpu)  # sampling runs on the host


def test_mlp_model_trains_on_device(device):
    cpu = sadl.models.create("mlp", in_features=4, out_features=3, hidden_sizes=(8,), rng=0)
    cpu = cpu.to(dtype=np.float64)
    there = copy.deepcopy(cpu).to(device)
    x = np.random.default_rng(0).standard_normal((5, 4))
    out_cpu, out_dev = cpu(sadl.tensor(x)), there(sadl.tensor(x, device=device))
    assert_close(out_dev, out_cpu, device=device)


def corpus_file(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text(builtin_corpus()[:4_000], encoding="utf-8")
    return path


FLAGS = [
    "--steps", "3", "--batch-size", "2", "--block-size", "8", "--n-layer", "1", "--n-head", "2",
    "--n-embd", "8", "--eval-interval", "3", "--eval-batches", "1", "--sample-tokens", "5",
    "--dropout", "0.1", "--no-progress",
]  # fmt: skip


def test_sadl_train_gpt_device_cuda_runs_and_generates_on_cuda(tmp_path, cuda_device, capsys):
    text = corpus_file(tmp_path)
    out = tmp_path / "run"
    args = ["train", "gpt", "--text", str(text), *FLAGS, "--out", str(out)]
    status = sadl_main([*args, "--device", cuda_device])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "steps on cuda:0" in captured.out and "sample:" in captured.out
    model, _ = load_model(out / "checkpoint.sadl", device=cuda_device)
    assert model.transformer.wte.weight.device == "cuda:0"
    # The same seed trains the same model on the CPU: `sadl train` draws its dropout masks
    # from its own seeded host generator, so CPU and CUDA runs match.
    cpu_out = tmp_path / "cpu"
    assert sadl_main(["train", "gpt", "--text", str(text), *FLAGS, "--out", str(cpu_out)]) == 0
    capsys.readouterr()
    on_cpu, _ = load_model(cpu_out / "checkpoint.sadl")
    assert_close(model.state_dict(), on_cpu.state_dict(), device="cuda", rtol=1e-4, atol=1e-6)
    ckpt = str(out / "checkpoint.sadl")
    gen = ["generate", "--checkpoint", ckpt, "--prompt", "The ", "--tokens", "8"]
    assert sadl_main([*gen, "--device", cuda_device]) == 0
    on_gpu = capsys.readouterr().out
    assert sadl_main(gen) == 0
    assert capsys.readouterr().out == on_gpu  # sampling on the host: the same text


def test_training_resumes_bit_identically_on_the_device(tmp_path, device):
    text = corpus_file(tmp_path)
    settings = {
        "text": str(text), "steps": 4, "batch_size": 2, "block_size": 8, "n_layer": 1,
        "n_head": 2, "n_embd": 8, "eval_interval": 2, "eval_batches": 1, "sample_tokens": 5,
        "dropout": 0.1, "device": device,
    }  # fmt: skip
    full = train(TrainConfig(**settings), tmp_path / "full", progress=False, plot=False)
    part = train(
        TrainConfig(**settings), tmp_path / "split", progress=False, plot=False, stop_after=2
    )
    assert part.interrupted
    resumed = train(TrainConfig(), tmp_path / "split", resume=True, progress=False, plot=False)
    assert resumed.history.train == full.history.train
    a, _ = load_model(full.checkpoint, device=device)
    b, _ = load_model(resumed.checkpoint, device=device)
    assert_close(b.state_dict(), a.state_dict(), device=device, rtol=0, atol=0)
