"""``sadl.optim.lr_scheduler``: the learning-rate schedules under ``torch.optim.lr_scheduler``'s
module name (``from sadl.optim.lr_scheduler import StepLR``), served by sadl-optim.
"""

from sadl._namespace import namespace, served

_NAMES = """LRScheduler StepLR MultiStepLR ExponentialLR LambdaLR CosineAnnealingLR
ReduceLROnPlateau CosineWithWarmup LinearWarmup OneCycle""".split()
_served = served("sadl.optim.lr_scheduler", "sadl-optim", "sadl_optim", _NAMES)
_registered = namespace("optimizers", globals(), "cls")[1]


def __getattr__(name: str) -> object:
    """A schedule of sadl-optim; another name is looked up as ``sadl.optim.<name>`` is, so its
    error names the nearest schedule sadl has (``OneCycleLR``: ``OneCycle``).
    """
    return _served(name) if name in _NAMES or name.startswith("__") else _registered(name)
