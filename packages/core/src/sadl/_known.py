"""Which first-party package provides which name, and a command that installs it from here.

A missing name (``sadl.optim.AdamW`` without sadl-optim, ``sadl train`` without sadl-models) is
answered with the package that provides it and a command that works where the user is: the
packages are not on PyPI yet, so from a checkout of the repository the command installs the
package's directory (``python -m pip install packages/optim``), and nothing ever suggests a PyPI
name that does not resolve. The table itself is data, ``known.json`` beside this file (kind ->
distribution -> names); once a distribution is published, list it under ``published`` there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

_TABLE = json.loads((Path(__file__).parent / "known.json").read_text())

#: kind -> name -> the first-party distribution that provides it (``known.json`` lists them).
KNOWN_PROVIDERS: dict[str, dict[str, str]] = {
    kind: {name: dist for dist, names in by_dist.items() for name in names.split()}
    for kind, by_dist in _TABLE["providers"].items()
}
#: Attributes of ``sadl`` that a first-party plugin serves: name -> (distribution, module).
KNOWN_ATTRIBUTES: dict[str, tuple[str, str]] = {
    k: (v[0], v[1]) for k, v in _TABLE["attributes"].items()
}
#: Subcommands of ``sadl`` that first-party plugins add.
KNOWN_COMMANDS: dict[str, str] = _TABLE["commands"]
#: kind -> torch name sadl lacks -> the nearest sadl spelling (``sadl.nn.ParameterList``, ...).
TORCH_HINTS: dict[str, dict[str, str]] = _TABLE["torch_hints"]
#: First-party distributions that ``pip install NAME`` finds on PyPI (none yet).
PUBLISHED: frozenset[str] = frozenset(_TABLE["published"])
#: Where each first-party distribution lives in a checkout of the repository.
CHECKOUT_DIRS: dict[str, str] = _TABLE["checkout_dirs"]


def known_provider(kind: str, name: str) -> tuple[str, str] | None:
    """``(distribution, exact name)`` for ``name``: in ``kind``, in any kind, then ignoring case."""
    found = KNOWN_PROVIDERS.get(kind, {}).get(name)
    if found is not None:
        return found, name
    for names in KNOWN_PROVIDERS.values():
        if name in names:
            return names[name], name
    folded = name.casefold()
    for names in (KNOWN_PROVIDERS.get(kind, {}), *KNOWN_PROVIDERS.values()):
        for known, distribution in names.items():
            if known.casefold() == folded:
                return distribution, known
    return None


def install_command(distribution: str, extra: str | None = None) -> str:
    """A command that installs ``distribution`` (with ``extra``) into the running Python.

    From a checkout it names the package's directory; a published distribution is named as is;
    otherwise the command is the one to run in a clone of the repository.
    """
    where = CHECKOUT_DIRS.get(distribution)
    root = checkout_root()
    if distribution in PUBLISHED or where is None:
        target = distribution
    else:
        target = _shorten(root / where) if root is not None else where
    if extra:
        target = f"'{target}[{extra}]'"
    command = f"{_installer()} {target}"
    if root is None and distribution not in PUBLISHED and where is not None:
        return f"{command} (run it in a clone of the sadl repository)"
    return command


def checkout_root() -> Path | None:
    """The repository this sadl-core was installed from (or runs from), if it is still there."""
    candidates = []
    try:
        text = metadata.distribution("sadl-core").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    if text:
        try:
            url = json.loads(text).get("url", "")
        except ValueError:
            url = ""
        parsed = urlparse(url)
        if parsed.scheme == "file":
            candidates.append(Path(unquote(parsed.path)).parent.parent)
    # Running from the source tree itself (editable install, PYTHONPATH): .../packages/core/src/sadl
    candidates.append(Path(__file__).resolve().parents[4])
    for root in candidates:
        if (root / "packages" / "core" / "pyproject.toml").is_file():
            return root
    return None


def _shorten(path: Path) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return relative if not relative.startswith("..") else str(path)


def _installer() -> str:
    """``python -m pip install`` for the running interpreter (``uv pip`` in a venv without pip)."""
    python = _python()
    if importlib.util.find_spec("pip") is not None:
        return f"{python} -m pip install"
    if shutil.which("uv"):
        active = os.environ.get("VIRTUAL_ENV")
        if active and os.path.abspath(active) == os.path.abspath(sys.prefix):
            return "uv pip install"  # uv installs into the active virtual environment
        return f"uv pip install --python {python}"
    return f"{python} -m ensurepip && {python} -m pip install"


def _python() -> str:
    """How to name this interpreter: ``python`` when that is the one on PATH, else its path."""
    for name in ("python", "python3"):
        found = shutil.which(name)
        if found and os.path.abspath(found) == os.path.abspath(sys.executable):
            return name
    return sys.executable
