"""Which first-party package provides which name: what a missing name's message cites.

A missing name (``sadl.optim.AdamW`` without sadl-optim, ``sadl train`` without sadl-models) is
answered with the package that provides it (and ``sadl._install``'s command for it). The table
itself is data, ``known.json`` beside this file (kind -> distribution -> names).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: ``known.json``: the name tables below, and ``sadl._install``'s where-to-install data.
TABLE: dict[str, Any] = json.loads((Path(__file__).parent / "known.json").read_text())

#: kind -> name -> the first-party distribution that provides it (``known.json`` lists them).
KNOWN_PROVIDERS: dict[str, dict[str, str]] = {
    kind: {name: dist for dist, names in by_dist.items() for name in names.split()}
    for kind, by_dist in TABLE["providers"].items()
}
#: Attributes of ``sadl`` that a first-party plugin serves: name -> (distribution, module).
KNOWN_ATTRIBUTES: dict[str, list[str]] = TABLE["attributes"]
#: Subcommands of ``sadl`` that first-party plugins add.
KNOWN_COMMANDS: dict[str, str] = TABLE["commands"]
#: kind -> torch name sadl lacks -> the nearest sadl spelling (``sadl.nn.ParameterList``, ...).
TORCH_HINTS: dict[str, dict[str, str]] = TABLE["torch_hints"]


def known_provider(kind: str, name: str) -> tuple[str, str] | None:
    """``(distribution, exact name)`` for ``name``: in ``kind``, in any kind, then ignoring case."""
    tables = (KNOWN_PROVIDERS.get(kind, {}), *KNOWN_PROVIDERS.values())
    for fold in (str, str.casefold):
        for names in tables:
            for known, distribution in names.items():
                if fold(known) == fold(name):
                    return distribution, known
    return None
