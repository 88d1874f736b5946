"""Faults: notice a rank that died, and end the whole job when one rank fails.

MPI itself gives a rank waiting in a collective no news of a peer that was killed: it waits
forever. So every rank learns at ``init`` the process id and machine of every other rank
(:class:`Peers`); a waiting rank checks, every half second, that the ranks on its own machine
are still alive, and raises :class:`RankFailedError` naming the dead one. Ranks on other machines
are covered by the launcher (``mpiexec`` ends the job when a process dies) and, failing that, by
the group's timeout.

MPICH's launcher, told not to end the job itself (``-disable-auto-cleanup``, as ``sadl launch``
does), tells the surviving processes that one died with ``SIGUSR1``, whose default action would
end them silently; :class:`Peers` catches it and checks at once.

An uncaught exception on one rank would leave the others waiting for it; ``abort_on_uncaught``
makes it print the traceback with the rank and end every rank of the job. A rank that caught such
an error and returns (a command line prints it and exits 1) would wait forever in MPI's finalize
for the dead rank; ``end_job_at_exit`` ends the job instead.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from sadl_distributed.errors import RankFailedError
from sadl_distributed.reports import REPORTS_VARIABLE, read_failure, write_failure

__all__ = [
    "Peers",
    "abort_on_uncaught",
    "end_job",
    "end_job_at_exit",
    "machine_id",
    "process_alive",
]

#: How long ``abort`` may take before the process exits by itself.
_ABORT_GRACE_S = 10.0
#: How long a failing rank waits for the launcher to forward its last words before aborting.
_OUTPUT_GRACE_S = 0.25
#: How long, after the launcher's signal, a rank looks again for a neighbour that died.
_REPOLL_S = 2.0
#: How long a rank waits for a dead neighbour's report (its supervisor writes it).
_REPORT_WAIT_S = 0.5
#: Set once this process has started ending the job (abort called once only).
_ending = threading.Event()


def machine_id() -> int:
    """A 63-bit number equal for processes that can see each other's process ids.

    Host name, boot id and PID namespace together: two containers on one host with the same
    host name but separate PID namespaces get different ids.
    """
    parts = [socket.gethostname()]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        pass
    digest = hashlib.blake2b("\0".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True  # no /proc (macOS): kill() said it exists
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


class Peers:
    """The process id and machine of every rank, to tell a dead rank from a slow one."""

    def __init__(self, rank: int, pids: Sequence[int], machines: Sequence[int]) -> None:
        self.rank = rank
        self.pids = list(pids)
        here = machines[rank]
        #: The other ranks on this machine: the ones whose death this rank can see.
        self.neighbours = [r for r, m in enumerate(machines) if m == here and r != rank]
        #: Set when the launcher signalled that some process of the job has failed.
        self.failure_reported = False

    def dead(self) -> list[int]:
        """The ranks on this machine whose process is gone."""
        return [r for r in self.neighbours if not process_alive(self.pids[r])]

    def check(self, what: str) -> None:
        """Raise :class:`RankFailedError` naming the first dead rank, if any.

        After the launcher's signal, a rank that it saw fail may still be visible for a moment
        (exiting, not yet reaped): look again for up to ``_REPOLL_S`` before concluding that
        the failed process is on another machine.
        """
        dead = self.dead()
        deadline = time.monotonic() + _REPOLL_S
        while not dead and self.failure_reported and time.monotonic() < deadline:
            time.sleep(0.02)
            dead = self.dead()
        if dead:
            r = dead[0]
            why = _report_of(r) or f"see rank {r}'s own output above for why it stopped"
            raise RankFailedError(
                f"rank {r} (process {self.pids[r]} on this machine) died while rank "
                f"{self.rank} was waiting for it in {what}; the job cannot continue without "
                f"it ({why})",
                r,
            )
        if self.failure_reported:
            raise RankFailedError(
                f"MPI's launcher reported that a process of this job died (on another "
                f"machine) while rank {self.rank} was waiting in {what}; the job cannot "
                "continue (see that rank's output for why it stopped)",
                -1,
            )

    def watch_launcher_signal(self) -> None:
        """Catch the launcher's ``SIGUSR1`` (a process failed) instead of dying silently.

        Only where nobody handles ``SIGUSR1`` yet, and only from the main thread.
        """
        usr1 = getattr(signal, "SIGUSR1", None)
        if usr1 is None or signal.getsignal(usr1) is not signal.SIG_DFL:
            return
        if threading.current_thread() is not threading.main_thread():
            return

        def on_failure(signum: int, frame: Any) -> None:
            self.failure_reported = True

        signal.signal(usr1, on_failure)
        # Python drops its handlers while the interpreter shuts down; a rank that exits
        # normally may still hear that another one already has: ignore it from then on.
        atexit.register(signal.signal, usr1, signal.SIG_IGN)


def _report_of(rank: int) -> str | None:
    """The dead rank's report (``sadl launch``): its supervisor writes it just after the death."""
    if not os.environ.get(REPORTS_VARIABLE):
        return None
    deadline = time.monotonic() + _REPORT_WAIT_S
    while (text := read_failure(rank)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return text


def end_job(abort: Callable[[int], Any], code: int = 1) -> None:
    """Flush, give the launcher a moment to forward the output, then end every rank."""
    _ending.set()
    sys.stderr.flush()
    sys.stdout.flush()
    # The launcher forwards our output asynchronously; aborting at once can cut it off.
    time.sleep(_OUTPUT_GRACE_S)
    # If aborting itself hangs (a broken network), exit anyway.
    timer = threading.Timer(_ABORT_GRACE_S, os._exit, (code,))
    timer.daemon = True
    timer.start()
    abort(code)


def end_job_at_exit(
    rank: int,
    size: int,
    broken: Callable[[], BaseException | None],
    abort: Callable[[int], Any],
    finalize: Callable[[], Any] | None,
) -> None:
    """At interpreter exit: end the job if ``broken()`` (an error this rank raised, or caught,
    said the job cannot go on), else ``finalize()`` (if given).

    A program that catches :class:`RankFailedError` and returns (as every command line does)
    would otherwise wait forever in MPI's finalize for the rank that died.
    """

    def at_exit() -> None:
        error = broken()
        if _ending.is_set():
            return  # the uncaught-exception hook has ended the job already
        if error is not None:
            sys.stderr.write(
                f"sadl_distributed: rank {rank} of {size} ends the job after "
                f"{type(error).__name__} (it cannot continue)\n"
            )
            write_failure(rank, size, type(error), error, error.__traceback__)
            end_job(abort)
        elif finalize is not None:
            finalize()

    atexit.register(at_exit)


def abort_on_uncaught(rank: int, size: int, abort: Callable[[int], Any]) -> None:
    """Make an uncaught exception print its traceback with the rank, then end the whole job.

    Without this, a rank that raises would exit (or hang in MPI's finalize) while the others
    wait for it in their next collective. Under ``sadl launch`` the report also goes to a file
    (``sadl_distributed.reports``): MPI's forwarding of output can lose the last words of a job
    that is falling apart, a file cannot.
    """
    previous = sys.excepthook

    def excepthook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        sys.stderr.write(f"sadl_distributed: rank {rank} of {size} stopped with an error:\n")
        previous(exc_type, exc, tb)
        sys.stderr.write(f"sadl_distributed: rank {rank} ends the job (all {size} ranks)\n")
        write_failure(rank, size, exc_type, exc, tb)
        end_job(abort)

    sys.excepthook = excepthook
