"""``sadl.save`` / ``sadl.load``: hand the object to the file format registered for the path.

The format is chosen by the file suffix (``.sadl``, ``.safetensors``, ...) or, on load, by the
file's first bytes. Formats come from plugins (sadl-serialize provides both of those).
``load_pysadl`` / ``save_pysadl`` (model files of py-sadl 2.0, docs/compat.md) and
``from_pysadl`` / ``to_pysadl`` are sadl-serialize's (``sadl_serialize.pysadl``), served here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sadl._host import registry
from sadl._install import install_command
from sadl._namespace import served
from sadl._plugin_records import FormatDef

__all__ = ["load", "save"]

PYSADL_NAMES = frozenset({"from_pysadl", "load_pysadl", "save_pysadl", "to_pysadl"})
__getattr__ = served("sadl.io", "sadl-serialize", "sadl_serialize.pysadl", PYSADL_NAMES)


def _formats() -> dict[str, FormatDef]:
    return registry().records("formats")


def _no_format(path: Path, what: str) -> Exception:
    formats = _formats()
    for fmt, conflict in registry().unserved("formats").values():
        if path.suffix.lower() in (s.lower() for s in fmt.suffixes):
            return conflict  # two formats claim the suffix
    if not formats:
        return LookupError(
            f"cannot {what} {path}: no file format is installed; sadl-serialize provides .sadl "
            f"and .safetensors: {install_command('sadl-serialize')}"
        )
    known = ", ".join(sorted(s for f in formats.values() for s in f.suffixes))
    suffix = path.suffix or "files without a suffix"
    return LookupError(
        f"cannot {what} {path}: no installed format handles {suffix} (known: {known}); "
        "pass format=NAME to choose one"
    )


def _by_name(name: str) -> FormatDef:
    formats = _formats()
    if name not in formats:
        conflict = registry().conflict("formats", name)
        if conflict is not None:
            raise conflict
        known = ", ".join(sorted(formats)) or (
            f"none installed; sadl-serialize provides them: {install_command('sadl-serialize')}"
        )
        raise LookupError(f"unknown format {name!r} (known: {known})")
    return formats[name]


def _chosen(path: Path, format: str | None) -> FormatDef | None:
    """The format named ``format``, else the one whose suffixes hold ``path``'s (or None)."""
    if format is not None:
        return _by_name(format)
    suffix = path.suffix.lower()
    return next((f for f in _formats().values() if suffix in f.suffixes), None)


def save(obj: Any, path: str | os.PathLike[str], format: str | None = None) -> None:
    """Write a Tensor or a mapping of Tensors to ``path`` in the format its suffix names."""
    target = Path(path)
    fmt = _chosen(target, format)
    if fmt is None:
        raise _no_format(target, "save")
    fmt.save(obj, target)


def load(
    path: str | os.PathLike[str],
    device: str | None = None,
    format: str | None = None,
    **options: Any,
) -> Any:
    """Read what ``save`` wrote; the format comes from the suffix or the file's magic bytes."""
    source = Path(path)
    fmt = _chosen(source, format)
    if fmt is None:
        if not source.exists():
            raise FileNotFoundError(f"cannot load {source}: no such file")
        fmt = _by_magic(source)
    if fmt is None:
        raise _no_format(source, "load")
    return fmt.load(source, device=device, **options)


def _by_magic(path: Path) -> FormatDef | None:
    formats = [f for f in _formats().values() if f.magic]
    if not formats:
        return None
    longest = max(len(f.magic or b"") for f in formats)
    try:
        with open(path, "rb") as fh:
            head = fh.read(longest)
    except OSError:
        return None
    return next((f for f in formats if f.magic and head.startswith(f.magic)), None)
