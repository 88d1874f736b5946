"""Start N copies of a command on this machine with ``mpiexec``: ``sadl launch``, ``--nproc N``.

``mpiexec -n N python train.py`` is all it takes; this module picks the right ``mpiexec`` and
flags so that it also works on a bare machine:

* ``mpiexec`` is ``$SADL_MPIEXEC``, else the one next to the running Python (where
  ``pip install mpich`` puts it, matching the MPI that mpi4py loads), else the first on PATH.
* MPICH's launcher (hydra) gets ``-disable-auto-cleanup`` and runs each rank under
  ``sadl_distributed.supervise``: when a rank dies, the others notice it themselves and stop
  with a message naming that rank (by default hydra kills them at once and names only a process
  id). Open MPI's gets ``--oversubscribe`` (more ranks than cores is allowed, as it is with
  MPICH).
* Unless the environment sets them, each rank's BLAS gets ``cores // N`` threads
  (``OMP_NUM_THREADS`` and friends), so N ranks do not fight over the cores.
* Ctrl-C goes to the ranks first (a training loop can stop cleanly), a second one to mpiexec.
* SIGTERM or SIGHUP to the launcher (``kill``, a batch system, a closed terminal) goes to every
  rank and to mpiexec; the launcher waits until the job has ended (killing what is left after
  ``_STOP_GRACE_S``) and exits with 128 + the signal's number, as if that signal had ended it.
* A job in which a rank failed ends: if the other ranks have not ended it themselves
  ``END_GRACE_S`` (10 s) later, or 2 s later for a rank that failed before
  ``sadl_distributed.init()`` (the others wait in MPI's start-up, where nothing can reach
  them), the launcher stops mpiexec and names the rank.

On a cluster, use the site's ``mpiexec``/``srun`` with a hostfile instead (docs/distributed.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

from sadl_distributed.faults import machine_id, process_alive
from sadl_distributed.reports import REPORTS_VARIABLE, RankRecord, read_ranks

__all__ = [
    "THREAD_VARIABLES",
    "find_mpiexec",
    "launcher_kind",
    "mpiexec_command",
    "rank_environment",
    "run",
]

#: How often the launcher looks at the ranks while they run.
_POLL_S = 0.1
#: How long after a rank failed the launcher lets the others end the job before it does.
END_GRACE_S = 10.0
#: How long mpiexec gets to end its ranks after SIGTERM before it is killed.
_STOP_GRACE_S = 5.0
#: The signals that end a job: passed on to it, waited for, and the launcher's exit status.
_ENDING = ("SIGTERM", "SIGHUP")
#: The variables that set how many threads BLAS and OpenMP use in each rank.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def find_mpiexec(environ: Mapping[str, str] = os.environ) -> str:
    """The ``mpiexec`` to use (see the module docstring); raises if there is none."""
    chosen = environ.get("SADL_MPIEXEC")
    if chosen:
        if not (Path(chosen).is_file() or shutil.which(chosen)):
            raise FileNotFoundError(f"SADL_MPIEXEC={chosen!r} is not an executable")
        return chosen
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("mpiexec", path=environ.get("PATH"))
    if found:
        return found
    from sadl.plugins import install_command  # only on this error path: the launcher stays light

    raise FileNotFoundError(
        "no mpiexec found (not next to this Python, not on PATH): install an MPI with "
        f"{install_command('sadl-distributed', extra='mpich')} (or pip install mpich), or "
        "point SADL_MPIEXEC at your MPI's mpiexec"
    )


def launcher_kind(mpiexec: str) -> str:
    """``"hydra"`` (MPICH, Intel MPI), ``"openmpi"``, or ``"unknown"``, from ``--version``."""
    try:
        result = subprocess.run(
            [mpiexec, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = result.stdout + result.stderr
    if "HYDRA" in text:
        return "hydra"
    if "Open MPI" in text or "OpenRTE" in text or "PRRTE" in text:
        return "openmpi"
    return "unknown"


def mpiexec_command(nproc: int, argv: Sequence[str], *, mpiexec: str | None = None) -> list[str]:
    """``[mpiexec, -n, N, <flags>, *argv]`` for ``nproc`` ranks on this machine."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"the number of processes must be a positive integer, got {nproc!r}")
    if not argv:
        raise ValueError("nothing to launch: give the command to run in every rank")
    exe = mpiexec or find_mpiexec()
    kind = launcher_kind(exe)
    if kind == "hydra":
        supervise = [sys.executable, "-m", "sadl_distributed.supervise"]
        return [exe, "-n", str(nproc), "-disable-auto-cleanup", *supervise, *argv]
    if kind == "openmpi":
        return [exe, "-n", str(nproc), "--oversubscribe", *argv]
    return [exe, "-n", str(nproc), *argv]


def rank_environment(nproc: int, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment for the ranks: ``environ`` plus BLAS thread counts unless it has them."""
    env = dict(environ)
    if not any(name in env for name in THREAD_VARIABLES):
        threads = str(max(1, (os.cpu_count() or 1) // nproc))
        env.update({name: threads for name in THREAD_VARIABLES})
    return env


def run(nproc: int, argv: Sequence[str], *, mpiexec: str | None = None) -> int:
    """Run ``argv`` in ``nproc`` ranks on this machine; returns mpiexec's exit status.

    While the job runs, this process watches the ranks (they register in a scratch directory,
    ``sadl_distributed.reports``). When the job fails, it says last, on stderr, which rank died
    first and each failed rank's own error, whatever MPI's launcher did with their output.
    """
    command = mpiexec_command(nproc, argv, mpiexec=mpiexec)
    env = rank_environment(nproc)
    with tempfile.TemporaryDirectory(prefix="sadl-launch-") as reports:
        env[REPORTS_VARIABLE] = reports
        # Its own session: Ctrl-C at the terminal reaches this process only, which passes it
        # on to the ranks (see _interrupt) instead of letting mpiexec kill them mid-step.
        process = subprocess.Popen(command, env=env, start_new_session=True)
        interrupted = False
        with _ending_signals_raise():
            while True:
                try:
                    deaths = _watch(process, Path(reports), interrupted)
                    break
                except KeyboardInterrupt:
                    interrupted = _interrupt(process, Path(reports), again=interrupted)
                except _JobEnded as ended:
                    _end(process, Path(reports), ended.signum)
                    return 128 + ended.signum
                except BaseException:
                    _stop(process)  # never leave the job behind
                    raise
        status = process.returncode
        if status < 0:  # ended by a signal (here, by _watch)
            status = 128 - status
        if status != 0 and not interrupted:
            for line in _failure_summary(read_ranks(reports), deaths):
                print(f"sadl launch: {line}", file=sys.stderr)
            print(f"sadl launch: the job failed (mpiexec exit status {status})", file=sys.stderr)
    return status


class _JobEnded(Exception):  # noqa: N818 (a signal, not an error)
    """SIGTERM or SIGHUP reached the launcher (raised by its handler, like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _ending_signals_raise() -> Iterator[None]:
    """While the job runs, SIGTERM and SIGHUP raise :class:`_JobEnded` here (instead of
    ending this process at once and leaving mpiexec and the ranks behind, in their session).
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; a launcher in a thread keeps Python's
        return

    def raise_ended(signum: int, frame: FrameType | None) -> None:
        raise _JobEnded(signum)

    numbers = [getattr(signal, name) for name in _ENDING if hasattr(signal, name)]
    previous = {number: signal.signal(number, raise_ended) for number in numbers}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _end(process: subprocess.Popen[bytes], reports: Path, signum: int) -> None:
    """Pass ``signum`` on to every rank on this machine and SIGTERM to mpiexec, then wait
    until the job has ended (``_STOP_GRACE_S``, then SIGKILL for what is left).
    """
    for name in _ENDING:  # a repeated signal changes nothing now: the job is being ended
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda signum, frame: None)
    here = machine_id()
    ranks = [r for r in read_ranks(reports).values() if r.machine == here and not r.done]
    print(
        f"sadl launch: {signal.Signals(signum).name}: ending the job (passed on to its "
        f"{len(ranks)} running ranks)",
        file=sys.stderr,
        flush=True,
    )
    for record in ranks:
        with contextlib.suppress(OSError):
            os.kill(record.pid, signum)
    with contextlib.suppress(OSError):
        process.terminate()
    deadline = time.monotonic() + _STOP_GRACE_S
    left = ranks
    while time.monotonic() < deadline:
        left = [r for r in left if process_alive(r.pid)]
        if process.poll() is not None and not left:
            return
        time.sleep(_POLL_S)
    for record in left:
        with contextlib.suppress(OSError):
            os.kill(record.pid, signal.SIGKILL)
    _stop(process)


def _interrupt(process: subprocess.Popen[bytes], reports: Path, *, again: bool) -> bool:
    """Ctrl-C: the first one goes to every rank (which may stop cleanly, as ``sadl train gpt``
    does: a checkpoint, then exit); the next one, or one before any rank is up, to mpiexec,
    which ends the job at once.
    """
    here = machine_id()
    ranks = [r for r in read_ranks(reports).values() if r.machine == here and not r.done]
    if again or not ranks:
        process.send_signal(signal.SIGINT)
        return True
    for record in ranks:
        with contextlib.suppress(OSError):
            os.kill(record.pid, signal.SIGINT)
    print(
        f"sadl launch: Ctrl-C passed on to the {len(ranks)} ranks; press it again to stop them "
        "at once",
        file=sys.stderr,
        flush=True,
    )
    return True


def _watch(process: subprocess.Popen[bytes], reports: Path, interrupted: bool) -> list[int]:
    """Wait for ``process``; meanwhile note, in order, the ranks whose process disappears
    or that leave a failure report.

    Once a rank has failed (left a report), the others normally end the job themselves
    within seconds. If the job is still running ``END_GRACE_S`` later (the others are stuck
    where no rank can notice anything: in MPI's start-up, waiting for a rank that failed
    before ``init``; a fifth of that for those), the launcher ends it.
    """
    here = machine_id()
    deaths: list[int] = []
    failed_at: float | None = None
    first = RankRecord(-1, -1, -1)
    while True:
        try:
            process.wait(timeout=_POLL_S)
            return deaths
        except subprocess.TimeoutExpired:
            pass
        for record in read_ranks(reports).values():
            if record.failure and failed_at is None:
                first, failed_at = record, time.monotonic()
            if record.rank in deaths:
                continue
            if record.failure or (record.machine == here and not process_alive(record.pid)):
                deaths.append(record.rank)
        if failed_at is None or interrupted:  # after Ctrl-C, ranks stop in their own time
            continue
        # A rank that failed before init: nobody else can notice (they wait in MPI's start-up).
        grace = END_GRACE_S if first.pid >= 0 else END_GRACE_S / 5
        if time.monotonic() - failed_at > grace:
            print(
                f"sadl launch: rank {first.rank} failed {grace:g} s ago and the other "
                "ranks have not ended: stopping the job",
                file=sys.stderr,
                flush=True,
            )
            _stop(process)
            return deaths


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End mpiexec (SIGTERM: it ends every rank), or kill it if it does not end."""
    process.terminate()
    try:
        process.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _failure_summary(ranks: dict[int, RankRecord], deaths: list[int]) -> list[str]:
    """Each failed rank's own report, the rank that was seen dying first named first."""
    order = [r for r in deaths if r in ranks] + [r for r in ranks if r not in deaths]
    lines = [ranks[r].failure for r in order if ranks[r].failure]
    silent = [r for r in order if not ranks[r].done and not ranks[r].failure]
    if silent:
        lines.append(f"ranks {silent} ended without a report (killed along with the job)")
    if not ranks:
        lines.append("no rank got as far as sadl_distributed.init()")
    return [line for line in lines if line]
