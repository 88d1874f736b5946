"""sadl: a deep-learning framework on NumPy (CuPy on GPU) that a person can read end to end.

``import sadl`` gives the Tensor, autograd, factories, ``Module``/``Function``, the optimizers,
devices and the namespaces over the plugin registries (``sadl.ops``, ``sadl.nn``, ``sadl.optim``,
``sadl.models``). Importing prints nothing and loads no plugin: plugins are discovered on first
use of a registry.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import Any

try:
    __version__ = _dist_version("sadl-core")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+unknown"

# Order matters: the Tensor first, then the engine that records ops on it.
from sadl.tensor import Parameter, Tensor, get_default_dtype, set_default_dtype  # noqa: I001
from sadl import engine as _engine
from sadl import cuda, data, models, nn, ops, optim, plugins, testing
from sadl.backend import Device
from sadl.backend import parse_device as device
from sadl.creation import (
    arange,
    empty,
    eye,
    full,
    linspace,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from sadl.engine import MissingGradientError, grad
from sadl.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from sadl.io import load, save
from sadl.nn.module import Function, Module
from sadl.optim import SGD, Adam, Optimizer
from sadl.plugins.errors import PluginConflictError, UnknownNameError
from sadl.random import default_generator, manual_seed

del _engine

__all__ = [
    "SGD",
    "Adam",
    "Device",
    "Function",
    "MissingGradientError",
    "Module",
    "Optimizer",
    "Parameter",
    "PluginConflictError",
    "Tensor",
    "UnknownNameError",
    "arange",
    "cuda",
    "data",
    "default_generator",
    "device",
    "empty",
    "enable_grad",
    "eye",
    "full",
    "get_default_dtype",
    "grad",
    "is_grad_enabled",
    "linspace",
    "load",
    "manual_seed",
    "models",
    "nn",
    "no_grad",
    "ones",
    "ones_like",
    "ops",
    "optim",
    "plugins",
    "rand",
    "randint",
    "randn",
    "save",
    "set_default_dtype",
    "set_grad_enabled",
    "tensor",
    "testing",
    "zeros",
    "zeros_like",
]


def __getattr__(name: str) -> Any:
    """``sadl.<Name>``: a registered layer or optimizer (``sadl.Linear``, ``sadl.AdamW``)."""
    if name.startswith("_") or not name[:1].isupper():
        raise AttributeError(f"module 'sadl' has no attribute {name!r}")
    from sadl.plugins.manager import registry

    reg = registry()
    for kind in ("layers", "optimizers"):
        record = reg.records(kind).get(name)
        if record is not None:
            return record.cls
    # Raise the lookup's error: it names the package that would provide the name.
    from sadl.plugins.known import KNOWN_PROVIDERS

    kind = "optimizers" if name in KNOWN_PROVIDERS["optimizers"] else "layers"
    return reg.lookup(kind, name).cls


def __dir__() -> list[str]:
    from sadl.plugins.manager import registry

    reg = registry()
    return sorted(set(globals()) | set(reg.records("layers")) | set(reg.records("optimizers")))
