"""The benchmarks' report header (bench/_common.py): where a report ran, and budgets judged only
on a quiet machine."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

# Loaded from its file: putting bench/ on sys.path would make its scripts importable by name.
_spec = importlib.util.spec_from_file_location(
    "bench_common", Path(__file__).resolve().parents[1] / "bench/_common.py"
)
assert _spec is not None and _spec.loader is not None
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)


@pytest.fixture
def load(monkeypatch):
    """Sets the load average the helpers read; a fresh report (no start load yet)."""
    monkeypatch.setattr(_common, "_START_LOAD", [])
    now = [0.2]
    monkeypatch.setattr(os, "getloadavg", lambda: (now[0], 0.0, 0.0))
    monkeypatch.setattr(_common.atexit, "register", lambda fn: None)
    return now


def test_the_header_names_the_cpu_the_blas_the_threads_and_the_load(load, capsys, monkeypatch):
    for name in _common.THREAD_VARS:  # this machine's own settings (OPENBLAS_CORETYPE) aside
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    _common.where_ran(["bench/core.py", "--threads", "1"])
    out = capsys.readouterr().out
    assert out.startswith("## core.py --threads 1\n")
    assert f"- CPU: {_common.cpu_model()}" in out and _common.cpu_model()
    blas = next(line for line in out.splitlines() if line.startswith("- BLAS: "))
    pytest.importorskip("threadpoolctl", reason="the BLAS line is threadpoolctl's view")
    assert "kernel" in blas and "threads" in blas, blas
    assert "- threads: OPENBLAS_NUM_THREADS=1, --threads 1" in out
    assert "- load average at start: 0.20 0.00 0.00" in out


def test_workers_print_no_header(load, capsys):
    _common.where_ran(["bench/models.py", "--worker", "sadl", "step", "M"])
    _common.where_ran(["bench/shakespeare.py", "--torch-worker", "spec.json"])
    assert capsys.readouterr().out == ""


def test_a_budget_is_judged_only_below_load_one_and_a_half(load):
    _common._START_LOAD.append(0.4)
    assert _common.verdict(True, "budget <= 1.3") == "budget <= 1.3: ok"
    assert _common.verdict(False, "budget <= 1.3") == "budget <= 1.3: OVER"
    load[0] = 2.04  # the machine got busy during the report
    assert _common.verdict(True, "budget <= 1.3") == "not judged: load 2.0"
    assert _common.judged(now=False) == ""  # (a report that loads the machine itself)
    _common._START_LOAD[0] = 1.5
    assert _common.judged(now=False) == "not judged: load 1.5"
