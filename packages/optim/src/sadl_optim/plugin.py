"""The sadl plugin module of sadl_optim (entry point ``optim`` in the group ``sadl.plugins``).

It registers the optimizers and the learning-rate schedules, served as ``sadl.optim.<Name>`` and
``sadl.<Name>``. Core keeps ``SGD`` and ``Adam``; registering those names again would conflict.
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl.plugins import OptimizerDef, hookimpl, require_api

require_api("1.0")

from sadl_optim.optimizers import Adagrad, AdamW, Lion, RMSprop  # noqa: E402
from sadl_optim.schedulers import (  # noqa: E402
    CosineWithWarmup,
    LinearWarmup,
    LRScheduler,
    OneCycle,
    StepLR,
)

#: Every class this plugin serves, under its own name.
PROVIDED: tuple[type, ...] = (
    AdamW,
    RMSprop,
    Adagrad,
    Lion,
    LRScheduler,
    StepLR,
    CosineWithWarmup,
    LinearWarmup,
    OneCycle,
)


@hookimpl
def register_optimizers() -> Iterable[OptimizerDef]:
    """AdamW, RMSprop, Adagrad, Lion and the schedules (with their base ``LRScheduler``)."""
    return [OptimizerDef(cls.__name__, cls) for cls in PROVIDED]
