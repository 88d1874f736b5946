"""``sadl.optim``: the ``Optimizer`` base, core's ``SGD`` and ``Adam``, and every registered name.

sadl-optim registers AdamW, RMSprop, Adagrad, Lion and the learning-rate schedules; they appear
here as ``sadl.optim.<Name>`` once it is installed.
"""

from __future__ import annotations

from typing import Any

from sadl.optim.adam import Adam
from sadl.optim.optimizer import Optimizer
from sadl.optim.sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer", "names"]


def names() -> list[str]:
    """Sorted names of every registered optimizer and scheduler."""
    from sadl.plugins.manager import registry

    return sorted(registry().records("optimizers"))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from sadl.plugins.manager import registry

    return registry().lookup("optimizers", name).cls


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(names()))
