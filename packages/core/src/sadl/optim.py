"""``sadl.optim``: the ``Optimizer`` base, core's ``SGD`` and ``Adam``, and every registered name.

sadl-optim registers AdamW, RMSprop, Adagrad, Lion and the learning-rate schedules; they appear
here as ``sadl.optim.<Name>`` once it is installed. ``adam_update`` is the Adam-family update rule
(in place, torch's arithmetic), public so that plugin optimizers share it.
"""

from __future__ import annotations

from sadl._adam import Adam, adam_update
from sadl._namespace import RegistryNamespace
from sadl._optimizer import Optimizer
from sadl._sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer", "adam_update", "names"]


_namespace = RegistryNamespace("optimizers", globals(), "cls")
names = _namespace.names
__getattr__ = _namespace.getattr
__dir__ = _namespace.dir
