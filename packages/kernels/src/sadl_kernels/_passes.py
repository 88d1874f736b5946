"""The compile passes of sadl-kernels: recorded norm, GELU and softmax ops, the bias fold."""

from __future__ import annotations

from sadl_kernels._api import Graph, PassContext
from sadl_kernels._bias import fold_bias_into_gelu
from sadl_kernels._jit import enabled, numba_error
from sadl_kernels._ops import SOFTMAX_KERNELS
from sadl_kernels._ops import op_kernels as replace_op_applications
from sadl_kernels._recompute import recompute_gelu_outputs

__all__ = ["op_kernels", "softmax_kernels"]


def op_kernels(graph: Graph, context: PassContext) -> None:
    """Replace the recorded applications of layer/RMS norm and GELU (forward and backward).

    Off without numba too (``softmax_kernels`` says why in the notes).
    """
    counts = replace_op_applications(graph, enabled)
    if counts:
        done = ", ".join(f"{n} x{k}" for n, k in counts.items())
        graph.notes.append(f"sadl_kernels: op kernels {done}")


def softmax_kernels(graph: Graph, context: PassContext) -> None:
    """Replace the recorded applications of the softmax ops (forward and backward); fold a
    Linear's bias-add into the GELU kernel after it; recompute a GELU's output for the backward
    (``sadl_kernels._recompute``).

    This runs after ``shared_recomputation``: the attention's backward recomputes its softmax
    from the same scores, and that pass lets it read the forward's probabilities first, so
    only the forward's application is left to replace.
    """
    if numba_error():
        graph.notes.append(f"sadl_kernels: off, {numba_error()}")
        return
    counts = replace_op_applications(graph, enabled, SOFTMAX_KERNELS)
    if enabled("gelu") and enabled("bias"):
        folded = fold_bias_into_gelu(graph)
        if folded:
            counts["bias-add into gelu"] = folded
    if enabled("gelu"):
        recomputed = recompute_gelu_outputs(graph)
        if recomputed:
            counts["gelu recomputed for the backward"] = recomputed
    if counts:
        done = ", ".join(f"{n} x{k}" for n, k in counts.items())
        graph.notes.append(f"sadl_kernels: fused kernels {done}")
