"""``sadl.nn``: ``Module``/``Function``, ``Parameter`` and every registered layer class.

Layers come from plugins (sadl-layers registers ``Linear``, ``LayerNorm``, ...; sadl-models
registers ``GPT``). Attribute access loads the plugins on first use. ``sadl.nn.init`` holds
``torch.nn.init``'s functions (served by sadl-layers).
"""

from __future__ import annotations

from sadl._module import Function, IncompatibleKeys, Module
from sadl._namespace import RegistryNamespace
from sadl._tensor import Parameter
from sadl.nn import init

__all__ = ["Function", "IncompatibleKeys", "Module", "Parameter", "init", "names"]


_namespace = RegistryNamespace("layers", globals(), "cls")
names = _namespace.names
__getattr__ = _namespace.getattr
__dir__ = _namespace.dir
