"""The sadl plugin module of sadl_kernels (entry point ``kernels`` in the group ``sadl.plugins``).

It registers two passes of ``sadl.compile``, both ``fusion=True`` (skipped by
``sadl.compile(fusion=False)``): ``kernels`` (after sadl-compile's ``shared_recomputation``,
before its ``fuse_elementwise``) and ``kernels_optimizer`` (after ``flat_optimizer``, before
``dead_code_final``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl_kernels._api import CompilePassDef, hookimpl
from sadl_kernels._optim import flat_kernels
from sadl_kernels._passes import pattern_kernels

__all__ = ["PASSES", "register_compile_passes"]

PASSES: tuple[CompilePassDef, ...] = (
    CompilePassDef(
        "kernels",
        pattern_kernels,
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
