"""A command that installs a distribution into the running Python, from where the user is.

Every "install X" in sadl's messages is built here: a first-party plugin package (sadl-optim for
``sadl.optim.AdamW``), core's extras (``sadl-core[gpu]``), a helper library (threadpoolctl). The
first-party packages are not on PyPI yet, so from a checkout of the repository the command
installs the package's directory (``python -m pip install packages/optim``), and nothing ever
suggests a PyPI name that does not resolve; once a distribution is published, list it under
``published`` in ``known.json``.
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

from sadl._known import TABLE

#: First-party distributions that ``pip install NAME`` finds on PyPI (none yet).
PUBLISHED: frozenset[str] = frozenset(TABLE["published"])
#: Where each first-party distribution lives in a checkout of the repository.
CHECKOUT_DIRS: dict[str, str] = TABLE["checkout_dirs"]


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
