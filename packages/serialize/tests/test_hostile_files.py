"""Hostile and damaged files, full disks, long names: one clear error, nothing half done.

* safetensors headers: repeated names, more than 64 dimensions, dimensions of 2**63 and more,
  deep nesting: ``SadlFormatError``, never a bare ``ValueError`` or ``RecursionError``.
* writes: a full disk raises ``OSError`` naming the target (which keeps its content), no
  temporary file survives a failed or killed save, names of 231-255 bytes save atomically.
* checkpoints: deep JSON is refused; hyperparameters and optimizer state are checked with the
  constructors' own checks; restoring is all or nothing.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl_serialize import SadlFormatError
from sadl_serialize.atomic import TEMP_MARKER


class TinyNet(sadl.Module):
    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.w1 = sadl.Parameter(rng.standard_normal((4, 8)).astype(np.float32))
        self.b1 = sadl.Parameter(np.zeros(8, np.float32))
        self.w2 = sadl.Parameter(rng.standard_normal((8, 1)).astype(np.float32))

    def forward(self, x):
        return (x @ self.w1 + self.b1).tanh() @ self.w2


def safetensors_file(path, header_text: bytes, data: bytes = b"") -> None:
    path.write_bytes(struct.pack("<Q", len(header_text)) + header_text + data)


def spec(shape, offsets, dtype="F32"):
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


# ------------------------------------------------------------------------ safetensors headers
HOSTILE_HEADERS = {
    "repeated-name": (
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
        b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b"\0" * 4,
        "appears twice",
    ),
    "65-dims": (json.dumps({"a": spec([1] * 65, [0, 4])}).encode(), b"\0" * 4, "65 dimensions"),
    "dim-2**63": (json.dumps({"a": spec([2**63], [0, 0])}).encode(), b"", "impossibly large"),
    "dim-2**64-1-times-0": (
        json.dumps({"a": spec([2**64 - 1, 0], [0, 0])}).encode(),
        b"",
        "impossibly large",
    ),
    "negative-dim": (json.dumps({"a": spec([-1], [0, 0])}).encode(), b"", "impossibly large"),
    "deep-metadata": (
        b'{"__metadata__": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"",
        "nests 100001 levels",
    ),
    "shape-not-a-list": (json.dumps({"a": spec("big", [0, 0])}).encode(), b"", "no list"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_HEADERS))
def test_a_hostile_safetensors_header_raises_the_package_error(tmp_path, case):
    header, data, message = HOSTILE_HEADERS[case]
    path = tmp_path / "hostile.safetensors"
    safetensors_file(path, header, data)
    for call in (
        lambda: ss.load_safetensors(path),
        lambda: ss.load_safetensors(path, mmap=True),
        lambda: ss.read_safetensors_index(path),
        lambda: sadl.load(path),
    ):
        with pytest.raises(SadlFormatError, match=message) as caught:
            call()
        assert str(caught.value).startswith(f"{path}: invalid .safetensors file")


def test_a_hostile_sadl_file_raises_the_package_error(tmp_path):
    def entry(dims, data=b""):
        return (
            struct.pack("<I", 1)
            + b"a"
            + bytes([7])
            + b"float32"
            + bytes([len(dims)])
            + b"".join(struct.pack("<Q", n) for n in dims)
            + data
        )

    for dims, data, message in [
        ([2**63, 0], b"", "impossibly large"),
        ([2**64 - 1, 0], b"", "impossibly large"),
        ([1] * 65, b"\0" * 4, "at most 64"),
    ]:
        path = tmp_path / "hostile.sadl"
        path.write_bytes(b"SADL\x01" + struct.pack("<I", 1) + entry(dims, data))
        with pytest.raises(SadlFormatError, match=message):
            sadl.load(path)


def test_safetensors_written_here_load_in_the_reference_library(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    values = {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4).T,  # not contiguous
        "b": np.array([True, False]),
        "s": np.array(2.5, dtype=">f8"),  # big-endian 0-d
        "e": np.zeros((0, 3), np.int16),
    }
    path = tmp_path / "w.safetensors"
    ss.save_safetensors(values, path, metadata={"who": "sadl"})
    loaded = safetensors_numpy.load_file(str(path))
    assert sorted(loaded) == sorted(values)
    for key, value in values.items():
        np.testing.assert_array_equal(loaded[key], value)
    header_length = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert (8 + header_length) % 8 == 0


# ------------------------------------------------------------------------ full disk, killed saves
FULL_DISK = """
import resource, signal, sys
import numpy as np, sadl
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))
try:
    sadl.save({"w": np.ones(100_000, np.float32)}, sys.argv[1])
except OSError as exc:
    print(type(exc).__name__, exc.errno, exc.filename, "|", exc)
"""


@pytest.mark.parametrize("suffix", [".sadl", ".safetensors"])
@pytest.mark.parametrize("length", [10, 255])
def test_a_full_disk_raises_oserror_naming_the_target_and_keeps_the_old_file(
    tmp_path, suffix, length
):
    target = tmp_path / ("m" * max(1, length - len(suffix)) + suffix)
    sadl.save({"w": np.zeros(3, np.float32)}, target)
    before = target.read_bytes()
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(target)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    kind, errno_text, filename, _, message = result.stdout.split(" ", 4)
    assert kind == "OSError" and int(errno_text) == 27  # EFBIG, as ENOSPC would be
    assert filename == str(target) and TEMP_MARKER not in message
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [target.name]


KILLED = """
import sys
import numpy as np, sadl
x = np.ones((16, 1024, 1024), np.float32)
print("saving", flush=True)
while True:
    sadl.save({"w": x}, sys.argv[1])
"""


@pytest.mark.parametrize("suffix", [".sadl", ".safetensors"])
def test_a_killed_save_leaves_only_a_marked_temporary_file_that_the_next_save_removes(
    tmp_path, suffix
):
    target = tmp_path / f"w{suffix}"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(target)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "saving\n"
    time.sleep(0.8)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    leftovers = [n for n in os.listdir(tmp_path) if n != target.name]
    assert all(n.startswith(f".{target.name}{TEMP_MARKER}{proc.pid}-") for n in leftovers), (
        leftovers
    )
    for name in leftovers:  # as if the crash was a while ago
        os.utime(tmp_path / name, (time.time() - 3600, time.time() - 3600))
    sadl.save({"w": np.ones(2, np.float32)}, target)
    assert os.listdir(tmp_path) == [target.name]


# ------------------------------------------------------------------------ long names
@pytest.mark.parametrize("length", [231, 240, 254, 255])
@pytest.mark.parametrize("suffix", [".sadl", ".safetensors"])
def test_names_of_up_to_255_bytes_save_atomically(tmp_path, length, suffix):
    stem = "é" * ((length - len(suffix)) // 2) + "a" * ((length - len(suffix)) % 2)
    target = tmp_path / f"{stem}{suffix}"
    assert len(os.fsencode(target.name)) == length
    for value in (1.0, 2.0):
        sadl.save({"w": np.full(3, value, np.float32)}, target)
        np.testing.assert_array_equal(sadl.load(target)["w"].numpy(), np.full(3, value))
    assert os.listdir(tmp_path) == [target.name]
    ss.save_checkpoint(tmp_path / f"{stem[:-4]}.sadl", step=3)
    assert ss.load_checkpoint(tmp_path / f"{stem[:-4]}.sadl")["step"] == 3


def test_a_stale_temporary_file_of_a_long_name_is_cleaned_up(tmp_path):
    from sadl_serialize.atomic import _temp_prefix

    target = tmp_path / ("x" * 250 + ".sadl")
    prefix = _temp_prefix(target)
    assert len(os.fsencode(prefix)) + 19 <= 255 and prefix.endswith(TEMP_MARKER)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    stale = tmp_path / f"{prefix}{int(dead.stdout)}-deadbeef"
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    other = tmp_path / ("x" * 249 + "y.sadl")  # same start, other name: other prefix
    assert _temp_prefix(other) != prefix
    sadl.save({"w": np.ones(1)}, target)
    assert os.listdir(tmp_path) == [target.name]


# ------------------------------------------------------------------------ checkpoints
def write_checkpoint_meta(path, meta_text: bytes) -> None:
    ss.save({"__meta__": np.frombuffer(meta_text, np.uint8)}, path)


def test_deeply_nested_checkpoint_metadata_is_a_format_error(tmp_path):
    path = tmp_path / "deep.sadl"
    depth = 100_000
    write_checkpoint_meta(
        path,
        b'{"format": "sadl-checkpoint", "version": 1, "extra": '
        + b"[" * depth
        + b"]" * depth
        + b"}",
    )
    with pytest.raises(SadlFormatError, match="nests 100001 levels deep"):
        ss.load_checkpoint(path)
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "inspect", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "nests" in result.stderr and "Traceback" not in result.stderr


def saved_run(tmp_path, optimizer_class=sadl.optim.Adam, **kwargs):
    model = TinyNet(0)
    optimizer = optimizer_class(model.parameters(), **kwargs)
    x = sadl.tensor(np.ones((2, 4), np.float32))
    (model(x) ** 2).mean().backward()
    optimizer.step()
    path = tmp_path / "run.sadl"
    ss.save_checkpoint(path, model=model, optimizer=optimizer, step=1, rng=np.random.default_rng(9))
    return path, model, optimizer


def tamper(path, edit):
    """Rewrite a checkpoint with ``edit(meta, entries)`` applied, as a hostile writer would:
    as an older version-1 document without the checksum record (a file without one is only
    validated, never verified)."""
    entries = ss.load(path)
    meta = json.loads(entries.pop("__meta__").numpy().tobytes())
    del meta["integrity"]
    meta["version"] = 1
    edit(meta, entries)
    text = json.dumps(meta).encode()
    ss.save({"__meta__": np.frombuffer(text, np.uint8), **entries}, path)


def set_hyper(key, value):
    def edit(meta, entries):
        meta["optimizer"]["param_groups"][0][key] = value

    return edit


def set_moment(make):
    def edit(meta, entries):
        key = meta["optimizer"]["state"]["__dict__"][0][1]["exp_avg"]["__tensor__"]
        entries[key] = make(entries[key].numpy())

    return edit


BAD_OPTIMIZER_STATES = {
    "negative-lr": (set_hyper("lr", -0.1), "invalid learning rate lr=-0.1"),
    "nan-lr": (set_hyper("lr", {"__float__": "nan"}), "invalid learning rate lr=nan"),
    "string-lr": (set_hyper("lr", "abc"), "invalid learning rate lr='abc'"),
    "betas": (set_hyper("betas", {"__tuple__": [5, 7]}), r"invalid betas=\(5, 7\)"),
    "unknown-key": (set_hyper("momentum", 0.9), r"unknown keys \['momentum'\]"),
    "0-d-moment": (set_moment(lambda a: np.array(1.0, a.dtype)), "shape ()"),
    "int-moment": (set_moment(lambda a: a.astype(np.int64)), "int64 array"),
    "complex-moment": (set_moment(lambda a: a.astype(np.complex64)), "complex64 array"),
}


@pytest.mark.parametrize("case", sorted(BAD_OPTIMIZER_STATES))
def test_bad_optimizer_state_is_refused_and_nothing_is_restored(tmp_path, case):
    edit, message = BAD_OPTIMIZER_STATES[case]
    path, _, _ = saved_run(tmp_path)
    tamper(path, edit)
    model = TinyNet(1)
    optimizer = sadl.optim.Adam(model.parameters())
    weights = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match=message):
        ss.load_checkpoint(path, model=model, optimizer=optimizer, rng=rng)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), weights[key])  # not half restored
    assert len(optimizer.state) == 0 and optimizer.param_groups[0]["lr"] == 1e-3
    assert rng.random() == np.random.default_rng(5).random()


def test_a_model_that_refuses_its_state_leaves_everything_as_it_was(tmp_path):
    path, _, _ = saved_run(tmp_path)

    def wrong_shape(meta, entries):
        entries["model.w2"] = np.zeros((3, 1), np.float32)  # the first entries are fine

    tamper(path, wrong_shape)
    model = TinyNet(1)
    optimizer = sadl.optim.Adam(model.parameters(), lr=0.5)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="'w2' has shape"):
        ss.load_checkpoint(path, model=model, optimizer=optimizer)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key])
    assert len(optimizer.state) == 0 and optimizer.param_groups[0]["lr"] == 0.5


def test_a_scheduler_that_refuses_its_state_undoes_the_optimizer(tmp_path):
    path, model, optimizer = saved_run(tmp_path)

    class Refusing:
        def state_dict(self):
            return {"n": 1}

        def load_state_dict(self, state):
            raise ValueError("Refusing: this state does not fit")

    ss.save_checkpoint(path, model=model, optimizer=optimizer, scheduler=Refusing())
    fresh = TinyNet(1)
    opt = sadl.optim.Adam(fresh.parameters(), lr=0.25)
    with pytest.raises(ValueError, match="does not fit"):
        ss.load_checkpoint(path, model=fresh, optimizer=opt, scheduler=Refusing())
    assert len(opt.state) == 0 and opt.param_groups[0]["lr"] == 0.25


def test_a_good_checkpoint_still_restores_everything(tmp_path):
    path, model, optimizer = saved_run(tmp_path, sadl.optim.SGD, lr=0.1, momentum=0.9)
    fresh = TinyNet(1)
    opt = sadl.optim.SGD(fresh.parameters(), lr=0.5, momentum=0.5)
    ss.load_checkpoint(path, model=fresh, optimizer=opt)
    for a, b in zip(model.parameters(), fresh.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0.9
    for p, q in zip(optimizer.param_groups[0]["params"], opt.param_groups[0]["params"]):
        np.testing.assert_array_equal(
            optimizer.state[p]["momentum_buffer"], opt.state[q]["momentum_buffer"]
        )


def test_the_optimizer_refuses_the_same_state_outside_checkpoints():
    model = TinyNet(0)
    optimizer = sadl.optim.Adam(model.parameters())
    state = optimizer.state_dict()
    state["param_groups"][0]["betas"] = (5, 7)
    with pytest.raises(ValueError, match="invalid betas"):
        optimizer.load_state_dict(state)
    assert optimizer.param_groups[0]["betas"] == (0.9, 0.999)
