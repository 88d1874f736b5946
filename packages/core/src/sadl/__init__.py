"""sadl: a deep-learning framework on NumPy (CuPy on GPU) that a person can read end to end.

``import sadl`` gives the Tensor, autograd, factories, ``Module``/``Function``, the optimizers,
devices and the namespaces over the plugin registries (``sadl.ops``, ``sadl.nn``, ``sadl.optim``,
``sadl.models``). Importing prints nothing and loads no plugin: plugins are discovered on first
use of a registry.
"""

# No ``from __future__ import annotations`` and no bare ``typing`` names here: each would be
# an attribute of ``sadl`` (``vars(sadl)`` holds the public surface and underscored names only).
import importlib.abc as _importlib_abc
import sys as _sys
from typing import Any as _Any

# Bottom to top (docs/architecture.md): importing the engine's upper half installs it below.
from sadl import (  # noqa: F401
    _dispatch,
    _host,
    _namespace,
    _tensor,
    _torch,
    autograd,
    backends,
    cuda,
    data,
    models,
    nn,
    ops,
    optim,
    plugins,
    random,
    testing,
    viz,
)
from sadl._adam import Adam
from sadl._backward import RemovableHandle, grad, queue_backward_callback
from sadl._compat import is_global_grad_mode_enabled, no_grad_fn, set_global_grad_mode
from sadl._creation import (
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
from sadl._defaults import get_default_dtype, set_default_dtype
from sadl._errors import (
    CompileError,
    CompileWarning,
    MissingGradientError,
    PluginConflictError,
    UnknownNameError,
)
from sadl._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from sadl._host import registry as _registry
from sadl._known import KNOWN_ATTRIBUTES as _KNOWN_ATTRIBUTES
from sadl._known import KNOWN_PROVIDERS as _KNOWN_PROVIDERS
from sadl._module import Function, Module
from sadl._optimizer import Optimizer
from sadl._sgd import SGD
from sadl._tensor import Parameter, Tensor
from sadl._threads import get_num_threads, set_num_threads
from sadl._version import __version__ as __version__
from sadl.backends import Device
from sadl.backends import parse_device as device
from sadl.io import load, save
from sadl.random import default_generator, manual_seed

__all__ = [
    "SGD",
    "Adam",
    "CompileError",
    "CompileWarning",
    "Device",
    "Function",
    "MissingGradientError",
    "Module",
    "Optimizer",
    "Parameter",
    "PluginConflictError",
    "RemovableHandle",
    "Tensor",
    "UnknownNameError",
    "arange",
    "autograd",
    "backends",
    "cuda",
    "data",
    "default_generator",
    "device",
    "empty",
    "enable_grad",
    "eye",
    "full",
    "get_default_dtype",
    "get_num_threads",
    "grad",
    "io",
    "is_global_grad_mode_enabled",
    "is_grad_enabled",
    "linspace",
    "load",
    "manual_seed",
    "models",
    "nn",
    "no_grad",
    "no_grad_fn",
    "ones",
    "ones_like",
    "ops",
    "optim",
    "plugins",
    "queue_backward_callback",
    "rand",
    "random",
    "randint",
    "randn",
    "save",
    "set_default_dtype",
    "set_global_grad_mode",
    "set_grad_enabled",
    "set_num_threads",
    "tensor",
    "testing",
    "viz",
    "zeros",
    "zeros_like",
]


def __getattr__(name: str) -> _Any:
    """``sadl.<Name>``: a registered layer or optimizer (``sadl.Linear``, ``sadl.AdamW``), or a
    name a plugin package serves (``sadl.compile`` from sadl-compile), imported on first use.
    """
    torch_name = _torch.served(name)  # sadl.cat, sadl.long, ...: torch's top-level spellings
    if torch_name is not None:
        return torch_name
    if name in _KNOWN_ATTRIBUTES:
        distribution, module = _KNOWN_ATTRIBUTES[name]
        return _namespace.served("sadl", distribution, module, {name})(name)
    if name.startswith("_") or not name[:1].isupper() or _torch.missing(name):
        raise AttributeError(_torch.missing(name) or f"module 'sadl' has no attribute {name!r}")
    reg = _registry()
    for kind in ("layers", "optimizers"):
        record = reg.records(kind).get(name)
        if record is not None:
            return record.cls
    # Raise the lookup's error: it names the package that would provide the name.
    kind = "optimizers" if name in _KNOWN_PROVIDERS["optimizers"] else "layers"
    if reg.conflict("optimizers", name) is not None:
        kind = "optimizers"
    return reg.lookup(kind, name).cls


def __dir__() -> list[str]:
    reg = _registry()
    served = (
        set(reg.records("layers"))
        | set(reg.records("optimizers"))
        | {*_torch.__all__, *_torch.DTYPES}
    )
    return sorted(set(globals()) | served)


class _ServedNameFinder(_importlib_abc.MetaPathFinder):
    """Why ``from sadl import compile`` fails when no plugin serves ``sadl.compile``.

    ``from sadl import NAME`` looks the attribute up, and when that raises (an AttributeError,
    which says which package to install) imports the submodule ``sadl.NAME`` instead, and then
    reports a bare "cannot import name". This finder, last on ``sys.meta_path`` (asked only
    when no other finder has the module), answers for the names a plugin serves with the
    lookup's reason, as an ImportError.
    """

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        """Raise the reason ``sadl.NAME`` is missing; None for every other module."""
        package, _, name = fullname.partition(".")
        if package == "sadl" and name in _KNOWN_ATTRIBUTES:
            try:
                __getattr__(name)
            except UnknownNameError as missing:
                raise ImportError(str(missing), name=_KNOWN_ATTRIBUTES[name][1]) from None
        return None


if not any(type(f).__module__ == __name__ for f in _sys.meta_path):  # once, across reloads
    _sys.meta_path.append(_ServedNameFinder())
