"""``torch.nn.functional`` with torch's signatures, over sadl's registered ops.

Served as ``sadl.nn.functional`` (``import sadl.nn.functional as F``, ``from sadl.nn import
functional as F``). Each function is a thin translation of torch's arguments to one op's: torch's
``dim`` is the op's ``axis``, classes sit at dim 1 for the losses (the ops put them last), ``pad``
counts from the last axis backwards, ``attn_mask``/``is_causal`` are ``mask``/``causal``, and
random masks (``dropout``, ``dropout_p``) are drawn from sadl's generator of the input's device,
so ``sadl.manual_seed`` makes them reproducible. Arguments torch has deprecated
(``size_average``, ``reduce``) or that sadl has no meaning for raise instead of being ignored.
A torch name missing here says so and names sadl's nearest spelling.
"""

from __future__ import annotations

from typing import Any

from sadl_layers.functional.activations import *  # noqa: F403
from sadl_layers.functional.composites import *  # noqa: F403
from sadl_layers.functional.dense import *  # noqa: F403
from sadl_layers.functional.losses import *  # noqa: F403
from sadl_layers.functional.spatial import *  # noqa: F403

_NEAREST = {
    "fold": "sadl.ops.unfold is im2col (F.unfold); its inverse is not an op",
    "grid_sample": "F.interpolate (regular grids only)",
    "gumbel_softmax": "F.softmax of (logits - log(-log(u))) / tau with u from sadl.rand",
    "multi_head_attention_forward": "sadl.nn.MultiHeadAttention or F.scaled_dot_product_attention",
    "alpha_dropout": "F.dropout",
    "local_response_norm": "F.group_norm or F.layer_norm",
    "instance_norm": "sadl.ops.instance_norm (running_mean, running_var, weight, bias, ...)",
    "max_unpool2d": "sadl.ops.max_unpool2d",
    "adaptive_max_pool2d": "F.max_pool2d with a kernel of input size // output size",
    "ctc_loss": "(no equivalent yet)",
    "triplet_margin_loss": "compose it from Tensor ops",
    "margin_ranking_loss": "compose it from Tensor ops",
    "cosine_embedding_loss": "compose it from Tensor ops",
    "poisson_nll_loss": "exp(input) - target * input with Tensor ops",
    "gaussian_nll_loss": "0.5 * (log(var) + (input - target)**2 / var) with Tensor ops",
    "rrelu": "F.leaky_relu",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    hint = _NEAREST.get(name)
    where = f"; use {hint}" if hint else "; see docs/pytorch.md for what sadl has"
    raise AttributeError(f"sadl.nn.functional has no {name!r} (torch.nn.functional.{name}){where}")
