"""``sadl check-plugins``: every installed plugin's records through the conformance batteries.

The plugin module of sadl-check (entry point ``check`` in the group ``sadl.plugins``): it adds the
command through ``register_commands``, as sadl-models adds ``sadl train``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Container, Iterator, Sequence
from typing import Any

import sadl.plugins
from sadl.backends import backend, parse_device
from sadl.cli import EXIT_FAILURE, ArgumentParser, CommandError
from sadl.plugins import hookimpl, require_api

from sadl_check.checks import CheckResult, OpReport, check_layer, check_op, check_optimizer

require_api("1.0")

KINDS = sadl.plugins.hookspecs.KINDS


@hookimpl
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``sadl check-plugins``."""
    p = subparsers.add_parser(
        "check-plugins",
        help="check what every plugin registers: ops, layers, optimizers, commands",
        description=(
            "Run sadl_check.check_op on every op, check_layer on every layer (built, run "
            "forward and backward), check_optimizer on every optimizer (steps taken) and "
            "--help on every command; a plugin that is not ok fails. Exit status 1 if "
            "anything failed."
        ),
    )
    p.add_argument(
        "--plugin", action="append", metavar="NAME", help="only this plugin (repeatable)"
    )
    p.add_argument(
        "--device",
        metavar="DEV",
        default=None,
        help="run the ops on this device against the CPU (cuda, or any registered device type)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print failure messages in full",
    )
    p.set_defaults(func=_cmd_check_plugins)


def _cmd_check_plugins(args: argparse.Namespace) -> int:
    device = None
    if args.device is not None:
        try:
            device = parse_device(args.device)
        except (TypeError, ValueError) as exc:
            raise CommandError(f"--device: {exc}") from None
        if device.type != "cpu" and (device.index or 0) >= _usable_devices(device.type):
            raise CommandError(f"--device: device {device} is not available here")
    plugins = sadl.plugins.plugins()
    if args.plugin:
        names = {str(p["name"]) for p in plugins}
        unknown = [n for n in args.plugin if n not in names]
        if unknown:
            raise CommandError(
                f"no plugin named {', '.join(map(repr, unknown))}; installed: "
                f"{', '.join(sorted(names))} (`sadl plugins` lists them)"
            )
        plugins = [p for p in plugins if p["name"] in args.plugin]
    rows = [("KIND", "NAME", "PLUGIN", "CHECKS", "RESULT")]
    failures: list[tuple[str, str]] = []
    failed_rows = variants = singular = 0
    for plugin in plugins:
        name, status = str(plugin["name"]), plugin["status"]
        if status not in ("ok", "conflict"):
            detail = str(plugin["error"] or "blocked by SADL_DISABLE_PLUGINS")
            rows.append(("plugin", name, name, "-", f"FAILED: {status}"))
            failures.append((f"plugin {name} ({status})", detail))
            failed_rows += 1
            continue
        for kind, what, report in _reports(plugin, device):
            variants += report.variants
            singular += report.singular_points
            failed = report.failures()
            counts = Counter(r.check for r in failed)  # each failing check once, with its count
            result = (
                "FAILED: " + ", ".join(f"{c} ({n})" for c, n in counts.items()) if failed else "ok"
            )
            rows.append((kind, what, name, str(len(report.results)), result))
            failures += [(f"{kind} {what}: {_label(r)}", r.message) for r in failed]
            failed_rows += bool(failed)
    _table(rows)
    print(f"\n{len(rows) - 1} checked, {failed_rows} failed")
    if variants or singular:
        print(f"(ops: {variants} derived variants and {singular} singular points included)")
    if failures:
        _print_failures(failures, verbose=getattr(args, "verbose", False))
    return EXIT_FAILURE if failures else 0


def _reports(plugin: dict[str, Any], device: Any = None) -> Iterator[tuple[str, str, Any]]:
    """``(kind, name, report)`` for everything ``plugin`` registers, commands included.

    With ``device`` the ops run there, against the CPU (``check_op(op, device=...)``).
    """
    checkers: dict[str, Callable[..., OpReport]] = {
        "ops": check_op,
        "layers": check_layer,
        "optimizers": check_optimizer,
    }
    # What the plugin lost in a clash: its own record is checked (never the winner's, such as
    # core's built-in of that name), and the check fails saying why it is not served.
    set_aside = sadl.plugins.set_aside(str(plugin["name"]))
    for kind, check in checkers.items():
        for name in plugin["provides"].get(KINDS[kind].hook, []):
            lost = set_aside.get(kind, {}).get(name)
            record = lost[0] if lost is not None else sadl.plugins.served(kind, name)
            extra = {"device": device} if kind == "ops" and device is not None else {}
            report = check(record, raise_exception=False, **extra)
            if lost is not None:
                report.results.insert(0, CheckResult("served", "", False, str(lost[1])))
            yield KINDS[kind].label, name, report
    register = sadl.plugins.command_registrations().get(str(plugin["name"]))
    if register is not None:
        yield from _check_commands(register, set(set_aside.get("commands", {})))
    for kind, names in set_aside.items():  # other kinds' names it lost in a clash
        if kind in checkers:
            continue
        label = KINDS[kind].label if kind in KINDS else kind.removesuffix("s")
        for name, (_, why) in names.items():
            report = OpReport(name, kind=label)
            report.results.append(CheckResult("served", "", False, str(why)))
            yield label, name, report


def _check_commands(
    register: Any, lost: Container[str] = ()
) -> Iterator[tuple[str, str, OpReport]]:
    """The command list and each subcommand the plugin adds must print ``--help``, exit 0.

    The commands in ``lost`` (set aside by a clash) are reported with the other lost names.
    """
    parser = ArgumentParser(prog="sadl")
    sub = parser.add_subparsers(dest="command", parser_class=ArgumentParser)
    try:
        register(subparsers=sub)
    except Exception as exc:
        report = OpReport("register_commands", kind="command")
        report.results.append(CheckResult("register", "", False, f"{type(exc).__name__}: {exc}"))
        yield "command", "(register_commands)", report
        return
    listing = _help_report("sadl --help", parser)
    if not listing.ok:  # a subcommand's help= text that cannot be formatted
        yield "command", "(sadl --help)", listing
    for name, subparser in _subcommands(sub, "sadl"):
        if name.split()[0] not in lost:
            yield "command", name, _help_report(name, subparser)


def _help_report(name: str, parser: argparse.ArgumentParser) -> OpReport:
    report = OpReport(name, kind="command")
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            parser.parse_args(["--help"])
        report.results.append(CheckResult("help", "", False, "--help did not exit"))
    except SystemExit as exc:
        ok = exc.code in (0, None) and bool(out.getvalue().strip())
        message = "" if ok else f"--help exited with {exc.code!r}"
        report.results.append(CheckResult("help", "", ok, message))
    except Exception as exc:
        report.results.append(CheckResult("help", "", False, f"{type(exc).__name__}: {exc}"))
    return report


def _subcommands(action: Any, prefix: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    seen: set[int] = set()
    for name, parser in action.choices.items():
        if id(parser) in seen:
            continue  # an alias
        seen.add(id(parser))
        full = f"{prefix} {name}".removeprefix("sadl ")
        yield full, parser
        for nested in parser._actions:
            if isinstance(nested, argparse._SubParsersAction):
                yield from _subcommands(nested, f"{prefix} {name}")


def _label(result: CheckResult) -> str:
    return f"{result.check} {result.example}" if result.example else result.check


def _print_failures(failures: list[tuple[str, str]], verbose: bool) -> None:
    """Every failure with its message: whole with ``--verbose``, else cut at a word, marked."""
    width = max(shutil.get_terminal_size().columns, 60)
    verbose = verbose or not sys.stdout.isatty()  # a log file gets everything
    shortened = False
    print("\nfailures:")
    for where, message in failures:
        line = " ".join(message.split())
        if not verbose and len(where) + len(line) + 4 > width:
            room = max(width - len(where) - 8, 20)
            line = line[:room].rsplit(" ", 1)[0] + " ..."
            shortened = True
        print(f"  {where}: {line}")
    if shortened:
        print("(messages shortened to fit; `sadl check-plugins --verbose` prints them in full)")


def _usable_devices(device_type: str) -> int:
    try:
        return int(backend(device_type).record.device_count())
    except RuntimeError:  # its array module does not import
        return 0


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
