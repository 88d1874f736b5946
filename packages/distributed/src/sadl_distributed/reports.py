"""What the ranks of a job started by ``sadl launch`` leave behind for it, in a directory.

``sadl launch`` names a fresh directory in ``SADL_DISTRIBUTED_REPORTS``; each rank writes there,
at ``init``, ``rank<r>.pid`` (its process id and machine), at a normal exit ``rank<r>.done``,
and when an uncaught exception ends it, ``rank<r>.txt`` (the error, then the traceback); the
rank's supervisor (``sadl_distributed.supervise``) writes ``rank<r>.txt`` when a signal killed
it or it exited with a non-zero status (before ``init`` too). From these the launcher says,
after a failed job, which rank failed and why, even when MPI's launcher cut the ranks' own
output short. Without the variable (a plain ``mpiexec`` run)
nothing is written.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = [
    "REPORTS_VARIABLE",
    "RankRecord",
    "read_ranks",
    "register_rank",
    "read_failure",
    "write_ended",
    "write_failure",
]

#: The environment variable naming the directory the ranks write into.
REPORTS_VARIABLE = "SADL_DISTRIBUTED_REPORTS"


def _directory() -> Path | None:
    text = os.environ.get(REPORTS_VARIABLE)
    return Path(text) if text else None


def register_rank(rank: int, machine: int) -> None:
    """Leave ``rank<r>.pid``, and arrange for ``rank<r>.done`` at a normal exit."""
    directory = _directory()
    if directory is None:
        return
    with contextlib.suppress(OSError):
        (directory / f"rank{rank}.pid").write_text(f"{os.getpid()} {machine}")

    def done() -> None:
        with contextlib.suppress(OSError):
            (directory / f"rank{rank}.done").write_text("")

    atexit.register(done)


def write_failure(
    rank: int,
    size: int,
    exc_type: type[BaseException],
    exc: BaseException,
    tb: TracebackType | None,
) -> None:
    """Leave ``rank<r>.txt``: one line naming the rank and the error, then the traceback."""
    directory = _directory()
    if directory is None:
        return
    summary = " ".join(f"{exc_type.__name__}: {exc}".split())
    text = [f"rank {rank} of {size}: {summary}", "", *traceback.format_exception(exc_type, exc, tb)]
    with contextlib.suppress(OSError):
        (directory / f"rank{rank}.txt").write_text("\n".join(text))


def write_ended(rank: int, size: int, pid: int, status: int) -> None:
    """Leave ``rank<r>.txt`` for a rank whose process a signal killed (``status`` < 0: it
    could not say so itself) or that exited with a non-zero status (``sys.exit(3)``; before
    ``init`` too), unless the rank has left its own report (its error, written first).
    """
    directory = _directory()
    if directory is None or (directory / f"rank{rank}.txt").exists():
        return
    if status >= 0:
        when = "" if (directory / f"rank{rank}.pid").exists() else " before sadl_distributed.init()"
        text = f"rank {rank} of {size}: exited with status {status}{when}, process {pid}"
    else:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        hint = " (the out-of-memory killer sends SIGKILL)" if -status == signal.SIGKILL else ""
        text = f"rank {rank} of {size}: killed by {name}{hint}, process {pid}"
    with contextlib.suppress(OSError):
        (directory / f"rank{rank}.txt").write_text(text + "\n")


def read_failure(rank: int) -> str | None:
    """The first line of ``rank<r>.txt`` of this job (``sadl launch``), if it is there."""
    directory = _directory()
    try:
        text = (directory / f"rank{rank}.txt").read_text(errors="replace") if directory else ""
    except OSError:
        return None
    return text.splitlines()[0] if text else None


@dataclass
class RankRecord:
    """What one rank left: its process, whether it exited normally, its error (if any)."""

    rank: int
    pid: int
    machine: int
    done: bool = False
    failure: str | None = None


def read_ranks(directory: str | os.PathLike[str]) -> dict[int, RankRecord]:
    """Every registered rank's record, by rank."""
    root = Path(directory)
    ranks: dict[int, RankRecord] = {}
    for path in [*root.glob("rank*.pid"), *root.glob("rank*.txt")]:
        number = path.stem[4:]
        if not number.isdigit() or int(number) in ranks:
            continue
        r = int(number)
        try:  # a rank that failed before init has a report but no process id (-1)
            pid, machine = (int(v) for v in (root / f"rank{r}.pid").read_text().split())
        except FileNotFoundError:
            pid, machine = -1, -1
        except (OSError, ValueError):
            continue  # being written, or damaged: not registered
        record = RankRecord(r, pid, machine, done=(root / f"rank{r}.done").exists())
        with contextlib.suppress(OSError):
            text = (root / f"rank{r}.txt").read_text(errors="replace")
            record.failure = text.splitlines()[0] if text else None
        ranks[r] = record
    return dict(sorted(ranks.items()))
