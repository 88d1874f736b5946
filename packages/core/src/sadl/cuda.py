"""``sadl.cuda``: is a CUDA device usable (CuPy installed and a GPU visible)?"""

from __future__ import annotations

from sadl.backends import cupy_or_none

__all__ = ["device_count", "is_available"]


def device_count() -> int:
    """Number of visible CUDA devices (0 without CuPy or a driver)."""
    cp = cupy_or_none()
    if cp is None:
        return 0
    try:
        return int(cp.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def is_available() -> bool:
    """True when tensors can be moved to ``"cuda"``."""
    return device_count() > 0
