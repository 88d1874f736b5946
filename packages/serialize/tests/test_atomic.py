"""Atomic writes: the previous file survives an exception, or a SIGKILL mid-save."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl_serialize.atomic import TEMP_MARKER


def _temps(directory, name):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(f".{name}{TEMP_MARKER}"))


def test_atomic_write_replaces_the_file_when_the_block_completes(tmp_path):
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    with ss.atomic_write(target) as fh:
        fh.write(b"new ")
        assert target.read_bytes() == b"old"  # not visible until the block ends
        fh.write(b"content")
    assert target.read_bytes() == b"new content"
    assert _temps(tmp_path, "a.bin") == []


def test_an_exception_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"), ss.atomic_write(target) as fh:
        fh.write(b"half")
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert list(tmp_path.iterdir()) == [target]


def test_a_failing_save_keeps_the_previous_sadl_file(tmp_path, monkeypatch):
    target = tmp_path / "m.sadl"
    sadl.save({"w": np.ones(3)}, target)
    before = target.read_bytes()

    class Exploding(np.ndarray):
        """An array whose data cannot be read (fails mid-write, after the header)."""

    bad = np.zeros(4).view(Exploding)
    import sadl_serialize.sadl_format as fmt

    real = fmt._host_array

    def host_array(value):
        if isinstance(value, Exploding):
            raise OSError("disk on fire")
        return real(value)

    monkeypatch.setattr(fmt, "_host_array", host_array)
    with pytest.raises(OSError, match="disk on fire"):
        sadl.save({"a": np.ones(2), "b": bad}, target)
    assert target.read_bytes() == before
    assert list(tmp_path.iterdir()) == [target]


def test_text_mode_permissions_and_symlinks(tmp_path):
    target = tmp_path / "config.json"
    with ss.atomic_write(target, "w") as fh:
        fh.write('{"λ": 1}')
    assert target.read_text(encoding="utf-8") == '{"λ": 1}'
    os.chmod(target, 0o640)
    with ss.atomic_write(target, "w") as fh:
        fh.write("{}")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the replaced file's mode is kept
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with ss.atomic_write(link, "w") as fh:
        fh.write("[]")
    assert link.is_symlink() and target.read_text() == "[]"


def test_bad_arguments_and_missing_directories(tmp_path):
    with pytest.raises(ValueError, match="mode must be"):
        ss.atomic_write(tmp_path / "x", "a")
    with pytest.raises(ValueError, match="text mode"):
        ss.atomic_write(tmp_path / "x", "wb", encoding="utf-8")
    with (
        pytest.raises(FileNotFoundError, match="does not exist"),
        ss.atomic_write(tmp_path / "nope" / "x"),
    ):
        pass
    with pytest.raises(IsADirectoryError), ss.atomic_write(tmp_path):
        pass


def test_stale_temporary_files_of_dead_writers_are_cleaned_up(tmp_path):
    target = tmp_path / "m.sadl"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".m.sadl{TEMP_MARKER}{dead_pid}-deadbeef"
    recent = tmp_path / f".m.sadl{TEMP_MARKER}{dead_pid}-0badf00d"
    alive = tmp_path / f".m.sadl{TEMP_MARKER}{os.getppid()}-cafecafe"
    other = tmp_path / f".other.sadl{TEMP_MARKER}{dead_pid}-deadbeef"
    for p in (stale, recent, alive, other):
        p.write_bytes(b"partial")
    old = time.time() - 3600
    for p in (stale, alive, other):
        os.utime(p, (old, old))
    sadl.save(np.ones(2), target)
    assert not stale.exists()  # dead writer, old: removed
    assert recent.exists()  # too recent to be sure: kept
    assert alive.exists()  # writer still running: kept
    assert other.exists()  # another target's: not ours to touch


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import sadl
    path = sys.argv[1]
    i = 1
    while True:
        # ~24 MB per save, every value equal to the generation number i
        state = {f"w{k}": np.full((1000, 1000), i, np.float64) for k in range(3)}
        sadl.save(state, path)
        print(i, flush=True)
        i += 1
    """
)


def _generation(path) -> int:
    """Load the file and check it is one complete generation; return the generation number."""
    loaded = sadl.load(path)
    assert list(loaded) == ["w0", "w1", "w2"]
    values = {float(v) for t in loaded.values() for v in np.unique(t.numpy())}
    assert len(values) == 1, f"mixed generations in one file: {values}"
    assert all(t.shape == (1000, 1000) for t in loaded.values())
    return int(values.pop())


def test_sigkill_mid_save_leaves_the_previous_file_loadable(tmp_path):
    target = tmp_path / "ckpt.sadl"
    sadl.save({f"w{k}": np.zeros((1000, 1000)) for k in range(3)}, target)
    assert _generation(target) == 0
    rng = random.Random()
    killed_mid_write = 0
    pids = []
    for attempt in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILL_SCRIPT, str(target)],
            stdout=subprocess.PIPE,
            text=True,
        )
        pids.append(proc.pid)
        mine = f".{target.name}{TEMP_MARKER}{proc.pid}-"
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # at least one save completed: the writer is in its loop
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # wait until one of its saves is in flight
                if any(n.startswith(mine) for n in _temps(tmp_path, target.name)):
                    break
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, 0.005))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == -signal.SIGKILL
        # A SIGKILLed writer cleans nothing up: its temporary file is still there exactly when
        # the kill landed between creating it and renaming it, i.e. in the middle of a save.
        killed_mid_write += any(n.startswith(mine) for n in _temps(tmp_path, target.name))
        # Whatever the moment, the target is a complete file: the last generation that finished.
        assert _generation(target) >= 1
        # Left-overs are only the killed writers' recognisable temporary files.
        for leftover in _temps(tmp_path, target.name):
            assert any(leftover.startswith(f".{target.name}{TEMP_MARKER}{p}-") for p in pids)
        if attempt >= 2 and killed_mid_write >= 2:
            break
    assert killed_mid_write >= 1, "no kill landed during a save; the test proved nothing"
    # Nothing but the target and (possibly) recognisable temporary files is left.
    others = [p.name for p in tmp_path.iterdir() if p != target]
    assert all(TEMP_MARKER in name for name in others)
