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
import contextlib
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from sadl._host import registry

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


class CommandError(Exception):
    """Raised by a command to stop with one line on stderr and an exit status (2 by default).

    ``raise CommandError(f"{path}: no such file")`` prints ``sadl <command>: error: <path>: no
    such file`` and exits with ``EXIT_USAGE``; pass ``status=EXIT_FAILURE`` for a failure that is
    not the user's input.
    """

    def __init__(self, message: str, status: int = EXIT_USAGE, prog: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.prog = prog


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors as one line (``<prog>: error: <message>``, exit status 2).

    Subparsers made from it are of this class too, so every plugin's subcommands report usage
    errors in the same format; an unknown option is reported by the subcommand that got it.
    """

    def error(self, message: str) -> NoReturn:
        """Stop with one line naming this (sub)command; never the usage block."""
        raise CommandError(message, EXIT_USAGE, prog=self.prog)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse, but a subcommand reports options it does not know itself."""
        result, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != "sadl":
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return result, extras


class _VersionAction(argparse.Action):
    """``sadl --version``: core's version and every plugin's (discovering them)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help=kwargs.get("help"))

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        print(version_text())
        parser.exit(EXIT_OK)


def version_text() -> str:
    """What ``sadl --version`` prints: sadl-core, then one line per plugin."""
    from sadl._version import API_VERSION, __version__

    lines = [f"sadl-core {__version__} (plugin API {API_VERSION})"]
    for p in registry().plugins:
        if p.builtin:
            continue
        status = "" if p.status == "ok" else f" [{p.status}]"
        lines.append(f"  {p.distribution} {p.version} (plugin {p.name!r}){status}")
    return "\n".join(lines)


def build_parser() -> ArgumentParser:
    """The argument parser, with every plugin's subcommands added."""
    parser = ArgumentParser(prog="sadl", description="sadl: deep learning on NumPy")
    parser.add_argument(
        "--version", action=_VersionAction, help="versions of sadl-core and every plugin"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="full messages: untruncated check results, tracebacks of unexpected errors",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    reg = registry()
    for info, register in reg.command_impls():
        try:
            # What a plugin prints here goes to stderr: `sadl plugins --json` stays parseable.
            with contextlib.redirect_stdout(sys.stderr):
                register(subparsers=_ServedCommands(sub, reg, info))
        except (Exception, SystemExit) as exc:
            _warn_line(
                f"plugin {info.label} failed to add its commands ({type(exc).__name__}: {exc}); "
                "the other commands work"
            )
    return parser


class _ServedCommands:
    """The subparsers a plugin's ``register_commands`` gets: a command it lost a clash for
    (``sadl plugins`` says which) is built on a parser of its own, off the command line.
    """

    def __init__(self, sub: Any, reg: Any, info: Any) -> None:
        self._sub, self._reg, self._info = sub, reg, info

    def _serves(self, name: str) -> bool:
        return bool(self._reg.provider("commands", name) is self._info)

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """``subparsers.add_parser``, for the commands this plugin serves."""
        if not self._serves(name):
            return ArgumentParser(prog=f"sadl {name}")
        kwargs["aliases"] = [a for a in kwargs.get("aliases", ()) if self._serves(a)]
        return self._sub.add_parser(name, **kwargs)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sub, name)


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
    return registry().command_hint(words[0])


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
