"""What a run leaves and shows: metrics.jsonl, progress fit for a log file, BLAS threads, and the
spellings people bring from autodidact."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import sadl
from sadl_models.corpus import builtin_corpus
from sadl_models.gpt import GPT
from sadl_models.plugin import GPT_DEFAULTS
from sadl_models.train import METRICS_NAME, TrainConfig, read_metrics, train

TINY = {
    "steps": 8,
    "batch_size": 4,
    "block_size": 16,
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "eval_interval": 4,
    "eval_batches": 2,
    "sample_tokens": 0,
}


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text(builtin_corpus()[:20_000], encoding="utf-8")
    return path


def test_metrics_jsonl_has_a_line_per_step_and_survives_a_resume(tmp_path, text_file):
    config = TrainConfig(text=str(text_file), **TINY)
    full = train(config, tmp_path / "full", progress=False, plot=False, stream=io.StringIO())
    rows = read_metrics(tmp_path / "full" / METRICS_NAME)
    assert [r["step"] for r in rows] == list(range(1, 9))
    assert [r["loss"] for r in rows] == full.history.train
    assert all(r["lr"] > 0 and r["tokens_per_s"] > 0 and r["time"] > 0 for r in rows)
    assert [(r["step"], r["train_loss"], r["val_loss"]) for r in rows if "val_loss" in r] == list(
        full.history.evals
    )
    # stop after 6 (checkpoint at 4 by eval, and at 6 on stopping), resume to the end
    part = tmp_path / "part"
    train(config, part, progress=False, plot=False, stop_after=6, stream=io.StringIO())
    assert [r["step"] for r in read_metrics(part / METRICS_NAME)] == list(range(1, 7))
    train(config, part, resume=True, progress=False, plot=False, stream=io.StringIO())
    resumed = read_metrics(part / METRICS_NAME)
    assert [r["step"] for r in resumed] == list(range(1, 9))
    assert [r["loss"] for r in resumed] == [r["loss"] for r in rows]  # bit-identical run


def test_a_killed_runs_last_half_line_is_left_out(tmp_path):
    path = tmp_path / METRICS_NAME
    path.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "lo')
    assert read_metrics(path) == [{"step": 1, "loss": 2.0}]
    path.write_text('{"step": 1\n{"step": 2}\n')
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        read_metrics(path)


def test_progress_into_a_file_is_a_few_plain_lines(tmp_path, text_file):
    flags = [
        "--steps", "40", "--batch-size", "2", "--block-size", "8", "--n-layer", "1",
        "--n-head", "1", "--n-embd", "8", "--eval-interval", "40", "--eval-batches", "1",
        "--sample-tokens", "0", "--text", str(text_file), "--out", str(tmp_path / "run"),
    ]  # fmt: skip
    env = {**os.environ, "SADL_PLUGINS_STRICT": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "train", "gpt", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr + result.stdout  # no bar redraws in a log file
    progress = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert progress[0].startswith("step 2/40: loss ") and "tok/s" in progress[0]
    assert len(progress) == 21  # every 2 steps (40 // 20), and the evaluation line
    assert (tmp_path / "run" / METRICS_NAME).exists()
    assert f"metrics: {tmp_path / 'run' / METRICS_NAME}" in result.stdout


def test_train_threads_flag_sets_the_blas_pool(monkeypatch, tmp_path):
    from sadl.cli import main

    seen = []
    monkeypatch.setattr(sadl, "set_num_threads", seen.append)
    assert main(["train", "gpt", "--threads", "0"]) == 2  # a usage error, before anything runs
    assert main(["generate", "--checkpoint", str(tmp_path / "nope.sadl"), "--threads", "2"]) != 0
    assert seen == [2]
    assert main(["generate", "--checkpoint", str(tmp_path / "nope.sadl")]) != 0
    assert seen == [2]  # without --threads sadl's policy picks the count per product


def test_autodidact_gpt_vocab_and_the_defaults_match_create():
    model = GPT(vocab=11, n_layer=1, n_embd=8, n_head=2, rng=0)
    assert model.vocab_size == 11
    with pytest.raises(TypeError, match="not both"):
        GPT(10, vocab=11)
    with pytest.raises(TypeError, match="missing vocab_size"):
        GPT()
    defaults = {**GPT_DEFAULTS, "vocab_size": 11}
    assert GPT(vocab=11, rng=0).config == defaults


def test_metrics_lines_are_json(tmp_path, text_file):
    config = TrainConfig(text=str(text_file), **{**TINY, "steps": 2, "eval_interval": 2})
    train(config, tmp_path, progress=False, plot=False, stream=io.StringIO())
    for line in (tmp_path / METRICS_NAME).read_text().splitlines():
        assert isinstance(json.loads(line)["loss"], float)
