"""``sadl.nn.init``: ``torch.nn.init``'s functions, served by sadl-layers (``sadl_layers.init``)."""

from sadl._namespace import served

_NAMES = """calculate_gain constant_ eye_ fans kaiming_normal_ kaiming_uniform_ normal_ ones_
trunc_normal_ uniform_ xavier_normal_ xavier_uniform_ zeros_""".split()
__getattr__ = served("sadl.nn.init", "sadl-layers", "sadl_layers.init", _NAMES)
