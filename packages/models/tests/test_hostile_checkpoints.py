"""Damaged and hostile checkpoints, and sizes too large for memory: one line, exit status 2.

A checkpoint's model config is checked before the model is built (a lying ``n_embd`` must not
start a 900 GiB allocation), its tokenizer, settings, weights and optimizer state are checked
too, and ``sadl generate`` / ``sadl train gpt --resume`` report every problem in one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import sadl_serialize as ss
from sadl_models.corpus import builtin_corpus
from sadl_models.train import TrainConfig, TrainError, load_model, train

TINY = {
    "steps": 4,
    "batch_size": 2,
    "block_size": 8,
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 8,
    "eval_interval": 4,
    "eval_batches": 1,
    "sample_tokens": 0,
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A finished tiny run: its directory and its text file."""
    root = tmp_path_factory.mktemp("hostile")
    text = root / "text.txt"
    text.write_text(builtin_corpus()[:5_000], encoding="utf-8")
    train(TrainConfig(text=str(text), **TINY), root / "run", progress=False, plot=False)
    return root / "run" / "checkpoint.sadl", text


def tampered(saved, tmp_path, edit):
    """A copy of the saved checkpoint, in its own run directory, with ``edit(meta, entries)``."""
    source, _ = saved
    run = tmp_path / "run"
    run.mkdir()
    target = run / "checkpoint.sadl"
    shutil.copy(source, target)
    if edit is not None:
        entries = ss.load(target)
        meta = json.loads(entries.pop("__meta__").numpy().tobytes())
        del meta["integrity"]  # a hostile writer leaves the checksums out: validation must hold
        meta["version"] = 1  # (as an older writer's document, which has no record)
        edit(meta, entries)
        text = json.dumps(meta).encode()
        ss.save({"__meta__": np.frombuffer(text, np.uint8), **entries}, target)
    return target


def model_config(key, value):
    def edit(meta, entries):
        meta["extra"]["model"][key] = value

    return edit


def settings(key, value):
    def edit(meta, entries):
        meta["extra"]["train"][key] = value

    return edit


def replace_entry(key, make):
    def edit(meta, entries):
        entries[key] = make(entries[key].numpy())

    return edit


def set_extra(key, value):
    def edit(meta, entries):
        meta["extra"][key] = value

    return edit


def optimizer_lr(value):
    def edit(meta, entries):
        meta["optimizer"]["param_groups"][0]["lr"] = value

    return edit


MODEL_CASES = {
    "huge-n-embd": (model_config("n_embd", 200_000), "would need about"),
    "string-size": (model_config("n_layer", "abc"), "n_layer must be a positive integer"),
    "bool-size": (model_config("n_head", True), "n_head must be a positive integer"),
    "not-divisible": (model_config("n_head", 3), "not divisible"),
    "unknown-key": (model_config("rope", True), "does not describe a GPT"),
    "bad-dropout": (model_config("dropout", 7), "dropout must be a number in [0, 1)"),
    "no-model": (set_extra("model", None), "'model' entry is not a mapping"),
    "bad-tokenizer": (set_extra("tokenizer", {"kind": "sentencepiece"}), "unknown saved"),
    "vocab-mismatch": (model_config("vocab_size", 3), "its tokenizer has"),
    "weight-shape": (
        replace_entry("model.transformer.h.0.attn.c_proj.weight", lambda a: a[:, :4].copy()),
        "has shape",
    ),
    "weight-dtype": (
        replace_entry("model.transformer.ln_f.weight", lambda a: a.astype(np.complex64)),
        "does not convert",
    ),
    "not-ours": (set_extra("format", "something-else"), "not a checkpoint written by"),
}


@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_load_model_refuses_a_damaged_or_hostile_checkpoint(saved, tmp_path, case):
    edit, message = MODEL_CASES[case]
    path = tampered(saved, tmp_path, edit)
    with pytest.raises(TrainError, match=re.escape(message)):
        load_model(path)


RESUME_CASES = {
    "huge-settings": (
        lambda meta, entries: meta["extra"]["train"].update(n_embd=65_536, n_layer=64),
        "this run would need about",
    ),
    "string-setting": (settings("batch_size", "abc"), "--batch-size must be a positive"),
    "unknown-setting": (settings("flash", True), "unknown training settings"),
    "negative-lr": (optimizer_lr(-0.1), "invalid learning rate lr=-0.1"),
    "none-lr": (optimizer_lr(None), "invalid learning rate lr=None"),
    "string-flag": (
        lambda meta, entries: meta["optimizer"]["param_groups"][0].update(amsgrad="yes"),
        "invalid amsgrad='yes'",
    ),
    "scheduler-lr": (
        lambda meta, entries: meta["scheduler"]["base_lrs"].__setitem__(0, -1.0),
        "invalid base_lrs[0]=-1.0",
    ),
    "history": (set_extra("history", [1, 2]), "'history' entry is not a mapping"),
    "moment": (
        lambda meta, entries: entries.update(
            {k: np.zeros(3, np.float32) for k in entries if k.endswith("exp_avg")}
        ),
        "shape (3,)",
    ),
}


@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_resume_refuses_a_damaged_or_hostile_checkpoint(saved, tmp_path, case):
    edit, message = RESUME_CASES[case]
    path = tampered(saved, tmp_path, edit)
    config = TrainConfig(text=str(saved[1]), **{**TINY, "steps": 8})
    with pytest.raises(TrainError, match=re.escape(message)):
        train(config, path.parent, resume=True, explicit={"steps"}, progress=False, plot=False)


def test_a_deeply_nested_checkpoint_is_refused(saved, tmp_path):
    path = tmp_path / "deep.sadl"
    meta = b'{"format": "sadl-checkpoint", "version": 1, "extra": ' + b"[" * 50_000
    ss.save({"__meta__": np.frombuffer(meta + b"]" * 50_000 + b"}", np.uint8)}, path)
    with pytest.raises(TrainError, match="nests 50001 levels"):
        load_model(path)


def test_sizes_too_large_for_memory_are_refused_before_anything_is_built(saved, tmp_path):
    config = TrainConfig(text=str(saved[1]), **{**TINY, "n_embd": 131_072, "n_head": 2})
    with pytest.raises(TrainError, match=r"this run would need about [\d.]+ TiB of memory"):
        train(config, tmp_path / "big", progress=False, plot=False)
    assert not (tmp_path / "big" / "checkpoint.sadl").exists()


def cli(*args, env=None):
    full = {**os.environ, "SADL_PLUGINS_STRICT": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "sadl", *args], capture_output=True, text=True, env=full, timeout=120
    )


def one_line(result, prog):
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" or "error" not in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), result.stderr
    return lines[0]


def test_the_command_line_reports_each_in_one_line(saved, tmp_path):
    def huge_everywhere(meta, entries):
        meta["extra"]["model"]["n_embd"] = 200_000
        meta["extra"]["train"].update(n_embd=200_000, n_head=2)

    huge = tampered(saved, tmp_path, huge_everywhere)
    line = one_line(cli("generate", "--checkpoint", str(huge)), "sadl generate")
    assert "would need about" in line and "not loaded" in line
    line = one_line(
        cli("train", "gpt", "--resume", "--out", str(huge.parent), "--no-progress"),
        "sadl train gpt",
    )
    assert "would need about" in line
    truncated = tmp_path / "cut.sadl"
    truncated.write_bytes(saved[0].read_bytes()[:100])
    line = one_line(cli("generate", "--checkpoint", str(truncated)), "sadl generate")
    assert "cannot read checkpoint" in line
    line = one_line(
        cli("train", "gpt", "--text", str(saved[1]), "--n-embd", "131072", "--n-head", "2",
            "--out", str(tmp_path / "big"), "--no-progress"),
        "sadl train gpt",
    )  # fmt: skip
    assert "would need about" in line


OUT_OF_MEMORY = """
import resource, sys
from sadl.cli import main
resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
sys.exit(main(sys.argv[1:]))
"""


def test_running_out_of_memory_anyway_is_one_line_with_the_estimate(saved, tmp_path):
    # Within the machine's memory, beyond this process's limit: the MemoryError comes mid-run.
    args = ["train", "gpt", "--text", str(saved[1]), "--out", str(tmp_path / "oom"),
            "--n-embd", "2048", "--n-head", "2", "--n-layer", "12", "--block-size", "8",
            "--batch-size", "2", "--steps", "2", "--no-progress"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", OUT_OF_MEMORY, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SADL_PLUGINS_STRICT": "1", "OPENBLAS_NUM_THREADS": "1"},
    )
    line = one_line(result, "sadl train gpt")
    assert "out of memory (this run needs about" in line


def test_bytes_overwritten_in_the_weights_are_refused_everywhere(saved, tmp_path):
    path = tampered(saved, tmp_path, None)
    info = next(i for i in ss.read_index(path) if i.key == "model.transformer.wte.weight")
    raw = bytearray(path.read_bytes())
    raw[info.offset + 40 : info.offset + 44] = b"\x00\x00\x80\x7f"  # one weight becomes inf
    path.write_bytes(bytes(raw))
    with pytest.raises(TrainError, match="'model.transformer.wte.weight'.*fails its CRC32 check"):
        load_model(path)
    line = one_line(cli("generate", "--checkpoint", str(path)), "sadl generate")
    assert str(path) in line and "fails its CRC32 check" in line
    line = one_line(
        cli("train", "gpt", "--resume", "--out", str(path.parent), "--no-progress"),
        "sadl train gpt",
    )
    assert "fails its CRC32 check" in line


def test_a_damaged_weight_behind_a_damaged_record_is_refused_on_resume(saved, tmp_path):
    path = tampered(saved, tmp_path, None)
    info = next(i for i in ss.read_index(path) if i.key == "model.transformer.wte.weight")
    raw = bytearray(path.read_bytes())
    raw[info.offset + 40 : info.offset + 44] = b"\x00\x00\x80\x7f"  # one weight becomes inf
    at = raw.index(b'"integrity"')
    raw[at + 5] ^= 0x01  # and one byte of the record's key: it must not pass for an old file
    path.write_bytes(bytes(raw))
    config = TrainConfig(text=str(saved[1]), **{**TINY, "steps": 8})
    with pytest.raises(TrainError, match="damaged checkpoint|cannot read checkpoint"):
        train(config, path.parent, resume=True, explicit={"steps"}, progress=False, plot=False)
    with pytest.raises(TrainError, match="unknown keys"):
        load_model(path)
