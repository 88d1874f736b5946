"""Replay: the graph as generated Python, one statement per node, compiled once with ``exec``.

The generated function takes the call's argument arrays ``A`` and argument tensors ``T`` and
returns the outputs; functions, constants, buffers and captured objects are its globals. Its
source is kept (``compiled.source``) and registered with ``linecache``, so tracebacks from a
replay show the generated line. A replay first checks that what the trace assumed still holds
(``StaleTraceError``: trace again) and raises ``GuardFailedError`` when a value-dependent branch
goes the other way (the call then runs eagerly).
"""

from __future__ import annotations

import itertools
import linecache
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from sadl.plugins import tensor_from_array as new_tensor
from sadl.random import (
    default_generator,
    generator,
    get_rng_state,
    manual_seed,
    resolve_generator,
    set_rng_state,
)

from sadl_compile.capture import rebuild
from sadl_compile.ir import AsTensor, Graph, Node, ObjectResult, Value, iter_values
from sadl_compile.rules import eager_product

__all__ = [
    "Emitter",
    "GuardFailedError",
    "Program",
    "StaleTraceError",
    "checks",
    "generate",
    "name_entries",
    "output_text",
    "statements",
]

_asarray = np.asarray
_counter = itertools.count()


class StaleTraceError(Exception):
    """What the trace assumed no longer holds (a parameter was replaced, a flag changed)."""


class GuardFailedError(Exception):
    """A value-dependent branch of the trace goes the other way on this call."""


class Program:
    """The generated replay function with its source and the objects it refers to."""

    def __init__(self, source: str, namespace: dict[str, Any], filename: str) -> None:
        self.source = source
        self.namespace = namespace
        self.filename = filename
        code = compile(source, filename, "exec")
        exec(code, namespace)
        self.run: Callable[[list[Any], list[Any]], Any] = namespace["replay"]
        self.line_nodes: list[Node | None] = []  #: the node of each line of the body
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        weakref.finalize(self, linecache.cache.pop, filename, None)  # gone with the program


class Emitter:
    """Names for everything the generated code refers to, and the lines it consists of."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "_asarray": _asarray,
            "_tensor": new_tensor,
            "_default_generator": default_generator,
            "_generator": generator,
            "Stale": StaleTraceError,
            "GuardFailed": GuardFailedError,
            "_rebuild": rebuild,
            "_seeded": resolve_generator,
        }
        self._ids: dict[int, str] = {}
        self.lines: list[str] = []

    def ref(self, obj: Any, prefix: str) -> str:
        """A global name for ``obj`` (the same object always gets the same name)."""
        key = id(obj)
        name = self._ids.get(key)
        if name is None:
            name = f"{prefix}{len(self._ids)}"
            self._ids[key] = name
            self.namespace[name] = obj
        return name

    def literal(self, x: Any, names: dict[int, str]) -> str:
        """Source text for an argument template (Values by local name, objects by global)."""
        if type(x) is Value:
            return names[x.index]
        kind = type(x)
        if x is None or kind is bool or kind is str or kind is int:
            return repr(x)
        if kind is float and math.isfinite(x):
            return repr(x)
        if x is Ellipsis:
            return "..."
        if kind is tuple:
            inner = ", ".join(self.literal(i, names) for i in x)
            return f"({inner}{',' if len(x) == 1 else ''})"
        if kind is list:
            return "[" + ", ".join(self.literal(i, names) for i in x) + "]"
        if kind is dict and all(type(k) is str for k in x):
            return "{" + ", ".join(f"{k!r}: {self.literal(v, names)}" for k, v in x.items()) + "}"
        if kind is slice and all(p is None or type(p) is int for p in (x.start, x.stop, x.step)):
            return f"slice({x.start!r}, {x.stop!r}, {x.step!r})"
        return self.ref(x, "k")

    def call(
        self, func: Any, args: Any, kwargs: Any, names: dict[int, str], first: str = ""
    ) -> str:
        """``f3(v1, 2.0, axis=1)``; ``first`` is source text put before the arguments.

        A product runs as in eager, on the BLAS threads its size calls for (``eager_product``).
        """
        func = eager_product(func)
        parts = [first] if first else []
        parts += [self.literal(a, names) for a in args]
        parts += [f"{k}={self.literal(v, names)}" for k, v in kwargs.items()]
        return f"{self.ref(func, 'f')}({', '.join(parts)})"


def generate(graph: Graph) -> Program:
    """Generate, compile and return the replay function of ``graph``."""
    em = Emitter()
    names: dict[int, str] = {}
    body: list[str] = []
    _prologue(graph, em, names, body)
    _save_streams(graph, em, body)
    line_nodes: list[Node | None] = [None] * len(body)
    for i, node in enumerate(graph.nodes):
        lines = statements(node, i, em, names)
        body.extend(lines)
        line_nodes.extend([node] * len(lines))
    body.extend(_release(graph, names))
    body.append(f"return {output_text(graph.outputs, em, names)}")
    source = "def replay(A, T):\n" + "".join(f"    {line}\n" for line in body)
    filename = f"<sadl.compile {graph.name} #{next(_counter)}>"
    program = Program(source, em.namespace, filename)
    program.line_nodes = line_nodes
    return program


def _save_streams(graph: Graph, em: Emitter, body: list[str]) -> None:
    """A guard after a draw: save the generators' states first, so a fallback to eager draws
    the numbers the replay drew (the eager stream stays the stream).
    """
    drawn = False
    own: list[str] = []  # generators of the function's own (rng=generator)
    for node in graph.nodes:
        if node.kind == "draw" and "seed" not in node.meta:
            drawn = True
            gen = node.meta["generator"]
            if gen is not None:
                own.append(em.ref(gen, "g"))
        elif node.kind == "guard" and drawn:
            em.namespace["_rng"] = True
            em.namespace["_restore"] = _restore_streams
            em.namespace["_rng_state"] = get_rng_state
            mine = "".join(f"{g}, " for g in dict.fromkeys(own))
            body.append(f"_rng = (_rng_state(), [(g, g.bit_generator.state) for g in ({mine})])")
            return


def _restore_streams(saved: tuple[Any, list[tuple[Any, Any]]]) -> None:
    """Put sadl's generators (host and devices) and the function's own back as saved."""
    set_rng_state(saved[0])
    for gen, state in reversed(saved[1]):
        gen.bit_generator.state = state


def _name_entry(v: Value, em: Emitter, names: dict[int, str], body: list[str]) -> None:
    """Arguments and gradients are read per call; captured arrays are globals (by identity)."""
    assert v.entry is not None
    kind, what = v.entry
    if kind == "arg":
        names[v.index] = f"v{v.index}"
        body.append(f"v{v.index} = A[{what}]")
    elif kind == "grad":
        names[v.index] = f"v{v.index}"
        holder = f"T[{what[1]}]" if isinstance(what, tuple) else em.ref(what(), "t")
        body.append(f"v{v.index} = {holder}.grad")
    else:
        names[v.index] = em.ref(what, "e")


def _prologue(graph: Graph, em: Emitter, names: dict[int, str], body: list[str]) -> None:
    """Check the trace's assumptions, then name every value that is not computed by a node."""
    checks(graph, em, body)
    name_entries(graph, em, names, body)


def _same(a: Any, b: Any) -> bool:
    """A name still holds what it held while tracing (numbers: the same type and value)."""
    return a is b or (type(a) is type(b) and not hasattr(a, "shape") and repr(a) == repr(b))


def _name_checks(graph: Graph, em: Emitter, body: list[str]) -> None:
    em.namespace["_same"] = _same
    for kind, holder, key, obj in graph.meta.get("name_guards", ()):
        if kind == "self":
            continue  # the object itself: held by the function
        what = f"{em.ref(holder, 'h')}"
        if kind == "global":
            read = f"{what}.get({key!r})"
        elif kind == "cell":
            read = f"{what}.cell_contents"
        elif kind == "item" and isinstance(holder, list):
            read = f"({what}[{key}] if len({what}) > {key} else None)"
        elif kind == "item":
            read = f"{what}.get({em.literal(key, {})})"
        else:
            read = f"{what}.__dict__.get({key!r})"
        test = f"{read} is not {em.ref(obj, 'k')}"
        if isinstance(obj, bool | int | float | complex | str | bytes):
            test = f"not _same({read}, {em.ref(obj, 'k')})"
        body.append(f"if {test}: raise Stale({f'{key} was rebound'!r})")


def checks(graph: Graph, em: Emitter, body: list[str]) -> None:
    """Lines checking what the trace assumed (raising ``Stale``)."""
    _name_checks(graph, em, body)
    for ref, array in graph.meta.get("data_guards", ()):
        tensor = ref()
        if tensor is not None:
            t, a = em.ref(tensor, "t"), em.ref(array, "e")
            body.append(f"if {t}.data is not {a}: raise Stale('the data of a tensor was replaced')")
    for i, array in graph.meta.get("captured_args", ()):
        body.append(
            f"if A[{i}] is not {em.ref(array, 'e')}: "
            "raise Stale('an argument is no longer the array a name holds')"
        )
    for ref, value in graph.meta.get("grad_guards", ()):
        holder = f"T[{ref[1]}]" if isinstance(ref, tuple) else em.ref(ref(), "t")
        if value is None:
            body.append(f"if {holder}.grad is not None: raise Stale('a .grad is no longer None')")
        else:
            body.append(f"if {holder}.grad is None: raise Stale('a .grad is now None')")
    for ref, flag in graph.meta.get("requires_grad_guards", ()):
        tensor = ref()
        if tensor is not None:
            body.append(
                f"if {em.ref(tensor, 't')}.requires_grad is not {flag}: "
                "raise Stale('requires_grad of a tensor changed')"
            )
    for ref, flag in graph.meta.get("training_guards", ()):
        module = em.ref(ref(), "m")
        body.append(
            f"if {module}.training is not {flag}: "
            f"raise Stale('{type(ref()).__name__}.training changed')"
        )
    for array, before in graph.meta.get("resets", ()):
        em.namespace.setdefault("_copyto", np.copyto)
        body.append(f"_copyto({em.ref(array, 'e')}, {em.ref(before, 's')})  # made anew per call")
    for node in graph.nodes:
        check = node.meta.get("check")
        if check is not None:
            holds, reason = check
            body.append(f"if not {em.ref(holds, 'f')}(): raise Stale({reason!r})")


def name_entries(graph: Graph, em: Emitter, names: dict[int, str], body: list[str]) -> None:
    """Name every value the replay reads without computing it (lines reading arguments)."""
    produced = {v.index for n in graph.nodes for v in n.outputs}
    used = used_values(graph)
    for v in graph.values:
        if v.index in produced or v.index not in used:
            continue
        if v.array is not None:
            names[v.index] = em.ref(v.array, "c")
        elif v.entry is not None:
            _name_entry(v, em, names, body)


def statements(node: Node, index: int, em: Emitter, names: dict[int, str]) -> list[str]:
    custom = node.meta.get("emit")
    if custom is not None:
        return custom(node, em, names)  # type: ignore[no-any-return]
    kind = node.kind
    if kind == "call" or kind == "draw":
        first = ""
        if kind == "draw":
            gen, where = node.meta["generator"], node.meta.get("device")
            if where is not None:  # the device's generator of the moment (manual_seed renews it)
                first = f"_generator({em.ref(where, 'd')})"
            else:
                first = "_default_generator()" if gen is None else em.ref(gen, "g")
            if "seed" in node.meta:  # seeded from an int in the call: a new generator per call
                first = f"r{node.meta['fresh']}"
                if first not in names.values():
                    names[-node.meta["fresh"]] = first
                    made = f"{first} = _seeded({node.meta['seed']!r})"
                    return [
                        made,
                        *_assign(
                            node, em.call(node.func, node.args, node.kwargs, names, first), names
                        ),
                    ]
        lines = _assign(node, em.call(node.func, node.args, node.kwargs, names, first), names)
        save = node.meta.get("save", ())  # a later rng_restore sets the stream back to here
        before = [f"_s{id(node)}b = {first}.bit_generator.state"] if "before" in save else []
        after = [f"_s{id(node)}a = {first}.bit_generator.state"] if "after" in save else []
        return before + lines + after
    if kind == "rng_restore":
        gen = node.meta["generator"]
        owner = "_default_generator()" if gen is None else em.ref(gen, "g")
        saved = f"_s{id(node.meta['target'])}{node.meta['when'][0]}"
        return [f"{owner}.bit_generator.state = {saved}"]
    if kind == "seed":
        em.namespace["_manual_seed"] = manual_seed
        return [f"_manual_seed({node.meta['seed']!r})"]
    if kind == "guard":
        source = node.meta["source"]
        test = em.call(source.func, source.args, source.kwargs, names)
        negate = "not " if node.meta["expected"] else ""
        undo = "_restore(_rng); " if "_rng" in em.namespace else ""
        return [f"if {negate}{test}: {undo}raise GuardFailed({index})"]
    if kind == "set_grad" or kind == "set_data":
        holder = _tensor(node.meta["tensor"], em)
        if holder is None:
            return []
        attr = "grad" if kind == "set_grad" else "data"
        value = _escaping(node.reads[0], names) if node.reads else "None"
        if kind == "set_data" and node.reads and node.reads[0].storage.kind != "temp":
            value = names[node.reads[0].index]  # t.data += 1: the same array, as in eager
        elif kind == "set_data" and node.reads and node.reads[0].scalar:
            value = f"{value}[()]"  # t.data = (a call that returned a NumPy scalar), as in eager
        return [f"{holder}.{attr} = {value}"]
    if kind == "set_training":
        module = node.meta["module"]
        return [f"{em.ref(module, 'm')}.training = {module.training!r}"]
    if kind == "version":
        return [f"{em.ref(node.meta['versions'], 'n')}[0] += {node.meta['n']}"]
    if kind == "optimizer":
        runner = node.meta.get("runner")
        if runner is None:
            step, optimizer = node.meta["step"], node.meta["optimizer"]
            return [f"{em.ref(step, 'f')}({em.ref(optimizer, 'o')})"]
        return [f"{em.ref(runner, 'f')}()"]
    raise AssertionError(f"unknown node kind {kind!r}")


def _assign(node: Node, text: str, names: dict[int, str]) -> list[str]:
    outs = node.outputs
    if not outs:
        return [text]
    for v in outs:
        names[v.index] = f"v{v.index}"
    if len(outs) == 1:
        v = outs[0]
        if v.scalar and "out=" not in text:
            return [f"v{v.index} = _asarray({text})"]
        return [f"v{v.index} = {text}"]
    return [f"{', '.join(f'v{v.index}' for v in outs)} = {text}"]


def _tensor(ref: Any, em: Emitter) -> str | None:
    if isinstance(ref, tuple):
        return f"T[{ref[1]}]"
    tensor = ref()
    return None if tensor is None else em.ref(tensor, "t")


def _escaping(v: Value, names: dict[int, str]) -> str:
    """A value handed out of the call: constants are copied (never share compiled memory)."""
    name = names[v.index]
    return f"{name}.copy()" if v.storage.const or v.storage.kind == "external" else name


def _release(graph: Graph, names: dict[int, str]) -> list[str]:
    return []


def output_text(tree: Any, em: Emitter, names: dict[int, str]) -> str:
    if type(tree) is Value:
        return _escaping(tree, names)
    if type(tree) is AsTensor:
        return f"_tensor({_escaping(tree.value, names)})"
    if type(tree) is ObjectResult:
        fields = {k: v for k, v in tree.fields.items()}
        return f"_rebuild({em.ref(tree.proto, 'k')}, {output_text(fields, em, names)})"
    if isinstance(tree, tuple):
        inner = ", ".join(output_text(x, em, names) for x in tree)
        if type(tree) is not tuple:  # a namedtuple: its fields positionally
            return f"{em.ref(type(tree), 'k')}({inner})"
        return f"({inner}{',' if len(tree) == 1 else ''})"
    if isinstance(tree, list):
        return "[" + ", ".join(output_text(x, em, names) for x in tree) + "]"
    if isinstance(tree, dict):
        items = ", ".join(
            f"{em.literal(k, names)}: {output_text(v, em, names)}" for k, v in tree.items()
        )
        return "{" + items + "}"
    return em.literal(tree, names)


def entry_values(graph: Graph) -> list[Value]:
    """Values the replay reads without computing them (arguments, captured arrays, grads)."""
    produced = {v.index for n in graph.nodes for v in n.outputs}
    return [v for v in graph.values if v.index not in produced and v.entry is not None]


def used_values(graph: Graph) -> set[int]:
    """Indices of every value some node or output reads."""
    used = {v.index for n in graph.nodes for v in n.reads}
    used |= {v.index for v in iter_values(graph.outputs)}
    return used
