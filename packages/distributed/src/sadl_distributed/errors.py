"""The exceptions of sadl-distributed: every one names the rank, the collective and what to do."""

from __future__ import annotations

__all__ = ["CollectiveTimeoutError", "DistributedError", "MismatchError", "RankFailedError"]


class DistributedError(RuntimeError):
    """Base class: something about the process group is wrong."""


class RankFailedError(DistributedError):
    """Another rank died while this one was waiting for it."""

    def __init__(self, message: str, failed_rank: int) -> None:
        super().__init__(message)
        self.failed_rank = failed_rank


class CollectiveTimeoutError(DistributedError):
    """A collective did not complete within the group's timeout (a rank hung or is unreachable)."""


class MismatchError(DistributedError, ValueError):
    """Ranks disagree on something that must be identical (parameters, data, world size)."""
