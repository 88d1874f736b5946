"""Core's own subcommands of ``sadl``: ``plugins``, ``ops``, ``info``, ``check-plugins``.

A built-in plugin (``sadl.cli``): they reach the command line through ``register_commands`` like
every plugin's commands, imported by name by the plugin host.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pluggy

from sadl._hookspecs import KINDS, hookimpl
from sadl._host import PluginInfo, registry
from sadl._version import API_VERSION, __version__
from sadl.backends import backend, backend_names, cupy_or_none, parse_device
from sadl.cli import EXIT_FAILURE, ArgumentParser, CommandError
from sadl.cuda import device_count
from sadl.testing import CheckResult, OpReport, check_layer, check_op, check_optimizer

__all__ = ["register_commands"]


@hookimpl
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``plugins``, ``ops``, ``info`` and ``check-plugins``."""
    p = subparsers.add_parser("plugins", help="list installed plugins and what they provide")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_plugins)
    p = subparsers.add_parser("ops", help="list every registered op with its provider")
    p.set_defaults(func=_cmd_ops)
    p = subparsers.add_parser("info", help="versions, backend and devices")
    p.set_defaults(func=_cmd_info)
    p = subparsers.add_parser(
        "check-plugins",
        help="check what every plugin registers: ops, layers, optimizers, commands",
        description=(
            "Run sadl.testing.check_op on every op, check_layer on every layer (built, run "
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


def _cmd_plugins(args: argparse.Namespace) -> int:
    plugins = registry().plugins
    if args.json:
        print(json.dumps([p.as_dict() for p in plugins], indent=2))
        return 0
    rows = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "PROVIDES")]
    for p in plugins:
        provides = ", ".join(
            f"{hook.removeprefix('register_')}={len(names)}"
            for hook, names in p.provides.items()
            if names
        )
        status = p.status
        if p.conflicts:
            status += " (" + ", ".join(n for names in p.conflicts.values() for n in names) + ")"
        rows.append((p.name, p.distribution, p.version, status, provides or "-"))
    _table(rows)
    for p in plugins:
        if p.error:
            print("\n" + "\n".join(f"{p.name}: {line}" for line in p.error.splitlines()))
    return 0


def _cmd_ops(args: argparse.Namespace) -> int:
    reg = registry()
    rows = [("OP", "PLUGIN", "NUMPY", "DESCRIPTION")]
    for name, op in sorted(reg.records("ops").items()):
        provider = reg.provider("ops", name)
        numpy_names = ",".join(getattr(f, "__name__", "?") for f in op.numpy_funcs) or "-"
        kind = "" if op.differentiable else "(no grad) "
        rows.append((name, provider.name if provider else "?", numpy_names, kind + op.doc[:60]))
    _table(rows)
    print(f"\n{len(rows) - 1} ops")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    cp = cupy_or_none()
    print(f"sadl-core      {__version__} (plugin API {API_VERSION})")
    print(f"python         {platform.python_version()} ({sys.executable})")
    print(f"numpy          {np.__version__}")
    print(f"pluggy         {pluggy.__version__}")
    print(f"cupy           {cp.__version__ if cp is not None else 'not installed'}")
    print(f"cuda devices   {device_count()}")
    devices = ["cpu"]
    for name in backend_names():
        if name != "cpu":
            devices += [f"{name}:{i}" for i in range(_usable_devices(name))]
    print(f"devices        {', '.join(devices)}")
    reg = registry()
    counts = ", ".join(
        f"{k}={len(reg.records(k))}"
        for k in ("ops", "layers", "optimizers", "models", "formats", "backends")
    )
    print(f"registered     {counts}")
    print(f"plugins        {', '.join(f'{p.name} ({p.status})' for p in reg.plugins)}")
    return 0


def _usable_devices(device_type: str) -> int:
    try:
        return int(backend(device_type).record.device_count())
    except RuntimeError:  # its array module does not import
        return 0


def _cmd_check_plugins(args: argparse.Namespace) -> int:
    device = None
    if args.device is not None:
        try:
            device = parse_device(args.device)
        except (TypeError, ValueError) as exc:
            raise CommandError(f"--device: {exc}") from None
        if device.type != "cpu" and (device.index or 0) >= _usable_devices(device.type):
            raise CommandError(f"--device: device {device} is not available here")
    reg = registry()
    plugins = reg.plugins
    if args.plugin:
        names = {p.name for p in plugins}
        unknown = [n for n in args.plugin if n not in names]
        if unknown:
            raise CommandError(
                f"no plugin named {', '.join(map(repr, unknown))}; installed: "
                f"{', '.join(sorted(names))} (`sadl plugins` lists them)"
            )
        plugins = [p for p in plugins if p.name in args.plugin]
    rows = [("KIND", "NAME", "PLUGIN", "CHECKS", "RESULT")]
    failures: list[tuple[str, str]] = []
    failed_rows = variants = singular = 0
    for plugin in plugins:
        if plugin.status not in ("ok", "conflict"):
            detail = plugin.error or "blocked by SADL_DISABLE_PLUGINS"
            rows.append(("plugin", plugin.name, plugin.name, "-", f"FAILED: {plugin.status}"))
            failures.append((f"plugin {plugin.name} ({plugin.status})", detail))
            failed_rows += 1
            continue
        for kind, name, report in _reports(reg, plugin, device):
            variants += report.variants
            singular += report.singular_points
            failed = report.failures()
            counts = Counter(r.check for r in failed)  # each failing check once, with its count
            result = (
                "FAILED: " + ", ".join(f"{c} ({n})" for c, n in counts.items()) if failed else "ok"
            )
            rows.append((kind, name, plugin.name, str(len(report.results)), result))
            failures += [(f"{kind} {name}: {_label(r)}", r.message) for r in failed]
            failed_rows += bool(failed)
    _table(rows)
    print(f"\n{len(rows) - 1} checked, {failed_rows} failed")
    if variants or singular:
        print(f"(ops: {variants} derived variants and {singular} singular points included)")
    if failures:
        _print_failures(failures, verbose=getattr(args, "verbose", False))
    return EXIT_FAILURE if failures else 0


def _reports(reg: Any, plugin: PluginInfo, device: Any = None) -> Iterator[tuple[str, str, Any]]:
    """``(kind, name, report)`` for everything ``plugin`` registers, commands included.

    With ``device`` the ops run there, against the CPU (``check_op(op, device=...)``).
    """
    checkers: dict[str, Callable[..., OpReport]] = {
        "ops": check_op,
        "layers": check_layer,
        "optimizers": check_optimizer,
    }
    for kind, check in checkers.items():
        for name in plugin.provides.get(KINDS[kind].hook, []):
            try:
                record = reg.lookup(kind, name)
            except Exception as exc:  # registered, but not served: another plugin claims it too
                report = OpReport(name, kind=KINDS[kind].label)
                report.results.append(CheckResult("served", "", False, str(exc)))
                yield KINDS[kind].label, name, report
                continue
            extra = {"device": device} if kind == "ops" and device is not None else {}
            yield KINDS[kind].label, name, check(record, raise_exception=False, **extra)
    register = next((f for p, f in reg.command_impls() if p is plugin), None)
    if register is not None:
        yield from _check_commands(register)
    others = [k for k in reg.kinds if k not in checkers]
    for kind in (*others, "commands"):
        for name, (_, why) in reg.unserved(kind).items():
            if reg.provider(kind, name) is not plugin and name in plugin.conflicts.get(
                f"register_{kind}", []
            ):
                label = reg.kinds[kind].label if kind in reg.kinds else "command"
                report = OpReport(name, kind=label)
                report.results.append(CheckResult("served", "", False, str(why)))
                yield label, name, report


def _check_commands(register: Any) -> Iterator[tuple[str, str, OpReport]]:
    """The command list and each subcommand the plugin adds must print ``--help``, exit 0."""
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


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
