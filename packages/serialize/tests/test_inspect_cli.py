"""``sadl inspect FILE`` run as a user runs it: ``python -m sadl inspect``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl_serialize.cli import format_size


def _inspect(path):
    return subprocess.run(
        [sys.executable, "-m", "sadl", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_inspect_lists_keys_dtypes_shapes_sizes_and_total_of_a_sadl_file(tmp_path):
    path = tmp_path / "m.sadl"
    sadl.save(
        {
            "layer.weight": np.zeros((128, 64), np.float32),
            "größe": np.zeros(3, np.int64),
            "flag": np.array(True),
        },
        path,
    )
    out = _inspect(path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{path}: sadl, 3 tensors"
    assert lines[1].split() == ["KEY", "DTYPE", "SHAPE", "SIZE"]
    assert lines[2].split() == ["layer.weight", "float32", "(128,", "64)", "32.0", "KiB"]
    assert lines[3].split() == ["größe", "int64", "(3,)", "24", "B"]
    assert lines[4].split() == ["flag", "bool", "()", "1", "B"]
    assert lines[5] == "total: 8,196 elements, 32.0 KiB (32,793 bytes of data)"


def test_inspect_reads_safetensors_and_checkpoints(tmp_path):
    st = tmp_path / "w.safetensors"
    sadl.save({"b": np.zeros(2, np.float16), "a": np.zeros((2, 2))}, st)
    out = _inspect(st)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == f"{st}: safetensors, 2 tensors"
    assert "a    float64  (2, 2)  32 B" in out.stdout

    ck = tmp_path / "c.sadl"
    ss.save_checkpoint(ck, model={"w": np.ones(3, np.float32)}, step=42, extra={"x": 1})
    out = _inspect(ck)
    assert out.returncode == 0, out.stderr
    assert "sadl checkpoint: step 42; holds model, extra" in out.stdout
    assert "model.w" in out.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"SADL\x01\x02\x00\x00\x00", "invalid .sadl file at byte 9: the key length of entry 0"),
        (b"SADL\x07\x00\x00\x00\x00", "format version 7 is not supported"),
        (b"hello world", "expected the magic bytes"),
        (b"", "the file is empty"),
    ],
)
def test_inspect_of_a_bad_or_missing_file_prints_one_line_and_fails(tmp_path, content, message):
    path = tmp_path / "bad.sadl"
    if content is not None:
        path.write_bytes(content)
    out = _inspect(path)
    assert out.returncode == 2  # bad input file: the status every sadl command uses
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("sadl inspect: error: ") and message in out.stderr
    assert "Traceback" not in out.stderr


def test_inspect_of_a_bad_safetensors_file_and_a_directory(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{}")  # header cut short
    out = _inspect(bad)
    assert out.returncode == 2 and "invalid .safetensors file" in out.stderr
    assert out.stderr.count("\n") == 1
    out = _inspect(tmp_path)
    assert out.returncode == 2 and "is a directory" in out.stderr


def test_format_size():
    assert [format_size(n) for n in (0, 1023, 1024, 1536, 5 * 2**20, 3 * 2**30)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "5.0 MiB",
        "3.0 GiB",
    ]


def test_inspect_of_a_checkpoint_or_object_that_fails_its_check_fails(tmp_path):
    path = tmp_path / "c.sadl"
    ss.save_checkpoint(path, model={"w": np.arange(4.0)}, step=1)
    obj = tmp_path / "o.sadl"
    sadl.save({"w": np.arange(4.0), "epoch": 1}, obj)
    for target, key in ((path, "model.w"), (obj, "w")):
        assert _inspect(target).returncode == 0
        info = next(i for i in ss.read_index(target) if i.key == key)
        raw = bytearray(target.read_bytes())
        raw[info.offset] ^= 0x40
        target.write_bytes(bytes(raw))
        out = _inspect(target)
        assert out.returncode == 2 and out.stdout == ""
        assert f"the data of entry {key!r} fails its CRC32 check" in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
