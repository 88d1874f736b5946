"""``sadl.optim``: the ``Optimizer`` base, core's ``SGD`` and ``Adam``, and every registered name.

sadl-optim registers AdamW, RMSprop, Adagrad, Lion and the learning-rate schedules; they appear
here as ``sadl.optim.<Name>`` once it is installed. ``adam_update`` is the Adam-family update rule
(in place, torch's arithmetic), public so that plugin optimizers share it. sadl-optim's
gradient utilities are here too (``sadl.optim.clip_grad_norm``), and ``sadl.optim.lr_scheduler``
holds the schedules under torch's module name.
"""

from __future__ import annotations

from sadl._adam import Adam, adam_update
from sadl._namespace import namespace, served
from sadl._optimizer import Optimizer, torch_options
from sadl._sgd import SGD
from sadl.optim import lr_scheduler

__all__ = ["SGD", "Adam", "Optimizer", "adam_update", "lr_scheduler", "names", "torch_options"]


names, _registered, __dir__ = namespace("optimizers", globals(), "cls")
_UTILITIES = {"clip_grad_norm", "clip_grad_value", "param_groups_for_weight_decay"}
_utility = served("sadl.optim", "sadl-optim", "sadl_optim", _UTILITIES)


def __getattr__(name: str) -> object:
    """A registered optimizer or schedule, or one of sadl-optim's gradient utilities."""
    return _utility(name) if name in _UTILITIES else _registered(name)
