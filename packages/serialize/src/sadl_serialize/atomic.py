"""Atomic file writes: the target is replaced whole, or not at all.

``atomic_write(path)`` writes into a temporary file in the target's directory, flushes and fsyncs
it, renames it over the target (``os.replace``, atomic on POSIX and Windows) and fsyncs the
directory, so the rename itself survives a power cut. If the writer raises, the temporary file is
removed and the target is untouched. If the process is killed mid-write, the target is still the
previous, complete file; the temporary file is left behind under a recognisable name
(``.<target name>.sadl-tmp-<pid>-<random>``) and is removed by the next successful
``atomic_write`` to the same target once its writer process is gone. For a target name so long
that the temporary name would pass the file system's limit (255 bytes on most), the name part is
shortened and a hash of the full name added: ``.<start of name>~<hash>.sadl-tmp-...``. Errors
name the target, never the temporary file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, overload

__all__ = ["TEMP_MARKER", "atomic_path", "atomic_write"]

#: Part of every temporary file name: ``.<target name>.sadl-tmp-<pid>-<random>``.
TEMP_MARKER = ".sadl-tmp-"

# A stale temporary file is only removed when its writer process is gone *and* it is this old:
# a writer in another PID namespace (a container sharing the directory) is never disturbed.
_STALE_AFTER_S = 60.0


@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["wb"] = "wb", *, encoding: None = None
) -> AbstractContextManager[BinaryIO]: ...


@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["w"], *, encoding: str | None = None
) -> AbstractContextManager[TextIO]: ...


def atomic_write(
    path: str | os.PathLike[str], mode: str = "wb", *, encoding: str | None = None
) -> AbstractContextManager[IO[Any]]:
    """Open ``path`` for writing so that it is replaced atomically when the block ends.

    ``mode`` is ``"wb"`` (binary, the default) or ``"w"`` (text, UTF-8 unless ``encoding`` says
    otherwise). Usage::

        with atomic_write("model.json", "w") as fh:
            fh.write(text)

    Until the ``with`` block completes, ``path`` keeps its previous content (or does not exist).
    On an exception the temporary file is deleted and the exception propagates. The new file
    keeps the permission bits of the file it replaces (a new file gets the usual ``0o666 &
    ~umask``). A symbolic link at ``path`` is followed: the file it points to is replaced.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write: mode must be 'wb' or 'w', got {mode!r}")
    if mode == "wb" and encoding is not None:
        raise ValueError("atomic_write: encoding is only meaningful in text mode ('w')")
    return _atomic_write(Path(path), mode, encoding)


@contextlib.contextmanager
def _atomic_write(path: Path, mode: str, encoding: str | None) -> Iterator[IO[Any]]:
    with atomic_path(path) as tmp:
        if mode == "w":
            fh: IO[Any] = open(tmp, "w", encoding=encoding or "utf-8")  # noqa: SIM115
        else:
            fh = open(tmp, "wb")  # noqa: SIM115
        with fh:  # closed (so flushed) before atomic_path fsyncs and renames it
            yield fh


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary path next to ``path``; rename it over ``path`` when the block ends.

    For writers that insist on a file name (such as ``safetensors.serialize_file``). The caller
    writes the temporary file and closes it; this function fsyncs it, renames it and fsyncs the
    directory. On an exception the temporary file is removed and the target is untouched.
    """
    target = _resolve(Path(path))
    tmp = _create_temp(target)
    try:
        yield tmp
        _fsync_file(tmp)
        _keep_mode(target, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno is None or exc.filename not in (None, os.fspath(tmp)):
            raise
        # "No space left on device" while writing, or any error about the temporary file:
        # say which file could not be written (the temporary file is gone).
        raise type(exc)(exc.errno, exc.strerror, os.fspath(target)) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)
    _remove_stale_temps(target)


def _resolve(path: Path) -> Path:
    """Follow a symbolic link at ``path`` (so the linked file is what gets replaced)."""
    if path.is_symlink():
        return Path(os.path.realpath(path))
    return path


def _create_temp(target: Path) -> Path:
    directory = target.parent
    if not directory.is_dir():
        raise FileNotFoundError(f"cannot write {target}: the directory {directory} does not exist")
    if target.is_dir():
        raise IsADirectoryError(f"cannot write {target}: it is a directory")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    prefix = _temp_prefix(target)
    for _ in range(100):
        tmp = directory / f"{prefix}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask applies, as for open()
        except FileExistsError:
            continue
        except PermissionError as exc:
            raise PermissionError(
                exc.errno, f"cannot write {target}: no permission to create files in {directory}"
            ) from None
        os.close(fd)
        return tmp
    raise FileExistsError(f"cannot create a temporary file next to {target}")


# What follows the prefix: the writer's pid (at most 10 digits), "-", 8 random hex digits.
_TAIL_BYTES = 10 + 1 + 8


def _temp_prefix(target: Path) -> str:
    """``.<name>.sadl-tmp-``, with the name shortened (plus a hash) to fit the name limit."""
    prefix = f".{target.name}{TEMP_MARKER}"
    limit = _name_max(target.parent)
    if len(os.fsencode(prefix)) + _TAIL_BYTES <= limit:
        return prefix
    name = os.fsencode(target.name)
    digest = hashlib.sha256(name).hexdigest()[:8]
    room = limit - _TAIL_BYTES - len(TEMP_MARKER) - len(digest) - 2  # "." and "~"
    start = os.fsdecode(name[: max(room, 0)])  # bytes round-trip, a cut character included
    return f".{start}~{digest}{TEMP_MARKER}"


def _name_max(directory: Path) -> int:
    """The longest file name (in bytes) the directory's file system takes."""
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (AttributeError, OSError, ValueError):
        return 255


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _keep_mode(target: Path, tmp: Path) -> None:
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return
    os.chmod(tmp, mode)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; a no-op where directories cannot be fsynced (Windows, some FS)."""
    if os.name == "nt":
        return
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_stale_temps(target: Path) -> None:
    """Delete temporary files of ``target`` left by killed writers (best effort, POSIX only)."""
    if sys.platform == "win32":  # os.kill(pid, 0) would terminate the process there
        return
    prefix = _temp_prefix(target)
    try:
        candidates = [e for e in os.scandir(target.parent) if e.name.startswith(prefix)]
    except OSError:
        return
    now = time.time()
    for entry in candidates:
        pid_text = entry.name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < _STALE_AFTER_S:
                continue
        except OSError:
            continue
        if _pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True
