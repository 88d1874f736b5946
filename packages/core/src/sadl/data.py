"""``sadl.data``: minibatches, a train/validation split, random next-token windows, served by
sadl-layers (``sadl_layers.data``), the package every training user installs.
"""

from __future__ import annotations

from sadl._namespace import served

__getattr__ = served(
    "sadl.data", "sadl-layers", "sadl_layers.data", {"batches", "train_val_split", "windows"}
)
