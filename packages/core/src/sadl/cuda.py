"""``sadl.cuda``: the ``"cuda"`` device type (CuPy), and whether a CUDA device is usable.

``CUDA_BACKEND`` is the record core's built-in plugin registers for ``"cuda"``; CuPy is imported
only inside its functions, the first time a tensor goes to a CUDA device. sadl-core's extra
``gpu`` installs it for CUDA 12, ``gpu-cuda13`` for CUDA 13; any CuPy build (``cupy-cuda12x``,
``cupy-cuda13x``) that imports as ``cupy`` serves.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from sadl._install import install_command
from sadl._plugin_records import BackendDef
from sadl.backends import backend, parse_device
from sadl.backends import synchronize as _synchronize_device

__all__ = ["CUDA_BACKEND", "device_count", "is_available", "synchronize"]


def _cupy() -> ModuleType:
    import cupy  # type: ignore[import-not-found]

    return cupy  # type: ignore[no-any-return]


def _from_host(array: Any, index: int) -> Any:
    cp = _cupy()
    with cp.cuda.Device(index):
        return cp.asarray(array)


def _device_count() -> int:
    try:
        return int(_cupy().cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver, no device: none usable
        return 0


def _generator(seed: int | None, index: int) -> Any:
    cp = _cupy()
    with cp.cuda.Device(index):
        return cp.random.default_rng(seed)


CUDA_BACKEND = BackendDef(
    "cuda",
    module="cupy",
    array_types=("cupy.ndarray",),
    to_host=lambda array: array.get(),
    from_host=_from_host,
    device_index=lambda array: int(array.device.id),
    device_count=_device_count,
    generator=_generator,
    synchronize=lambda index: _cupy().cuda.Device(index).synchronize(),
    install_hint=lambda: (
        f"{install_command('sadl-core', extra='gpu')} (CUDA 12) or "
        f"{install_command('sadl-core', extra='gpu-cuda13')} (CUDA 13)"
    ),
)


def device_count() -> int:
    """Number of usable CUDA devices (0 without CuPy or a driver)."""
    try:
        served = backend("cuda")
    except RuntimeError:  # the array module does not import
        return 0
    return int(served.record.device_count())


def is_available() -> bool:
    """True when tensors can be moved to ``"cuda"``."""
    return device_count() > 0


def synchronize(device: str | int | None = None) -> None:
    """Wait for the work queued on a CUDA device (``"cuda:N"``, ``N`` or None for ``cuda:0``).

    CuPy launches kernels asynchronously: time a GPU step only after synchronizing.
    """
    if device is None or isinstance(device, int):
        device = f"cuda:{device or 0}"
    target = parse_device(device)
    if target.type != "cuda":
        raise ValueError(f"sadl.cuda.synchronize: {device!r} is not a CUDA device")
    _synchronize_device(target)
