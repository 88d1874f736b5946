"""A GPT-2 style language model with a KV cache for generation.

The layout and parameter names follow nanoGPT (``transformer.wte``, ``transformer.wpe``,
``transformer.h.0.ln_1``, ``attn.c_attn``, ``attn.c_proj``, ``ln_2``, ``mlp.c_fc``, ``mlp.c_proj``,
``transformer.ln_f``, ``lm_head``), so a nanoGPT/PyTorch state dict loads by name. The output
projection ``lm_head`` is tied to the token embedding: one Parameter, one optimizer slot.

Generation keeps each layer's keys and values (the KV cache), so a new token costs one pass of
one position through the network instead of a re-run over the whole context.

``checkpoint_activations=True`` trains with ``sadl.checkpoint`` around every block: a block keeps
only its input during the forward and runs again during backward, so the activations of one
block at a time are alive instead of all of them (less memory, one more forward's worth of time).
The result is the same, bit for bit, dropout included.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from sadl import Tensor, is_grad_enabled, no_grad
from sadl.backends import array_module, is_array, to_device
from sadl.nn import Module
from sadl.random import resolve_generator
from sadl_layers import CausalSelfAttention, Dropout, Embedding, LayerNorm, Linear, checkpoint
from sadl_layers.ops import (
    cross_entropy,
    gelu,
    layer_norm,
    linear,
)

__all__ = [
    "GPT",
    "Block",
    "CausalSelfAttention",
    "KVCache",
    "MLPBlock",
    "sample_next",
]


class KVCache:
    """Keys and values of every layer for the current context window (generation only).

    ``keys[i]`` / ``values[i]`` are preallocated arrays of shape ``(batch, n_head, block_size,
    head_dim)``; the first ``length`` positions are filled.
    """

    def __init__(
        self, n_layer: int, batch: int, n_head: int, block_size: int, head_dim: int, like: Any
    ) -> None:
        xp = array_module(like)
        shape = (batch, n_head, block_size, head_dim)
        self.keys = [xp.zeros(shape, dtype=like.dtype) for _ in range(n_layer)]
        self.values = [xp.zeros(shape, dtype=like.dtype) for _ in range(n_layer)]
        self.length = 0
        self.block_size = block_size

    def store(self, layer: int, k: Any, v: Any) -> tuple[Tensor, Tensor]:
        """Write ``k``/``v`` (batch, n_head, new, head_dim) at ``length``; return all so far."""
        start, stop = self.length, self.length + k.shape[2]
        if stop > self.block_size:
            raise RuntimeError(
                f"KV cache overflow: {stop} positions for a block size of {self.block_size}"
            )
        self.keys[layer][:, :, start:stop] = k
        self.values[layer][:, :, start:stop] = v
        return Tensor(self.keys[layer][:, :, :stop]), Tensor(self.values[layer][:, :, :stop])

    def slot(self, layer: int) -> _Slot:
        """This cache as layer ``layer`` sees it: ``store(k, v)`` writes that layer's keys and
        values (sadl-layers' ``CausalSelfAttention`` takes it as its ``cache``).
        """
        return _Slot(self, layer)


class _Slot:
    """One layer's view of a :class:`KVCache`."""

    def __init__(self, cache: KVCache, layer: int) -> None:
        self.cache, self.layer = cache, layer

    def store(self, k: Any, v: Any) -> tuple[Tensor, Tensor]:
        """Keep ``k``/``v`` for this layer; every key and value so far."""
        return self.cache.store(self.layer, k, v)


class MLPBlock(Module):
    """The feed-forward part of a block: ``c_fc`` (C -> 4C), GELU (tanh form), ``c_proj``."""

    def __init__(
        self,
        n_embd: int,
        bias: bool = True,
        dropout: float = 0.0,
        *,
        rng: np.random.Generator | None = None,
        dropout_rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__()
        self.c_fc = Linear(n_embd, 4 * n_embd, bias=bias, rng=rng)
        self.c_proj = Linear(4 * n_embd, n_embd, bias=bias, rng=rng)
        self.dropout = Dropout(dropout, rng=dropout_rng)

    def forward(self, x: Tensor) -> Tensor:
        """(..., C) -> (..., C)."""
        h = gelu(linear(x, self.c_fc.weight, self.c_fc.bias), approximate="tanh")
        out: Tensor = self.dropout(linear(h, self.c_proj.weight, self.c_proj.bias))
        return out


class Block(Module):
    """A pre-LayerNorm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(
        self,
        n_embd: int,
        n_head: int,
        bias: bool = True,
        dropout: float = 0.0,
        *,
        rng: np.random.Generator | None = None,
        dropout_rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias=bias)
        self.attn = CausalSelfAttention(
            n_embd, n_head, bias, dropout, rng=rng, dropout_rng=dropout_rng
        )
        self.ln_2 = LayerNorm(n_embd, bias=bias)
        self.mlp = MLPBlock(n_embd, bias, dropout, rng=rng, dropout_rng=dropout_rng)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0) -> Tensor:
        """(batch, time, C) -> (batch, time, C)."""
        x = x + self.attn(_ln(self.ln_1, x), None if cache is None else cache.slot(layer))
        out: Tensor = x + self.mlp(_ln(self.ln_2, x))
        return out


def _ln(module: LayerNorm, x: Tensor) -> Tensor:
    out: Tensor = layer_norm(x, module.weight, module.bias, eps=module.eps)
    return out


class _SameMasks:
    """``block(h)``, the first time drawing dropout masks as usual and keeping them, every later
    time (a checkpoint's recomputation) handing out the same masks in the same order.
    """

    def __init__(self, block: Block) -> None:
        self.block = block
        self.dropouts = [m for m in block.modules() if isinstance(m, Dropout)]
        self.masks: list[Any] = []
        self.calls = 0

    def __call__(self, h: Tensor) -> Tensor:
        self.calls += 1
        again = iter(self.masks) if self.calls > 1 else None

        def keep_mask(drop: Dropout, shape: tuple[int, ...], device: Any = None) -> Any:
            if again is not None:
                return next(again)
            mask = Dropout.keep_mask(drop, shape, device)
            self.masks.append(mask)
            return mask

        for drop in self.dropouts:  # an instance attribute shadows the method while we run
            drop.keep_mask = functools.partial(keep_mask, drop)  # type: ignore[method-assign]
        try:
            out: Tensor = self.block(h)
        finally:
            for drop in self.dropouts:
                del drop.keep_mask
        return out


class _Transformer(Module):
    """The trunk: embeddings, blocks, final norm (named as in nanoGPT)."""

    def __init__(
        self,
        vocab_size: int,
        block_size: int,
        n_layer: int,
        n_head: int,
        n_embd: int,
        dropout: float,
        bias: bool,
        rng: np.random.Generator,
        dropout_rng: np.random.Generator | None,
    ) -> None:
        super().__init__()
        self.wte = Embedding(vocab_size, n_embd, rng=rng)
        self.wpe = Embedding(block_size, n_embd, rng=rng)
        self.drop = Dropout(dropout, rng=dropout_rng)
        self.h = [
            Block(n_embd, n_head, bias, dropout, rng=rng, dropout_rng=dropout_rng)
            for _ in range(n_layer)
        ]
        self.ln_f = LayerNorm(n_embd, bias=bias)


def _host(value: Any) -> np.ndarray[Any, Any]:
    """A state-dict value (Tensor, NumPy/CuPy array, CPU torch tensor) as a NumPy array."""
    data = value.data if isinstance(value, Tensor) else value
    return to_device(data, "cpu") if is_array(data) else np.asarray(data)  # type: ignore[no-any-return]


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise ValueError(f"GPT: {name} must be a positive integer, got {value!r}")
    return int(value)


class GPT(Module):
    """A GPT-2 style language model.

    ``GPT(vocab_size, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=True, *,
    rng=None)`` (the defaults are ``sadl.models.create("gpt")``'s; autodidact's ``vocab=`` is
    accepted for ``vocab_size``).
    ``model(idx, targets=None) -> (logits, loss)``: ``idx`` is (batch, time) integer token ids
    with time <= ``block_size``; ``logits`` is (batch, time, vocab_size) and ``loss`` the mean
    cross-entropy against ``targets`` (same shape as ``idx``; -100 is ignored), or None.
    Initialization follows GPT-2: weights normal(0, 0.02), the residual projections scaled by
    1/sqrt(2 * n_layer), biases zero, LayerNorms one/zero. ``rng`` (a Generator or int seed)
    makes it reproducible; it also drives dropout (without it, sadl's default generator does).
    ``checkpoint_activations=True`` recomputes each block in backward instead of keeping its
    activations (``sadl.checkpoint``; same results, less memory, more time).
    """

    def __init__(
        self,
        vocab_size: int | None = None,
        block_size: int = 64,
        n_layer: int = 4,
        n_head: int = 4,
        n_embd: int = 128,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        rng: np.random.Generator | int | None = None,
        vocab: int | None = None,
        checkpoint_activations: bool = False,
    ) -> None:
        super().__init__()
        self.checkpoint_activations = bool(checkpoint_activations)
        if vocab is not None:
            if vocab_size is not None and vocab_size != vocab:
                raise TypeError("GPT: give vocab_size= or autodidact's vocab=, not both")
            vocab_size = vocab
        if vocab_size is None:
            raise TypeError("GPT: missing vocab_size (the number of distinct tokens)")
        self.vocab_size = _positive_int("vocab_size", vocab_size)
        self.block_size = _positive_int("block_size", block_size)
        self.n_layer = _positive_int("n_layer", n_layer)
        self.n_head = _positive_int("n_head", n_head)
        self.n_embd = _positive_int("n_embd", n_embd)
        if self.n_embd % self.n_head:
            raise ValueError(f"GPT: n_embd={n_embd} must be divisible by n_head={n_head}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"GPT: dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.bias = bool(bias)
        gen = resolve_generator(rng)
        # Dropout draws from ``rng`` when one is given, else from sadl's default generator
        # at call time (so ``sadl.manual_seed`` governs it, as for sadl-layers' Dropout).
        self._dropout_rng = None if rng is None else gen
        self.transformer = _Transformer(
            self.vocab_size,
            self.block_size,
            self.n_layer,
            self.n_head,
            self.n_embd,
            self.dropout,
            self.bias,
            gen,
            self._dropout_rng,
        )
        self.lm_head = Linear(self.n_embd, self.vocab_size, bias=False, rng=gen)
        self.lm_head.weight = self.transformer.wte.weight  # weight tying: one Parameter
        self._init_weights(gen)

    @property
    def config(self) -> dict[str, Any]:
        """The constructor arguments (JSON-serializable), as stored in checkpoints."""
        return {
            "vocab_size": self.vocab_size,
            "block_size": self.block_size,
            "n_layer": self.n_layer,
            "n_head": self.n_head,
            "n_embd": self.n_embd,
            "dropout": self.dropout,
            "bias": self.bias,
        }

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> Any:
        """Load parameters by name; a nanoGPT/PyTorch ``lm_head.weight`` entry is accepted.

        The output projection is tied to ``transformer.wte.weight``, so ``lm_head.weight`` is
        not a separate parameter here: when a state dict carries it (as PyTorch's does), it
        must equal the token embedding and is then skipped.
        """
        if "lm_head.weight" in state:
            state = dict(state)
            head = state.pop("lm_head.weight")
            wte = state.get("transformer.wte.weight")
            if wte is not None and not np.array_equal(_host(head), _host(wte)):
                raise ValueError(
                    "GPT.load_state_dict: lm_head.weight differs from transformer.wte.weight, "
                    "but this GPT ties the two (one parameter)"
                )
        return super().load_state_dict(state, strict)

    def extra_repr(self) -> str:
        """The configuration, shown by ``repr``."""
        return ", ".join(f"{k}={v}" for k, v in self.config.items())

    def _init_weights(self, gen: np.random.Generator) -> None:
        resid_std = 0.02 / math.sqrt(2 * self.n_layer)
        for name, p in self.named_parameters():
            data = p.data
            if name.endswith("c_proj.weight"):
                values = gen.normal(0.0, resid_std, size=data.shape)
            elif name.endswith(".weight") and (".ln_" in name or name.endswith("ln_f.weight")):
                values = np.ones(data.shape)
            elif name.endswith(".bias"):
                values = np.zeros(data.shape)
            else:  # linear and embedding weights
                values = gen.normal(0.0, 0.02, size=data.shape)
            with no_grad():
                p.copy_(array_module(data).asarray(values, dtype=data.dtype))

    # ------------------------------------------------------------------ forward
    def _check_ids(self, ids: Any, what: str) -> np.ndarray[Any, Any]:
        arr = ids.data if isinstance(ids, Tensor) else ids
        if not hasattr(arr, "dtype"):
            arr = np.asarray(arr)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"GPT: {what} must hold integer token ids, got dtype {arr.dtype}")
        if arr.ndim != 2:
            raise ValueError(f"GPT: {what} must have shape (batch, time), got {tuple(arr.shape)}")
        return arr  # type: ignore[no-any-return]

    def _trunk(self, ids: Any, pos_start: int, cache: KVCache | None) -> Tensor:
        """Hidden states after ``ln_f`` of ids (batch, time) at positions ``pos_start``..."""
        T = ids.shape[1]
        tr = self.transformer
        weight = tr.wte.weight.data
        if type(ids) is not type(weight):  # token ids follow the weights to their device
            ids = array_module(weight).asarray(ids)
        x = tr.wte(ids) + tr.wpe.weight[pos_start : pos_start + T]
        x = tr.drop(x)
        recompute = self.checkpoint_activations and cache is None and is_grad_enabled()
        for i, block in enumerate(tr.h):
            x = self._checkpointed(block, x) if recompute else block(x, cache, i)
        return _ln(tr.ln_f, x)

    def _checkpointed(self, block: Block, x: Tensor) -> Tensor:
        """``block(x)`` under ``sadl.checkpoint``, recomputed in backward with the same dropout.

        The recomputation reuses the dropout masks the first run drew (:class:`_SameMasks`), so
        it drops the same elements whichever generator drew them, also under ``sadl.compile``
        (which replays random draws, not assignments to a generator's state); and it is exact by
        construction, so checkpoint's determinism check (a value read back into Python per
        block) is left out.
        """
        run = _SameMasks(block) if self.dropout > 0.0 else block
        out: Tensor = checkpoint(run, x, preserve_rng_state=False, determinism_check="none")
        return out

    def forward(self, idx: Any, targets: Any = None) -> tuple[Tensor, Tensor | None]:
        """Logits (batch, time, vocab) and, when ``targets`` are given, the mean cross-entropy."""
        ids = self._check_ids(idx, "idx")
        B, T = ids.shape
        if self.block_size < T:
            raise ValueError(
                f"GPT: sequence of length {T} is longer than the block size {self.block_size}"
            )
        # A boolean test, not the ids' values read into Python: under sadl.compile it is a
        # guard that every replay checks again.
        if ids.size and ((ids < 0) | (ids >= self.vocab_size)).any():
            raise ValueError(
                f"GPT: token ids must be in [0, {self.vocab_size}), got values from "
                f"{int(ids.min())} to {int(ids.max())}"
            )
        x = self._trunk(ids, 0, None)
        logits = linear(x, self.lm_head.weight, None)
        if targets is None:
            return logits, None
        tgt = self._check_ids(targets, "targets")
        if tuple(tgt.shape) != (B, T):
            raise ValueError(
                f"GPT: targets must have the shape of idx {(B, T)}, got {tuple(tgt.shape)}"
            )
        if type(tgt) is not type(logits.data):  # targets follow the logits to their device
            tgt = array_module(logits.data).asarray(tgt)
        loss = cross_entropy(logits, tgt)
        return logits, loss

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        idx: Any,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        rng: np.random.Generator | int | None = None,
        use_cache: bool = True,
    ) -> np.ndarray[Any, Any]:
        """Continue ``idx`` (batch, time) or (time,) by ``max_new_tokens`` sampled tokens.

        ``temperature`` divides the logits (0 means greedy: always the most likely token);
        ``top_k`` keeps the k most likely tokens, ``top_p`` the smallest set whose probability
        reaches p (nucleus sampling). Returns the ids, prompt included, with ``idx``'s rank.

        The model sees at most ``block_size`` tokens: when the context is full, the window
        slides forward by half a block (the oldest half is dropped). With ``use_cache`` the keys
        and values of the window are kept, so each new token costs one position's pass; after a
        slide the kept half is re-encoded once. ``use_cache=False`` re-runs the window for every
        token and gives the same tokens (it exists to check that and to measure the gain).
        """
        ids = to_device(idx.data if isinstance(idx, Tensor) else idx, "cpu")  # ids live on the host
        if ids.dtype.kind not in "iu":
            raise TypeError(f"generate: idx must hold integer token ids, got dtype {ids.dtype}")
        squeeze = ids.ndim == 1
        if squeeze:
            ids = ids[None, :]
        if ids.ndim != 2 or ids.shape[1] == 0:
            raise ValueError(
                f"generate: idx must be a non-empty (batch, time) or (time,) array of ids, got "
                f"shape {tuple(np.shape(idx))}"
            )
        if int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"generate: token ids must be in [0, {self.vocab_size})")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int | np.integer):
            raise TypeError(f"generate: max_new_tokens must be an int, got {max_new_tokens!r}")
        if max_new_tokens < 0:
            raise ValueError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
        _check_sampling(temperature, top_k, top_p)
        gen = resolve_generator(rng)
        ids = ids.astype(np.int64)
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                return self._generate(
                    ids, int(max_new_tokens), temperature, top_k, top_p, gen, use_cache, squeeze
                )
        finally:
            self.train(was_training)

    def _generate(
        self,
        ids: np.ndarray[Any, Any],
        steps: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        gen: np.random.Generator,
        use_cache: bool,
        squeeze: bool,
    ) -> np.ndarray[Any, Any]:
        B = ids.shape[0]
        out = np.empty((B, ids.shape[1] + steps), dtype=np.int64)
        out[:, : ids.shape[1]] = ids
        n = ids.shape[1]
        start = max(0, n - self.block_size)  # first position of the context window
        weight = self.lm_head.weight
        cache: KVCache | None = None
        for _ in range(steps):
            if n - start > self.block_size:
                start = n - (self.block_size - self.block_size // 2)
                cache = None
            if not use_cache:
                x = self._trunk(out[:, start:n], 0, None)
            elif cache is None:
                cache = KVCache(
                    self.n_layer,
                    B,
                    self.n_head,
                    self.block_size,
                    self.n_embd // self.n_head,
                    weight.data,
                )
                x = self._trunk(out[:, start:n], 0, cache)
                cache.length = n - start
            else:
                x = self._trunk(out[:, n - 1 : n], n - 1 - start, cache)
                cache.length = n - start
            logits = linear(x[:, -1, :], weight, None).numpy()
            out[:, n] = sample_next(logits, temperature, top_k, top_p, gen)
            n += 1
        return out[0] if squeeze else out


def _check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if not isinstance(temperature, int | float) or not temperature >= 0 or temperature == math.inf:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None and (
        isinstance(top_k, bool) or not isinstance(top_k, int | np.integer) or top_k < 1
    ):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
    if top_p is not None and (not isinstance(top_p, int | float) or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1] or None, got {top_p!r}")


def sample_next(
    logits: np.ndarray[Any, Any],
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray[Any, Any]:
    """One token id per row of ``logits`` (batch, vocab), by temperature / top-k / top-p.

    ``temperature=0`` picks the most likely token (ties: the lowest id), as does ``top_k=1``.
    """
    _check_sampling(temperature, top_k, top_p)
    z = np.asarray(logits, dtype=np.float64)
    if temperature == 0 or top_k == 1:
        return np.asarray(np.argmax(z, axis=-1))
    z = z / temperature
    V = z.shape[-1]
    if top_k is not None and top_k < V:
        kth = np.partition(z, V - top_k, axis=-1)[:, V - top_k : V - top_k + 1]
        z = np.where(z < kth, -np.inf, z)
    z = z - z.max(axis=-1, keepdims=True)
    probs = np.exp(z)
    probs /= probs.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-probs, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(probs, order, axis=-1)
        before = np.cumsum(sorted_p, axis=-1) - sorted_p  # probability mass ranked above
        sorted_p = np.where(before < top_p, sorted_p, 0.0)
        probs = np.zeros_like(probs)
        np.put_along_axis(probs, order, sorted_p, axis=-1)
        probs /= probs.sum(axis=-1, keepdims=True)
    gen = resolve_generator(rng)
    cdf = np.cumsum(probs, axis=-1)
    u = gen.random(probs.shape[0])[:, None] * cdf[:, -1:]
    picked = (cdf <= u).sum(axis=-1)
    return np.asarray(np.minimum(picked, V - 1))
