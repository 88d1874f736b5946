"""``sadl.viz``: the autograd graph as Graphviz DOT, served by sadl-check (``sadl_check.viz``)."""

from __future__ import annotations

from sadl._namespace import served

__getattr__ = served("sadl.viz", "sadl-check", "sadl_check.viz", {"to_dot", "render"})
