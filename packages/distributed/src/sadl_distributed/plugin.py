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
    from sadl_distributed.launch import run

    if args.module:
        argv = [sys.executable, "-m", args.module, *args.args]
    elif args.args:
        argv = [sys.executable, *args.args]
    else:
        print("sadl launch: give a script to run (or -m MODULE)", file=sys.stderr)
        return 2
    if args.nproc < 1:
        print(f"sadl launch: --nproc must be at least 1, got {args.nproc}", file=sys.stderr)
        return 2
    try:
        return run(args.nproc, argv)
    except FileNotFoundError as exc:
        print(f"sadl launch: {exc}", file=sys.stderr)
        return 1
