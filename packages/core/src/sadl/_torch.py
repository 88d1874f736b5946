"""PyTorch's top-level spellings: ``sadl.cat``, ``sadl.topk``, ``sadl.float32``, ``sadl.long``, ...

``sadl`` serves these names through its module ``__getattr__`` (so they never shadow Python's
``float``/``int``/``bool`` inside sadl's own code), with torch's signatures (``dim``,
``keepdim``, ``diagonal``). The dtypes are NumPy's scalar types, so they work wherever a dtype
is accepted (``sadl.zeros(3, dtype=sadl.long)``, ``t.astype(sadl.float64)``,
``t.dtype == sadl.float32``). ``MISSING`` answers a torch name sadl lacks with the nearest
spelling sadl has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sadl import ops
from sadl._grad_mode import enable_grad, no_grad
from sadl._tensor import Tensor
from sadl.random import generator as _generator

#: torch's dtype names: NumPy's own (float32, int64, ...) and torch's short ones (float, long, ...).
DTYPES: dict[str, Any] = {
    **{n: getattr(np, n) for n in "float32 float64 float16 int8 int16 int32 int64 uint8".split()},
    **{"complex64": np.complex64, "complex128": np.complex128, "bool": np.bool_},
    **{"float": np.float32, "double": np.float64, "half": np.float16, "short": np.int16},
    **{"int": np.int32, "long": np.int64, "cfloat": np.complex64, "cdouble": np.complex128},
}

#: torch names sadl lacks -> the nearest sadl spelling (the AttributeError says it).
MISSING: dict[str, str] = {
    "bfloat16": "NumPy has no bfloat16; use sadl.float16 or sadl.float32",
    "autocast": "sadl has no mixed-precision autocast; cast with model.half() or t.astype()",
    "jit": "use sadl.compile (from sadl-compile) traces and replays a step",
    "Generator": "use numpy.random.Generator (pass rng=) or sadl.random.generator(device)",
    "randn_like": "use sadl.randn(*t.shape, dtype=t.dtype)",
    "rand_like": "use sadl.rand(*t.shape, dtype=t.dtype)",
    "empty_like": "use sadl.zeros_like(t)",
    "utils": "use sadl.data (batches, train_val_split, windows) and sadl.checkpoint",
    "distributed": "use sadl_distributed (the sadl-distributed package)",
    "set_float32_matmul_precision": "drop the call: NumPy's float32 matmul has one precision",
    "unfold": "use sadl.ops.unfold, which is im2col (F.unfold), not torch.Tensor.unfold",
}

__all__ = [
    "argmax",
    "argmin",
    "cat",
    "concat",
    "concatenate",
    "flatten",
    "from_numpy",
    "inference_mode",
    "is_tensor",
    "multinomial",
    "numel",
    "randperm",
    "stack",
    "topk",
    "tril",
    "triu",
    "where",
]


def cat(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    """Join tensors along an existing axis ``dim`` (``torch.cat``)."""
    return ops.concatenate(*tensors, axis=dim)  # type: ignore[no-any-return]


concat = concatenate = cat


def stack(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    """Join tensors along a new axis ``dim``."""
    return ops.stack(*tensors, axis=dim)  # type: ignore[no-any-return]


def _tensor(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def argmax(input: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (of the flattened tensor when ``dim`` is None)."""
    return _tensor(input).argmax(axis=dim, keepdims=keepdim)


def argmin(input: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (of the flattened tensor when ``dim`` is None)."""
    return _tensor(input).argmin(axis=dim, keepdims=keepdim)


def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes ``start_dim`` .. ``end_dim`` into one."""
    return _tensor(input).flatten(start_dim, end_dim)


def numel(input: Any) -> int:
    """Number of elements."""
    return int(_tensor(input).size)


def is_tensor(obj: Any) -> bool:
    """True for a sadl Tensor."""
    return isinstance(obj, Tensor)


def from_numpy(ndarray: np.ndarray[Any, Any]) -> Tensor:
    """A Tensor sharing ``ndarray``'s memory (no copy), as ``torch.from_numpy``."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(ndarray).__name__}")
    return Tensor(ndarray)


def inference_mode(mode: bool = True) -> no_grad | enable_grad:
    """``torch.inference_mode``: sadl's ``no_grad()`` (a context manager and a decorator).

    sadl has no separate inference tensors; ``inference_mode(False)`` is ``enable_grad()``.
    """
    return no_grad() if mode else enable_grad()


def topk(input: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    """The ``k`` largest (or smallest) values along ``dim`` and their indices."""
    return ops.topk(_tensor(input), k, dim, largest, sorted)


def tril(input: Any, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes (the rest zeroed)."""
    return ops.tril(_tensor(input), k=diagonal)  # type: ignore[no-any-return]


def triu(input: Any, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes (the rest zeroed)."""
    return ops.triu(_tensor(input), k=diagonal)  # type: ignore[no-any-return]


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """``input`` where ``condition`` holds, else ``other``."""
    return ops.where(condition, input, other)  # type: ignore[no-any-return]


def randperm(n: int, *, dtype: Any = np.int64, device: Any = None) -> Tensor:
    """A random permutation of ``0 .. n - 1`` from sadl's CPU generator (``sadl.manual_seed``)."""
    order = np.argsort(_generator("cpu").random(n))
    return Tensor(order.astype(dtype), device=device)


def multinomial(
    input: Any, num_samples: int, replacement: bool = False, *, generator: Any = None
) -> Tensor:
    """Draw ``num_samples`` category indices per row of non-negative weights ``input``.

    Rows need not sum to one. Without ``replacement`` each category is drawn at most once (by
    the Gumbel-top-k trick); more samples than non-zero weights is an error, as in torch. The
    draws come from sadl's CPU generator (``sadl.manual_seed``), or from a NumPy ``generator``
    given here; they differ from torch's stream. The result is on the input's device.
    """
    t = _tensor(input)
    weights = t.numpy()  # drawn on the host: a few numbers per row, then copied back
    if weights.ndim not in (1, 2):
        raise ValueError(f"multinomial: input must be 1-d or 2-d, got shape {t.shape}")
    if (weights < 0).any() or not np.isfinite(weights).all():
        raise ValueError("multinomial: weights must be finite and non-negative")
    rows = weights.reshape(-1, weights.shape[-1])
    rng = generator if generator is not None else _generator("cpu")
    u = rng.random(rows.shape if not replacement else (rows.shape[0], num_samples))
    if replacement:
        cdf = np.cumsum(rows, axis=-1)
        total = cdf[:, -1:]
        if (total <= 0).any():
            raise ValueError("multinomial: a row of weights sums to zero")
        picks = np.stack([np.searchsorted(c, x * s) for c, x, s in zip(cdf, u, total[:, 0])])
    else:
        if (np.count_nonzero(rows, axis=-1) < num_samples).any():
            raise ValueError(
                f"multinomial: cannot draw {num_samples} samples without replacement from a "
                "row with fewer non-zero weights"
            )
        with np.errstate(divide="ignore"):
            keys = np.log(rows) - np.log(-np.log(np.clip(u, 1e-300, 1.0)))
        picks = np.argsort(-keys, axis=-1, kind="stable")[:, :num_samples]
    picks = np.minimum(picks, rows.shape[-1] - 1).astype(np.int64)
    return Tensor(picks.reshape(*weights.shape[:-1], num_samples), device=t.device)


def served(name: str) -> Any:
    """``sadl.<name>`` for one of this module's names: a dtype or a function (else None)."""
    if name in DTYPES:
        return DTYPES[name]
    return globals()[name] if name in __all__ else None


def missing(name: str) -> str | None:
    """The message for a torch name sadl lacks, or None if it is not a known torch name."""
    hint = MISSING.get(name)
    return None if hint is None else f"sadl has no {name!r} (torch.{name}): {hint}"
