"""The ``sadl`` command line: every subcommand comes from a plugin's ``register_commands``.

Core's own (``plugins``, ``ops``, ``info``, ``check-plugins``) come from the built-in plugin
``sadl._commands``, the same way ``sadl train`` comes from sadl-models.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from sadl._host import registry

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with every plugin's subcommands added."""
    parser = argparse.ArgumentParser(prog="sadl", description="sadl: deep learning on NumPy")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info, register in registry().command_impls():
        try:
            register(subparsers=sub)
        except Exception as exc:
            print(f"sadl: plugin {info.label} failed to add its commands: {exc}", file=sys.stderr)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    try:
        parser = build_parser()
    except Exception as exc:
        print(f"sadl: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    func: Any = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    try:
        status = func(args)
    except KeyboardInterrupt:
        print("sadl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The output was piped into a command that stopped reading (`sadl ops | head`).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(status or 0)


if __name__ == "__main__":
    raise SystemExit(main())
