"""A Llama-family decoder (Llama, SmolLM, Mistral without sliding windows): RMSNorm, rotary
position embedding, SwiGLU, grouped-query attention, tied or untied output, a KV cache.

Parameter names are Hugging Face's (``model.layers.0.self_attn.q_proj.weight`` ...), so a
``LlamaForCausalLM`` state dict loads by name. Queries and keys use Hugging Face's rotate-half
convention; a GGUF file's permuted Q/K rows are put back in that order when it is loaded
(:mod:`sadl_models.pretrained.loading`), as transformers' own GGUF loader does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sadl import Tensor, no_grad
from sadl.backends import to_device
from sadl.nn import Module
from sadl.random import resolve_generator
from sadl_layers import Embedding, Linear, ModuleList, RMSNorm, RotaryEmbedding
from sadl_layers.ops import linear, scaled_dot_product_attention, silu

from sadl_models.gpt import KVCache, _check_sampling, sample_next

__all__ = ["LlamaConfig", "LlamaForCausalLM"]


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama-family decoder (Hugging Face ``LlamaConfig`` field names)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    head_dim: int | None = None
    attention_bias: bool = False
    mlp_bias: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"LlamaConfig: {name} must be >= 1, got {getattr(self, name)}")
        h, kv = self.num_attention_heads, self.num_key_value_heads
        if h < 1 or kv < 1 or h % kv:
            raise ValueError(
                f"LlamaConfig: num_key_value_heads ({kv}) must divide num_attention_heads ({h})"
            )
        if self.head_dim is None and self.hidden_size % h:
            raise ValueError(
                f"LlamaConfig: hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({h})"
            )

    @property
    def dim_per_head(self) -> int:
        """``head_dim``, or ``hidden_size / num_attention_heads`` when it is not given."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return asdict(self)


class LlamaAttention(Module):
    """Grouped-query self-attention with rotary queries and keys."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        c = config
        d = c.dim_per_head
        self.n_head, self.n_kv, self.head_dim = c.num_attention_heads, c.num_key_value_heads, d
        bias = c.attention_bias
        self.q_proj = Linear(c.hidden_size, c.num_attention_heads * d, bias=bias)
        self.k_proj = Linear(c.hidden_size, c.num_key_value_heads * d, bias=bias)
        self.v_proj = Linear(c.hidden_size, c.num_key_value_heads * d, bias=bias)
        self.o_proj = Linear(c.num_attention_heads * d, c.hidden_size, bias=bias)
        self.rotary = RotaryEmbedding(d, base=c.rope_theta)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0) -> Tensor:
        """Attend over ``x`` (B, T, C); with ``cache``, also over the cached positions."""
        B, T, _ = x.shape
        offset = 0 if cache is None else cache.length
        q = self.q_proj(x).reshape(B, T, self.n_head, self.head_dim).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(B, T, self.n_kv, self.head_dim).transpose(0, 2, 1, 3)
        v = self.v_proj(x).reshape(B, T, self.n_kv, self.head_dim).transpose(0, 2, 1, 3)
        q, k = self.rotary(q, offset), self.rotary(k, offset)
        if cache is not None:  # generation (no gradient): keys and values of every position
            k, v = cache.store(layer, k.data, v.data)
        # One new query (a decode step) sees every cached key: no causal mask to build or add.
        gqa = self.n_kv != self.n_head
        y = scaled_dot_product_attention(q, k, v, causal=T > 1, enable_gqa=gqa)
        out: Tensor = self.o_proj(
            y.transpose(0, 2, 1, 3).reshape(B, T, self.n_head * self.head_dim)
        )
        return out


class LlamaMLP(Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        c = config
        self.gate_proj = Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.up_proj = Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.down_proj = Linear(c.intermediate_size, c.hidden_size, bias=c.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        """The feed-forward block."""
        out: Tensor = self.down_proj(silu(self.gate_proj(x)) * self.up_proj(x))
        return out


class LlamaDecoderLayer(Module):
    """Pre-norm block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, x: Tensor, cache: KVCache | None = None, layer: int = 0) -> Tensor:
        """One block."""
        x = x + self.self_attn(self.input_layernorm(x), cache, layer)
        out: Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out


class LlamaModel(Module):
    """Embedding, the blocks and the final norm (no output head)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size)
        self.layers = ModuleList(
            [LlamaDecoderLayer(config) for _ in range(config.num_hidden_layers)]
        )
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, ids: Any, cache: KVCache | None = None) -> Tensor:
        """Hidden states (B, T, C) of the ids (B, T)."""
        x = self.embed_tokens(ids)
        for i, block in enumerate(self.layers):
            x = block(x, cache, i)
        out: Tensor = self.norm(x)
        return out


class LlamaForCausalLM(Module):
    """A Llama-family language model: ``model(ids)`` is float32 logits (B, T, vocab).

    With ``tie_word_embeddings`` the output head is the embedding matrix itself (one
    Parameter, listed once by ``parameters()`` and ``state_dict()``). A batch of prompts of
    different lengths is padded on the right: causal attention keeps each prompt's logits
    exact at its own positions.
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else Linear(config.hidden_size, config.vocab_size, bias=False)
        )

    @property
    def output_weight(self) -> Tensor:
        """The (vocab, hidden) matrix of the output head."""
        w: Tensor = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return w

    def _ids(self, ids: Any, what: str, check_range: bool = False) -> np.ndarray[Any, Any]:
        """The ids as an int64 (B, T) host array. The range is checked by ``generate`` only:
        ``forward`` leaves it to the embedding, so that it reads no values (``sadl.compile``).
        """
        arr = np.asarray(to_device(ids.data if isinstance(ids, Tensor) else ids, "cpu"))
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{what}: ids must be integer token ids, got dtype {arr.dtype}")
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise ValueError(f"{what}: ids must be a non-empty (batch, time) or (time,) array")
        if check_range and (int(arr.min()) < 0 or int(arr.max()) >= self.config.vocab_size):
            raise ValueError(f"{what}: token ids must be in [0, {self.config.vocab_size})")
        return arr.astype(np.int64)

    def forward(self, ids: Any, cache: KVCache | None = None) -> Tensor:
        """Logits (B, T, vocab) for ids (B, T) or (T,) (then B = 1)."""
        arr = self._ids(ids, "LlamaForCausalLM")
        device = self.output_weight.device
        x = self.model(arr if device == "cpu" else to_device(arr, device), cache)
        out: Tensor = linear(x, self.output_weight, None)
        return out

    def generate(
        self,
        ids: Any,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        rng: np.random.Generator | int | None = None,
        stop_ids: tuple[int, ...] | None = None,
        on_token: Any = None,
    ) -> np.ndarray[Any, Any]:
        """Continue ``ids`` (T,) or (B, T) by up to ``max_new_tokens`` tokens (KV cache).

        ``temperature=0`` is greedy; ``top_k`` / ``top_p`` restrict sampling as in
        :func:`sadl_models.gpt.sample_next`. Generation stops early once every row has produced
        one of ``stop_ids`` (default: none). ``on_token(ids_of_this_step)`` is called after each
        step (streaming). Returns the ids, prompt included, with the input's rank.
        """
        squeeze = np.ndim(ids.data if isinstance(ids, Tensor) else ids) == 1
        arr = self._ids(ids, "generate", check_range=True)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int | np.integer):
            raise TypeError(f"generate: max_new_tokens must be an int, got {max_new_tokens!r}")
        if max_new_tokens < 0:
            raise ValueError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
        _check_sampling(temperature, top_k, top_p)
        gen = resolve_generator(rng)
        B, T = arr.shape
        c = self.config
        stops = np.asarray(tuple(stop_ids or ()), dtype=np.int64)
        out = [arr]
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                w = self.output_weight.data
                cache = KVCache(c.num_hidden_layers, B, c.num_key_value_heads,
                                T + int(max_new_tokens), c.dim_per_head, w)  # fmt: skip
                device = self.output_weight.device
                step = arr
                done = np.zeros(B, dtype=bool)
                for _ in range(int(max_new_tokens)):
                    x = self.model(step if device == "cpu" else to_device(step, device), cache)
                    cache.length += step.shape[1]
                    logits = np.asarray(to_device(linear(x[:, -1, :], w, None).data, "cpu"))
                    nxt = np.asarray(sample_next(logits, temperature, top_k, top_p, gen))
                    step = nxt.astype(np.int64)[:, None]
                    out.append(step)
                    if on_token is not None:
                        on_token(step[:, 0])
                    done |= np.isin(step[:, 0], stops)
                    if done.all():
                        break
        finally:
            self.train(was_training)
        full = np.concatenate(out, axis=1)
        return full[0] if squeeze else full

    def extra_repr(self) -> str:
        """The main sizes."""
        c = self.config
        return (
            f"layers={c.num_hidden_layers}, hidden={c.hidden_size}, heads={c.num_attention_heads}"
            f"/{c.num_key_value_heads}, vocab={c.vocab_size}, tied={c.tie_word_embeddings}"
        )
