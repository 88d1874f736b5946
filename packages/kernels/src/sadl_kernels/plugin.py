"""The sadl plugin module of sadl_kernels (entry point ``kernels`` in the group ``sadl.plugins``).

It registers three passes of ``sadl.compile``, all ``fusion=True`` (skipped by
``sadl.compile(fusion=False)``): ``kernels_ops`` (recorded layer/RMS norm applications, after
``common_subexpressions`` and before ``shared_recomputation``, which would otherwise share the
norm's row statistics between forward and backward), ``kernels`` (the softmax ops, and a
Linear's bias-add folded into GELU, after sadl-compile's ``shared_recomputation``, before its
``fuse_elementwise``) and
``kernels_optimizer`` (after ``flat_optimizer``, before ``dead_code_final``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl_kernels._api import CompilePassDef, hookimpl
from sadl_kernels._optim import flat_kernels
from sadl_kernels._passes import op_kernels, softmax_kernels

__all__ = ["PASSES", "register_compile_passes"]

PASSES: tuple[CompilePassDef, ...] = (
    CompilePassDef(
        "kernels_ops",
        op_kernels,
        after=("common_subexpressions",),
        before=("shared_recomputation",),
        fusion=True,
    ),
    CompilePassDef(
        "kernels",
        softmax_kernels,
        after=("shared_recomputation",),
        before=("fuse_elementwise",),
        fusion=True,
    ),
    CompilePassDef(
        "kernels_optimizer",
        flat_kernels,
        after=("flat_optimizer",),
        before=("dead_code_final",),
        fusion=True,
    ),
)


@hookimpl
def register_compile_passes() -> Iterable[CompilePassDef]:
    """sadl-kernels' passes: fused norm/softmax/GELU kernels and numba optimizer updates."""
    return PASSES
