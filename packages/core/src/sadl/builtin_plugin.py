"""Core's own plugin: it registers the built-in ops and optimizers through the public hooks.

sadl-layers, sadl-optim and any third-party package do exactly the same from their own modules.
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl.ops import (
    activations,
    arithmetic,
    elementwise,
    indexing,
    linalg,
    nondifferentiable,
    reductions,
    shapes,
    special,
)
from sadl.optim.adam import Adam
from sadl.optim.sgd import SGD
from sadl.plugins import OpDef, OptimizerDef, hookimpl

CORE_OPS: tuple[OpDef, ...] = (
    *arithmetic.OPS,
    *elementwise.OPS,
    *activations.OPS,
    *reductions.OPS,
    *shapes.OPS,
    *indexing.OPS,
    *linalg.OPS,
    *nondifferentiable.OPS,
    *special.OPS,
)


@hookimpl
def register_ops() -> Iterable[OpDef]:
    """Every op defined in ``sadl.ops``."""
    return CORE_OPS


@hookimpl
def register_optimizers() -> Iterable[OptimizerDef]:
    """Core's SGD and Adam."""
    return (OptimizerDef("SGD", SGD), OptimizerDef("Adam", Adam))
