"""``sadl.optim``: the ``Optimizer`` base, core's ``SGD`` and ``Adam``, and every registered name.

sadl-optim registers AdamW, RMSprop, Adagrad, Lion and the learning-rate schedules; they appear
here as ``sadl.optim.<Name>`` once it is installed.
"""

from __future__ import annotations

from sadl.optim.adam import Adam
from sadl.optim.adam import adam_step as adam_update
from sadl.optim.optimizer import Optimizer
from sadl.optim.sgd import SGD
from sadl.plugins.namespace import RegistryNamespace

__all__ = ["SGD", "Adam", "Optimizer", "adam_update", "names"]


_namespace = RegistryNamespace("optimizers", globals(), "cls")
names = _namespace.names
__getattr__ = _namespace.getattr
__dir__ = _namespace.dir
