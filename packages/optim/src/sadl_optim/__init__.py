"""sadl_optim: optimizers, learning-rate schedules and gradient utilities for sadl.

Installed next to ``sadl-core``, its classes are also served as ``sadl.optim.<Name>`` and
``sadl.<Name>`` through the plugin registry (entry point ``optim``).

* Optimizers (on core's ``Optimizer`` base): ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adadelta``,
  ``Lion``, ``Muon``, ``LAMB``. Core itself provides ``SGD`` and ``Adam``.
* Schedules: ``LRScheduler`` (base), ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
  ``CosineAnnealingLR``, ``LambdaLR``, ``CosineWithWarmup``,
  ``LinearWarmup``, ``OneCycle``; ``ReduceLROnPlateau`` (driven by a metric).
* Utilities: ``clip_grad_norm``, ``clip_grad_value``, ``param_groups_for_weight_decay``.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

from sadl_optim.clip import clip_grad_norm, clip_grad_value
from sadl_optim.groups import param_groups_for_weight_decay
from sadl_optim.matrix import LAMB, Muon
from sadl_optim.optimizers import Adadelta, Adagrad, AdamW, Lion, RMSprop
from sadl_optim.plateau import ReduceLROnPlateau
from sadl_optim.schedulers import (
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

try:
    __version__ = _dist_version("sadl-optim")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "Adadelta",
    "Adagrad",
    "AdamW",
    "LAMB",
    "CosineAnnealingLR",
    "CosineWithWarmup",
    "ExponentialLR",
    "LambdaLR",
    "LRScheduler",
    "LinearWarmup",
    "Lion",
    "Muon",
    "MultiStepLR",
    "OneCycle",
    "RMSprop",
    "ReduceLROnPlateau",
    "StepLR",
    "clip_grad_norm",
    "clip_grad_value",
    "param_groups_for_weight_decay",
]
