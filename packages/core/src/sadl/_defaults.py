"""The default floating dtype: what Python floats and new parameters become (float32, as torch)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["get_default_dtype", "set_default_dtype"]

_default_dtype = np.dtype(np.float32)


def get_default_dtype() -> np.dtype[Any]:
    """The dtype given to tensors made from Python floats (float32, as in torch)."""
    return _default_dtype


def set_default_dtype(dtype: Any) -> None:
    """Set the dtype for tensors made from Python floats (``float32`` or ``float64``)."""
    global _default_dtype
    d = np.dtype(dtype)
    if d.kind != "f":
        raise TypeError(f"default dtype must be a floating dtype, got {d}")
    _default_dtype = d
