"""The idx format of MNIST and Fashion-MNIST, plain or gzip-compressed.

An idx file is two zero bytes, a type code, the number of dimensions, each dimension as a
big-endian ``u32``, then the C-order data. The file is untrusted input: the header is checked
against the bytes present, so a damaged file is a clear :class:`IdxFormatError`, never a huge
allocation or a silently short array.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import numpy as np

from sadl_layers.datasets._missing import DatasetNotFoundError

__all__ = ["FASHION_MNIST_DIR", "IdxFormatError", "fashion_mnist", "read_idx"]

#: Where the Debian package ``dataset-fashion-mnist`` installs its four files.
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
_INSTALL = (
    "install the Debian package dataset-fashion-mnist (sudo apt-get install "
    "dataset-fashion-mnist), or pass root= a folder holding the four idx files of "
    "https://github.com/zalandoresearch/fashion-mnist"
)
# The idx type codes; multi-byte types are big-endian.
_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IdxFormatError(ValueError):
    """An idx file whose header or length is wrong (the message names the file)."""


def read_idx(path: str | os.PathLike[str]) -> np.ndarray[Any, Any]:
    """The array stored in the idx file ``path`` (``.gz`` is decompressed), native byte order."""
    p = Path(path)
    if not p.is_file():
        raise DatasetNotFoundError(f"{p}: no such idx file")
    raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _TYPES:
        raise IdxFormatError(f"{p}: not an idx file (bad magic {raw[:4].hex()})")
    ndim = raw[3]
    start = 4 + 4 * ndim
    if len(raw) < start:
        raise IdxFormatError(f"{p}: header of {ndim} dimensions is cut short")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, 4))
    dtype = np.dtype(_TYPES[raw[2]])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - start != expected:
        raise IdxFormatError(
            f"{p}: shape {shape} needs {expected} bytes of data, the file holds {len(raw) - start}"
        )
    data = np.frombuffer(raw, dtype, offset=start).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def fashion_mnist(
    split: str = "train", root: str | os.PathLike[str] | None = None
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Fashion-MNIST's ``"train"`` (60,000) or ``"test"`` (10,000) images and labels.

    Returns ``(images, labels)``: ``uint8`` images of shape ``(n, 28, 28)`` (0-255) and
    ``int64`` labels 0-9. ``root`` defaults to :data:`FASHION_MNIST_DIR`.
    """
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ValueError(f"fashion_mnist: split must be 'train' or 'test', got {split!r}")
    folder = FASHION_MNIST_DIR if root is None else Path(root)
    arrays = []
    for kind in ("images-idx3", "labels-idx1"):
        name = f"{prefix}-{kind}-ubyte"
        found = [folder / n for n in (name + ".gz", name) if (folder / n).is_file()]
        if not found:
            raise DatasetNotFoundError(f"Fashion-MNIST: {folder / name}.gz is missing: {_INSTALL}")
        arrays.append(read_idx(found[0]))
    images, labels = arrays
    if images.ndim != 3 or labels.shape != images.shape[:1]:
        raise IdxFormatError(
            f"Fashion-MNIST in {folder}: images {images.shape} and labels {labels.shape} differ"
        )
    return images, labels.astype(np.int64)
