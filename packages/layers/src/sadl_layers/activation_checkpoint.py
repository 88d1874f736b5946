"""Activation checkpointing: ``sadl.checkpoint(fn, *args)`` keeps no activations of ``fn``.

The forward runs ``fn`` normally, so the graph is the real one (parameters captured in ``fn``,
tensors from outside it, ``sadl.grad`` and ``create_graph`` all work as without checkpointing),
but every node recorded inside ``fn`` gives its saved arrays up when ``fn`` returns (not as it
is recorded: an in-place write on a slice, ``h[0] += 1``, rebases the graph from arrays of
nodes recorded before it, and a backward inside ``fn`` needs them too). The first time backward
needs one of them, ``fn`` runs again on the same inputs, with sadl's random generator put back
where it was, and every node of the original call gets its arrays back from the node recorded at
the same position of the recomputation. This is PyTorch's non-reentrant checkpoint; the engine's
part is :func:`sadl.plugins.recording_hook` and a node's ``refill`` (core's backward calls it).
It lives in sadl-layers; ``sadl.checkpoint`` serves it.

Peak memory then holds the inputs of each checkpointed block and the activations of one block at
a time; the price is one more forward of every block during backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sadl import Tensor, enable_grad, is_grad_enabled
from sadl.plugins import recording_hook
from sadl.random import get_rng_state, set_rng_state

__all__ = ["checkpoint"]

Node = Any  #: a recorded op (``Tensor.grad_fn``): op, params, datas, out, refill


def checkpoint(
    fn: Callable[..., Any],
    *args: Any,
    preserve_rng_state: bool = True,
    determinism_check: str = "default",
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)``, with its activations recomputed in backward instead of kept.

    ``fn`` must compute the same thing when it runs again: randomness drawn from sadl's default
    generator (dropout, ``sadl.rand``) is replayed (``preserve_rng_state=True``); randomness from
    a generator of your own is not. ``determinism_check="default"`` compares the recomputed
    shapes, dtypes and outputs with the first run and raises if they differ; ``"none"`` skips
    that. Under ``no_grad`` (or when nothing requires grad) it is just ``fn(*args, **kwargs)``.
    """
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"checkpoint: determinism_check must be 'default' or 'none', got {determinism_check!r}"
        )
    if not callable(fn):
        raise TypeError(f"checkpoint: fn must be callable, got {type(fn).__name__}")
    if not is_grad_enabled():
        return fn(*args, **kwargs)
    frame = _Frame(fn, args, kwargs, preserve_rng_state, determinism_check == "default")
    with recording_hook(frame.note):
        outputs = fn(*args, **kwargs)
    frame.drop(outputs)
    return outputs


class _Frame:
    """One checkpointed call: what is needed to run it again, and the nodes waiting for it."""

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        preserve_rng_state: bool,
        check: bool,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = get_rng_state() if preserve_rng_state else None
        self.check = check
        self.recorded: list[tuple[str, tuple[int, ...], Any]] = []  # op, out shape, out dtype
        self.nodes: list[Node] = []  # the nodes fn records, only while fn runs
        self.refillable: set[int] = set()  # positions of the nodes that wait for a refill
        self.outputs: list[tuple[int, Any]] = []  # (position, data) of fn's outputs
        self.recomputed: dict[int, Node] | None = None

    def note(self, node: Node) -> None:
        """``recording_hook``: note the node; its arrays stay until fn returns (see drop)."""
        self.recorded.append(_signature(node))
        self.nodes.append(node)

    def drop(self, outputs: Any) -> None:
        """After ``fn`` returns: let the arrays of its nodes go, and tell each how to refill.

        Not at record time: an in-place write on a slice (``h[0] += 1``) reads arrays of nodes
        recorded before it (the ``getitem`` under the view) to rebase the graph, and with them
        dropped the forward would record another graph than the recomputation. The arrays
        therefore live until fn returns, which the recomputation in backward holds anyway.
        """
        # A node a backward inside fn freed stays freed (going through it again raises, as
        # without checkpointing); the others wait for the recomputation.
        position = {id(node): k for k, node in enumerate(self.nodes) if node.datas is not None}
        if self.check:  # fn's outputs (alive anyway downstream), to compare a recomputation with
            for t in _tensors_in(outputs):
                k = position.get(id(t.grad_fn)) if t.grad_fn is not None else None
                if k is not None:
                    self.outputs.append((k, t.data))
        for k in position.values():
            node = self.nodes[k]
            node.datas = None
            node.out = None
            node.refill = _Refill(self, k)
        self.refillable = set(position.values())
        self.nodes = []

    def refill(self, k: int, node: Node) -> None:
        """Give ``node`` (position ``k``) its arrays back, recomputing ``fn`` when needed."""
        if self.recomputed is None or k not in self.recomputed:
            self.recomputed = self.recompute()
        source = self.recomputed.pop(k)
        node.datas = source.datas
        node.out = source.out
        if not self.recomputed:
            self.recomputed = None  # every node had its arrays: let the recomputation go

    def recompute(self) -> dict[int, Node]:
        """Run fn again (same inputs, same random numbers) and collect the nodes it records."""
        collected: list[Node] = []
        seen: list[tuple[str, tuple[int, ...], Any]] = []  # as recorded (a backward in fn frees)

        def collect(node: Node) -> None:
            collected.append(node)
            seen.append(_signature(node))

        now = get_rng_state() if self.rng_state is not None else None
        try:
            if self.rng_state is not None:
                set_rng_state(self.rng_state)
            with enable_grad(), recording_hook(collect):
                self.fn(*self.args, **self.kwargs)
        finally:
            if now is not None:
                set_rng_state(now)
        if self.check:
            self._compare(collected, seen)
        elif len(collected) < len(self.recorded):
            raise RuntimeError(
                _DIFFERENT + f" (ops recorded: {len(self.recorded)} then {len(collected)})"
            )
        return {k: node for k, node in enumerate(collected) if k in self.refillable}

    def _compare(self, collected: list[Node], seen: list[tuple[str, tuple[int, ...], Any]]) -> None:
        if len(collected) != len(self.recorded):
            raise RuntimeError(
                f"{_DIFFERENT}: the first run recorded {len(self.recorded)} ops, the "
                f"recomputation {len(collected)}"
            )
        for k, ((name, shape, dtype), (name2, shape2, dtype2)) in enumerate(
            zip(self.recorded, seen)
        ):
            if name2 != name or shape2 != shape or dtype2 != dtype:
                raise RuntimeError(
                    f"{_DIFFERENT}: op {k} was {name} -> {dtype}{list(shape)}, recomputed "
                    f"{name2} -> {dtype2}{list(shape2)}"
                )
        for k, first in self.outputs:
            if not first.size:
                continue
            again = collected[k].out
            # The test is one array-level bool (under sadl.compile a guard, not a value read).
            diff = np.max(np.abs(again - first))
            tolerance = np.sqrt(np.finfo(first.dtype).eps) * np.maximum(np.max(np.abs(first)), 1)
            if not bool(diff <= tolerance):  # NaN differences fail too
                raise RuntimeError(
                    f"{_DIFFERENT}: an output of fn changed by up to {float(diff):.3g} "
                    f"(tolerance {float(tolerance):.3g})"
                )


_DIFFERENT = (
    "checkpoint: recomputing fn in backward did not repeat the first run (is fn deterministic? "
    "randomness must come from sadl's default generator, and nothing fn reads may change "
    "between forward and backward; determinism_check='none' turns this check off)"
)


class _Refill:
    """``Node.refill`` of a checkpointed node: position ``k`` of its frame."""

    __slots__ = ("frame", "k")

    def __init__(self, frame: _Frame, k: int) -> None:
        self.frame = frame
        self.k = k

    def __call__(self, node: Node) -> None:
        self.frame.refill(self.k, node)


def _signature(node: Node) -> tuple[str, tuple[int, ...], Any]:
    """What a recomputation must repeat of a node: its op, output shape and dtype."""
    return node.op.name, node.out.shape, node.out.dtype


def _tensors_in(value: Any) -> list[Tensor]:
    """The Tensors in fn's return value (a Tensor, or lists, tuples and dicts of them)."""
    found: list[Tensor] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            found.append(item)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found
