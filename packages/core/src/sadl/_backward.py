"""The autograd engine, backward half: walk the recorded nodes from the output to the leaves.

``run_backward`` sorts the nodes ``sadl._engine.apply`` recorded (iteratively, so a 100,000-op
chain is fine), calls each op's backward rule, checks what the rule returned, sums away
broadcasting, and accumulates into the leaves' ``.grad``; ``grad`` returns the gradients instead.

Two public hooks let code run during a backward pass (distributed training overlaps its
communication with the rest of the pass this way): a leaf's post-accumulate-grad hooks run as soon
as its ``.grad`` is final for the pass, and ``queue_backward_callback`` runs a function once the
pass is finished. With no hook registered the walker takes its plain path and pays nothing.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from sadl import _engine
from sadl._engine import Node, apply, new_tensor
from sadl._engine import _hooks as _engine_hooks
from sadl._grad_mode import enable_grad
from sadl._ops.special import NO_DOUBLE_BACKWARD
from sadl._records import OpDef
from sadl._tensor_base import TensorBase
from sadl.backends import array_module, is_array

if TYPE_CHECKING:
    from sadl._tensor import Tensor

__all__ = [
    "RemovableHandle",
    "backward",
    "grad",
    "queue_backward_callback",
    "register_post_accumulate_grad_hook",
    "run_backward",
]

# --------------------------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------------------------


def backward(tensor: Tensor, grad: Any, retain_graph: bool, create_graph: bool) -> None:
    """``tensor.backward(...)``: accumulate its gradient into every leaf's ``.grad``."""
    seed = _seed_grad(tensor, grad, create_graph, "backward()")
    run_backward(
        [tensor], [seed], retain_graph=retain_graph or create_graph, create_graph=create_graph
    )


def run_backward(
    roots: Sequence[Tensor],
    root_grads: Sequence[Any],
    *,
    retain_graph: bool,
    create_graph: bool,
    targets: Sequence[Tensor] | None = None,
) -> list[Any] | None:
    """Push ``root_grads`` from ``roots`` down the graph.

    Without ``targets`` the gradients accumulate into the leaves' ``.grad`` (``Tensor.backward``);
    with ``targets`` their gradients are returned instead and no ``.grad`` is touched
    (``sadl.grad``), and only nodes that lead to a target run their rules. Callbacks queued
    during the pass (``queue_backward_callback``) run when it has finished. The walk: toposort
    (a node is ready once all its consumers ran) -> rule -> accumulate.
    """
    with _backward_pass():
        grads: dict[Any, Any] = {}  # Node or leaf Tensor -> gradient of its output so far
        for tensor, g in zip(roots, root_grads):
            key = tensor._node if tensor._node is not None else tensor
            grads[key] = grads[key] + g if key in grads else g
        pending = _count_consumers(grads)
        wanted = _nodes_leading_to(targets, pending) if targets is not None else None
        hooked = _hooked_leaf_uses(pending) if _hooks.count and targets is None else None
        copied: set[int] = set()  # ids of gradient arrays already handed to a leaf
        ready = [n for n, count in pending.items() if count == 0]
        while ready:
            node = ready.pop()
            g = grads.pop(node, None)
            if g is not None and (wanted is None or node in wanted):
                if node.datas is None:
                    _refill(node)  # a checkpointed node recomputes; one freed by a backward raises
                if node.retained is not None and (kept := node.retained()) is not None:
                    kept.grad = g if kept.grad is None else kept.grad + g  # retain_grad()
                if targets is not None:
                    grads[("target", node)] = g
                if wanted is None or any(p in wanted for p in node.parents):
                    for p, gi in zip(node.parents, _input_grads(node, g, create_graph, wanted)):
                        if gi is not None:
                            grads[p] = grads[p] + gi if p in grads else gi
                if not retain_graph:
                    node.datas = node.out = node.refill = None
                elif node.refill is not None:
                    node.datas = node.out = None  # checkpointed: drop the recomputed arrays again
            for p in node.parents:
                if type(p) is Node:
                    left = pending[p] - 1
                    pending[p] = left
                    if not left:
                        ready.append(p)
                elif hooked and p in hooked:  # one use of a hooked leaf done; after the last,
                    hooked[p] -= 1  # its .grad is final: accumulate (and run its hooks) now
                    if hooked[p] == 0 and p in grads:
                        _accumulate(p, grads.pop(p), copied)
        if targets is not None:
            return [grads.get(("target", t._node) if t._node is not None else t) for t in targets]
        for leaf, g in grads.items():
            if isinstance(leaf, TensorBase):
                _accumulate(leaf, g, copied)
        return None


def _refill(node: Node) -> None:
    """Give ``node`` its saved arrays back: a checkpointed node recomputes them."""
    if node.refill is not None:
        node.refill(node)
    if node.datas is None:
        raise RuntimeError(
            f"trying to backward through the graph a second time (op {node.op.name!r}): "
            "its saved arrays were freed by the first backward; pass retain_graph=True "
            "to the first call if you need to go through it again"
        )


def _count_consumers(roots: dict[Any, Any]) -> dict[Node, int]:
    """Every node reachable from ``roots``, with how many recorded consumers it has."""
    stack = [key for key in roots if type(key) is Node]
    pending: dict[Node, int] = dict.fromkeys(stack, 0)
    while stack:
        for p in stack.pop().parents:
            if type(p) is Node:
                if p in pending:
                    pending[p] += 1
                else:
                    pending[p] = 1
                    stack.append(p)
    return pending


def _nodes_leading_to(targets: Sequence[Tensor], nodes: dict[Node, int]) -> set[Any]:
    """The nodes (and target leaves) whose backward can reach one of ``targets``: one pass.

    A node is wanted when it is a target's producer or one of its parents is wanted. Visiting
    every node after its parents (an iterative post-order walk) decides each one exactly once.
    """
    wanted: set[Any] = {t._node if t._node is not None else t for t in targets}
    done: set[Node] = set()
    for start in nodes:
        if start in done:
            continue
        stack: list[tuple[Node, bool]] = [(start, False)]
        while stack:
            node, parents_done = stack.pop()
            if parents_done:
                if node not in wanted and any(p in wanted for p in node.parents):
                    wanted.add(node)
                done.add(node)
                continue
            if node in done:
                continue
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if type(p) is Node and p not in done)
    return wanted


def _input_grads(node: Node, g: Any, create_graph: bool, wanted: set[Any] | None) -> list[Any]:
    """Call the op's backward rule and check, shape and cast each gradient to its input."""
    op = node.op
    datas = node.datas
    assert datas is not None
    for counter, seen in zip(node.counters, node.versions):  # inline: once per node
        if counter is not None and counter[0] != seen:
            _modified_error(node)
    rules: Any = op.backward
    out = node.out
    if create_graph:
        if not op.double_backward:
            return _no_double_backward(node, g)
        inputs: tuple[Any, ...] = tuple(_saved_input(d, p) for d, p in zip(datas, node.parents))
        out = new_tensor(out, node)
        with enable_grad():
            g = g if isinstance(g, TensorBase) else new_tensor(g)
            rules = _call_rule(op, node, g, out, inputs, wanted)
    else:
        g = g.data if isinstance(g, TensorBase) else g
        hook = _engine_hooks.on_apply if _engine._active else None
        if hook is not None:
            run = lambda: _call_rule(op, node, g, out, datas, wanted)
            rules = hook(op, "backward", run, (g, out, *datas), node.params)
        elif type(rules) is not tuple or len(rules) < len(datas):
            rules = _call_rule(op, node, g, out, datas, wanted)
    # The plain path calls each input's rule here, in the loop that fits its gradient.
    called, params, grads = rules is not op.backward, node.params, []
    for i, (r, d, p) in enumerate(zip(rules, datas, node.parents)):
        gi = None
        if p is not None and (wanted is None or p in wanted):
            gi = r if called else r(g, out, *datas, **params)
            if gi is not None and (
                type(gi) is not type(d) or gi.shape != d.shape or gi.dtype != d.dtype
            ):
                gi = _fit_gradient(gi, d, op.name, i)  # (an array like its input passes as it is)
        grads.append(gi)
    return grads


def _fit_gradient(gi: Any, data: Any, op_name: str, index: int) -> Any:
    """A rule's gradient for input ``index``, checked against the input and shaped like it.

    It must be an array (or, under create_graph, a Tensor) of the input's backend, with the
    input's shape or a shape that broadcasting the input produced (summed back here). A gradient
    of lower rank or a bare scalar is a bug in the rule: it is never broadcast up.
    """
    arr = gi.data if isinstance(gi, TensorBase) else gi
    if type(arr) is not type(data):
        if isinstance(arr, np.generic):
            # NumPy turns 0-d results into scalars; gradients stay arrays.
            gi = arr = np.asarray(arr)
        if not is_array(arr) or array_module(arr) is not array_module(data):
            raise RuntimeError(
                f"backward rule of op {op_name!r} returned {type(arr).__name__} as the gradient "
                f"of input {index}; expected an array like the input ({type(data).__name__})"
            )
    shape = data.shape
    if arr.shape != shape:
        gi = _sum_to_shape(gi, arr.shape, shape, op_name, index)
    if arr.dtype != data.dtype:
        if arr.dtype.kind not in "fc":
            raise RuntimeError(
                f"backward rule of op {op_name!r} returned a {arr.dtype} gradient for input "
                f"{index} ({data.dtype}); gradients are floating point"
            )
        gi = gi.astype(data.dtype)
    return gi


def _sum_to_shape(
    g: Any, g_shape: tuple[int, ...], shape: tuple[int, ...], op_name: str, index: int
) -> Any:
    """Undo broadcasting: sum ``g`` over the axes that broadcasting added or stretched."""
    lead = len(g_shape) - len(shape)
    if lead < 0 or any(n != 1 and g_shape[lead + i] != n for i, n in enumerate(shape)):
        raise RuntimeError(
            f"backward rule of op {op_name!r} returned a gradient of shape {g_shape} for input "
            f"{index} of shape {shape}; it must have the input's shape or the broadcast "
            "output's shape"
        )
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g_shape[lead + i] != 1
    )
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return np.reshape(g, shape) if lead else g


def _call_rule(
    op: OpDef, node: Node, g: Any, out: Any, inputs: Sequence[Any], wanted: set[Any] | None
) -> Sequence[Any]:
    rule = op.backward
    parents = node.parents
    if type(rule) is tuple:
        # Extra trailing rules are allowed: they belong to optional inputs left out of this call.
        if len(rule) < len(inputs):
            raise RuntimeError(
                f"op {op.name!r} has {len(rule)} per-input backward rules for {len(inputs)} inputs"
            )
        params = node.params
        grads: list[Any] = []  # a loop, not a comprehension (a call of its own in Python 3.11)
        for f, p in zip(rule, parents):
            wanted_here = p is not None and (wanted is None or p in wanted)
            grads.append(f(g, out, *inputs, **params) if wanted_here else None)
        return grads
    assert rule is not None and not isinstance(rule, tuple)
    if op.accepts_needs_input_grad:
        needs = tuple(p is not None and (wanted is None or p in wanted) for p in parents)
        raw = rule(g, out, *inputs, needs_input_grad=needs, **node.params)
    else:
        raw = rule(g, out, *inputs, **node.params)
    if type(raw) is not tuple or len(raw) != len(inputs):
        got = f"{len(raw)} gradients" if type(raw) is tuple else f"a {type(raw).__name__}"
        raise RuntimeError(
            f"backward rule of op {op.name!r} must return a tuple with one gradient (or None) "
            f"per input: expected {len(inputs)}, got {got}"
        )
    return raw


def _modified_error(node: Node) -> None:
    """Raise for the first array of ``node`` changed in place since the op ran."""
    for i, (counter, seen) in enumerate(zip(node.counters, node.versions)):
        if counter is not None and counter[0] != seen:
            which = "its output" if i == len(node.parents) else f"input {i}"
            raise RuntimeError(
                f"one of the arrays needed to compute the gradient of op {node.op.name!r} "
                f"({which}) was modified by an in-place operation after the op ran (version "
                f"{seen} -> {counter[0]}); make a copy before modifying it, or modify it "
                "out of place"
            )


def _saved_input(data: Any, parent: Any) -> Any:
    """An input as a Tensor on the original graph (for create_graph), or the constant itself."""
    if isinstance(parent, TensorBase):
        return parent
    return new_tensor(data, parent) if type(parent) is Node else data


def _no_double_backward(node: Node, g: Any) -> list[Any]:
    """First-order gradients from an op whose rule is not differentiable, marked as such.

    The gradients are right; differentiating them once more raises a clear error (never a
    silently missing term).
    """
    assert node.datas is not None
    plain = _call_rule(node.op, node, g.data, node.out, node.datas, None)
    on_graph = tuple(_saved_input(d, p) for d, p in zip(node.datas, node.parents) if p is not None)
    if g.requires_grad:
        on_graph += (g,)
    params = {"op_name": node.op.name}
    return [
        None if gi is None else apply(NO_DOUBLE_BACKWARD, on_graph, {**params, "value": gi})
        for gi in plain
    ]


def _accumulate(leaf: TensorBase, g: Any, copied: set[int]) -> None:
    """Add this pass's gradient ``g`` into ``leaf.grad``; then run the leaf's hooks, if any."""
    old = leaf.grad
    if not isinstance(g, TensorBase):
        # A rule may hand the same array to several inputs, or a read-only broadcast view:
        # give each leaf its own writable array, as optimizers update .grad in place.
        if (i := id(g)) in copied or not (g.flags.owndata and getattr(g.flags, "writeable", True)):
            g = g.copy()
            i = id(g)
        copied.add(i)
    g = g if old is None else old + g
    leaf.grad = np.asarray(g) if isinstance(g, np.generic) else g
    if _hooks.count and (hooks := getattr(leaf, "_grad_hooks", None)):
        for hook in list(hooks.values()):
            hook(leaf)


# --------------------------------------------------------------------------------------------
# Hooks: a leaf's gradient is final; the backward pass is finished
# --------------------------------------------------------------------------------------------


class _hooks:  # noqa: N801
    count = 0  #: post-accumulate-grad hooks registered (0: the walker's plain path)


_handle_ids = itertools.count()


class RemovableHandle:
    """What registering a hook returns: ``handle.remove()`` unregisters the hook.

    It is also a context manager that removes the hook when the block ends.
    """

    __slots__ = ("_hooks", "_id")

    def __init__(self, hooks: dict[int, Any], hook_id: int) -> None:
        self._hooks: dict[int, Any] | None = hooks
        self._id = hook_id

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        if self._hooks is not None and self._hooks.pop(self._id, None) is not None:
            _hooks.count -= 1
        self._hooks = None

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def register_post_accumulate_grad_hook(
    tensor: Tensor, hook: Callable[[Tensor], Any]
) -> RemovableHandle:
    """``Tensor.register_post_accumulate_grad_hook``: see there."""
    if not callable(hook):
        raise TypeError(f"a post-accumulate-grad hook must be callable, got {type(hook).__name__}")
    if tensor._node is not None or not tensor.requires_grad:
        raise RuntimeError(
            "post-accumulate-grad hooks can only be registered on leaf tensors that require "
            "grad (such as Parameters): only leaves accumulate into .grad"
        )
    hooks = getattr(tensor, "_grad_hooks", None)
    if hooks is None:
        hooks = tensor._grad_hooks = {}
    hook_id = next(_handle_ids)
    hooks[hook_id] = hook
    _hooks.count += 1
    return RemovableHandle(hooks, hook_id)


def _hooked_leaf_uses(nodes: dict[Node, int]) -> dict[Any, int]:
    """Leaves with post-accumulate-grad hooks -> how many recorded ops use them in this graph."""
    uses: dict[Any, int] = {}
    for node in nodes:
        for p in node.parents:
            if p is not None and type(p) is not Node and getattr(p, "_grad_hooks", None):
                uses[p] = uses.get(p, 0) + 1
    return uses


class _Passes(threading.local):
    """The backward passes running in this thread, innermost last: each one's queued callbacks."""

    def __init__(self) -> None:
        self.stack: list[list[Callable[[], Any]]] = []


_passes = _Passes()


def queue_backward_callback(callback: Callable[[], Any]) -> None:
    """Run ``callback()`` once the backward pass now running (in this thread) has finished.

    Call it during a backward pass, typically from a post-accumulate-grad hook: the callback
    runs after every leaf's ``.grad`` has been written (callbacks run in the order queued, and
    may queue more). Outside a backward pass it raises ``RuntimeError``. If the pass raises,
    its queued callbacks are dropped.
    """
    if not callable(callback):
        raise TypeError(f"a backward callback must be callable, got {type(callback).__name__}")
    if not _passes.stack:
        raise RuntimeError(
            "queue_backward_callback: no backward pass is running in this thread; call it "
            "during backward (from a post-accumulate-grad hook)"
        )
    _passes.stack[-1].append(callback)


@contextmanager
def _backward_pass() -> Iterator[None]:
    """Around one pass: opens its callback queue; when the pass succeeded, runs the queue."""
    queue: list[Callable[[], Any]] = []
    _passes.stack.append(queue)
    try:
        yield
        while queue:
            queue.pop(0)()
    finally:
        _passes.stack.pop()


# --------------------------------------------------------------------------------------------
# sadl.grad
# --------------------------------------------------------------------------------------------


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[Any, ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, returned as Tensors.

    Like ``torch.autograd.grad``: ``.grad`` attributes are left untouched, ``grad_outputs`` defaults
    to ones for scalar outputs, ``retain_graph`` defaults to ``create_graph``. With
    ``create_graph=True`` the returned gradients carry their own graph, so they can be
    differentiated again. An input that the outputs do not depend on raises, unless
    ``allow_unused=True`` (then its gradient is None).

    >>> import sadl
    >>> x = sadl.tensor([1.0, 2.0], requires_grad=True)
    >>> (dx,) = sadl.grad((x ** 3).sum(), x)
    >>> dx
    Tensor([ 3., 12.])
    """
    Tensor = TensorBase
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for i, t in enumerate(ins):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(f"sadl.grad: input {i} is not a Tensor that requires grad")
    if grad_outputs is None or isinstance(grad_outputs, Tensor) or is_array(grad_outputs):
        grad_outputs = [grad_outputs] * len(outs) if grad_outputs is None else [grad_outputs]
    seeds = [_seed_grad(o, g, create_graph, "sadl.grad") for o, g in zip(outs, grad_outputs)]
    keep = create_graph if retain_graph is None else retain_graph
    found = run_backward(outs, seeds, retain_graph=keep, create_graph=create_graph, targets=ins)
    assert found is not None
    for i, g in enumerate(found):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"sadl.grad: input {i} was not used to compute the outputs; pass "
                "allow_unused=True to get None for it"
            )
    return tuple(g if g is None or isinstance(g, Tensor) else new_tensor(g) for g in found)


def _seed_grad(out: Tensor, g: Any, create_graph: bool, where: str) -> Any:
    if not out.requires_grad:
        raise RuntimeError(
            f"{where}: the output does not require grad (no input requires grad, or it was "
            "computed under no_grad), so there is nothing to differentiate"
        )
    if g is None:
        if out.data.size != 1:
            raise RuntimeError(
                f"{where}: grad can be created implicitly only for outputs with one element; "
                f"this one has shape {out.shape}, so pass a gradient of that shape"
            )
        data = out.data  # NumPy's ones without asking the backends which module it is
        return (np if type(data) is np.ndarray else array_module(data)).ones_like(data)
    if isinstance(g, TensorBase):
        seed = g if create_graph else g.data
    else:
        seed = g if is_array(g) else np.asarray(g)
    shape = seed.shape if hasattr(seed, "shape") else np.shape(seed)
    if tuple(shape) != out.shape:
        raise RuntimeError(
            f"{where}: gradient has shape {tuple(shape)} but the output has shape {out.shape}"
        )
    if not isinstance(seed, TensorBase) and seed.dtype != out.dtype:
        seed = seed.astype(out.dtype)
    return seed
