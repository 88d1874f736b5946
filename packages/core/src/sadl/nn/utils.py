"""``sadl.nn.utils``: ``torch.nn.utils``' gradient clipping, served by sadl-optim
(``clip_grad_norm_``, ``clip_grad_value_``; sadl-optim also spells them without the underscore).
"""

from sadl._namespace import served

_NAMES = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_grad_value"}
__getattr__ = served("sadl.nn.utils", "sadl-optim", "sadl_optim.clip", _NAMES)
