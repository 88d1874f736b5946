"""``sadl.nn``: ``Module``/``Function``, ``Parameter`` and every registered layer class.

Layers come from plugins (sadl-layers registers ``Linear``, ``LayerNorm``, ...; sadl-models
registers ``GPT``). Attribute access loads the plugins on first use. ``sadl.nn.init`` holds
``torch.nn.init``'s functions and ``sadl.nn.functional`` ``torch.nn.functional``'s (both served by
sadl-layers); ``sadl.nn.utils`` has the gradient clipping (served by sadl-optim).
"""

from __future__ import annotations

from sadl._module import Function, IncompatibleKeys, Module
from sadl._namespace import namespace
from sadl._tensor import Parameter
from sadl.nn import functional, init, utils

__all__ = [
    "Function",
    "IncompatibleKeys",
    "Module",
    "Parameter",
    "functional",
    "init",
    "names",
    "utils",
]


names, __getattr__, __dir__ = namespace("layers", globals(), "cls")
