"""The ``sadl`` command line: every subcommand comes from a plugin's ``register_commands``.

Core's own (``plugins``, ``ops``, ``info``, ``check-plugins``) come from the built-in plugin
``sadl._commands``, the same way ``sadl train`` comes from sadl-models.

One error format and one exit status scheme for every command, core's and plugins' alike:

* ``0`` (``EXIT_OK``): done; ``1`` (``EXIT_FAILURE``): something failed while running;
  ``2`` (``EXIT_USAGE``): bad usage or bad input (an unknown option, a missing or corrupt file);
  ``130``: interrupted (Ctrl-C).
* Errors are one line on stderr, ``sadl <command>: error: <what was wrong and what to do>``. A
  command reports bad input by raising :class:`CommandError` (or returning the status after
  printing that line itself); usage errors from argparse take the same form, since every
  subcommand parser is an :class:`ArgumentParser` of this module.
* An unexpected exception is one line too (exit 1); ``sadl --verbose ...`` adds the traceback.
  Broken plugins are one warning line each (``sadl plugins`` has the details).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from sadl._argparse import ArgumentParser
from sadl._errors import CommandError
from sadl._host import registry
from sadl._known import KNOWN_COMMANDS
from sadl._version import API_VERSION, __version__

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ArgumentParser",
    "CommandError",
    "build_parser",
    "main",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def version_text() -> str:
    """What ``sadl --version`` prints: sadl-core, then one line per plugin."""
    lines = [f"sadl-core {__version__} (plugin API {API_VERSION})"]
    for p in registry().plugins:
        if not p.builtin:
            status = "" if p.status == "ok" else f" [{p.status}]"
            lines.append(f"  {p.distribution} {p.version} (plugin {p.name!r}){status}")
    return "\n".join(lines)


def build_parser() -> ArgumentParser:
    """The argument parser, with every plugin's subcommands added."""
    parser = ArgumentParser(
        prog="sadl",
        description="sadl: deep learning on NumPy",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # --version: one line per plugin
    )
    reg = registry()
    parser.add_argument("--version", action="version", version=version_text())
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="full messages: untruncated check results, tracebacks of unexpected errors",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    # Each plugin's commands were built once, on subparsers of its own, when they were settled;
    # the ones it serves join the command line here, with their line of ``sadl --help``.
    for command in reg.commands():
        sub.choices[command.name] = command.parser
        if command.line is not None:
            sub._choices_actions.append(command.line)
    for info in reg.loaded():
        if info.command_error:
            _warn_line(
                f"plugin {info.label} failed to add its commands ({info.command_error}); "
                "the other commands work"
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning_line
        return _main(args_list)


def _main(argv: list[str]) -> int:
    verbose = "-v" in argv or "--verbose" in argv
    try:
        parser = build_parser()
    except Exception as exc:
        return _report_unexpected("sadl", exc, verbose)
    missing = _missing_command(parser, argv)
    if missing:
        print(f"sadl: error: {missing}", file=sys.stderr)
        return EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except CommandError as exc:
        print(f"{exc.prog or 'sadl'}: error: {exc.message}", file=sys.stderr)
        return exc.status
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    func: Any = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_OK
    prog = f"sadl {args.command}"
    try:
        status = func(args)
    except CommandError as exc:
        print(f"{exc.prog or prog}: error: {exc.message}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The output was piped into a command that stopped reading (`sadl ops | head`).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        return _report_unexpected(prog, exc, args.verbose)
    return int(status or 0)


def _missing_command(parser: ArgumentParser, argv: list[str]) -> str:
    """The message for a subcommand a first-party package provides that is not here, or ''."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or argv[0] in ("-h", "--help", "--version"):
        return ""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if words[0] in sub.choices:
        return ""
    conflict = registry().conflict("commands", words[0])
    if conflict is not None:
        return f"{type(conflict).__name__}: {conflict}"
    distribution = KNOWN_COMMANDS.get(words[0])  # a first-party command that is not here
    if distribution is None:
        return ""
    what = f"'sadl {words[0]}' is a command of {distribution}"
    return registry().provider_status(distribution, words[0], what=what)


def _report_unexpected(prog: str, exc: BaseException, verbose: bool) -> int:
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    message = " ".join(str(exc).split()) or "(no message)"
    more = "" if verbose else " (run with --verbose for the traceback)"
    print(f"{prog}: error: {type(exc).__name__}: {message}{more}", file=sys.stderr)
    return EXIT_FAILURE


def _warn_line(message: str) -> None:
    print(f"sadl: warning: {message}", file=sys.stderr)


def _show_warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Warnings on the command line: one line each, without a source location."""
    _warn_line(" ".join(str(message).split()))


if __name__ == "__main__":
    raise SystemExit(main())
