"""Tokenizers of published checkpoints, through Hugging Face ``tokenizers`` (no hand-written BPE).

* A Hugging Face directory: its ``tokenizer.json`` (padding and truncation stored in the file
  are switched off, so ``encode`` returns exactly the text's ids; ``max_length=`` truncates).
* A GGUF file: the byte-level BPE built from the file's own ``tokenizer.ggml.*`` metadata
  (tokens, merges, token types). The pre-tokenizer follows the file's ``tokenizer.ggml.pre``
  the way llama.cpp does (:data:`PRE_TOKENIZERS`); ``smollm`` splits every digit first, then
  applies the GPT-2 pattern, which is also what SmolLM2's own ``tokenizer.json`` does.
  (transformers' GGUF reader has no entry for ``smollm`` and uses GPT-2's split alone, so it
  differs on text with numbers of two or more digits.)

The chat template, where the checkpoint has one, is rendered with Jinja2 in a sandbox.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["PRE_TOKENIZERS", "PretrainedTokenizer", "TokenizerLoadError", "gguf_tokenizer"]

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: ``tokenizer.ggml.pre`` -> the regexes llama.cpp splits with, applied in order.
PRE_TOKENIZERS: dict[str, tuple[str, ...]] = {
    "default": (_GPT2,),
    "gpt2": (_GPT2,),
    "smollm": (r"\p{N}", _GPT2),
    "starcoder": (r"\p{N}", _GPT2),
    "refact": (r"\p{N}", _GPT2),
    "llama3": (_LLAMA3,),
    "llama-bpe": (_LLAMA3,),
}
_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp's token types


class TokenizerLoadError(ValueError):
    """A checkpoint's tokenizer is missing or cannot be built; the message names the file."""


class PretrainedTokenizer:
    """``encode(text) -> list[int]``, ``decode(ids) -> str`` and the chat template.

    ``encode`` adds the checkpoint's special tokens (BERT's [CLS] ... [SEP]; a BOS where the
    GGUF asks for one) unless ``add_special_tokens=False``, as transformers' ``encode`` does.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        source: str,
        chat_template: str | None = None,
        bos_token: str | None = None,
        eos_token: str | None = None,
    ) -> None:
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tok = tokenizer
        self.source = source
        self.chat_template = chat_template
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._truncating: dict[int, Any] = {}

    @property
    def vocab_size(self) -> int:
        """The number of ids, added tokens included."""
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def token_id(self, token: str | None) -> int | None:
        """The id of ``token`` (None when absent or None)."""
        return None if token is None else self._tok.token_to_id(token)

    @property
    def eos_token_id(self) -> int | None:
        """The end-of-sequence id, where the checkpoint names one."""
        return self.token_id(self.eos_token)

    def encode(
        self, text: str, add_special_tokens: bool = True, max_length: int | None = None
    ) -> list[int]:
        """The ids of ``text``; ``max_length`` truncates (keeping the special tokens, as
        tokenizers does).
        """
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        tok = self._tok
        if max_length is not None:
            tok = self._truncating.get(max_length)
            if tok is None:
                from tokenizers import Tokenizer

                tok = Tokenizer.from_str(self._tok.to_str())
                tok.enable_truncation(int(max_length))
                self._truncating[int(max_length)] = tok
        return list(tok.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        """The text of ``ids`` (a list or 1-d array of ints)."""
        return str(self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens))

    def apply_chat_template(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """The checkpoint's chat template rendered for ``messages`` ({"role", "content"} dicts)."""
        if not self.chat_template:
            raise ValueError(f"{self.source}: this checkpoint has no chat template")
        try:
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise ImportError(
                'chat templates need jinja2: pip install "sadl-models[pretrained]"'
            ) from None
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        template = env.from_string(self.chat_template)
        return str(
            template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token or "",
                eos_token=self.eos_token or "",
            )
        )

    def __repr__(self) -> str:
        return f"PretrainedTokenizer({self.source!r}, vocab_size={self.vocab_size})"


def _tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise ImportError(
            'pretrained tokenizers need the "tokenizers" package: pip install '
            '"sadl-models[pretrained]"'
        ) from None
    return tokenizers


def hf_tokenizer(directory: str) -> PretrainedTokenizer:
    """The tokenizer of a Hugging Face directory (``tokenizer.json``, ``tokenizer_config.json``)."""
    tk = _tokenizers()
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(path):
        raise TokenizerLoadError(f"{path}: missing: the checkpoint has no tokenizer.json")
    try:
        tok = tk.Tokenizer.from_file(path)
    except Exception as exc:  # tokenizers raises its own Exception type for a bad file
        raise TokenizerLoadError(f"{path}: cannot be read as a tokenizer: {exc}") from None
    config: dict[str, Any] = {}
    cfg_path = os.path.join(directory, "tokenizer_config.json")
    if os.path.isfile(cfg_path):
        with open(cfg_path, encoding="utf-8") as fh:
            config = json.load(fh)

    def name(key: str) -> str | None:
        value = config.get(key)
        return value.get("content") if isinstance(value, dict) else value

    return PretrainedTokenizer(
        tok,
        source=path,
        chat_template=config.get("chat_template"),
        bos_token=name("bos_token") or name("cls_token"),
        eos_token=name("eos_token") or name("sep_token"),
    )


def gguf_tokenizer(metadata: dict[str, Any], path: str) -> PretrainedTokenizer:
    """The byte-level BPE described by a GGUF file's ``tokenizer.ggml.*`` metadata."""
    tk = _tokenizers()
    model = metadata.get("tokenizer.ggml.model")
    if model is None:
        raise TokenizerLoadError(f"{path}: the GGUF file has no tokenizer (tokenizer.ggml.model)")
    if model != "gpt2":
        raise TokenizerLoadError(
            f"{path}: tokenizer.ggml.model {model!r} is not supported (only 'gpt2', byte-level BPE)"
        )
    pre = metadata.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise TokenizerLoadError(
            f"{path}: tokenizer.ggml.pre {pre!r} is not supported; supported: "
            f"{', '.join(sorted(PRE_TOKENIZERS))}"
        )
    tokens = list(metadata.get("tokenizer.ggml.tokens") or [])
    merges = list(metadata.get("tokenizer.ggml.merges") or [])
    if not tokens:
        raise TokenizerLoadError(f"{path}: tokenizer.ggml.tokens is missing or empty")
    types = list(metadata.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    vocab = {token: i for i, token in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    bpe = tk.models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False)
    tok = tk.Tokenizer(bpe)
    splits = [
        tk.pre_tokenizers.Split(tk.Regex(rx), behavior="isolated") for rx in PRE_TOKENIZERS[pre]
    ]
    byte_level = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.pre_tokenizer = tk.pre_tokenizers.Sequence([*splits, byte_level])
    tok.decoder = tk.decoders.ByteLevel()
    special = [
        tk.AddedToken(t, special=True, normalized=False)
        for t, kind in zip(tokens, types)
        if kind == _CONTROL
    ]
    user = [
        tk.AddedToken(t, special=False, normalized=False)
        for t, kind in zip(tokens, types)
        if kind == _USER_DEFINED
    ]
    tok.add_special_tokens(special)
    tok.add_tokens(user)

    def token(key: str) -> str | None:
        i = metadata.get(key)
        return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

    bos = token("tokenizer.ggml.bos_token_id")
    if metadata.get("tokenizer.ggml.add_bos_token", False) and bos is not None:
        tok.post_processor = tk.processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])]
        )
    return PretrainedTokenizer(
        tok,
        source=path,
        chat_template=metadata.get("tokenizer.chat_template"),
        bos_token=bos,
        eos_token=token("tokenizer.ggml.eos_token_id"),
    )
