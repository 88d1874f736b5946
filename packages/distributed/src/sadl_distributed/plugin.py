"""The sadl plugin module of sadl_distributed (entry point ``distributed`` in ``sadl.plugins``).

Registers the ``sadl launch`` command: ``sadl launch --nproc 4 train.py --lr 3e-4`` runs
``python train.py --lr 3e-4`` in 4 ranks on this machine through ``mpiexec``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sadl.plugins import hookimpl, require_api

require_api("1.0")


@hookimpl
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``sadl launch``."""
    p = subparsers.add_parser(
        "launch",
        help="run a Python script in N processes on this machine (data-parallel, via mpiexec)",
        description=(
            "Run a Python script (or -m module) in N ranks on this machine through mpiexec. "
            "Each rank calls sadl_distributed.init() to join the others. Same as "
            "'mpiexec -n N python SCRIPT ...' with the mpiexec next to this Python, a rank "
            "that dies named by the others, and BLAS threads shared out among the ranks."
        ),
    )
    p.add_argument("--nproc", "-n", type=int, required=True, help="number of processes (ranks)")
    p.add_argument("-m", dest="module", help="run a module, as 'python -m MODULE'")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script and its arguments")
    p.set_defaults(func=_cmd_launch)


def _cmd_launch(args: Any) -> int:
    """Check what can be checked here, once (every rank would say it), then start the ranks."""
    from importlib.util import find_spec
    from pathlib import Path

    from sadl.cli import EXIT_FAILURE, CommandError

    from sadl_distributed.launch import run

    if args.nproc < 1:
        raise CommandError(f"--nproc must be at least 1, got {args.nproc}")
    if args.module:
        try:
            found = find_spec(args.module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise CommandError(f"-m {args.module}: no module named {args.module!r}")
        argv = [sys.executable, "-m", args.module, *args.args]
    elif args.args:
        script = Path(args.args[0])
        if not script.is_file():
            what = "is a directory" if script.is_dir() else "no such file"
            raise CommandError(f"{script}: {what} (the script to run in every rank)")
        argv = [sys.executable, *args.args]
    else:
        raise CommandError("give a script to run (or -m MODULE)")
    try:
        return run(args.nproc, argv)
    except FileNotFoundError as exc:
        raise CommandError(str(exc), status=EXIT_FAILURE) from None
