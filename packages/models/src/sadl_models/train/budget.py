"""Check a GPT's sizes before anything is allocated: the config's types, and a memory estimate.

A checkpoint is a file from elsewhere: its model config is checked key by key before the model
is built (``n_embd = 200000`` would otherwise start allocating 894 GiB), and so are the sizes of
a new run. The estimate counts float32 weights (with their gradients and the two AdamW moments
when training), the activations a step keeps for backward, and the KV cache when generating. It
is compared with the machine's physical memory: the limit a run cannot pass.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from sadl_models.train.config import TrainError

__all__ = [
    "check_fits_in_memory",
    "check_model_config",
    "estimate_bytes",
    "format_bytes",
    "physical_memory",
]

_INTS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")
_KEYS = frozenset({*_INTS, "dropout", "bias"})
_FLOAT_BYTES = 4


def check_model_config(config: Any, where: str) -> dict[str, Any]:
    """A saved GPT config (``GPT.config``) with every entry checked; TrainError otherwise."""
    if not isinstance(config, Mapping):
        raise TrainError(f"{where}: the model config is {type(config).__name__}, not a mapping")
    missing, unknown = sorted(_KEYS - set(config)), sorted(set(config) - _KEYS, key=str)
    if missing or unknown:
        raise TrainError(
            f"{where}: the model config does not describe a GPT (missing {missing}, unknown "
            f"{unknown})"
        )
    for name in _INTS:
        value = config[name]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise TrainError(f"{where}: model {name} must be a positive integer, got {value!r}")
    if config["n_embd"] % config["n_head"]:
        raise TrainError(
            f"{where}: model n_embd={config['n_embd']} is not divisible by "
            f"n_head={config['n_head']}"
        )
    dropout = config["dropout"]
    if (
        isinstance(dropout, bool)
        or not isinstance(dropout, int | float)
        or not 0.0 <= dropout < 1.0
    ):
        raise TrainError(f"{where}: model dropout must be a number in [0, 1), got {dropout!r}")
    if not isinstance(config["bias"], bool):
        raise TrainError(f"{where}: model bias must be true or false, got {config['bias']!r}")
    return dict(config)


def estimate_bytes(config: Mapping[str, Any], *, batch: int, training: bool) -> int:
    """About how many bytes a GPT of ``config`` needs for a step (or to generate), in float32."""
    V, T, L, H, C = (int(config[name]) for name in _INTS)
    weights = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    if training:
        # weights, gradients, two AdamW moments; per layer the step keeps ~16 values per
        # position and channel (layer norms, qkv, MLP), the attention probabilities, and logits
        kept = batch * T * (L * (16 * C + 2 * H * T) + 3 * V)
        return _FLOAT_BYTES * (4 * weights + kept)
    cache = 2 * L * batch * T * C  # keys and values of every layer
    return _FLOAT_BYTES * (weights + cache + batch * T * (4 * C + V))


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_fits_in_memory(estimate: int, what: str, hint: str) -> None:
    """TrainError when ``estimate`` bytes exceed the physical memory (the limit)."""
    limit = physical_memory()
    if limit is not None and estimate > limit:
        raise TrainError(
            f"{what} would need about {format_bytes(estimate)} of memory, more than this "
            f"machine's {format_bytes(limit)}; {hint}"
        )


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    if n < 1024:
        return f"{int(n)} B"
    exponent = min(int(math.log(n, 1024)), 6)
    return f"{n / 1024**exponent:.1f} {('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB')[exponent]}"
