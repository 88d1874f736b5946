"""The sadl plugin module of sadl_optim (entry point ``optim`` in the group ``sadl.plugins``).

It registers the optimizers and the learning-rate schedules, served as ``sadl.optim.<Name>`` and
``sadl.<Name>``. Core keeps ``SGD`` and ``Adam``; registering those names again would conflict.
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl.plugins import Example, OptimizerDef, hookimpl, require_api

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


#: Constructor arguments ``sadl check-plugins`` builds each one with (the defaults otherwise).
EXAMPLES: dict[type, tuple[Example, ...]] = {
    AdamW: (Example(lr=0.01), Example(lr=0.01, amsgrad=True)),
    RMSprop: (Example(lr=0.01), Example(lr=0.01, momentum=0.9, centered=True)),
    Lion: (Example(lr=0.01),),
    StepLR: (Example(step_size=2, gamma=0.5),),
    CosineWithWarmup: (Example(warmup_steps=1, total_steps=3),),
    LinearWarmup: (Example(warmup_steps=2),),
    OneCycle: (Example(max_lr=0.5, total_steps=4),),
}


@hookimpl
def register_optimizers() -> Iterable[OptimizerDef]:
    """AdamW, RMSprop, Adagrad, Lion and the schedules (with their base ``LRScheduler``)."""
    return [OptimizerDef(cls.__name__, cls, EXAMPLES.get(cls, ())) for cls in PROVIDED]
