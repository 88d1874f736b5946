"""The attribute protocol shared by ``sadl.ops``, ``sadl.nn``, ``sadl.optim`` and ``sadl.models``.

Each of those modules serves one registry kind through PEP 562 module ``__getattr__`` /
``__dir__``; this class is that behaviour, written once. ``served`` does the same for the
names of a module that moved to a plugin package (``sadl.viz``, ``sadl.testing.check_op``).
"""

from __future__ import annotations

import importlib
from collections.abc import Container
from typing import Any

from sadl._errors import UnknownNameError
from sadl._host import LOADED, registry
from sadl._known import TORCH_HINTS


class RegistryNamespace:
    """Serve registry ``kind`` as module attributes (``attribute`` picks a field of the record)."""

    def __init__(self, kind: str, module_globals: dict[str, Any], attribute: str | None) -> None:
        self.kind = kind
        self.module_globals = module_globals
        self.attribute = attribute

    def names(self) -> list[str]:
        """Sorted names registered under this kind."""
        return sorted(registry().records(self.kind))

    def getattr(self, name: str) -> Any:
        """The registered object called ``name`` (an error naming the provider if missing)."""
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            record = registry().lookup(self.kind, name)
        except UnknownNameError as missing:
            hint = TORCH_HINTS.get(self.kind, {}).get(name)
            if hint is None:
                raise
            raise UnknownNameError(f"{missing}; for torch's {name}, {hint}") from None
        return record if self.attribute is None else getattr(record, self.attribute)

    def dir(self) -> list[str]:
        """The module's own names plus every registered name (for tab completion)."""
        return sorted(set(self.module_globals) | set(self.names()))


def served(owner: str, distribution: str, module: str, names: Container[str] | None) -> Any:
    """A module ``__getattr__`` for names that moved to a plugin package: ``owner.name`` is
    ``module.name`` once ``distribution``'s plugin loaded, else an error naming how to get it.
    ``names=None`` serves every public name of ``module`` (its own errors name what is missing).
    """

    def __getattr__(name: str) -> Any:  # noqa: N807 (a module's __getattr__)
        if name.startswith("__") or (names is not None and name not in names):
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        reg = registry()
        # A plugin in ``conflict`` lost only its contested names: it serves everything else.
        if any(p.distribution == distribution and p.status in LOADED for p in reg.plugins):
            return getattr(importlib.import_module(module), name)
        raise UnknownNameError(reg.provider_status(distribution, f"{owner}.{name}"))

    return __getattr__
