"""Tiny random checkpoints written inside the tests: Hugging Face directories saved by
transformers (``save_pretrained``) and GGUF files written by ``gguf.GGUFWriter`` the way
llama.cpp's converter writes them (Q/K rows permuted for its interleaved RoPE)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TRAIN_LINES = [
    "The quick brown fox jumps over the lazy dog 1234 times.",
    "def add(a, b):\n    return a + b  # 42",
    "Ünïcödé façade — naïve café, 東京 2024, emoji 🙂 and tabs\tand  spaces.",
    "In 1969, 600 million people watched the landing; 3.14159 is pi.",
] * 4


def byte_level_bpe(vocab_size: int = 400) -> Any:
    """A small byte-level BPE laid out as SmolLM2's tokenizer.json (digits split first)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )  # fmt: skip
    tok.train_from_iterator(TRAIN_LINES, trainer)
    return tok


def word_piece() -> Any:
    """A small lower-casing BERT WordPiece tokenizer with [CLS] ... [SEP] and 128-padding."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=special, show_progress=False)
    tok.train_from_iterator(TRAIN_LINES, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )  # fmt: skip
    tok.enable_padding(length=128, pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(128)
    return tok


def llama_dir(path: str, *, tied: bool = True, kv_heads: int = 2, seed: int = 0) -> Any:
    """A tiny random Llama saved by transformers, with a byte-level BPE tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = byte_level_bpe()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=kv_heads,
        rms_norm_eps=1e-5, rope_theta=500.0, max_position_embeddings=128,
        tie_word_embeddings=tied, bos_token_id=0, eos_token_id=2,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # RMSNorm weights are ones at init: make them matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    model.save_pretrained(path)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as fh:
        json.dump({"chat_template": CHAT_TEMPLATE, "eos_token": "<|im_end|>"}, fh)
    return model


def bert_dir(path: str, *, sentence: bool = True, seed: int = 0) -> Any:
    """A tiny random BERT saved by transformers, laid out as a sentence-transformers model."""
    import torch
    from transformers import BertConfig, BertModel

    tok = word_piece()
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=24, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=40, max_position_embeddings=64,
        layer_norm_eps=1e-12,
    )  # fmt: skip
    model = BertModel(config).eval()
    model.save_pretrained(path)
    tok.save(os.path.join(path, "tokenizer.json"))
    if sentence:
        os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
        with open(os.path.join(path, "1_Pooling", "config.json"), "w") as fh:
            json.dump({"word_embedding_dimension": 24, "pooling_mode_mean_tokens": True}, fh)
        kinds = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
        modules = [
            {"idx": i, "name": str(i), "path": p, "type": f"sentence_transformers.models.{kind}"}
            for i, (p, kind) in enumerate(kinds)
        ]
        with open(os.path.join(path, "modules.json"), "w") as fh:
            json.dump(modules, fh)
        with open(os.path.join(path, "sentence_bert_config.json"), "w") as fh:
            json.dump({"max_seq_length": 16, "do_lower_case": False}, fh)
    return model


def permute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``LlamaModel.permute`` of Q/K rows."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


_GGUF_NAMES = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}  # fmt: skip


def write_gguf(
    path: str,
    hf_model: Any,
    tokenizer: Any,
    *,
    qtype: str = "F32",
    arch: str = "llama",
    pre: str = "smollm",
    with_tokenizer: bool = True,
    extra_tensor: str | None = None,
    feed_forward_length: int | None = None,
) -> dict[str, np.ndarray]:
    """Write ``hf_model`` (a transformers Llama) as GGUF; return the weights as stored
    (dequantized, in Hugging Face names and order) so a reference can use the same values.
    ``feed_forward_length`` overrides the metadata's (a header that does not match the weights).
    """
    import gguf

    c = hf_model.config
    kind = gguf.GGMLQuantizationType[qtype]
    w = gguf.GGUFWriter(path, arch)
    w.add_name("tiny")
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(feed_forward_length or c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(float(c.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(c.vocab_size)
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    if with_tokenizer:
        model = json.loads(tokenizer.to_str())["model"]
        vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
        tokens = [t for t, _ in vocab]
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_merges(merges)
        w.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
        w.add_bos_token_id(0)
        w.add_eos_token_id(2)
        w.add_add_bos_token(False)
        w.add_chat_template(CHAT_TEMPLATE)
    stored: dict[str, np.ndarray] = {}

    def put(gname: str, hname: str, array: np.ndarray, quantize: bool) -> None:
        array = np.ascontiguousarray(array, dtype=np.float32)
        if quantize and kind != gguf.GGMLQuantizationType.F32:
            raw = gguf.quants.quantize(array, kind)
            w.add_tensor(gname, raw, raw_dtype=kind)
            back = gguf.quants.dequantize(raw, kind).reshape(array.shape)
        else:
            w.add_tensor(gname, array)
            back = array
        stored[hname] = back

    sd = {k: v.detach().numpy() for k, v in hf_model.state_dict().items()}
    put("token_embd.weight", "model.embed_tokens.weight", sd["model.embed_tokens.weight"], True)
    for i in range(c.num_hidden_layers):
        for hname, gname in _GGUF_NAMES.items():
            key = f"model.layers.{i}.{hname}.weight"
            array = sd[key]
            heads = {"attn_q": c.num_attention_heads, "attn_k": c.num_key_value_heads}
            if gname in heads:  # the converter permutes; the stored values are kept unpermuted
                raw = permute_rows(array, heads[gname])
                put(f"blk.{i}.{gname}.weight", key, raw, True)
                stored[key] = _unpermute(stored[key], heads[gname])
            else:
                put(f"blk.{i}.{gname}.weight", key, array, "norm" not in gname)
    put("output_norm.weight", "model.norm.weight", sd["model.norm.weight"], False)
    if not c.tie_word_embeddings:
        put("output.weight", "lm_head.weight", sd["lm_head.weight"], True)
    if extra_tensor:
        put(extra_tensor, extra_tensor, np.ones(4, np.float32), False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return stored


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    return (
        w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )
