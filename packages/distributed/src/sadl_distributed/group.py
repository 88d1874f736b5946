"""Process groups: the ranks that run collectives together, and what a started collective is.

A :class:`ProcessGroup` moves contiguous arrays between ranks (``all_reduce``, ``broadcast``,
``all_gather``, ``reduce_scatter``), each call returning a :class:`Work` that ``wait()`` completes.
Waiting is bounded: a rank that died is noticed (and named) within seconds, a rank that hangs
within the group's ``timeout``; neither makes the others hang.
"""

from __future__ import annotations

import abc
import os
import time
from collections.abc import Callable
from typing import Any

from sadl_distributed.errors import CollectiveTimeoutError, DistributedError

__all__ = ["DEFAULT_TIMEOUT_S", "LocalGroup", "ProcessGroup", "Work"]

#: How long a collective may wait for the other ranks (``SADL_DISTRIBUTED_TIMEOUT`` overrides).
DEFAULT_TIMEOUT_S = 300.0
#: How often a waiting rank checks that the ranks it waits for are still alive.
LIVENESS_INTERVAL_S = 0.5
#: A wait spins this long before it starts sleeping between polls (most collectives finish first).
_SPIN_S = 2e-4


class Work:
    """A started collective. ``wait()`` returns once it has completed on this rank.

    After the transfer, ``wait`` runs the collective's finishing steps (dividing for ``"mean"``,
    copying a staged buffer back into the caller's array), exactly once.
    """

    __slots__ = ("_done", "_finish", "_group", "_handle", "_what")

    def __init__(
        self,
        group: ProcessGroup,
        handle: Any,
        what: str,
        finish: Callable[[], None] | None = None,
    ) -> None:
        self._group = group
        self._handle = handle
        self._what = what
        self._finish = finish
        self._done = handle is None

    def is_completed(self) -> bool:
        """Whether the transfer has completed (polling also lets MPI make progress)."""
        if not self._done:
            self._done = self._group.test(self._handle)
        return self._done

    def then(self, step: Callable[[], None]) -> Work:
        """Run ``step()`` after the transfer, at ``wait()`` (after any earlier steps)."""
        before = self._finish
        if before is None:
            self._finish = step
        else:

            def both() -> None:
                before()
                step()

            self._finish = both
        return self

    def wait(self) -> None:
        """Block until the transfer has completed, then run the finishing steps."""
        if not self._done:
            self._group.wait(self._handle, self._what)
            self._done = True
        finish, self._finish = self._finish, None
        if finish is not None:
            finish()


class ProcessGroup(abc.ABC):
    """A set of ranks that run the same collectives in the same order.

    The array methods take contiguous NumPy (or, for the NCCL group, CuPy) arrays and work in
    place or into ``out``; ``sadl_distributed.all_reduce`` and friends are the user-facing
    functions that also take Tensors, strided arrays and every dtype.
    """

    backend: str
    rank: int
    size: int
    local_rank: int  #: this rank's index among the ranks on the same machine
    local_size: int
    timeout: float
    #: The error that left this rank unable to go on (a dead or hung peer), or None.
    broken: BaseException | None = None

    @abc.abstractmethod
    def all_reduce(self, buffer: Any, op: str) -> Work:
        """Combine ``buffer`` over every rank with ``op`` (sum, max, min, prod), in place."""

    @abc.abstractmethod
    def broadcast(self, buffer: Any, src: int) -> Work:
        """Overwrite ``buffer`` on every rank with rank ``src``'s."""

    @abc.abstractmethod
    def all_gather(self, buffer: Any, out: Any) -> Work:
        """``out[r]`` = rank ``r``'s ``buffer``; ``out`` has shape ``(size, *buffer.shape)``."""

    @abc.abstractmethod
    def reduce_scatter(self, buffer: Any, out: Any, op: str) -> Work:
        """Reduce ``buffer`` (``size`` equal chunks on axis 0); rank r gets chunk r in ``out``."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Return once every rank has called ``barrier``."""

    def test(self, handle: Any) -> bool:
        """Whether the transfer ``handle`` has completed (never blocks)."""
        return True

    def check_peers(self, what: str) -> None:
        """Raise :class:`RankFailedError` if a rank this one may wait for is known to be dead."""
        return None  # a group without peers has nobody to check

    def failure_reported(self) -> bool:
        """Whether the launcher has said that a process of the job died (checked every poll)."""
        return False

    def abort(self, code: int = 1) -> None:
        """End every rank of the job now (after an unrecoverable error on this one)."""
        os._exit(code)

    def close(self) -> None:
        """Free the group's resources (MPI itself stays initialized until the process exits)."""
        return None  # nothing held by default

    def wait(self, handle: Any, what: str) -> None:
        """Poll ``handle`` until it completes, watching the other ranks while waiting.

        Spins briefly, then sleeps with a growing pause (so a rank that waits for a slower one
        leaves the CPU to it); every ``LIVENESS_INTERVAL_S`` it checks that the ranks it waits
        for are alive, and after ``timeout`` seconds it gives up with a clear error.
        """
        if self.test(handle):
            return
        try:
            self._poll(handle, what)
        except DistributedError as exc:
            self.broken = exc  # the job cannot go on: at exit, end it instead of finalizing
            raise
        self.broken = None  # a caught timeout that a retry got past

    def _poll(self, handle: Any, what: str) -> None:
        start = time.monotonic()
        next_check = start + LIVENESS_INTERVAL_S
        pause = 0.0
        while not self.test(handle):
            now = time.monotonic()
            if now - start < _SPIN_S:
                continue
            time.sleep(pause)
            pause = min(max(2 * pause, 2e-5), 2e-3)
            if now >= next_check or self.failure_reported():
                self.check_peers(what)
                next_check = now + LIVENESS_INTERVAL_S
                if now - start > self.timeout:
                    raise CollectiveTimeoutError(
                        f"rank {self.rank}: {what} did not complete within {self.timeout:g} s: "
                        "another rank is stuck, much slower, or on a machine that went away "
                        "(raise the limit with init(timeout=...) or SADL_DISTRIBUTED_TIMEOUT)"
                    )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.size} ({self.backend})>"


class LocalGroup(ProcessGroup):
    """A world of one process: every collective is a copy at most. Needs no MPI."""

    backend = "local"

    def __init__(self, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.rank, self.size = 0, 1
        self.local_rank, self.local_size = 0, 1
        self.timeout = timeout

    def all_reduce(self, buffer: Any, op: str) -> Work:
        """Nothing to combine: the buffer already holds the result."""
        return Work(self, None, "all_reduce")

    def broadcast(self, buffer: Any, src: int) -> Work:
        """Rank 0 is the only source there is."""
        if src != 0:
            raise ValueError(f"broadcast: src={src} does not exist in a world of 1 process")
        return Work(self, None, "broadcast")

    def all_gather(self, buffer: Any, out: Any) -> Work:
        """``out[0] = buffer``."""
        out[0] = buffer
        return Work(self, None, "all_gather")

    def reduce_scatter(self, buffer: Any, out: Any, op: str) -> Work:
        """The one chunk is the whole buffer."""
        out[...] = buffer
        return Work(self, None, "reduce_scatter")

    def barrier(self) -> None:
        """Nobody to wait for."""
