"""``sadl train gpt --config docs/examples/shakespeare_char.toml``: nanoGPT's CPU Shakespeare.

The file's settings are nanoGPT's (README's CPU line over config/train_shakespeare_char.py);
on char-rnn's input.txt the run has nanoGPT's vocabulary of 65 and its 1,003,854 / 111,540
split. The real text is read where present ($SADL_TINYSHAKESPEARE, or shared/data/ beside the
checkout) and the test skips naming how to fetch it otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sadl_models.corpus import split_tokens
from sadl_models.train import TrainConfig, TrainError
from sadl_models.train.config import read_config_file

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "docs/examples/shakespeare_char.toml"
FETCH = (
    "curl -o input.txt https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
    "tinyshakespeare/input.txt and set SADL_TINYSHAKESPEARE=input.txt"
)

#: nanoGPT's settings (config/train_shakespeare_char.py with the README's CPU overrides).
NANOGPT = {
    "steps": 2000, "batch_size": 12, "block_size": 64, "n_layer": 4, "n_head": 4,
    "n_embd": 128, "dropout": 0.0, "bias": False, "lr": 1e-3, "min_lr": 1e-4,
    "warmup_steps": 100, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99, "grad_clip": 1.0,
    "eval_interval": 250, "eval_batches": 20, "val_fraction": 0.1, "device": "cpu",
    "tokenizer": "char",
}  # fmt: skip


def shakespeare() -> Path:
    env = os.environ.get("SADL_TINYSHAKESPEARE")
    names = [Path(env)] if env else []
    names += [
        base / "shared/data/tinyshakespeare.txt" for base in (ROOT.parent, ROOT.parent.parent)
    ]
    found = next((p for p in names if p.is_file()), None)
    if found is None:
        pytest.skip(f"tiny Shakespeare is not here: {FETCH}")
    return found


def test_the_preset_holds_nanogpts_cpu_settings() -> None:
    settings = read_config_file(PRESET)
    assert settings == NANOGPT
    config = TrainConfig(**settings)
    config.validate()
    assert config.final_lr == 1e-4 and config.warmup == 100


def test_the_split_is_nanogpts_int_n_times_0_9() -> None:
    train, val = split_tokens(np.zeros(1_115_394, dtype=np.int64), 0.1)
    assert (len(train), len(val)) == (1_003_854, 111_540)


def test_a_config_file_refuses_unknown_settings_and_bad_toml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("max_iters = 2000\n")
    with pytest.raises(TrainError, match="unknown setting 'max_iters'"):
        read_config_file(bad)
    bad.write_text("steps = [1, 2]\n")
    with pytest.raises(TrainError, match="steps must be a number"):
        read_config_file(bad)
    bad.write_text("steps = \n")
    with pytest.raises(TrainError, match="not TOML"):
        read_config_file(bad)
    with pytest.raises(TrainError, match="no such file"):
        read_config_file(tmp_path / "absent.toml")


def _sadl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SADL_PLUGINS_STRICT": "1"}
    cmd = [sys.executable, "-m", "sadl", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_train_gpt_on_shakespeare_has_nanogpts_vocabulary_and_split(tmp_path: Path) -> None:
    text = shakespeare()
    # Two steps of the real configuration; the flags beside --config override the file.
    proc = _sadl(
        "train", "gpt", "--config", str(PRESET), "--text", str(text), "--steps", "2",
        "--warmup-steps", "1", "--eval-interval", "2", "--eval-batches", "1",
        "--sample-tokens", "0", "--no-progress", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "1,115,394 tokens (char tokenizer, vocab 65), 1,003,854 train / 111,540 val" in (
        proc.stdout
    )
    assert "4 layers, 4 heads, 128 dims, block 64, batch 12, 2 steps on cpu" in proc.stdout


def test_a_flag_beside_config_overrides_the_file_and_bad_files_are_one_line(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("n_embd = 130\n")  # not divisible by the 4 heads of the flag below
    proc = _sadl("train", "gpt", "--config", str(bad), "--n-head", "4", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == "sadl train gpt: error: --n-embd 130 must be divisible by --n-head 4"
    )
    bad.write_text("max_iters = 1\n")
    proc = _sadl("train", "gpt", "--config", str(bad), "--out", str(tmp_path))
    assert proc.returncode == 2 and "unknown setting 'max_iters'" in proc.stderr
