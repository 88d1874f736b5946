"""The compile passes of sadl-kernels: recorded norm ops, softmax and GELU kernels."""

from __future__ import annotations

from sadl_kernels._api import Graph, PassContext
from sadl_kernels._bias import fold_bias_into_gelu
from sadl_kernels._elementwise import SOFTMAX_PATTERNS
from sadl_kernels._jit import enabled, numba_error
from sadl_kernels._match import Pattern, rewrite_all
from sadl_kernels._ops import op_kernels as replace_op_applications

__all__ = ["op_kernels", "pattern_kernels"]

#: The pattern kernels by switch name (``SADL_KERNELS_DISABLE``), in the order they are tried.
PATTERNS: dict[str, tuple[Pattern, ...]] = {
    "softmax": SOFTMAX_PATTERNS,
}


def op_kernels(graph: Graph, context: PassContext) -> None:
    """Replace the recorded applications of layer/RMS norm and GELU (forward and backward).

    Off without numba too (``pattern_kernels`` says why in the notes).
    """
    counts = replace_op_applications(graph, enabled)
    if counts:
        done = ", ".join(f"{n} x{k}" for n, k in counts.items())
        graph.notes.append(f"sadl_kernels: op kernels {done}")


def pattern_kernels(graph: Graph, context: PassContext) -> None:
    """Replace the attention's softmax call sequences with fused numba kernels; fold a Linear's
    bias-add into the GELU kernel after it.
    """
    if numba_error():
        graph.notes.append(f"sadl_kernels: off, {numba_error()}")
        return
    chosen = [p for name, group in PATTERNS.items() if enabled(name) for p in group]
    counts = rewrite_all(graph, chosen)
    if enabled("gelu") and enabled("bias"):
        folded = fold_bias_into_gelu(graph)
        if folded:
            counts["bias-add into gelu"] = folded
    if counts:
        done = ", ".join(f"{n} x{k}" for n, k in counts.items())
        graph.notes.append(f"sadl_kernels: fused kernels {done}")
