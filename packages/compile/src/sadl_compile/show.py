"""``print(compiled.graph)``: the IR as text, one line per node.

graph step(arg0, arg1): 2 inputs, 41 calls, 3 effects
  %0 = arg0                                    float32[8, 8]
  %3 = multiply(%0, 1.0001)                    float32[8, 8]    step.py:12
  %4 = add(%3, 0.0001) -> buffer 1             float32[8, 8]    step.py:12
  set_grad arg0.grad = %9
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl_compile.ir import AsTensor, Graph, Node, Value, install_formatter
from sadl_compile.where import short

__all__ = ["format_args", "format_graph", "format_node"]

_MAX_LITERAL = 40


def _literal(x: Any) -> str:
    if type(x) is Value:
        return repr(x)
    if type(x) is AsTensor:
        return f"tensor({x.value!r})"
    if isinstance(x, tuple):
        inner = ", ".join(_literal(i) for i in x)
        return f"({inner}{',' if len(x) == 1 else ''})"
    if isinstance(x, list):
        return "[" + ", ".join(_literal(i) for i in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in x.items()) + "}"
    if isinstance(x, slice):
        parts = ["" if p is None else _literal(p) for p in (x.start, x.stop)]
        text = ":".join(parts)
        return text + (f":{x.step}" if x.step is not None else "")
    if x is Ellipsis:
        return "..."
    if isinstance(x, np.ndarray):
        return f"<array {x.dtype}{list(x.shape)}>"
    name = getattr(x, "__name__", None) if callable(x) else None
    text = name if isinstance(name, str) else repr(x)
    return text if len(text) <= _MAX_LITERAL else text[: _MAX_LITERAL - 3] + "..."


def format_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """``%1, %2, axis=1``."""
    parts = [_literal(a) for a in args]
    parts += [f"{k}={_literal(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def format_node(node: Node) -> str:
    """One node as a line of text (without its source location)."""
    if node.kind == "call" or node.kind == "draw":
        kwargs = node.kwargs
        if node.meta.get("buffer") is not None:
            kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        call = f"{node.label}({format_args(node.args, kwargs)})"
        if node.outputs:
            names = ", ".join(repr(v) for v in node.outputs)
            text = f"{names} = {call}"
        else:
            text = call
        if node.meta.get("buffer") is not None:
            text += f" -> buffer {node.meta['buffer']}"
        return text
    if node.kind == "fused":
        return node.meta["describe"]()  # type: ignore[no-any-return]
    if node.kind == "guard":
        source = node.meta["source"]
        test = f"{source.label}({format_args(source.args, source.kwargs)})"
        return f"guard {test} is {node.meta['expected']}"
    if node.kind in ("set_grad", "set_data"):
        target = _tensor_name(node.meta["tensor"])
        attr = "grad" if node.kind == "set_grad" else "data"
        value = repr(node.reads[0]) if node.reads else "None"
        return f"{node.kind} {target}.{attr} = {value}"
    if node.kind == "optimizer":
        grads = ", ".join(repr(v) for v in node.reads[: len(node.meta["params"])])
        how = " (flat buffers)" if node.meta.get("flat") else ""
        return f"{node.label}(grads: {grads}){how}"
    return node.label


def _tensor_name(ref: Any) -> str:
    if isinstance(ref, tuple):
        return f"arg{ref[1]}"
    tensor = ref()
    if tensor is None:
        return "<tensor>"
    return f"tensor{list(tensor.shape)}"


def _value_line(v: Value) -> str:
    kind, what = v.entry if v.entry is not None else ("", None)
    if kind == "arg":
        return f"{v!r} = {v.name or f'arg{what}'}"
    if kind == "grad":
        return f"{v!r} = {_tensor_name(what)}.grad"
    if v.storage.const or v.array is not None:
        return f"{v!r} = constant" if v.storage.const else f"{v!r} = buffer view"
    return f"{v!r} = captured array"


def format_graph(graph: Graph) -> str:
    """The whole graph: its entries, its nodes in order, its outputs and notes."""
    lines: list[str] = []
    calls = sum(1 for n in graph.nodes if n.kind in ("call", "fused"))
    effects = len(graph.nodes) - calls
    lines.append(
        f"graph {graph.name}: {len(graph.inputs)} inputs, {calls} calls, {effects} effects"
    )
    produced = {v.index for n in graph.nodes for v in n.outputs}
    used = {v.index for n in graph.nodes for v in n.reads}
    used |= {v.index for n in graph.nodes if n.kind == "guard" for v in n.meta["source"].reads}
    for v in graph.values:
        if v.index in used and v.index not in produced:
            lines.append(f"  {_value_line(v):<48} {v.describe()}")
    for node in graph.nodes:
        text = format_node(node)
        shape = node.outputs[0].describe() if node.outputs else ""
        lines.append(f"  {text:<48} {shape:<20} {short(node.where)}".rstrip())
    outs = ", ".join(_literal(o) for o in _flat_outputs(graph.outputs))
    lines.append(f"  return {outs}")
    if graph.passes:
        lines.append(f"  # passes, in order: {', '.join(graph.passes)}")
    for note in graph.notes:
        lines.append(f"  # {note}")
    return "\n".join(lines)


def _flat_outputs(outputs: Any) -> list[Any]:
    if isinstance(outputs, tuple | list):
        return list(outputs)
    return [outputs]


install_formatter(format_graph)
