"""Core's own plugin: built-in ops, optimizers and device backends, through the public hooks.

sadl-layers, sadl-optim and any third-party package do exactly the same from their own modules.
The plugin host imports this module by name (``sadl._host.BUILTIN_PLUGINS``), as pytest loads its
built-in plugins; it cannot be blocked.
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl._adam import Adam
from sadl._hookspecs import hookimpl
from sadl._ops import CORE_OPS
from sadl._plugin_records import BackendDef, OptimizerDef
from sadl._records import OpDef
from sadl._sgd import SGD
from sadl.backends import CPU_BACKEND
from sadl.cuda import CUDA_BACKEND


@hookimpl
def register_ops() -> Iterable[OpDef]:
    """Every op defined in ``sadl.ops``."""
    return CORE_OPS


@hookimpl
def register_optimizers() -> Iterable[OptimizerDef]:
    """Core's SGD and Adam."""
    return (OptimizerDef("SGD", SGD), OptimizerDef("Adam", Adam))


@hookimpl
def register_backends() -> Iterable[BackendDef]:
    """NumPy on the host (``"cpu"``) and CuPy on NVIDIA GPUs (``"cuda"``)."""
    return (CPU_BACKEND, CUDA_BACKEND)
