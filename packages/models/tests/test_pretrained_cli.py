"""``sadl generate --pretrained`` and ``sadl inspect`` on tiny checkpoints written here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("tokenizers", reason="load_pretrained needs sadl-models[pretrained]")
pytest.importorskip("gguf", reason="GGUF files need gguf")
torch = pytest.importorskip("torch", reason="the tiny checkpoints are written by transformers")
pytest.importorskip("transformers", reason="the tiny checkpoints are written by transformers")

from pretrained_fixtures import byte_level_bpe, llama_dir, write_gguf  # noqa: E402


def _sadl(*args):
    env = {**os.environ, "SADL_PLUGINS_STRICT": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "sadl", *args], capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    hf = str(tmp_path_factory.mktemp("hf"))
    ref = llama_dir(hf, tied=False)
    gguf_path = str(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    write_gguf(gguf_path, ref, byte_level_bpe(), qtype="Q8_0")
    return hf, gguf_path


def test_generate_streams_the_greedy_continuation_and_reports_tokens_per_second(checkpoints):
    from sadl_models.pretrained import load_pretrained

    hf, gguf_path = checkpoints
    for path in (hf, gguf_path):
        run = _sadl(
            "generate", "--pretrained", path, "--prompt", "The quick", "--max-new-tokens", "8"
        )
        assert run.returncode == 0, run.stderr
        model, tok = load_pretrained(path)
        ids = tok.encode("The quick")
        out = model.generate(ids, 8, stop_ids=(tok.eos_token_id,))
        assert run.stdout.rstrip("\n") == tok.decode(out, skip_special_tokens=True)
        assert "tokens/s" in run.stderr and "first token after" in run.stderr


def test_generate_chat_uses_the_template_and_bad_paths_are_one_line(checkpoints, tmp_path):
    hf, gguf_path = checkpoints
    run = _sadl(
        "generate", "--pretrained", gguf_path, "--prompt", "hi", "--chat", "--max-new-tokens", "3"
    )
    assert run.returncode == 0, run.stderr
    assert "<|im_start|>" not in run.stdout  # the template is the prompt, not echoed
    bad = tmp_path / "cut.gguf"
    with open(gguf_path, "rb") as fh:
        bad.write_bytes(fh.read(200))
    run = _sadl("generate", "--pretrained", str(bad), "--prompt", "x")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "cut.gguf" in run.stderr
    run = _sadl("generate", "--checkpoint", "x.sadl", "--pretrained", hf)
    assert run.returncode == 2 and "not allowed with" in run.stderr


def test_inspect_describes_gguf_and_hf_directories(checkpoints):
    hf, gguf_path = checkpoints
    run = _sadl("inspect", gguf_path)
    assert run.returncode == 0, run.stderr
    assert "GGUF, architecture llama" in run.stdout and "Q8_0" in run.stdout
    assert "pre-tokenizer smollm" in run.stdout and "chat template: yes" in run.stdout
    run = _sadl("inspect", hf)
    assert run.returncode == 0, run.stderr
    assert "architecture llama (LlamaForCausalLM)" in run.stdout and "float32" in run.stdout
    assert "tokenizer: tokenizer.json (BPE" in run.stdout
