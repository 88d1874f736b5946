from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from sadl_models.corpus import builtin_corpus, read_text
from sadl_models.tokenizers import ByteTokenizer
from sadl_models.train import TrainConfig, TrainError, load_model, train
from sadl_serialize import load_checkpoint

TINY = {
    "steps": 8,
    "batch_size": 4,
    "block_size": 16,
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "eval_interval": 4,
    "eval_batches": 2,
    "sample_tokens": 20,
    "dropout": 0.1,  # exercises the dropout generator across a resume
}
TINY_FLAGS = [
    "--steps", "8", "--batch-size", "4", "--block-size", "16", "--n-layer", "1",
    "--n-head", "2", "--n-embd", "16", "--eval-interval", "4", "--eval-batches", "2",
    "--sample-tokens", "20", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text(builtin_corpus()[:20_000], encoding="utf-8")
    return path


def run_cli(*args, timeout=120):
    env = {**os.environ, "SADL_PLUGINS_STRICT": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "sadl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def test_resume_continues_bit_identically(tmp_path, text_file):
    config = TrainConfig(text=str(text_file), **TINY)
    full = train(config, tmp_path / "full", progress=False, plot=False)
    assert full.step == 8 and not full.interrupted

    part = train(config, tmp_path / "split", progress=False, plot=False, stop_after=3)
    assert part.interrupted and part.step == 3
    assert part.history.train == full.history.train[:3]
    resumed = train(TrainConfig(), tmp_path / "split", resume=True, progress=False, plot=False)
    assert resumed.step == 8
    assert resumed.history.train == full.history.train  # exact float equality
    assert resumed.history.evals == full.history.evals
    a, _ = load_model(full.checkpoint)
    b, _ = load_model(resumed.checkpoint)
    pa, pb = params(a), params(b)
    assert all(np.array_equal(pa[k], pb[k]) for k in pa)
    assert resumed.sample == full.sample


def test_training_lowers_the_loss_and_writes_outputs(tmp_path, text_file):
    settings = {**TINY, "steps": 200, "eval_interval": 100, "batch_size": 32, "n_embd": 48}
    config = TrainConfig(text=str(text_file), **settings, lr=5e-3)
    result = train(config, tmp_path, progress=False)
    assert result.val_loss < result.unigram_loss
    assert result.history.train[-1] < result.history.train[0]
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.sample.startswith("The ") and len(result.sample) == 24
    ckpt = load_checkpoint(result.checkpoint)
    extra = ckpt["extra"]
    assert extra["model"]["n_embd"] == 48 and extra["tokenizer"]["kind"] == "char"
    assert ckpt["step"] == 200
    model, tokenizer = load_model(result.checkpoint)
    assert tokenizer.decode(tokenizer.encode("The ")) == "The "
    assert not [f for f in os.listdir(tmp_path) if ".sadl-tmp-" in f]  # atomic writes only


def test_byte_tokenizer_run_saves_and_reloads_the_tokenizer(tmp_path, text_file):
    config = TrainConfig(text=str(text_file), tokenizer="byte", **{**TINY, "steps": 2})
    result = train(config, tmp_path, progress=False, plot=False)
    model, tokenizer = load_model(result.checkpoint)
    assert tokenizer.kind == "byte" and model.vocab_size == 256


def test_the_byte_tokenizer_trains_on_a_file_of_any_bytes(tmp_path, text_file):
    # Latin-1 text and binary noise: not UTF-8, which the char tokenizer refuses (see
    # test_cli_bad_inputs_print_one_line); bytes are bytes to the byte tokenizer.
    raw = "na\u00efve caf\u00e9\n".encode("latin-1") * 50 + bytes(range(256)) * 4
    path = tmp_path / "latin1.bin"
    path.write_bytes(raw)
    assert np.array_equal(
        ByteTokenizer().encode(read_text(path, any_bytes=True)), np.frombuffer(raw, np.uint8)
    )
    proc = run_cli("train", "gpt", "--text", str(path), "--tokenizer", "byte", "--out",
                   str(tmp_path / "run"), *TINY_FLAGS)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "(byte tokenizer, vocab 256)" in proc.stdout
    assert f"{len(raw):,} tokens" in proc.stdout  # every byte of the file is a token
    gen = run_cli("generate", "--checkpoint", str(tmp_path / "run" / "checkpoint.sadl"),
                  "--tokens", "10")  # fmt: skip
    assert gen.returncode == 0 and gen.stdout.endswith("\n"), gen.stderr


def test_resume_refuses_conflicting_settings(tmp_path, text_file):
    config = TrainConfig(text=str(text_file), **{**TINY, "steps": 2})
    train(config, tmp_path, progress=False, plot=False)
    changed = TrainConfig(**{**TINY, "n_layer": 3})
    with pytest.raises(TrainError, match="--n-layer 3 differs from its 1"):
        train(changed, tmp_path, resume=True, explicit={"n_layer"}, progress=False)
    with pytest.raises(TrainError, match="no checkpoint at"):
        train(config, tmp_path / "nowhere", resume=True, progress=False)
    with pytest.raises(TrainError, match="below the checkpoint's step 2"):
        train(TrainConfig(steps=1), tmp_path, resume=True, explicit={"steps"}, progress=False)
    # A longer run may be resumed with more steps.
    longer = train(
        TrainConfig(steps=4), tmp_path, resume=True, explicit={"steps"}, progress=False, plot=False
    )
    assert longer.step == 4 and len(longer.history.train) == 4


def _one_error_line(proc, prog="sadl train gpt"):
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


def test_cli_bad_inputs_print_one_line(tmp_path, text_file):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("na\u00efve caf\u00e9\n".encode("latin-1") * 100)
    short = tmp_path / "short.txt"
    short.write_text("tiny corpus\n" * 3)
    out = ["--out", str(tmp_path / "run")]
    cases = [
        (["--text", str(tmp_path / "missing.txt")], "missing.txt: no such file"),
        (
            ["--text", str(latin1)],
            "not UTF-8 text (byte 0xef at offset 2 is invalid); convert it to UTF-8 first, "
            "or train on its bytes with --tokenizer byte",
        ),
        (["--text", str(short), "--block-size", "64"], "--block-size 64 is too large"),
        (["--device", "tpu"], "unknown device 'tpu'"),
        (["--device", "cuda"], "no CUDA device found"),
        (["--steps", "abc"], "argument --steps: expected an integer, got 'abc'"),
        (["--steps", "0"], "argument --steps: expected a positive integer, got '0'"),
        (["--lr", "-1"], "argument --lr: expected a finite number > 0, got '-1'"),
        (["--lr", "nan"], "argument --lr: expected a finite number > 0"),
        (["--n-embd", "30", "--n-head", "4"], "--n-embd 30 must be divisible by --n-head 4"),
        (["--dropout", "1.5"], "--dropout must be a number in [0.0, 1.0)"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--resume"], "no checkpoint at"),
        (["--out", str(short)], "exists and is not a directory"),
        (["--warmup-steps", "50", "--steps", "10"], "--warmup-steps 50 must be less than"),
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "sadl", "train", "gpt", *out, *args, "--no-progress"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "SADL_PLUGINS_STRICT": "1"},
        )
        for args, _ in cases
    ]
    for (args, expected), proc in zip(cases, procs):
        stdout, stderr = proc.communicate(timeout=120)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        line = _one_error_line(done)
        assert expected in line, (args, line)
        assert done.returncode == 2
    assert not (tmp_path / "run" / "checkpoint.sadl").exists()


def test_cli_train_then_generate(tmp_path, text_file):
    out = tmp_path / "run"
    proc = run_cli("train", "gpt", "--text", str(text_file), *TINY_FLAGS, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "unigram baseline" in proc.stdout and "sample:" in proc.stdout
    assert (out / "checkpoint.sadl").is_file() and (out / "loss.png").is_file()
    ckpt = str(out / "checkpoint.sadl")
    gen = run_cli("generate", "--checkpoint", ckpt, "--prompt", "The ", "--tokens", "15")
    assert gen.returncode == 0, gen.stderr
    assert gen.stdout.startswith("The ") and len(gen.stdout.rstrip("\n")) >= 19 - 2
    again = run_cli("generate", "--checkpoint", ckpt, "--prompt", "The ", "--tokens", "15")
    assert again.stdout == gen.stdout  # default seed: reproducible
    greedy = run_cli(
        "generate", "--checkpoint", ckpt, "--tokens", "15", "--temperature", "0", "--no-cache"
    )
    greedy_cached = run_cli("generate", "--checkpoint", ckpt, "--tokens", "15", "--top-k", "1")
    assert greedy.returncode == 0 and greedy.stdout == greedy_cached.stdout

    bad = run_cli("generate", "--checkpoint", str(tmp_path / "nope.sadl"))
    assert "no checkpoint at" in _one_error_line(bad, "sadl generate")
    bad = run_cli("generate", "--checkpoint", ckpt, "--prompt", "\u263a")
    assert "--prompt: text contains 1 character(s) not in" in _one_error_line(bad, "sadl generate")
    assert gen.stdout.endswith("\n") and not gen.stdout.endswith("\n\n")  # one line end
    for typed in ("2", "0", "1e3", "nan"):  # quoted as typed, as every other option is
        bad = run_cli("generate", "--checkpoint", ckpt, "--top-p", typed)
        assert _one_error_line(bad, "sadl generate") == (
            f"sadl generate: error: argument --top-p: expected a number in (0, 1], got '{typed}'"
        )
        assert bad.returncode == 2
    not_ckpt = tmp_path / "junk.sadl"
    not_ckpt.write_bytes(b"not a checkpoint")
    bad = run_cli("generate", "--checkpoint", str(not_ckpt))
    assert "cannot read checkpoint" in _one_error_line(bad, "sadl generate")


def test_ctrl_c_saves_a_checkpoint(tmp_path, text_file):
    out = tmp_path / "run"
    args = [
        sys.executable, "-m", "sadl", "train", "gpt", "--text", str(text_file),
        "--steps", "100000", "--batch-size", "4", "--block-size", "16", "--n-layer", "1",
        "--n-head", "2", "--n-embd", "16", "--eval-interval", "100000", "--no-progress",
        "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SADL_PLUGINS_STRICT": "1", "PYTHONUNBUFFERED": "1"},
    )
    # Wait for the run to start (it prints its configuration), let it take a few steps.
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and not line.startswith("data:"):
        line = proc.stdout.readline()
    assert line.startswith("data:"), proc.stderr.read() if proc.stderr else ""
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "checkpoint saved to" in stdout
    ckpt = load_checkpoint(out / "checkpoint.sadl")
    assert ckpt["step"] > 0
    assert len(ckpt["extra"]["history"]["train"]) == ckpt["step"]
    # ...and the run continues from there.
    more = str(ckpt["step"] + 2)
    resumed = run_cli(
        "train", "gpt", "--resume", "--out", str(out), "--steps", more, "--no-progress"
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {out / 'checkpoint.sadl'} at step {ckpt['step']}" in resumed.stdout
    assert load_checkpoint(out / "checkpoint.sadl")["step"] == ckpt["step"] + 2


def test_cli_help_lists_the_commands():
    proc = run_cli("--help")
    assert "train" in proc.stdout and "generate" in proc.stdout
    proc = run_cli("train", "gpt", "--help")
    assert proc.returncode == 0 and "--block-size" in proc.stdout
    proc = run_cli("train")
    assert "required" in _one_error_line(proc, "sadl train")


def test_resume_refuses_a_changed_text(tmp_path, text_file):
    text = tmp_path / "text.txt"
    text.write_text(text_file.read_text(encoding="utf-8"), encoding="utf-8")
    config = TrainConfig(text=str(text), **{**TINY, "steps": 2})
    train(config, tmp_path / "run", progress=False, plot=False)
    text.write_text(text_file.read_text(encoding="utf-8")[::-1], encoding="utf-8")
    with pytest.raises(TrainError, match="is not the text the checkpoint was trained on"):
        train(TrainConfig(), tmp_path / "run", resume=True, progress=False)


def test_a_run_in_out_is_never_replaced_without_overwrite(tmp_path, text_file, capsys):
    from sadl.cli import main

    out = tmp_path / "run"
    flags = ["train", "gpt", "--text", str(text_file), *TINY_FLAGS, "--out", str(out)]
    assert main([*flags, "--steps", "4", "--sample-tokens", "0"]) == 0
    saved = (out / "checkpoint.sadl").read_bytes()
    metrics = (out / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main([*flags, "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sadl train gpt: error: --out ")
    assert "holds a checkpoint" in err and "--resume" in err and "--overwrite" in err
    assert (out / "checkpoint.sadl").read_bytes() == saved  # the 4-step run is intact
    assert (out / "metrics.jsonl").read_text() == metrics
    assert main([*flags, "--steps", "2", "--resume", "--overwrite"]) == 2
    assert "pass one" in capsys.readouterr().err
    assert main([*flags, "--steps", "2", "--sample-tokens", "0", "--overwrite"]) == 0
    assert "--overwrite: " in capsys.readouterr().out
    assert load_checkpoint(out / "checkpoint.sadl")["step"] == 2
    with pytest.raises(TrainError, match="holds a checkpoint"):
        train(TrainConfig(text=str(text_file), **TINY), out, progress=False, plot=False)
