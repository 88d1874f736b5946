"""The Tensor's conversions: other dtypes and devices (differentiable), and Python values.

A mixin of ``sadl._tensor.Tensor`` like the families of ``sadl._methods``: ``t.float()``,
``t.astype(dtype)``, ``t.to(device)``, then ``t.item()``, ``t.numpy()``, ``len(t)``, ``float(t)``,
``bool(t)`` and py-sadl's ``t.copy_to_device(device)``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from sadl._engine import apply as _apply
from sadl._methods import TensorLike, _cast
from sadl._ops import special as _sp
from sadl.backends import Device, device_of, parse_device, to_device

if TYPE_CHECKING:
    from sadl._tensor import Tensor

__all__ = ["ConversionMethods"]


class ConversionMethods:
    """Other dtypes and devices; casts between float dtypes and device moves are differentiable."""

    __slots__ = ()

    float = _cast(np.float32, "Cast to float32.")
    double = _cast(np.float64, "Cast to float64.")
    half = _cast(np.float16, "Cast to float16.")
    long = _cast(np.int64, "Cast to int64.")
    int = _cast(np.int32, "Cast to int32.")
    bool = _cast(np.bool_, "Cast to bool.")

    def astype(self: TensorLike, dtype: Any, copy: builtins.bool = True) -> Tensor:
        """The values as ``dtype`` (differentiable between float dtypes)."""
        dtype = np.dtype(dtype)
        if not copy and dtype == self.dtype:
            return cast("Tensor", self)
        return _apply(_sp.ASTYPE, (self,), {"dtype": dtype})

    def to(self: TensorLike, device: str | Device | None = None, dtype: Any = None) -> Tensor:
        """A copy on ``device`` and/or as ``dtype``; differentiable.

        >>> import sadl
        >>> sadl.tensor([1, 2]).to(dtype="float64").dtype
        dtype('float64')
        """
        out = cast("Tensor", self)
        if isinstance(device, type | np.dtype):  # t.to(sadl.float64): a dtype first, as torch
            device, dtype = None, device
        if dtype is not None and np.dtype(dtype) != self.dtype:
            out = out.astype(dtype)
        if device is not None:
            source, target = device_of(out.data), parse_device(device)
            if source != target:
                params = {"device": str(target), "source": str(source)}
                out = _apply(_sp.TO_DEVICE, (out,), params)
        return out

    def cpu(self: TensorLike) -> Tensor:
        """This tensor on the CPU."""
        return self.to("cpu")

    def cuda(self: TensorLike, index: builtins.int = 0) -> Tensor:
        """This tensor on CUDA device ``index``."""
        return self.to(f"cuda:{index}")

    # Python values: numbers, lists, NumPy arrays, truth, length, iteration
    def item(self: TensorLike) -> Any:
        """The single value as a Python number.

        >>> import sadl
        >>> sadl.tensor([2.5]).item()
        2.5
        """
        if self.data.size != 1:
            raise ValueError(
                f"item(): only one-element tensors can become a Python number, shape {self.shape}"
            )
        return self.data.item()

    def numpy(self: TensorLike) -> np.ndarray[Any, Any]:
        """The data as a NumPy array (copied to the host from a GPU; shared on the CPU).

        >>> import sadl
        >>> sadl.tensor([1.0, 2.0]).numpy()
        array([1., 2.], dtype=float32)
        """
        return to_device(self.data, "cpu")  # type: ignore[no-any-return]

    def tolist(self: TensorLike) -> Any:
        """The data as nested Python lists."""
        return self.numpy().tolist()

    def __len__(self: TensorLike) -> builtins.int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return len(self.data)

    def __iter__(self: TensorLike) -> Iterator[Tensor]:
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self.data)))

    def __float__(self: TensorLike) -> builtins.float:
        return float(self.item())

    def __int__(self: TensorLike) -> builtins.int:
        return int(self.item())

    def __index__(self: TensorLike) -> builtins.int:
        if self.data.dtype.kind not in "iub":
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return int(self.item())

    def __bool__(self: TensorLike) -> builtins.bool:
        if self.data.size != 1:
            raise ValueError(
                f"the truth value of a tensor with {self.data.size} elements is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.data.item())

    def copy_to_device(self: TensorLike, device: str | Device | builtins.int) -> Tensor:
        """py-sadl's name for ``to(device)`` (an int N is ``"cuda:N"``)."""
        return self.to(device)  # type: ignore[arg-type]
