"""``--out``, ``--overwrite``, ``--resume`` and ``--text``: nothing of a run is lost or mixed up.

A run replaced with ``--overwrite`` and killed before its first checkpoint resumes as the new
run, never as the old one with the new one's metrics; ``--resume`` knows the run's text by any
name of the same file; a run refused before training leaves no ``--out`` behind; with
``--nproc`` such a refusal is printed once, before any process starts.
"""

from __future__ import annotations

import pytest
from sadl.cli import main
from sadl_models.corpus import builtin_corpus
from sadl_models.train import TrainConfig, TrainError, parallel, read_metrics, train
from sadl_serialize import load_checkpoint

TINY = {
    "steps": 4,
    "batch_size": 2,
    "block_size": 8,
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 8,
    "eval_interval": 2,
    "eval_batches": 1,
    "sample_tokens": 0,
}


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text(builtin_corpus()[:4_000], encoding="utf-8")
    return path


class KilledError(Exception):
    """Stands in for a kill -9 at a step."""


def kill_at(step):
    def on_step(at, loss):
        if at == step:
            raise KilledError

    return on_step


def test_an_overwritten_run_killed_before_its_first_checkpoint_resumes_as_the_new_run(
    tmp_path, text
):
    out = tmp_path / "run"
    train(TrainConfig(text=str(text), **TINY), out, progress=False, plot=False)
    new = TrainConfig(text=str(text), **{**TINY, "seed": 7, "lr": 1e-3})
    reference = train(new, tmp_path / "reference", progress=False, plot=False)
    with pytest.raises(KilledError):  # killed at step 1: no checkpoint of the new run saved yet
        train(new, out, overwrite=True, progress=False, plot=False, on_step=kill_at(1))
    saved = load_checkpoint(out / "checkpoint.sadl")
    assert saved["step"] == 0 and saved["extra"]["train"]["seed"] == 7  # the new run's
    assert read_metrics(out / "metrics.jsonl") == []  # its step-1 line came after: it is redone
    resumed = train(TrainConfig(), out, resume=True, progress=False, plot=False)
    assert resumed.history.train == reference.history.train
    assert [row["loss"] for row in read_metrics(out / "metrics.jsonl")] == reference.history.train


def test_resume_knows_the_text_by_any_name_of_the_same_file(tmp_path, text, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train(TrainConfig(text="tiny.txt", **{**TINY, "steps": 2}), "run", progress=False, plot=False)
    for name in ("./tiny.txt", str(text), "../" + tmp_path.name + "/tiny.txt"):
        config = TrainConfig(text=name, steps=2)
        assert train(config, "run", resume=True, explicit={"text", "steps"}, plot=False).step == 2
    copy = tmp_path / "moved.txt"  # the same content elsewhere: the checkpoint's SHA-256 says so
    copy.write_bytes(text.read_bytes())
    config = TrainConfig(text=str(copy), steps=3)
    assert train(config, "run", resume=True, explicit={"text", "steps"}, plot=False).step == 3
    copy.write_text("other text " * 500, encoding="utf-8")
    config = TrainConfig(text=str(copy), steps=4)
    with pytest.raises(TrainError, match="is not the text the checkpoint was trained on"):
        train(config, "run", resume=True, explicit={"text", "steps"}, plot=False)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"text": "missing.txt"}, "--text missing.txt"),
        ({"block_size": 100_000}, "block"),
        ({"n_head": 3}, "divisible by --n-head 3"),
    ],
)
def test_a_run_refused_before_training_leaves_no_out(tmp_path, text, settings, message):
    out = tmp_path / "a" / "run"
    config = TrainConfig(**{"text": str(text), **TINY, **settings})
    with pytest.raises(TrainError, match=message):
        train(config, out, progress=False, plot=False)
    assert not (tmp_path / "a").exists()


@pytest.fixture
def launched(monkeypatch):
    calls = []
    monkeypatch.setattr(parallel, "launch", lambda n, argv: calls.append((n, argv)) or 0)
    return calls


def test_nproc_prints_a_refusal_once_before_starting_any_process(tmp_path, text, launched, capsys):
    out = tmp_path / "run"
    train(TrainConfig(text=str(text), **TINY), out, progress=False, plot=False)
    capsys.readouterr()
    base = ["train", "gpt", "--nproc", "2", "--text", str(text), "--steps", "2"]
    cases = [
        ([*base, "--out", str(out)], "holds a checkpoint"),
        ([*base, "--out", str(tmp_path / "new"), "--text", "missing.txt"], "--text missing.txt"),
        ([*base, "--out", str(tmp_path / "none"), "--resume"], "no checkpoint at"),
        ([*base, "--out", str(out), "--resume", "--batch-size", "4"], "--batch-size 4 differs"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert launched == [] and not (tmp_path / "new").exists()
    assert main([*base, "--out", str(out), "--resume", "--steps", "6"]) == 0  # resumable: launched
    assert len(launched) == 1
