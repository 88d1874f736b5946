"""The compile passes of sadl-kernels: recorded norm ops, softmax and GELU kernels."""

from __future__ import annotations

from sadl_kernels._api import Graph, PassContext
from sadl_kernels._bias import fold_bias_into_gelu
from sadl_kernels._elementwise import GELU_PATTERNS, SOFTMAX_PATTERNS
from sadl_kernels._jit import enabled, numba_error
from sadl_kernels._match import Pattern, rewrite_all
from sadl_kernels._ops import op_kernels as replace_op_applications

__all__ = ["op_kernels", "pattern_kernels"]

#: The pattern kernels by switch name (``SADL_KERNELS_DISABLE``), in the order they are tried.
PATTERNS: dict[str, tuple[Pattern, ...]] = {
    "softmax": SOFTMAX_PATTERNS,
    "gelu": GELU_PATTERNS,
}


def op_kernels(graph: Graph, context: PassContext) -> None:
    """Replace the recorded applications of layer norm and RMS norm (forward and backward)."""
    if not enabled("layer_norm"):  # off without numba too (``pattern_kernels`` says why)
        return
    counts = replace_op_applications(graph)
    if counts:
        done = ", ".join(f"{n} x{k}" for n, k in counts.items())
        graph.notes.append(f"sadl_kernels: op kernels {done}")


def pattern_kernels(graph: Graph, context: PassContext) -> None:
    """Replace softmax and GELU call sequences with fused numba kernels."""
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
