"""``sadl inspect`` for published checkpoints: a ``.gguf`` file or a Hugging Face directory.

It reports the architecture, the parameter count, the dtypes or quantization types (with how
many tensors and parameters each) and the tokenizer, after validating the file the way
loading does (a truncated GGUF or an unsupported quantization is refused here too).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from typing import Any

from sadl_serialize.errors import SadlFormatError

__all__ = ["describe_pretrained", "is_pretrained"]


def is_pretrained(path: str) -> bool:
    """A Hugging Face directory (holds ``config.json``) or a file starting with ``GGUF``."""
    if os.path.isdir(path):
        return os.path.isfile(os.path.join(path, "config.json"))
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as fh:
        return fh.read(4) == b"GGUF"


def _types_lines(counts: Counter[str], params: Counter[str]) -> list[str]:
    return [
        f"  {kind:<8} {counts[kind]:>5} tensors  {params[kind]:>14,} parameters"
        for kind in sorted(counts, key=lambda k: -params[k])
    ]


def _describe_gguf(path: str) -> list[str]:
    from sadl_serialize.gguf_format import read_gguf

    file = read_gguf(path)
    meta = file.metadata
    arch = meta.get("general.architecture", "?")
    counts: Counter[str] = Counter()
    params: Counter[str] = Counter()
    for t in file.tensors:
        counts[t.type] += 1
        params[t.type] += math.prod(t.shape)
    lines = [
        f"{path}: GGUF, architecture {arch} ({meta.get('general.name', 'unnamed')})",
        f"parameters: {sum(params.values()):,} in {len(file.tensors)} tensors",
    ]
    shape_keys = ("block_count", "embedding_length", "feed_forward_length",
                  "attention.head_count", "attention.head_count_kv", "context_length",
                  "rope.freq_base", "attention.layer_norm_rms_epsilon")  # fmt: skip
    shape = [f"{k}={meta[f'{arch}.{k}']}" for k in shape_keys if f"{arch}.{k}" in meta]
    if shape:
        lines.append("config: " + ", ".join(shape))
    lines.append("tensor types:")
    lines += _types_lines(counts, params)
    tokens = meta.get("tokenizer.ggml.tokens") or []
    tok = meta.get("tokenizer.ggml.model")
    lines.append(
        "tokenizer: none"
        if tok is None
        else f"tokenizer: {tok} (pre-tokenizer {meta.get('tokenizer.ggml.pre', 'default')}), "
        f"{len(tokens):,} tokens, {len(meta.get('tokenizer.ggml.merges') or []):,} merges, "
        f"chat template: {'yes' if meta.get('tokenizer.chat_template') else 'no'}"
    )
    return lines


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise SadlFormatError(path, None, f"not valid JSON: {exc}", format=".json") from None


def _describe_hf(directory: str) -> list[str]:
    from sadl_serialize.safetensors_format import read_safetensors_index

    config = _read_json(os.path.join(directory, "config.json"))
    single = os.path.join(directory, "model.safetensors")
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(single):
        files = [single]
    elif os.path.isfile(index):
        weight_map = _read_json(index).get("weight_map") or {}
        files = [os.path.join(directory, f) for f in sorted(set(weight_map.values()))]
    else:
        raise SadlFormatError(directory, None, "no model.safetensors or index", format="model")
    counts: Counter[str] = Counter()
    params: Counter[str] = Counter()
    for f in files:
        for info in read_safetensors_index(f):
            counts[info.dtype] += 1
            params[info.dtype] += info.size
    arch = config.get("model_type", "?")
    names = ", ".join(config.get("architectures") or [])
    lines = [
        f"{directory}: Hugging Face model, architecture {arch}" + (f" ({names})" if names else ""),
        f"parameters: {sum(params.values()):,} in {sum(counts.values())} tensors, "
        f"{len(files)} safetensors file{'s' if len(files) != 1 else ''}",
    ]
    keys = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
            "num_key_value_heads", "vocab_size", "max_position_embeddings")  # fmt: skip
    shape = [f"{k}={config[k]}" for k in keys if k in config]
    if shape:
        lines.append("config: " + ", ".join(shape))
    lines.append("dtypes:")
    lines += _types_lines(counts, params)
    tok_path = os.path.join(directory, "tokenizer.json")
    if os.path.isfile(tok_path):
        model = _read_json(tok_path).get("model") or {}
        lines.append(
            f"tokenizer: tokenizer.json ({model.get('type', '?')}, "
            f"{len(model.get('vocab') or {}):,} tokens)"
        )
    else:
        lines.append("tokenizer: none (no tokenizer.json)")
    return lines


def describe_pretrained(path: str) -> list[str]:
    """The lines ``sadl inspect`` prints for a GGUF file or a Hugging Face directory."""
    return _describe_hf(path) if os.path.isdir(path) else _describe_gguf(path)
