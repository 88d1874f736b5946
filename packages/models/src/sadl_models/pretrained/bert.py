"""A BERT-family encoder (BERT, MiniLM, sentence-transformers' ``all-*`` models): word, position
and token-type embeddings, post-LN blocks, GELU, and sentence embeddings with the checkpoint's
pooling and normalisation.

Parameter names are Hugging Face's ``BertModel`` ones (``encoder.layer.0.attention.self.query
.weight`` ...), so its state dict loads by name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sadl import Tensor, no_grad
from sadl.backends import to_device
from sadl.nn import Module
from sadl_layers import Embedding, LayerNorm, Linear, ModuleList
from sadl_layers.ops import gelu, scaled_dot_product_attention

__all__ = ["BertConfig", "BertModel", "POOLING_MODES"]

#: sentence-transformers' pooling modes that :meth:`BertModel.embed` implements.
POOLING_MODES = ("mean", "cls", "max")
_ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "relu": None}


@dataclass(frozen=True)
class BertConfig:
    """The shape of a BERT encoder (Hugging Face ``BertConfig`` field names)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig: hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise ValueError(
                f"BertConfig: hidden_act {self.hidden_act!r} is not supported; supported: "
                f"{', '.join(_ACTIVATIONS)}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return asdict(self)


class _Dense(Module):
    """``dense`` (+ ``LayerNorm`` of ``x + dense(h)`` when ``norm``): BERT's output blocks."""

    def __init__(self, n_in: int, n_out: int, eps: float | None) -> None:
        super().__init__()
        self.dense = Linear(n_in, n_out)
        self.LayerNorm = None if eps is None else LayerNorm(n_out, eps=eps)

    def forward(self, h: Tensor, residual: Tensor | None = None) -> Tensor:
        out: Tensor = self.dense(h)
        if self.LayerNorm is not None:
            out = self.LayerNorm(out + residual)
        return out


class _SelfAttention(Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.n_head = c.num_attention_heads
        self.query = Linear(c.hidden_size, c.hidden_size)
        self.key = Linear(c.hidden_size, c.hidden_size)
        self.value = Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: Tensor, keep: Any) -> Tensor:
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head

        def heads(t: Tensor) -> Tensor:
            return t.reshape(B, T, H, D).transpose(0, 2, 1, 3)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        y = scaled_dot_product_attention(q, k, v, keep)
        out: Tensor = y.transpose(0, 2, 1, 3).reshape(B, T, C)
        return out


class _Attention(Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.self = _SelfAttention(c)  # Hugging Face's name: attention.self.query
        self.output = _Dense(c.hidden_size, c.hidden_size, c.layer_norm_eps)

    def forward(self, x: Tensor, keep: Any) -> Tensor:
        out: Tensor = self.output(self.self(x, keep), x)
        return out


class BertLayer(Module):
    """Post-LN block: ``LN(x + attn(x))``, then ``LN(h + W2 act(W1 h))``."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.attention = _Attention(c)
        self.intermediate = _Dense(c.hidden_size, c.intermediate_size, None)
        self.output = _Dense(c.intermediate_size, c.hidden_size, c.layer_norm_eps)
        self._approximate = _ACTIVATIONS[c.hidden_act]

    def forward(self, x: Tensor, keep: Any) -> Tensor:
        h = self.attention(x, keep)
        z = self.intermediate(h)
        z = z.relu() if self._approximate is None else gelu(z, approximate=self._approximate)
        out: Tensor = self.output(z, h)
        return out


class _Embeddings(Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, ids: Any, token_type_ids: Any) -> Tensor:
        T = ids.shape[1]
        x = self.word_embeddings(ids) + self.position_embeddings(np.arange(T)[None, :])
        out: Tensor = self.LayerNorm(x + self.token_type_embeddings(token_type_ids))
        return out


class _Encoder(Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.layer = ModuleList([BertLayer(c) for _ in range(c.num_hidden_layers)])


class BertModel(Module):
    """``model(ids, attention_mask=None, token_type_ids=None)``: the last hidden states (B, T, C).

    ``embed(texts)`` is the sentence embedding (N, C) as a float32 Tensor: the tokenizer set by
    the loader, truncation at ``max_seq_length``, then ``pooling`` over the real tokens
    (``"mean"``, ``"cls"`` or ``"max"``) and, with ``normalize``, unit length; these come from
    a sentence-transformers checkpoint's own files (``1_Pooling``, ``modules.json``).
    """

    def __init__(
        self,
        config: BertConfig,
        *,
        pooling: str = "mean",
        normalize: bool = False,
        max_seq_length: int | None = None,
        tokenizer: Any = None,
        pooler: bool = False,
    ) -> None:
        super().__init__()
        if pooling not in POOLING_MODES:
            raise ValueError(f"BertModel: pooling must be one of {POOLING_MODES}, got {pooling!r}")
        self.config = config
        self.embeddings = _Embeddings(config)
        self.encoder = _Encoder(config)
        # Hugging Face's tanh(dense(h[:, 0])) head, kept when a checkpoint has it (unused by embed).
        self.pooler = _Dense(config.hidden_size, config.hidden_size, None) if pooler else None
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.max_seq_length = int(max_seq_length or config.max_position_embeddings)
        self.tokenizer = tokenizer

    def forward(self, ids: Any, attention_mask: Any = None, token_type_ids: Any = None) -> Tensor:
        """Hidden states (B, T, hidden) of ids (B, T); ``attention_mask`` 1 = real token."""
        arr = np.asarray(to_device(ids.data if isinstance(ids, Tensor) else ids, "cpu"))
        if arr.ndim == 1:
            arr = arr[None, :]
        c = self.config
        if arr.dtype.kind not in "iu" or arr.ndim != 2:
            raise TypeError(f"BertModel: ids must be integer (batch, time), got {arr.dtype}")
        if arr.shape[1] > c.max_position_embeddings:
            raise ValueError(
                f"BertModel: {arr.shape[1]} tokens exceed max_position_embeddings "
                f"{c.max_position_embeddings}"
            )
        types = np.zeros_like(arr) if token_type_ids is None else np.asarray(token_type_ids)
        keep = None
        if attention_mask is not None:
            keep = (np.asarray(attention_mask).reshape(arr.shape) != 0)[:, None, None, :]
        device = self.embeddings.word_embeddings.weight.device
        if device != "cpu":
            arr, types = to_device(arr, device), to_device(types, device)
            keep = None if keep is None else to_device(keep, device)
        x: Tensor = self.embeddings(arr, types)
        for block in self.encoder.layer:
            x = block(x, keep)
        return x

    def embed(self, texts: list[str], batch_size: int = 32) -> Tensor:
        """Sentence embeddings (N, hidden) of ``texts`` with this checkpoint's pooling."""
        if self.tokenizer is None:
            raise ValueError("BertModel.embed needs a tokenizer: load it with load_pretrained")
        if isinstance(texts, str):
            raise TypeError("BertModel.embed takes a list of strings (wrap one string in a list)")
        rows = []
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                for start in range(0, len(texts), batch_size):
                    rows.append(self._embed_batch(list(texts[start : start + batch_size])))
        finally:
            self.train(was_training)
        if not rows:
            return Tensor(np.zeros((0, self.config.hidden_size), np.float32))
        return Tensor(np.concatenate(rows, axis=0))

    def _embed_batch(self, texts: list[str]) -> np.ndarray[Any, Any]:
        encoded = [self.tokenizer.encode(t, max_length=self.max_seq_length) for t in texts]
        T = max(len(ids) for ids in encoded)
        ids = np.full((len(texts), T), self.config.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(texts), T), dtype=np.float32)
        for i, row in enumerate(encoded):
            ids[i, : len(row)], mask[i, : len(row)] = row, 1.0
        h = np.asarray(to_device(self(ids, mask).data, "cpu"), dtype=np.float32)
        if self.pooling == "cls":
            pooled = h[:, 0]
        elif self.pooling == "max":
            pooled = np.where(mask[:, :, None] > 0, h, -np.inf).max(axis=1)
        else:
            pooled = (h * mask[:, :, None]).sum(axis=1) / np.maximum(
                mask.sum(1, keepdims=True), 1e-9
            )
        if self.normalize:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32)

    def extra_repr(self) -> str:
        """The main sizes and the pooling."""
        c = self.config
        return (
            f"layers={c.num_hidden_layers}, hidden={c.hidden_size}, heads="
            f"{c.num_attention_heads}, pooling={self.pooling}, normalize={self.normalize}"
        )
