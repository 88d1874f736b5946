"""Public array/device helpers for plugin authors (``sadl.backends``).

Backward rules and layers written in NumPy vocabulary run on NumPy and CuPy arrays alike; when a
plugin must allocate or move arrays itself it asks here which array module owns some data.
"""

from __future__ import annotations

from sadl.backend import (
    Device,
    array_module,
    device_of,
    is_array,
    parse_device,
    scatter_add,
    to_device,
)

__all__ = [
    "Device",
    "array_module",
    "device_of",
    "is_array",
    "parse_device",
    "scatter_add",
    "to_device",
]
