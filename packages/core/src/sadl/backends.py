"""Devices and array modules: the only place that knows NumPy from CuPy.

Engine code never branches on the backend; it asks this module for the array module of some data
(``array_module``), the device it lives on (``device_of``) or to move it (``to_device``). CuPy is
imported on first need, so ``import sadl`` stays silent and fast where it is absent.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from sadl._known import install_command

__all__ = [
    "Device",
    "array_module",
    "cupy_or_none",
    "device_of",
    "ensure_same_device",
    "is_array",
    "match_key",
    "parse_device",
    "scatter_add",
    "scatter_reduce_into",
    "to_device",
]

_cupy: ModuleType | None = None
_cupy_checked = False


def cupy_or_none() -> ModuleType | None:
    """CuPy if it imports, else None (checked once, silently)."""
    global _cupy, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:
            _cupy = importlib.import_module("cupy")
        except Exception:
            _cupy = None
    return _cupy


@dataclass(frozen=True)
class Device:
    """Where a tensor's data lives: ``Device("cpu")`` or ``Device("cuda", 0)``."""

    type: str
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device('{self}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str | int) and not isinstance(other, bool):
            try:
                other = parse_device(other)
            except ValueError:
                return False
        if not isinstance(other, Device):
            return NotImplemented
        return self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))


CPU = Device("cpu")


def parse_device(spec: str | Device | int | None) -> Device:
    """Turn ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a Device into a Device; reject the rest.

    An int ``N`` means ``"cuda:N"``, as torch and py-sadl read it.
    """
    if spec is None:
        return CPU
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
        return Device("cuda", spec)
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
    text = spec.strip().lower()
    if text == "cpu":
        return CPU
    if text == "cuda":
        return Device("cuda", 0)
    if text.startswith("cuda:") and text[5:].isdigit():
        return Device("cuda", int(text[5:]))
    raise ValueError(f"unknown device {spec!r}: expected 'cpu', 'cuda' or 'cuda:N'")


def is_array(value: Any) -> bool:
    """True for a NumPy or CuPy ndarray."""
    if isinstance(value, np.ndarray):
        return True
    cp = _cupy
    return cp is not None and isinstance(value, cp.ndarray)


def array_module(data: Any) -> ModuleType:
    """``numpy`` or ``cupy``, whichever owns ``data``."""
    if isinstance(data, np.ndarray | np.generic) or _cupy is None:
        return np
    return _cupy if isinstance(data, _cupy.ndarray) else np


def device_of(data: Any) -> Device:
    """The Device an array lives on."""
    if isinstance(data, np.ndarray | np.generic) or _cupy is None:
        return CPU
    if isinstance(data, _cupy.ndarray):
        return Device("cuda", int(data.device.id))
    return CPU


def ensure_same_device(arrays: tuple[Any, ...] | list[Any], what: str) -> None:
    """Raise a clear error when ``arrays`` (plain values are ignored) span several devices."""
    seen: Device | None = None
    for data in arrays:
        if not is_array(data):
            continue
        dev = device_of(data)
        if seen is None:
            seen = dev
        elif dev != seen:
            raise RuntimeError(
                f"{what}: expected all tensors on one device, found {seen} and {dev}; "
                "move them with .to(device) first"
            )


def to_device(data: Any, device: str | Device | int) -> Any:
    """Copy ``data`` to ``device`` (no copy when it is already there)."""
    target = parse_device(device)
    if target.type == "cpu":
        if isinstance(data, np.ndarray):
            return data
        if _cupy is not None and isinstance(data, _cupy.ndarray):
            return _cupy.asnumpy(data)
        return np.asarray(data)
    cp = cupy_or_none()
    if cp is None:
        raise RuntimeError(
            f"device {target} needs CuPy, which is not installed: "
            f"{install_command('sadl-core', extra='gpu')}"
        )
    index = target.index or 0
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise RuntimeError(f"device {target} is not available: {exc}") from exc
    if index >= count:
        raise RuntimeError(f"device {target} is not available: found {count} CUDA device(s)")
    if isinstance(data, cp.ndarray) and data.device.id == index:
        return data
    with cp.cuda.Device(index):
        return cp.asarray(data)


def match_key(key: Any, like: Any) -> Any:
    """``key`` with NumPy index arrays moved to the device of ``like`` (no-op on the CPU)."""
    if isinstance(like, np.ndarray) or _cupy is None:
        return key
    if isinstance(key, np.ndarray):
        return _cupy.asarray(key)
    if isinstance(key, tuple):
        return tuple(_cupy.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    return key


def scatter_add(target: Any, key: Any, values: Any) -> None:
    """``target[key] += values`` where repeated indices in ``key`` all accumulate."""
    if isinstance(target, np.ndarray):
        np.add.at(target, key, values)
        return
    import cupyx  # type: ignore[import-not-found]

    cupyx.scatter_add(target, key, values)


def scatter_reduce_into(target: Any, key: Any, values: Any, ufunc: str) -> None:
    """``target[key] = ufunc(target[key], values)`` where repeated indices in ``key`` all count.

    ``ufunc`` is ``"add"``, ``"multiply"``, ``"maximum"`` or ``"minimum"`` (``np.<ufunc>.at``);
    ``key`` is a tuple of integer index arrays.
    """
    if isinstance(target, np.ndarray):
        getattr(np, ufunc).at(target, key, values)
        return
    import cupyx  # type: ignore[import-not-found]

    scatter = {"add": "scatter_add", "maximum": "scatter_max", "minimum": "scatter_min"}.get(ufunc)
    if scatter is not None:
        getattr(cupyx, scatter)(target, key, values)
        return
    _multiply_at_in_rounds(target, key, values)


def _multiply_at_in_rounds(target: Any, key: Any, values: Any) -> None:
    """``multiply.at`` for CuPy, which has none: the k-th write to each position in round k."""
    xp = array_module(target)
    positions = xp.ravel_multi_index(xp.broadcast_arrays(*key), target.shape)
    values = xp.broadcast_to(xp.asarray(values, dtype=target.dtype), positions.shape).ravel()
    positions = positions.ravel()
    order = xp.argsort(positions)
    positions, values = positions[order], values[order]
    rank = xp.arange(positions.size) - xp.searchsorted(positions, positions, side="left")
    flat = target.reshape(-1)  # a view: target is contiguous (a fresh copy in every caller)
    for k in range(int(rank.max()) + 1 if rank.size else 0):
        chosen = rank == k
        flat[positions[chosen]] *= values[chosen]
