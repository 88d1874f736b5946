"""Core's op tables, one file per family: each op's forward, its backward and its record together.

These modules import only the records, the array helpers and each other; the engine above them
applies the records, and the built-in plugin (``sadl._builtin``) registers them.
"""

from sadl._ops import (
    activations,
    arithmetic,
    elementwise,
    erf,
    indexing,
    layout,
    linalg,
    nondifferentiable,
    reductions,
    selection,
    shapes,
    special,
    take,
)
from sadl._records import OpDef

#: Every op core registers (``sadl._builtin``'s ``register_ops``), in the order listed.
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
    *layout.OPS,
    *take.OPS,
    *selection.OPS,
    *erf.OPS,
)
