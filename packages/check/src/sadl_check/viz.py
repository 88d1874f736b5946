"""See the autograd graph: Graphviz DOT text (no dependency), SVG/PNG/PDF with Graphviz installed.

``sadl.viz.to_dot(loss)`` walks the graph that produced ``loss`` (the same records ``backward``
walks) and describes it in the DOT language: one box per op with its output shape and dtype, one
per leaf tensor (blue when it requires grad, grey when it is a constant), and on every edge the
version each saved input had when the op ran. An input changed in place since then is drawn red,
because backward will refuse it; a graph already freed by ``backward`` says so.
``sadl.viz.render(loss, "graph.svg")`` runs Graphviz's ``dot`` program on that text.

Pass ``names=model.named_parameters()`` to label parameters by name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sadl import Parameter, Tensor

Node = Any  # a graph node (``Tensor.grad_fn``): op, params, parents, datas, out, versions

__all__ = ["render", "to_dot"]

_LEAF = 'shape=box, style="rounded,filled", fillcolor="#cfe2f3"'
_CONSTANT = 'shape=box, style="rounded,filled", fillcolor="#eeeeee", fontcolor="#555555"'
_OP = 'shape=box, style=filled, fillcolor="#fff2cc"'
_ROOT = 'shape=box, style=filled, fillcolor="#d9ead3", penwidth=2'


def to_dot(
    tensors: Tensor | Iterable[Tensor],
    names: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]] | None = None,
) -> str:
    """The autograd graph that produced ``tensors`` as Graphviz DOT text.

    ``names`` labels leaf tensors (``dict(model.named_parameters())`` or the iterator itself).
    A tensor that is not the result of a recorded op is drawn alone.
    """
    roots = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    for i, t in enumerate(roots):
        if not isinstance(t, Tensor):
            raise TypeError(f"sadl.viz.to_dot: argument {i} is {type(t).__name__}, not a Tensor")
    labels = {id(t): n for n, t in (names.items() if isinstance(names, Mapping) else names or ())}
    lines = [
        "digraph sadl {",
        '  graph [rankdir=TB, fontname="Helvetica", nodesep=0.3, ranksep=0.35];',
        '  node [fontname="Helvetica", fontsize=11, margin="0.12,0.06"];',
        '  edge [fontname="Helvetica", fontsize=9, color="#666666", fontcolor="#666666"];',
    ]
    ids: dict[int, str] = {}
    stack: list[Any] = []

    def ident(obj: Any, style: str, label: str) -> str:
        key = id(obj)
        if key not in ids:
            ids[key] = f"n{len(ids)}"
            lines.append(f"  {ids[key]} [{style}, label={_quote(label)}];")
            if not isinstance(obj, Tensor):
                stack.append(obj)
        return ids[key]

    root_nodes = set()
    for t in roots:
        if t.grad_fn is None:
            ident(t, _LEAF if t.requires_grad else _CONSTANT, _leaf_label(t, labels))
        else:
            root_nodes.add(id(t.grad_fn))
            ident(t.grad_fn, _ROOT, _op_label(t.grad_fn))
    while stack:
        node = stack.pop()
        target = ids[id(node)]
        for i, parent in enumerate(node.parents):
            counter = node.counters[i]
            if parent is None and counter is None:
                continue  # a Python number or another non-tensor argument
            if isinstance(parent, Tensor):
                source = ident(parent, _LEAF, _leaf_label(parent, labels))
            elif parent is not None:  # a graph node
                style = _ROOT if id(parent) in root_nodes else _OP
                source = ident(parent, style, _op_label(parent))
            else:  # a tensor that does not require grad: a constant input
                data = node.datas[i] if node.datas is not None else None
                source = f"{target}_c{i}"
                lines.append(f"  {source} [{_CONSTANT}, label={_quote(_constant_label(data))}];")
            lines.append(f"  {source} -> {target} [{_edge(node, i)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _op_label(node: Node) -> str:
    params = ", ".join(
        f"{k}={_short(v)}" for k, v in node.params.items() if v is not None and v is not False
    )
    head = f"{node.op.name}({params})" if params else node.op.name
    out = node.out
    if out is None:  # backward without retain_graph=True dropped what the op saved
        return f"{head}\nfreed by backward()"
    return f"{head}\n{_shape(out.shape)} {out.dtype}"


def _leaf_label(t: Tensor, labels: Mapping[int, str]) -> str:
    kind = "Parameter" if isinstance(t, Parameter) else "Tensor"
    name = labels.get(id(t))
    head = f"{name}: {kind}" if name else kind
    grad = "requires grad" if t.requires_grad else "constant"
    return f"{head}\n{_shape(t.shape)} {t.dtype}\n{grad}"


def _constant_label(data: Any) -> str:
    if data is None:
        return "constant\n(freed)"
    return f"constant\n{_shape(getattr(data, 'shape', ()))} {getattr(data, 'dtype', '')}".rstrip()


def _edge(node: Node, i: int) -> str:
    counter, saved = node.counters[i], node.versions[i]
    if counter is None:
        return 'label=""'
    if counter[0] != saved:
        return (
            f'label="saved v{saved}, now v{counter[0]}\\nchanged in place", color="#cc0000", '
            'fontcolor="#cc0000", penwidth=2'
        )
    return f'label="v{saved}"'


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _short(value: Any) -> str:
    text = repr(value) if not hasattr(value, "shape") else f"array{_shape(value.shape)}"
    return text if len(text) <= 24 else text[:21] + "..."


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def render(
    tensors: Tensor | Iterable[Tensor],
    path: str | os.PathLike[str],
    format: str | None = None,
    names: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]] | None = None,
) -> Path:
    """Draw the graph into ``path`` (SVG, PNG or PDF, from the suffix or ``format``).

    Needs Graphviz's ``dot`` program on PATH; without it the error says how to install it and
    that ``to_dot`` gives the text. The file is written atomically. Returns the path.
    """
    target = Path(path)
    fmt = (format or target.suffix.lstrip(".")).lower()
    if fmt not in ("svg", "png", "pdf"):
        raise ValueError(
            f"sadl.viz.render: cannot draw {target.name!r} as {fmt or 'a file without a suffix'}; "
            "use .svg, .png or .pdf (or format=...)"
        )
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError(
            "sadl.viz.render needs Graphviz's `dot` program, which is not on PATH: install "
            "Graphviz (Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install "
            "graphviz); sadl.viz.to_dot(t) gives the DOT text without it"
        )
    text = to_dot(tensors, names)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # what open() would have given, not mkstemp's 0600
    try:
        result = subprocess.run(
            [dot, f"-T{fmt}", "-o", tmp], input=text, capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            raise RuntimeError(f"Graphviz's dot failed: {result.stderr.strip()}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
