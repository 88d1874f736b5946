"""Linear, Embedding, Dropout, Flatten and Identity (torch.nn names, parameters and shapes)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sadl.random
from sadl import Parameter, Tensor
from sadl.backends import is_array, to_device

from sadl_layers.modules._base import (
    Layer,
    as_tensor,
    check_count,
    fan_in_bound,
    init_uniform,
    param_dtype,
    resolve_generator,
)
from sadl_layers.ops import dense as _ops

__all__ = ["Linear", "Embedding", "Dropout", "Flatten", "Identity"]


class Linear(Layer):
    """``y = x @ weight.T + bias`` over any leading axes.

    ``Linear(in_features, out_features, bias=True, *, rng=None, dtype=None)``; SADL's
    keywords ``dim_in=`` / ``dim_out=`` work too. ``weight`` has shape ``(out, in)`` and ``bias``
    ``(out,)``, both drawn from U(-1/sqrt(in), 1/sqrt(in)) (torch's default) with the generator
    ``rng`` (a ``numpy.random.Generator``, an int seed, or None for sadl's default generator).
    """

    def __init__(
        self,
        in_features: int | None = None,
        out_features: int | None = None,
        bias: bool = True,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
        dim_in: int | None = None,
        dim_out: int | None = None,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        in_features = _either("in_features", in_features, "dim_in", dim_in)
        out_features = _either("out_features", out_features, "dim_out", dim_out)
        self.in_features = check_count("Linear", "in_features", in_features, minimum=0)
        self.out_features = check_count("Linear", "out_features", out_features, minimum=0)
        gen = resolve_generator(rng)
        bound = fan_in_bound(self.in_features)
        self.weight = init_uniform(gen, bound, (self.out_features, self.in_features), dtype)
        self.bias = init_uniform(gen, bound, (self.out_features,), dtype) if bias else None

    def forward(self, x: Any) -> Tensor:
        """Apply the layer to ``x`` of shape ``(..., in_features)``."""
        shape = np.shape(x) if not isinstance(x, Tensor) else x.shape
        if not shape or shape[-1] != self.in_features:
            raise self.fail(f"input has shape {tuple(shape)}, expected (..., {self.in_features})")
        out: Tensor = self.call_op(_ops.linear, x, self.weight, self.bias)
        return out

    def extra_repr(self) -> str:
        """Sizes and whether there is a bias."""
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


def _either(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    if value is not None and alias_value is not None:
        raise TypeError(f"Linear: give {name} or {alias}, not both")
    chosen = value if value is not None else alias_value
    if chosen is None:
        raise TypeError(f"Linear: missing {name} (or SADL's {alias})")
    return chosen


class Embedding(Layer):
    """A lookup table: integer ids of any shape -> rows of ``weight`` (num_embeddings, dim).

    ``weight`` is drawn from N(0, 1) as in torch. Repeated ids accumulate their gradients.
    With ``padding_idx`` that row starts at zero and receives no gradient.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        self.num_embeddings = check_count("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = check_count("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx={padding_idx} must be in "
                    f"[-{self.num_embeddings}, {self.num_embeddings})"
                )
            padding_idx = int(padding_idx) % self.num_embeddings
        self.padding_idx = padding_idx
        data = resolve_generator(rng).standard_normal((self.num_embeddings, self.embedding_dim))
        if padding_idx is not None:
            data[padding_idx] = 0.0
        self.weight = Parameter(data.astype(dtype))

    def forward(self, ids: Any) -> Tensor:
        """The rows of ``weight`` at ``ids`` (an int array or int Tensor): shape ``(*ids, dim)``."""
        data = ids.data if isinstance(ids, Tensor) else ids
        if not is_array(data):
            data = np.asarray(data)
        data = to_device(data, self.weight.device)  # ids from the host follow the table
        out: Tensor = self.call_op(_ops.embedding, self.weight, data, padding_idx=self.padding_idx)
        return out

    def extra_repr(self) -> str:
        """Table size."""
        extra = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{extra}"


class Dropout(Layer):
    """Zero each element with probability ``p`` in training mode (and scale by 1/(1-p)).

    The keep-mask is drawn where the input lives, from sadl's generator of that device, so
    ``sadl.manual_seed(n)`` makes a run reproducible on a device type; a CPU run and a CUDA run
    of the same seed draw different masks (each device type has its own generator, as in
    torch). With ``rng`` (a NumPy Generator or int seed owned by this layer) the mask comes from
    that generator on the host and is copied to the device: the same mask on every device.
    In evaluation mode, or with ``p == 0``, the input passes through unchanged.
    """

    def __init__(self, p: float = 0.5, *, rng: np.random.Generator | int | None = None) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)
        self._rng = None if rng is None else resolve_generator(rng)

    def keep_mask(self, shape: tuple[int, ...], device: Any = None) -> Any:
        """A fresh boolean keep-mask of ``shape`` on ``device`` (True with probability 1 - p)."""
        if self._rng is None:  # drawn where the tensor lives
            return sadl.random.generator(device).random(shape, dtype=np.float32) >= self.p
        # This layer's own NumPy generator: drawn on the host, only the booleans travel.
        mask = self._rng.random(shape, dtype=np.float32) >= self.p
        return mask if device is None else to_device(mask, device)

    def forward(self, x: Any) -> Tensor:
        """``x`` with elements dropped (training) or unchanged (evaluation, p = 0)."""
        t = as_tensor(x)
        if not self.training or self.p == 0.0:
            return t
        mask = self.keep_mask(t.shape, t.device)
        out: Tensor = self.call_op(_ops.dropout, t, p=self.p, mask=mask)
        return out

    def extra_repr(self) -> str:
        """The drop probability."""
        return f"p={self.p}"


class Flatten(Layer):
    """Merge axes ``start_dim .. end_dim`` (default: all but the batch axis) into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = int(start_dim)
        self.end_dim = int(end_dim)

    def forward(self, x: Any) -> Tensor:
        """The flattened input."""
        t = as_tensor(x)
        nd = max(t.ndim, 1)
        start, end = self.start_dim, self.end_dim
        if not (-nd <= start < nd and -nd <= end < nd) or start % nd > end % nd:
            raise self.fail(f"cannot flatten axes {start}..{end} of an input of shape {t.shape}")
        if t.ndim == 0:
            return t.reshape(1)
        shape = t.shape
        start, end = start % nd, end % nd  # the merged size written out: an empty batch has it
        return t.reshape(*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :])

    def extra_repr(self) -> str:
        """The axes merged."""
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Layer):
    """Returns its input unchanged (a placeholder layer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        """``x`` itself."""
        return x
