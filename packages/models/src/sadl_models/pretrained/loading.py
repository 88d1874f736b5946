"""``load_pretrained(path) -> (model, tokenizer)``: a GGUF file or a Hugging Face directory.

Everything is read and checked before a model is built: every tensor the architecture needs
must be present with the shape the config implies, and nothing else may be left over, so a
config that does not match its weights is refused with the file and the first differences,
and nothing is ever half loaded.

GGUF (``gguf``, through sadl-serialize's reader): tensors are dequantized to float32 and
renamed to Hugging Face's names. llama.cpp's converter permutes the rows of ``attn_q`` and
``attn_k`` so that rotary pairs are adjacent (its interleaved RoPE); they are permuted back
here (as transformers' GGUF loader does), so one model with rotate-half RoPE serves both
GGUF and Hugging Face checkpoints.

Hugging Face directories: ``config.json`` plus ``model.safetensors`` or the shards listed in
``model.safetensors.index.json``, read with sadl-serialize's safetensors reader; float16 and
bfloat16 weights become float32.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from sadl_models.pretrained.bert import BertConfig, BertModel
from sadl_models.pretrained.llama import LlamaConfig, LlamaForCausalLM
from sadl_models.pretrained.tokenizer import (
    PretrainedTokenizer,
    gguf_tokenizer,
    hf_tokenizer,
)

__all__ = ["ARCHITECTURES", "PretrainedLoadError", "load_pretrained", "register_architecture"]


class PretrainedLoadError(ValueError):
    """A checkpoint cannot be loaded; the message names the file and what is wrong."""


#: Hugging Face ``model_type`` (also GGUF's ``general.architecture``) -> (config class, builder).
ARCHITECTURES: dict[str, Any] = {}


def register_architecture(model_type: str, config_cls: type, build: Any) -> None:
    """Let ``load_pretrained`` build ``model_type`` checkpoints of Hugging Face directories:
    ``build(config, directory, tokenizer) -> Module`` with a ``config_cls(**fields)`` made from
    the fields of ``config.json`` that ``config_cls`` declares.
    """
    ARCHITECTURES[model_type] = (config_cls, build)


def _build_llama(config: LlamaConfig, directory: str, tokenizer: Any) -> LlamaForCausalLM:
    return LlamaForCausalLM(config)


def _build_bert(config: BertConfig, directory: str, tokenizer: Any) -> BertModel:
    return BertModel(config, tokenizer=tokenizer, **_sentence_options(directory))


register_architecture("llama", LlamaConfig, _build_llama)
register_architecture("bert", BertConfig, _build_bert)


def load_pretrained(path: str | os.PathLike[str]) -> tuple[Any, PretrainedTokenizer]:
    """``(model, tokenizer)`` from a ``.gguf`` file or a Hugging Face model directory.

    The model is an ordinary sadl Module in float32 (eval mode): ``model(ids)`` gives logits
    (decoders) or hidden states (encoders). Raises :class:`PretrainedLoadError` (or
    :class:`SadlFormatError` for a malformed file) naming the file and the problem.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        return _load_hf(name)
    if not os.path.exists(name):
        raise FileNotFoundError(2, "no such file or directory", name)
    with open(name, "rb") as fh:
        head = fh.read(4)
    if head == b"GGUF":
        return _load_gguf(name)
    raise PretrainedLoadError(
        f"{name}: not a GGUF file (it does not start with b'GGUF') nor a Hugging Face model "
        "directory (config.json + model.safetensors)"
    )


# ---------------------------------------------------------------------------------- GGUF


def _gguf_config(meta: dict[str, Any], path: str) -> LlamaConfig:
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise PretrainedLoadError(
            f"{path}: unknown architecture {arch!r} (general.architecture); GGUF files of "
            "these load: llama"
        )

    def key(name: str, default: Any = None) -> Any:
        value = meta.get(f"{arch}.{name}", default)
        if value is None:
            raise PretrainedLoadError(f"{path}: metadata {arch}.{name} is missing")
        return value

    tokens = meta.get("tokenizer.ggml.tokens")
    heads = int(key("attention.head_count"))
    width = int(key("embedding_length"))
    rope_dims = meta.get(f"{arch}.rope.dimension_count")
    if rope_dims is not None and int(rope_dims) != width // heads:
        raise PretrainedLoadError(
            f"{path}: partial rotary embeddings ({arch}.rope.dimension_count = {rope_dims}, "
            f"head width {width // heads}) are not supported"
        )
    try:
        return LlamaConfig(
            vocab_size=int(key("vocab_size", len(tokens) if tokens else None)),
            hidden_size=width,
            intermediate_size=int(key("feed_forward_length")),
            num_hidden_layers=int(key("block_count")),
            num_attention_heads=heads,
            num_key_value_heads=int(key("attention.head_count_kv", heads)),
            rms_norm_eps=float(key("attention.layer_norm_rms_epsilon")),
            rope_theta=float(key("rope.freq_base", 10000.0)),
            max_position_embeddings=int(key("context_length", 2048)),
            tie_word_embeddings=False,  # decided by the presence of output.weight
            bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
            eos_token_id=meta.get("tokenizer.ggml.eos_token_id"),
        )
    except ValueError as exc:
        raise PretrainedLoadError(f"{path}: {exc}") from None


_GGUF_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _hf_name(gguf_name: str) -> str | None:
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _GGUF_NAMES:
        return f"model.layers.{parts[1]}.{_GGUF_NAMES[parts[2]]}.{parts[3]}"
    return None


def unpermute_rotary_rows(w: np.ndarray[Any, Any], n_head: int) -> np.ndarray[Any, Any]:
    """Undo llama.cpp's Q/K row permutation: per head, rows ``(d/2, 2)`` back to ``(2, d/2)``."""
    rows = w.shape[0]
    return np.ascontiguousarray(
        w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def _load_gguf(path: str) -> tuple[LlamaForCausalLM, PretrainedTokenizer]:
    from sadl_serialize.gguf_format import dequantize, read_gguf

    file = read_gguf(path)
    config = _gguf_config(file.metadata, path)
    tokenizer = gguf_tokenizer(file.metadata, path)
    names = {t.name for t in file.tensors}
    tied = "output.weight" not in names
    config = LlamaConfig(**{**config.to_dict(), "tie_word_embeddings": tied})
    plan = {}
    unknown = []
    for t in file.tensors:
        hf = _hf_name(t.name)
        if hf is None:
            unknown.append(t.name)
        else:
            plan[hf] = t
    if unknown:
        raise PretrainedLoadError(
            f"{path}: tensors this llama loader does not know: {', '.join(unknown[:5])}"
            + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        )
    model = LlamaForCausalLM(config)
    _check_shapes(model, {k: t.shape for k, t in plan.items()}, path)
    # Checked before any data is read: each tensor is dequantized straight into its parameter,
    # so the float32 weights exist once (the peak is the model plus one tensor).
    params = dict(model.named_parameters())
    heads = {"q_proj": config.num_attention_heads, "k_proj": config.num_key_value_heads}
    for hf, t in plan.items():
        array = dequantize(t)
        kind = hf.split(".")[-2]
        if kind in heads:
            array = unpermute_rotary_rows(array, heads[kind])
        params[hf].data[...] = array
        del array
    model.eval()
    return model, tokenizer


# ------------------------------------------------------------------- Hugging Face directories


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise PretrainedLoadError(f"{path}: not valid JSON: {exc}") from None


def _sentence_options(directory: str) -> dict[str, Any]:
    """Pooling / normalize / max_seq_length from a sentence-transformers checkpoint's files."""
    options: dict[str, Any] = {}
    pooling_path = os.path.join(directory, "1_Pooling", "config.json")
    if os.path.isfile(pooling_path):
        cfg = _read_json(pooling_path)
        modes = [m for m in ("cls", "mean", "max") if cfg.get(f"pooling_mode_{m}_token")]
        modes += ["mean"] if cfg.get("pooling_mode_mean_tokens") else []
        modes += ["max"] if cfg.get("pooling_mode_max_tokens") else []
        others = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v]
        known = {"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens"}
        if len(set(modes)) != 1 or set(others) - known:
            raise PretrainedLoadError(
                f"{pooling_path}: pooling {others} is not supported (one of cls, mean, max)"
            )
        options["pooling"] = modes[0]
    modules_path = os.path.join(directory, "modules.json")
    if os.path.isfile(modules_path):
        kinds = [m.get("type", "") for m in _read_json(modules_path)]
        options["normalize"] = any(k.endswith(".Normalize") for k in kinds)
    st_path = os.path.join(directory, "sentence_bert_config.json")
    if os.path.isfile(st_path):
        length = _read_json(st_path).get("max_seq_length")
        if length is not None:
            options["max_seq_length"] = int(length)
    return options


def _hf_weights(directory: str) -> tuple[dict[str, np.ndarray[Any, Any]], str]:
    from sadl_serialize import load_safetensors

    single = os.path.join(directory, "model.safetensors")
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(single):
        files, where = [single], single
    elif os.path.isfile(index):
        weight_map = _read_json(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise PretrainedLoadError(f"{index}: no weight_map")
        files, where = [os.path.join(directory, f) for f in sorted(set(weight_map.values()))], index
        for f in files:
            if not os.path.isfile(f):
                raise PretrainedLoadError(f"{index}: lists the shard {f}, which is missing")
    else:
        raise PretrainedLoadError(
            f"{directory}: no model.safetensors or model.safetensors.index.json"
        )
    state: dict[str, np.ndarray[Any, Any]] = {}
    for f in files:
        loaded = load_safetensors(f)
        if not isinstance(loaded, dict):
            raise PretrainedLoadError(f"{f}: holds a single tensor, not named weights")
        for key, tensor in loaded.items():
            array = tensor.numpy()
            state[key] = array.astype(np.float32) if array.dtype.kind == "f" else array
    return state, where


def _load_hf(directory: str) -> tuple[Any, PretrainedTokenizer]:
    config_path = os.path.join(directory, "config.json")
    if not os.path.isfile(config_path):
        raise PretrainedLoadError(f"{config_path}: missing (not a Hugging Face model directory)")
    raw = _read_json(config_path)
    model_type = raw.get("model_type")
    if model_type not in ARCHITECTURES:
        raise PretrainedLoadError(
            f"{config_path}: unknown architecture model_type={model_type!r}; these load: "
            f"{', '.join(sorted(ARCHITECTURES))}"
        )
    config_cls, build = ARCHITECTURES[model_type]
    fields = set(config_cls.__dataclass_fields__)
    values = {k: v for k, v in raw.items() if k in fields}
    rope = raw.get("rope_parameters") or raw.get("rope_scaling")
    if "rope_theta" in fields and isinstance(rope, dict):
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise PretrainedLoadError(f"{config_path}: rope scaling {rope} is not supported")
        values.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
    try:
        config = config_cls(**values)
    except (TypeError, ValueError) as exc:
        raise PretrainedLoadError(f"{config_path}: {exc}") from None
    tokenizer = hf_tokenizer(directory)
    state, where = _hf_weights(directory)
    state = _strip_prefix(state, model_type)
    model = build(config, directory, tokenizer)
    if isinstance(model, BertModel) and "pooler.dense.weight" in state:
        model = BertModel(config, tokenizer=tokenizer, pooler=True, **_sentence_options(directory))
    _load_checked(model, state, where)
    return model, tokenizer


_BUFFERS = ("embeddings.position_ids", "rotary_emb.inv_freq")  # recomputed, never learned


def _strip_prefix(state: dict[str, Any], model_type: str) -> dict[str, Any]:
    """Drop buffers and a ``bert.`` prefix (BertForMaskedLM & co.); tied heads are dropped."""
    out = {}
    for key, value in state.items():
        if any(key.endswith(b) for b in _BUFFERS):
            continue
        if model_type == "bert" and key.startswith("bert."):
            key = key[len("bert.") :]
        out[key] = value
    return out


def _check_shapes(model: Any, shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """Every parameter of ``model`` has a tensor of its shape in ``shapes``, and nothing else is
    there; otherwise one error naming ``where`` and the first differences.
    """
    expected = dict(model.state_dict())
    if getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        shapes.pop("lm_head.weight", None)  # the same matrix as the embedding (HF saves both)
    missing = sorted(set(expected) - set(shapes))
    extra = sorted(set(shapes) - set(expected))
    wrong = [
        f"{k}: file {tuple(shapes[k])}, config {tuple(expected[k].shape)}"
        for k in expected
        if k in shapes and tuple(shapes[k]) != tuple(expected[k].shape)
    ]
    problems = []
    if wrong:
        problems.append("shapes differ from the config: " + "; ".join(wrong[:3]))
    if missing:
        problems.append(f"missing weights: {', '.join(missing[:5])}")
    if extra:
        problems.append(f"weights the config has no place for: {', '.join(extra[:5])}")
    if problems:
        more = len(wrong) + len(missing) + len(extra)
        raise PretrainedLoadError(f"{where}: the weights do not match the config ({more} "
                                  f"differences): " + " | ".join(problems))  # fmt: skip


def _load_checked(model: Any, state: dict[str, np.ndarray[Any, Any]], where: str) -> None:
    """Copy ``state`` into ``model`` after checking every name and shape (all or nothing)."""
    _check_shapes(model, {k: tuple(v.shape) for k, v in state.items()}, where)
    expected = dict(model.state_dict())
    model.load_state_dict({k: np.ascontiguousarray(state[k], np.float32) for k in expected})
    model.eval()
