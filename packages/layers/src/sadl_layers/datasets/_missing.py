"""The one error every dataset loader raises for data that is not on this machine."""

from __future__ import annotations

__all__ = ["DatasetNotFoundError"]


class DatasetNotFoundError(FileNotFoundError):
    """A data file is absent; the message names the package or command that provides it.

    Loaders never download: the data is installed by the user (a Debian package, a wheel, a
    file fetched once), and this error says how.
    """
