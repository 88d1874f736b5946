"""The sadl plugin module of sadl_models (entry point in the group ``sadl.plugins``).

It registers the ``gpt`` and ``mlp`` models (``sadl.models.create("gpt", ...)``), the ``GPT``
class as a layer (``sadl.nn.GPT``), and the ``sadl train`` / ``sadl generate`` commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from sadl.plugins import Example, LayerDef, ModelDef, hookimpl, require_api

require_api("1.0")

#: Defaults of ``sadl.models.create("gpt")``: a small character-level model.
GPT_DEFAULTS = {
    "vocab_size": 256,
    "block_size": 64,
    "n_layer": 4,
    "n_head": 4,
    "n_embd": 128,
    "dropout": 0.0,
    "bias": True,
}
#: Defaults of ``sadl.models.create("mlp", in_features=..., out_features=...)``.
MLP_DEFAULTS = {"hidden_sizes": (64,), "activation": "relu", "dropout": 0.0}


@hookimpl
def register_models() -> Iterable[ModelDef]:
    """``gpt`` (GPT-2 style language model), ``mlp`` (a classifier) and ``load_pretrained``
    (``sadl.models.load_pretrained(path) -> (model, tokenizer)`` for published checkpoints).
    """
    from sadl_models.gpt import GPT
    from sadl_models.mlp import MLP
    from sadl_models.pretrained.loading import load_pretrained

    return [
        ModelDef("gpt", GPT, dict(GPT_DEFAULTS)),
        ModelDef("mlp", MLP, dict(MLP_DEFAULTS)),
        ModelDef("load_pretrained", load_pretrained),
    ]


@hookimpl
def register_layers() -> Iterable[LayerDef]:
    """``GPT``, so that ``sadl.nn.GPT`` works (with a tiny one for ``sadl check-plugins``)."""
    import numpy as np

    from sadl_models.gpt import GPT

    ids = np.array([[1, 2, 3], [4, 5, 6]])
    examples = [
        Example(*inputs, vocab_size=7, block_size=4, n_layer=1, n_head=2, n_embd=4)
        for inputs in ((ids,), (ids, ids))  # logits alone, then logits and loss
    ]
    return [LayerDef("GPT", GPT, examples=tuple(examples))]


@hookimpl
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``sadl train gpt`` and ``sadl generate``."""
    from sadl_models.cli import register_commands as add

    add(subparsers)
