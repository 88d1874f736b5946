"""Published checkpoints in sadl: ``model, tokenizer = sadl.models.load_pretrained(path)``.

``path`` is a ``.gguf`` file (llama.cpp; Llama-family decoders, quantized weights dequantized
to float32) or a Hugging Face model directory (``config.json`` + safetensors; ``llama`` and
``bert``). Needs the extra ``sadl-models[pretrained]`` (``tokenizers``, ``gguf``, ``jinja2``).
"""

from __future__ import annotations

from sadl_models.pretrained.bert import BertConfig, BertModel
from sadl_models.pretrained.llama import LlamaConfig, LlamaForCausalLM
from sadl_models.pretrained.loading import (
    ARCHITECTURES,
    PretrainedLoadError,
    load_pretrained,
    register_architecture,
)
from sadl_models.pretrained.tokenizer import PretrainedTokenizer, TokenizerLoadError

__all__ = [
    "ARCHITECTURES",
    "BertConfig",
    "BertModel",
    "LlamaConfig",
    "LlamaForCausalLM",
    "PretrainedLoadError",
    "PretrainedTokenizer",
    "TokenizerLoadError",
    "load_pretrained",
    "register_architecture",
]
