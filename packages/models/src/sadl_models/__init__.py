"""sadl_models: a GPT-2 style model, an MLP classifier, tokenizers, ``sadl train`` / ``generate``.

Names are loaded on first use (PEP 562), so discovering the plugin stays cheap: ``GPT`` and
``MLP`` pull in sadl-layers, the trainer pulls in sadl-optim and sadl-serialize.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import TYPE_CHECKING, Any

try:
    __version__ = _dist_version("sadl-models")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0.0.0+unknown"

_WHERE = {
    "GPT": "sadl_models.gpt",
    "KVCache": "sadl_models.gpt",
    "sample_next": "sadl_models.gpt",
    "MLP": "sadl_models.mlp",
    "ByteTokenizer": "sadl_models.tokenizers",
    "CharTokenizer": "sadl_models.tokenizers",
    "TokenizerError": "sadl_models.tokenizers",
    "make_tokenizer": "sadl_models.tokenizers",
    "tokenizer_from_dict": "sadl_models.tokenizers",
    "CorpusError": "sadl_models.corpus",
    "builtin_corpus": "sadl_models.corpus",
    "read_text": "sadl_models.corpus",
    "unigram_cross_entropy": "sadl_models.corpus",
    "TrainConfig": "sadl_models.train",
    "TrainError": "sadl_models.train",
    "train": "sadl_models.train",
    "load_model": "sadl_models.train",
}

__all__ = [
    "ByteTokenizer",
    "CharTokenizer",
    "CorpusError",
    "GPT",
    "KVCache",
    "MLP",
    "TokenizerError",
    "TrainConfig",
    "TrainError",
    "builtin_corpus",
    "load_model",
    "make_tokenizer",
    "read_text",
    "sample_next",
    "tokenizer_from_dict",
    "train",
    "unigram_cross_entropy",
]

if TYPE_CHECKING:
    from sadl_models.corpus import CorpusError, builtin_corpus, read_text, unigram_cross_entropy
    from sadl_models.gpt import GPT, KVCache, sample_next
    from sadl_models.mlp import MLP
    from sadl_models.tokenizers import (
        ByteTokenizer,
        CharTokenizer,
        TokenizerError,
        make_tokenizer,
        tokenizer_from_dict,
    )
    from sadl_models.train import TrainConfig, TrainError, load_model, train


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sadl_models' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
