"""``sadl.optim.lr_scheduler``: the learning-rate schedules under ``torch.optim.lr_scheduler``'s
module name (``from sadl.optim.lr_scheduler import StepLR``), served by sadl-optim.
"""

from sadl._namespace import served

_NAMES = """LRScheduler StepLR MultiStepLR ExponentialLR LambdaLR CosineAnnealingLR
ReduceLROnPlateau CosineWithWarmup LinearWarmup OneCycle""".split()
__getattr__ = served("sadl.optim.lr_scheduler", "sadl-optim", "sadl_optim", _NAMES)
