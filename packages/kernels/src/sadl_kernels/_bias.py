"""A Linear's bias-add folded into the GELU kernel that follows its product.

NumPy's ``matmul`` has no epilogue (BLAS's ``beta=1`` is not exposed, and a numba GEMM is far
slower than OpenBLAS), so sadl-layers adds the bias after the product, one in-place pass over
the whole output, ``add(h, bias, out=h)``; the MLP's GELU then reads ``h`` again block by block.
When every block of ``h`` goes to a GELU kernel right after (nothing else reads ``h`` in between
but views of it), the bias is added block by block just before each GELU kernel, on the block
while it is in the cache, and stored back (the GELU's backward reads the biased ``h``): ``h``
crosses memory once less and the separate call is gone. Bit for bit the same
``h``: the kernel adds in the array's dtype, as NumPy does.
"""

from __future__ import annotations

from sadl_kernels._api import Graph, Node, Value, new_node
from sadl_kernels._elementwise import CHUNK, _gelu1
from sadl_kernels._gelu import AC, Array, C, gelu_forward_into
from sadl_kernels._jit import PER_THREAD, jit, prange
from sadl_kernels._match import contiguous, extent, func_name, is_view, touches

__all__ = ["fold_bias_into_gelu", "gelu_forward_bias_into"]


@jit(per_thread=PER_THREAD)
def _gelu_bias(x, bias, out, ac, c):  # type: ignore[no-untyped-def]
    width = bias.size
    x2, o2 = x.reshape(-1, width), out.reshape(-1, width)
    rows = x2.shape[0]
    step = max(1, CHUNK // width)  # rows per chunk of the prange (the same on any count)
    a_, c_ = x2.dtype.type(ac), x2.dtype.type(c)  # (new names: parfors mishandle rebinding)
    one, half = x2.dtype.type(1.0), x2.dtype.type(0.5)
    for k in prange((rows + step - 1) // step):
        for r in range(k * step, min(k * step + step, rows)):
            for j in range(width):
                v = x2[r, j] + bias[j]
                x2[r, j] = v
                o2[r, j] = _gelu1(v, a_, c_, one, half)


def gelu_forward_bias_into(x: Array, bias: Array, out: Array) -> None:
    """``x += bias`` (``bias`` repeating along ``x``'s rows), then :func:`gelu_forward_into`,
    in one pass: each element is biased, stored back and its GELU written while in a register.
    """
    _gelu_bias.launch(x.size, x, bias, out, AC, C)


def _bias_add(node: Node) -> tuple[Value, Value] | None:
    """``(h, bias)`` when ``node`` is ``add(h, bias, out=h)`` with a 1-D float32 bias."""
    if node.kind != "call" or func_name(node) != "add" or len(node.args) != 2:
        return None
    h, bias = node.args
    out = node.kwargs.get("out")
    if set(node.kwargs) != {"out"} or not isinstance(out, tuple) or len(out) != 1:
        return None
    if out[0] is not h or not hasattr(bias, "storage") or not hasattr(h, "storage"):
        return None
    if len(bias.shape) != 1 or not h.shape or h.shape[-1] != bias.shape[0]:
        return None
    if h.dtype != bias.dtype or str(h.dtype) != "float32" or bias.storage is h.storage:
        return None
    if h.storage.device is not None or not contiguous(h) or not contiguous(bias):
        return None
    return h, bias


def _gelu_blocks(graph: Graph, start: int, h: Value) -> list[tuple[int, int]] | None:
    """``(node index, element offset in h)`` of the GELU kernels that cover ``h`` right after
    ``start``, with nothing but views of ``h`` in between; None when that is not so.
    """
    span = extent(h)
    if span is None:
        return None
    found: list[tuple[int, int]] = []
    covered = span[0]
    for j in range(start + 1, len(graph.nodes)):
        node = graph.nodes[j]
        if node.func is gelu_forward_into and node.args[0].storage is h.storage:
            part = extent(node.args[0])
            if part is None or part[0] != covered:
                return None
            found.append((j, part[0] - span[0]))
            covered = part[1]
            if covered == span[1]:
                return found
            continue
        if is_view(node):
            continue
        if touches(node, h.storage):
            return None
    return None


def fold_bias_into_gelu(graph: Graph) -> int:
    """Fold each qualifying ``add(h, bias, out=h)`` into the GELU kernels of ``h``; the count."""
    folded = 0
    i = 0
    while i < len(graph.nodes):
        found = _bias_add(graph.nodes[i])
        blocks = None if found is None else _gelu_blocks(graph, i, found[0])
        if found is None or blocks is None:
            i += 1
            continue
        bias = found[1]
        if len(blocks) != 1 or blocks[0][1] != 0:
            i += 1  # one kernel per GELU application, from h's first element
            continue
        for j, _ in blocks:
            node = graph.nodes[j]
            x, out = node.args
            graph.nodes[j] = new_node(
                node,
                func=gelu_forward_bias_into,
                args=(x, bias, out),
                reads=(*node.reads, bias),
                writes=(*node.writes, x),
                label="kernel[gelu+bias]",
            )
        del graph.nodes[i]
        folded += 1
    return folded
