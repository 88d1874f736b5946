"""Where sadl's CPU generators stand between the draws of a trace.

A replay draws from the generator of the moment, so a state the call itself sets must be set
again on every replay, relative to that call's draws, never as the numbers the trace saw:

* ``sadl.manual_seed(n)`` inside the call is replayed as itself (a ``seed`` effect);
* a state set back to where it was before or after an earlier draw of the call
  (``set_rng_state(get_rng_state())`` around draws, activation checkpointing's replay of
  dropout) becomes an ``rng_restore`` effect that puts the generator back to the state the
  replay saved at that draw;
* a NumPy generator held outside the call (``resolve_generator(g)`` of a captured ``g``) is a
  stream that outlives the call: a replay draws on from it (``held_outside``);
* any other change of a generator's state inside the call (a state made elsewhere, a draw
  behind sadl's back) is refused with a ``CompileError``: a replay could not follow it.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from sadl import CompileError
from sadl.random import default_generator

from sadl_compile.ir import Node

__all__ = ["Streams", "held_outside", "seed_of", "state_key"]


def state_key(generator: Any) -> str:
    """The state of ``generator``'s bit generator, exactly (a dict of ints, as text)."""
    return repr(generator.bit_generator.state)


def held_outside(generator: Any, arguments: Any = ()) -> bool:
    """Whether ``generator`` draws from the bit generator of a NumPy ``Generator`` that exists
    outside the call (one of the ``arguments``, or held by a global, a closure, an attribute, a
    container that something holds: ``resolve_generator(g)`` of a captured ``g``): that stream
    outlives the call, and a replay draws on from it. A bit generator made with ``generator``
    (``rng=7``), or one of a ``numpy.random.default_rng(7)`` made in the call and held only by
    its locals and the keywords of the calls it is passed to, starts anew on every call, as
    eager makes it anew.
    """
    found = gc.get_referrers(generator.bit_generator)
    owners = [g for g in found if g is not generator and isinstance(g, np.random.Generator)]
    internal = {id(found), id(owners)}
    passed = {id(a) for a in arguments}  # (no closure over owner: its cell would hold it)
    for owner in owners:
        if id(owner) in passed:
            return True
        holders = gc.get_referrers(owner)
        internal.add(id(holders))
        for holder in holders:
            if id(holder) in internal or isinstance(holder, types.FrameType):
                continue
            if isinstance(holder, dict | tuple):  # f(*a, rng=g) makes a dict that dies with it
                outer = gc.get_referrers(holder)
                internal.add(id(outer))
                if all(id(o) in internal or isinstance(o, types.FrameType) for o in outer):
                    continue
            return True
    return False


def _stream(generator: Any) -> int:
    """Which stream ``generator`` draws from: its bit generator's identity."""
    return id(generator.bit_generator)


class Streams:
    """The states of the CPU generators a trace drew from, before and after each draw."""

    def __init__(self, key: Callable[[Any], str] = state_key) -> None:
        #: a generator's state (``state_key``, run where the tracer records nothing)
        self.key = key
        default = default_generator()
        # Streams are told apart by their bit generator: two sadl Generators wrapping one
        # (resolve_generator(g) called twice on a NumPy g) are one stream.
        #: id(bit generator) -> (a generator on it, its state now, as the graph left it)
        self.last: dict[int, tuple[Any, str]] = {_stream(default): (default, key(default))}
        #: (id(bit generator), state) -> (draw node, "before" or "after") where the call had it
        self.marks: dict[tuple[int, str], tuple[Node, str]] = {}
        #: the states ``get_rng_state`` handed out inside the call (kept: told apart by identity)
        self._taken: list[dict[str, Any]] = []

    def taken(self, state: dict[str, Any]) -> None:
        """``get_rng_state()`` inside the call returned ``state``."""
        self._taken.append(state)

    def reseeded(self, generator: Any) -> None:
        """``manual_seed`` made ``generator`` the default: its stream starts here."""
        self.last[_stream(generator)] = (generator, self.key(generator))

    def jump(self, generator: Any, where: str) -> tuple[Node, str] | None:
        """The draw whose saved state ``generator`` was set back to since the graph last left
        it (None when it was not moved); raises CompileError when no draw of the call had it.
        """
        now = self.key(generator)
        seen = self.last.get(_stream(generator))
        if seen is None or seen[1] == now:
            return None
        mark = self.marks.get((_stream(generator), now))
        if mark is None:
            raise CompileError(
                f"sadl.compile: the state of a sadl generator was set inside the call (found at "
                f"{where}) to one no draw of the call had; a replay could not set it again. "
                "Set generator states (set_rng_state, bit_generator.state) outside the "
                "compiled function, or seed it with sadl.manual_seed inside"
            )
        return mark

    def setting(self, state: dict[str, Any], where: str) -> None:
        """``sadl.random.set_rng_state(state)`` inside the call: refused unless a draw of the
        call had ``state`` (a state from outside the call is not set again by a replay). A state
        taken inside the call that the generator stands at already moves nothing, on any replay
        (activation checkpointing puts it back after recomputing a forward without draws).
        """
        cpu = repr({k: v for k, v in state.items() if k != "devices"})
        key = _stream(default_generator())
        inside = any(state is s for s in self._taken) and self.last.get(key, (None, ""))[1] == cpu
        if (key, cpu) not in self.marks and not inside:
            raise CompileError(
                f"sadl.compile: set_rng_state(...) at {where} sets a state that no draw of the "
                "call had (taken outside the call); a replay could not set it again. Set it "
                "outside the compiled function, or seed with sadl.manual_seed inside"
            )

    def drew(self, generator: Any, node: Node, before: str) -> None:
        """``node`` drew from ``generator``, which stood at ``before``."""
        key = _stream(generator)
        self.marks.setdefault((key, before), (node, "before"))
        after = self.key(generator)
        self.marks.setdefault((key, after), (node, "after"))
        self.last[key] = (generator, after)

    def moved_at_end(self) -> list[tuple[Any, tuple[Node, str]]]:
        """The generators set back after the call's last draw from them, and where to."""
        out = []
        for generator, _ in list(self.last.values()):
            mark = self.jump(generator, "the end of the call")
            if mark is not None:
                out.append((generator, mark))
        return out


def seed_of(generator: Any) -> int | None:
    """The int a generator was seeded with, while it has drawn nothing yet (else None)."""
    bit = getattr(generator, "bit_generator", None)
    seq: Any = getattr(bit, "seed_seq", None)
    entropy = getattr(seq, "entropy", None)
    if type(bit) is not np.random.PCG64 or not isinstance(entropy, int) or seq.spawn_key:
        return None
    if bit.state != np.random.PCG64(entropy).state:
        return None
    return entropy
