"""sadl-kernels: fused numba kernels that ``sadl.compile`` puts in place of traced NumPy calls.

Installed, it needs no action: its passes run in every ``sadl.compile`` (with ``fusion=True``,
the default). ``KERNELS`` lists each kernel with the tolerance to eager it is tested against;
``SADL_KERNELS=0`` turns them all off, ``SADL_KERNELS_DISABLE=gelu,softmax`` some of them.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from sadl_kernels._jit import enabled, numba_error

__all__ = ["KERNELS", "__version__", "available", "enabled"]

try:
    __version__ = version("sadl-kernels")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

#: Kernel switch name -> what it replaces and its tested tolerance to eager (float32; float64).
KERNELS: dict[str, str] = {
    "layer_norm": "layer/RMS norm forward and backward ops: atol=rtol=2e-5; float64 1e-12",
    "softmax": (
        "the softmax and log-softmax ops (masked_softmax, masked_log_softmax, softmax, "
        "log_softmax) and their backward ops (softmax_backward, log_softmax_backward): "
        "atol=rtol=1e-5; float64 1e-13"
    ),
    "gelu": (
        "GELU (tanh form), float32 only: forward atol=rtol=1e-6, backward 5e-6 * |g| + 1e-6 * |dx|"
    ),
    "bias": "a Linear's bias-add folded into the GELU kernel that follows: bit for bit",
    "optimizer": "flat AdamW / Adam / SGD (momentum) updates: bit for bit (tolerance 0)",
}


def available() -> bool:
    """Numba imports, so the kernels can run (each may still be switched off)."""
    return not numba_error()
