"""``SadlFormatError``: the one exception a malformed file raises."""

from __future__ import annotations

import os

__all__ = ["SadlFormatError"]


class SadlFormatError(ValueError):
    """A file (or byte string) is not a valid ``.sadl`` or ``.safetensors`` file.

    The message names the file and, where it is known, the byte offset of the field that is wrong.
    The parts are also attributes: ``path`` (a string, ``"<bytes>"`` for in-memory data),
    ``offset`` (an int, or None when the underlying reader does not report one) and ``reason``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        offset: int | None,
        reason: str,
        *,
        format: str = ".sadl",
    ) -> None:
        self.path = os.fspath(path)
        self.offset = offset
        self.reason = reason
        self.format = format
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{self.path}: invalid {format} file{where}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle support (multiprocessing hands exceptions between processes)."""
        return (_rebuild, (self.path, self.offset, self.reason, self.format))


def _rebuild(path: str, offset: int | None, reason: str, format: str) -> SadlFormatError:
    return SadlFormatError(path, offset, reason, format=format)
