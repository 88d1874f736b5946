"""Run one rank as a child process: ``python -m sadl_distributed.supervise COMMAND...``.

``sadl launch`` starts each rank through this under MPICH's launcher (hydra). The reason: when
a process that hydra started is killed by a signal (the out-of-memory killer's SIGKILL), hydra
kills every other process of the job at once, so no survivor can say which rank died. Here the
rank is a child; when a signal kills it, or it exits with a non-zero status, this process notes
it in the job's reports (``sadl_distributed.reports``) and exits with the same status (128 +
signal), which hydra treats as an ordinary failure: it tells the survivors (SIGUSR1, see
``faults``), and they stop with an error that names the dead rank and its status.

The child gets this process's environment, standard streams and the PMI connection
(``PMI_FD``); signals sent to the process group (Ctrl-C, hydra's SIGUSR1) reach it directly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from sadl_distributed.reports import write_ended

__all__ = ["main"]

#: Signals meant for the rank: they reach it through the process group; here they are noted
#: and otherwise ignored (a Python handler, not SIG_IGN, which the child would inherit).
_PASSED_ON = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")


def main(argv: list[str]) -> int:
    """Run ``argv``; return its exit status, or 128 + the signal that killed it."""
    if not argv:
        print("usage: python -m sadl_distributed.supervise COMMAND [ARGS...]", file=sys.stderr)
        return 2
    pmi_fd = os.environ.get("PMI_FD", "")
    passed = (int(pmi_fd),) if pmi_fd.isdigit() else ()
    for name in _PASSED_ON:
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, lambda signum, frame: None)
    child = subprocess.Popen(argv, pass_fds=passed)
    for fd in passed:  # only the rank talks to the process manager
        with contextlib.suppress(OSError):
            os.close(fd)
    status = child.wait()
    # From here on, the launcher's notices about other ranks are of no concern to us.
    for name in _PASSED_ON:
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, signal.SIG_IGN)
    rank = os.environ.get("PMI_RANK", "")
    size = os.environ.get("PMI_SIZE", "")
    if status != 0 and rank.isdigit() and size.isdigit():
        write_ended(int(rank), int(size), child.pid, status)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
