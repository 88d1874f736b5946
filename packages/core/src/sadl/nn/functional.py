"""``sadl.nn.functional``: ``torch.nn.functional`` with torch's signatures, served by sadl-layers
(``sadl_layers.functional``): ``import sadl.nn.functional as F`` or ``from sadl.nn import
functional as F``; without sadl-layers each name says which package to install.
"""

from sadl._namespace import served

__getattr__ = served("sadl.nn.functional", "sadl-layers", "sadl_layers.functional", None)
