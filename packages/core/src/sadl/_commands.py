"""Core's own subcommands of ``sadl``: ``plugins``, ``ops`` and ``info``.

(``check-plugins`` comes from sadl-check.)

A built-in plugin (``sadl.cli``): they reach the command line through ``register_commands`` like
every plugin's commands, imported by name by the plugin host.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence

import numpy as np
import pluggy

from sadl._errors import CommandError
from sadl._hookspecs import hookimpl
from sadl._host import registry
from sadl._threads import blas_description, cpu_model
from sadl._version import API_VERSION, __version__
from sadl.backends import backend, backend_names, cupy_or_none
from sadl.cuda import device_count

__all__ = ["register_commands"]


@hookimpl
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``plugins``, ``ops`` and ``info``."""
    p = subparsers.add_parser("plugins", help="list installed plugins and what they provide")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--passes", action="store_true", help="the compile passes (`sadl passes`)")
    p.set_defaults(func=_cmd_plugins)
    p = subparsers.add_parser("ops", help="list every registered op with its provider")
    p.set_defaults(func=_cmd_ops)
    p = subparsers.add_parser("info", help="versions, backend and devices")
    p.set_defaults(func=_cmd_info)


def _cmd_plugins(args: argparse.Namespace) -> int:
    if args.passes:  # a plugin's command (sadl-compile's): core knows no passes
        for c in (c for c in registry().commands() if c.name == "passes"):
            return int(c.parser.get_default("func")(args))
        raise CommandError("--passes lists sadl-compile's passes: pip install sadl-compile")
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
    print(f"numpy          {np.__version__}\npluggy         {pluggy.__version__}")
    print(f"cpu            {cpu_model()}\nblas           {blas_description() or 'none found'}")
    print(f"cupy           {cp.__version__ if cp else 'none'}\ncuda devices   {device_count()}")
    devices = ["cpu"]
    for name in (n for n in backend_names() if n != "cpu"):
        devices += [f"{name}:{i}" for i in range(_usable_devices(name))]
    print(f"devices        {', '.join(devices)}")
    reg = registry()
    kinds = ("ops", "layers", "optimizers", "models", "formats", "backends")
    print(f"registered     {', '.join(f'{k}={len(reg.records(k))}' for k in kinds)}")
    print(f"plugins        {', '.join(f'{p.name} ({p.status})' for p in reg.plugins)}")
    return 0


def _usable_devices(device_type: str) -> int:
    try:
        return int(backend(device_type).record.device_count())
    except RuntimeError:  # its array module does not import
        return 0


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
