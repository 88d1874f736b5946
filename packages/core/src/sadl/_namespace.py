"""The attribute protocol shared by ``sadl.ops``, ``sadl.nn``, ``sadl.optim`` and ``sadl.models``.

Each of those modules serves one registry kind through PEP 562 module ``__getattr__`` /
``__dir__``; ``namespace`` is that behaviour, written once. ``served`` does the same for the
names of a module that moved to a plugin package (``sadl.viz``, ``sadl.testing.check_op``).
"""

from __future__ import annotations

import importlib
from collections.abc import Container
from typing import Any

from sadl._errors import UnknownNameError
from sadl._host import LOADED, registry
from sadl._known import TORCH_HINTS


def namespace(kind: str, module_globals: dict[str, Any], attribute: str | None) -> Any:
    """``(names, __getattr__, __dir__)`` of a module serving registry ``kind`` as attributes:
    the sorted registered names, the record called ``name`` (or its field ``attribute``; an
    error naming the provider if missing), and the module's own names plus every registered one.
    """

    def names() -> list[str]:
        return sorted(registry().records(kind))

    def __getattr__(name: str) -> Any:  # noqa: N807 (a module's __getattr__)
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            record = registry().lookup(kind, name)
        except UnknownNameError as missing:
            hint = TORCH_HINTS.get(kind, {}).get(name)
            if hint is None:
                raise
            raise UnknownNameError(f"{missing}; for torch's {name}, {hint}") from None
        return record if attribute is None else getattr(record, attribute)

    def __dir__() -> list[str]:  # noqa: N807 (a module's __dir__)
        return sorted(set(module_globals) | set(names()))

    return names, __getattr__, __dir__


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
