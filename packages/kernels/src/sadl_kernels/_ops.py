"""Kernels for recorded op applications, by the op's registered name.

sadl.compile marks the calls each op application made (``Node.region``, an ``OpRegion`` naming
the registered ``OpDef`` with its inputs, parameters and outputs). :func:`op_kernels` finds the
applications of the ops in :data:`OP_KERNELS` (layer norm, RMS norm, GELU and their backward
ops; the softmax ops' :data:`SOFTMAX_KERNELS` run in a later pass, see ``_passes.py``) and
replaces the calls each made with one kernel call computing the op's result from the op's
inputs, whatever NumPy calls the op's implementation makes inside
(``sadl_compile.replace_region``, which refuses when something outside the application reads
an array only its dropped calls made). Recognition happens once, while compiling; a replay
calls the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sadl_kernels._api import Graph, OpRegion, op_regions, replace_region
from sadl_kernels._gelu import GELU_KERNELS
from sadl_kernels._norm import NORM_KERNELS, share_statistics
from sadl_kernels._softmax import SOFTMAX_KERNELS

__all__ = ["OP_KERNELS", "SOFTMAX_KERNELS", "SWITCHES", "op_kernels"]

#: For each registered op name, ``kernel(region)``: ``(function, arguments, result value)``
#: for an application the kernel handles, None for one it does not (left to the op's code).
OP_KERNELS: dict[str, Callable[[OpRegion], Any]] = {**NORM_KERNELS, **GELU_KERNELS}


#: The switch (``SADL_KERNELS_DISABLE``) that turns each op's kernel off.
SWITCHES = {
    **{name: "softmax" for name in SOFTMAX_KERNELS},
    "layer_norm": "layer_norm",
    "rms_norm": "layer_norm",
    "layer_norm_backward": "layer_norm",
    "gelu": "gelu",
    "gelu_backward": "gelu",
}


def op_kernels(
    graph: Graph,
    enabled: Callable[[str], bool],
    table: dict[str, Callable[[OpRegion], Any]] = OP_KERNELS,
) -> dict[str, int]:
    """Replace each recorded application that its op's kernel in ``table`` handles (and whose
    switch ``enabled`` allows); counts by op name.

    An application refused because a later one reads an array it made (common_subexpressions
    shares the cross-entropy's row maxima between its log-softmax and its gradient's softmax)
    is tried again once that one is replaced.
    """
    counts: dict[str, int] = {}
    waiting = op_regions(graph, table)
    while waiting:
        refused = []
        for region in waiting:
            if not enabled(SWITCHES.get(region.op.name, region.op.name)):
                continue
            found = table[region.op.name](region)
            if found is None:
                continue
            func, args, out = found
            if replace_region(graph, region, func, args, out, owner="sadl_kernels"):
                counts[region.op.name] = counts.get(region.op.name, 0) + 1
            else:
                refused.append(region)
        if len(refused) == len(waiting):
            break
        waiting = refused
    shared = share_statistics(graph) if counts.get("layer_norm_backward") else 0
    if shared:  # (the backward norm kernels that read their forward's row statistics)
        graph.notes.append(f"sadl_kernels: norm statistics shared x{shared}")
    return counts
