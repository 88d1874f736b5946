"""Kernels for recorded op applications: layer norm and RMS norm, forward and backward, by name.

sadl.compile marks the calls each op application made (``Node.region``, an ``OpRegion`` naming
the registered ``OpDef`` with its inputs, parameters and outputs). This pass finds the
applications of the ops registered as ``layer_norm`` and ``rms_norm`` and of their backward op
``layer_norm_backward``, and replaces the calls each made with one kernel call computing the
op's result from the op's inputs, whatever NumPy calls sadl-layers uses inside. The calls that
allocate the result and view it stay; every other call of the region goes, so the replacement is
refused (the calls kept, a note left) when anything outside the region reads an array only the
region's dropped calls made.

The arithmetic is ``_norm.py``'s kernels (same tolerance, documented there); the statistics
and the normalized rows of the backward go to per-thread scratch buffers kept between calls.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from sadl_kernels._api import Graph, Node, OpRegion, Value, new_node
from sadl_kernels._match import contiguous
from sadl_kernels._norm import _backward, _forward

__all__ = ["NORM_OPS", "norm_op_kernels"]

#: The registered op names this module replaces, forward and backward.
NORM_OPS = ("layer_norm", "rms_norm", "layer_norm_backward")


class _Scratch(threading.local):
    def __init__(self) -> None:
        self.arrays: dict[tuple[Any, ...], np.ndarray[Any, Any]] = {}


_SCRATCH = _Scratch()


def _scratch(tag: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    """A buffer of ``shape`` kept per thread between calls (contents undefined)."""
    key = (tag, shape, np.dtype(dtype))
    array = _SCRATCH.arrays.get(key)
    if array is None:
        array = _SCRATCH.arrays[key] = np.empty(shape, dtype)
    return array


def norm_forward_into(x, w, b, y, eps, d, centered):  # type: ignore[no-untyped-def]
    """``y = norm(x) [* w] [+ b]`` over rows of ``d`` (centered: layer norm; else RMS norm)."""
    x2, y2 = x.reshape(-1, d), y.reshape(-1, d)
    n = x2.shape[0]
    stats = _scratch("stats", (2, n, 1), x.dtype)
    affine = 0 if w is None else (1 if b is None else 2)
    dummy = _scratch("vec", (d,), x.dtype)
    w1 = dummy if w is None else w.reshape(-1)
    b1 = dummy if b is None else b.reshape(-1)
    # y doubles as the normalized rows: each element is read before its affine map writes it
    _forward(x2, w1, b1, stats[0], y2, stats[1], y2, centered, affine, 1.0 / d, eps)


def norm_backward_into(g, x, w, packed, eps, d, centered, has_bias):  # type: ignore[no-untyped-def]
    """``packed`` = dx, dweight (when ``w``), dbias (when ``has_bias``) back to back."""
    x2, g2 = x.reshape(-1, d), g.reshape(-1, d)
    n = x2.shape[0]
    dt = packed.dtype
    gx = packed[: n * d].reshape(n, d)
    at = n * d
    dweight = None
    if w is not None:
        dweight, at = packed[at : at + d], at + d
    dbias = packed[at : at + d] if has_bias else None
    stats = _scratch("stats", (4, n, 1), dt)
    xhat = _scratch("xhat", (n, d), dt)
    vecs = _scratch("vecs", (4, d), dt)
    inv = 1.0 / d
    _forward(x2, vecs[0], vecs[0], stats[0], xhat, stats[1], xhat, centered, 0, inv, eps)
    for total in (dweight, dbias):
        if total is not None:
            total[...] = 0
    ones = vecs[0]
    ones[...] = 1
    flags = np.array([False, centered, dbias is not None, dweight is not None])
    _backward(
        g2,
        ones if w is None else w.reshape(-1),
        x2,
        stats[0],
        stats[1],
        xhat,
        gx,
        stats[2],
        stats[3],
        xhat,  # the product xhat * b: each element written after its last read of xhat
        vecs[1] if dbias is None else dbias,
        vecs[1] if dweight is None else dweight,
        vecs[2],
        vecs[3],
        flags,
        inv,
    )


def _regions(graph: Graph) -> list[OpRegion]:
    found: dict[int, OpRegion] = {}
    for node in graph.nodes:
        r = node.region
        while r is not None:
            if r.phase == "forward" and r.op.name in NORM_OPS:
                found.setdefault(id(r), r)
            r = r.parent
    return list(found.values())


def _plain(*values: Any) -> bool:
    vs = [v for v in values if v is not None]
    return (
        all(type(v) is Value and contiguous(v) and v.storage.device is None for v in vs)
        and len({v.dtype for v in vs}) == 1
        and vs[0].dtype in (np.float32, np.float64)
    )


def _width(region: OpRegion) -> int | None:
    ns = region.params.get("normalized_shape")
    x = region.inputs[0]
    if ns is None:
        return x.shape[-1] if x.shape else None
    ns = (int(ns),) if isinstance(ns, int) else tuple(ns)
    return math.prod(ns) if x.shape[len(x.shape) - len(ns) :] == ns else None


def _call(region: OpRegion) -> tuple[Any, tuple[Any, ...], Value] | None:
    """(kernel, its arguments, the value it writes) for the region, None when it does not fit."""
    name = region.op.name
    out = region.outputs[0] if len(region.outputs) == 1 else None
    d = _width(region)
    if out is None or d is None or not region.inputs:
        return None
    x = region.inputs[0]
    eps = region.params.get("eps", 1e-5 if name == "layer_norm" else None)
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    if name == "layer_norm_backward":
        g, x, w = (*region.inputs, None, None)[:3]
        centered = bool(region.params.get("centered", True))
        has_bias = bool(region.params.get("has_bias"))
        if not _plain(g, x, w, out) or g.shape != x.shape:
            return None
        return norm_backward_into, (g, x, w, out, float(eps), d, centered, has_bias), out
    x, w, b = (*region.inputs, None, None)[:3]
    if name == "rms_norm":
        b = None
    if not _plain(x, w, b, out) or out.shape != x.shape:
        return None
    return norm_forward_into, (x, w, b, out, float(eps), d, name == "layer_norm"), out


def _replace(graph: Graph, region: OpRegion) -> bool:
    found = _call(region)
    if found is None:
        return False
    func, args, out = found
    nodes = graph.nodes
    inside = [i for i, n in enumerate(nodes) if _within(n, region)]
    if not inside or out.storage.kind != "temp":
        return False
    root = out.storage.root
    if root is None or root.nbytes != out.nbytes:
        return False
    kept = [i for i in inside if _allocates(nodes[i], out)]
    dropped = [i for i in inside if i not in set(kept)]
    region_nodes = {id(nodes[i]) for i in inside}
    made = {  # memory the region allocated (views of earlier arrays are not the region's)
        v.storage
        for i in dropped
        for v in nodes[i].outputs
        if v.storage.root is not None and id(v.storage.root.producer) in region_nodes
    }
    made.discard(out.storage)
    written = {v.storage for i in dropped for v in nodes[i].writes}
    if not written <= made | {out.storage} or any(s.kind != "temp" or s.escapes for s in made):
        return False
    if any(v.storage in made for v in graph.output_values()):
        return False
    outside = set(range(len(nodes))) - set(inside)
    if any(v.storage in made for i in outside for v in nodes[i].reads):
        return False
    # the kernel writes the allocation itself (views of it may be hoisted by the memory plan)
    if root.producer is None or root.producer not in [nodes[i] for i in kept]:
        return False
    if not contiguous(root) or root.dtype != out.dtype:
        return False
    args = tuple(root if a is out else a for a in args)
    inputs = tuple(dict.fromkeys(a for a in args[:3] if type(a) is Value))
    if any(v.storage is out.storage for v in inputs):
        return False
    reads = (*inputs, root)  # as every kernel node: the written values are among its reads
    at = nodes.index(root.producer)
    kernel = new_node(
        nodes[at],
        kind="call",
        func=func,
        key=("sadl_kernels", region.op.name),
        args=args,
        kwargs={},
        outputs=(),
        reads=reads,
        writes=(root,),
        label=f"kernel[{region.op.name}]",
        const=False,
    )
    drop = set(dropped)
    graph.nodes = [n for i, n in enumerate(nodes) if i not in drop and i <= at]
    graph.nodes.append(kernel)
    graph.nodes += [n for i, n in enumerate(nodes) if i not in drop and i > at]
    return True


def _within(node: Node, region: OpRegion) -> bool:
    r = node.region
    while r is not None and r is not region:
        r = r.parent
    return r is region


def _allocates(node: Node, out: Value) -> bool:
    """A call that only makes the result's memory or views it (kept: the kernel writes it)."""
    return (
        node.kind == "call"
        and not node.writes
        and bool(node.outputs)
        and all(v.storage is out.storage for v in node.outputs)
    )


def norm_op_kernels(graph: Graph) -> dict[str, int]:
    """Replace each recorded norm application that qualifies; counts by op name."""
    counts: dict[str, int] = {}
    for region in _regions(graph):
        if _replace(graph, region):
            counts[region.op.name] = counts.get(region.op.name, 0) + 1
    return counts
