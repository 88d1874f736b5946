"""The sadl plugin module of sadl_optim (entry point ``optim`` in the group ``sadl.plugins``).

It registers the optimizers and the learning-rate schedules, served as ``sadl.optim.<Name>`` and
``sadl.<Name>``. Core keeps ``SGD`` and ``Adam``; registering those names again would conflict.
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl.plugins import Example, OptimizerDef, hookimpl, require_api

require_api("1.0")

from sadl_optim.matrix import LAMB, Muon  # noqa: E402
from sadl_optim.optimizers import Adadelta, Adagrad, AdamW, Lion, RMSprop  # noqa: E402
from sadl_optim.plateau import ReduceLROnPlateau  # noqa: E402
from sadl_optim.schedulers import (  # noqa: E402
    CosineAnnealingLR,
    CosineWithWarmup,
    ExponentialLR,
    LambdaLR,
    LinearWarmup,
    LRScheduler,
    MultiStepLR,
    OneCycle,
    StepLR,
)

#: Every class this plugin serves, under its own name.
PROVIDED: tuple[type, ...] = (
    AdamW,
    RMSprop,
    Adagrad,
    Adadelta,
    Lion,
    Muon,
    LAMB,
    LRScheduler,
    StepLR,
    MultiStepLR,
    ExponentialLR,
    CosineAnnealingLR,
    LambdaLR,
    CosineWithWarmup,
    LinearWarmup,
    OneCycle,
    ReduceLROnPlateau,
)


#: Constructor arguments ``sadl check-plugins`` builds each one with (the defaults otherwise).
EXAMPLES: dict[type, tuple[Example, ...]] = {
    AdamW: (Example(lr=0.01), Example(lr=0.01, amsgrad=True)),
    RMSprop: (Example(lr=0.01), Example(lr=0.01, momentum=0.9, centered=True)),
    Lion: (Example(lr=0.01),),
    # Muon orthogonalises matrices: parameters of shapes (3, 4), (4, 2) and (2, 3)
    Muon: (
        Example((3, 4), (4, 2), (2, 3), lr=0.02),
        Example((2, 3, 2), (5, 2), (2, 2), nesterov=False),
    ),
    LAMB: (Example(lr=0.01), Example(lr=0.01, weight_decay=0.1)),
    StepLR: (Example(step_size=2, gamma=0.5),),
    MultiStepLR: (Example(milestones=[1, 2], gamma=0.5),),
    ExponentialLR: (Example(gamma=0.5),),
    CosineAnnealingLR: (Example(T_max=3),),
    LambdaLR: (Example(lr_lambda=lambda step: 0.5**step),),
    ReduceLROnPlateau: (Example(1.0, patience=0),),  # step(1.0): never better, lr drops
    CosineWithWarmup: (Example(warmup_steps=1, total_steps=3),),
    LinearWarmup: (Example(warmup_steps=2),),
    OneCycle: (Example(max_lr=0.5, total_steps=4),),
}


@hookimpl
def register_optimizers() -> Iterable[OptimizerDef]:
    """AdamW, RMSprop, Adagrad, Lion, Muon, LAMB and the schedules (with their base
    ``LRScheduler``).
    """
    return [OptimizerDef(cls.__name__, cls, EXAMPLES.get(cls, ())) for cls in PROVIDED]
