"""scaled_dot_product_attention(enable_gqa=True) and max_unpool2d / MaxUnpool2d against torch
(float64; skipped without torch): forward, first and second derivatives."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers import MaxUnpool2d, Unfold
from test_layer_vocabulary_torch_parity import _rand, parity

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
F = torch.nn.functional
pytestmark = pytest.mark.torch


def _math_gqa(q, k, v, mask=None, scale=None, is_causal=False):
    """Grouped-query attention in plain torch ops (k, v repeated per group; torch's own SDPA
    has no second derivative on the CPU)."""
    g = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


@pytest.mark.parametrize(
    "q, kv, kwargs",
    [
        ((2, 4, 3, 2), (2, 2, 3, 2), {}),
        ((2, 6, 3, 4), (2, 2, 5, 4), {"scale": 0.4}),
        ((1, 4, 5, 3), (1, 1, 5, 3), {"is_causal": True}),  # multi-query attention
        ((2, 4, 3, 2), (2, 4, 3, 2), {}),  # as many heads: enable_gqa changes nothing
    ],
)
def test_sdpa_enable_gqa(q, kv, kwargs):
    ours = {"causal": kwargs["is_causal"]} if "is_causal" in kwargs else dict(kwargs)
    inputs = (_rand(*q), _rand(*kv, seed=1), _rand(*kv, seed=2))

    def sdpa(a, b, c):
        return sadl.ops.scaled_dot_product_attention(a, b, c, enable_gqa=True, **ours)

    torch_sdpa = F.scaled_dot_product_attention
    parity(
        sdpa, lambda a, b, c: torch_sdpa(a, b, c, enable_gqa=True, **kwargs), *inputs, second=False
    )
    parity(sdpa, lambda a, b, c: _math_gqa(a, b, c, **kwargs), *inputs)


@pytest.mark.parametrize("head_axis", [True, False])
def test_sdpa_enable_gqa_with_a_mask(head_axis):
    rng = np.random.default_rng(4)
    mask = rng.random((4, 3, 5) if head_axis else (3, 5)) > 0.3
    mask[..., 0] = True  # every query sees a key
    inputs = (_rand(2, 4, 3, 2), _rand(2, 2, 5, 2, seed=1), _rand(2, 2, 5, 2, seed=2))
    tmask = torch.from_numpy(mask)

    def sdpa(a, b, c):
        return sadl.ops.scaled_dot_product_attention(a, b, c, mask=mask, enable_gqa=True)

    parity(
        sdpa,
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=tmask, enable_gqa=True),
        *inputs,
        second=False,
    )
    parity(sdpa, lambda a, b, c: _math_gqa(a, b, c, mask=tmask), *inputs)


def test_sdpa_enable_gqa_refuses_heads_that_do_not_divide():
    q, kv = sadl.tensor(_rand(1, 3, 2, 2)), sadl.tensor(_rand(1, 2, 2, 2))
    with pytest.raises(ValueError, match="q has 3 heads, k 2"):
        sadl.ops.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        ({"kernel_size": 2}, (2, 3, 6, 4)),
        ({"kernel_size": 3, "stride": 2, "padding": 1}, (1, 2, 7, 5)),
        ({"kernel_size": 3, "stride": 1}, (1, 2, 5, 5)),  # overlapping windows share indices
    ],
)
def test_max_unpool2d_inverts_max_pool2d_like_torch(kwargs, shape):
    x = _rand(*shape)
    _, idx = F.max_pool2d(torch.from_numpy(x), return_indices=True, **kwargs)
    pooled = F.max_pool2d(torch.from_numpy(x), **kwargs).numpy()
    indices = idx.numpy()
    size = shape[-2:]
    parity(
        lambda t: sadl.ops.max_unpool2d(t, indices, output_size=size, **kwargs),
        lambda t: F.max_unpool2d(t, idx, output_size=size, **kwargs),
        pooled,
    )
    sadl_idx = sadl.ops.max_pool2d(sadl.tensor(x), return_indices=True, **kwargs)[1]
    layer = MaxUnpool2d(**kwargs)
    tlayer = torch.nn.MaxUnpool2d(**kwargs)
    got = layer(sadl.tensor(pooled), sadl_idx.numpy(), output_size=size)
    want = tlayer(torch.from_numpy(pooled), idx, output_size=size)
    np.testing.assert_array_equal(got.data, want.numpy())


def test_max_unpool2d_default_size_unbatched_and_errors():
    x = _rand(3, 4, 4)
    pooled, idx = F.max_pool2d(torch.from_numpy(x), 2, return_indices=True)
    got = sadl.ops.max_unpool2d(sadl.tensor(pooled.numpy()), idx.numpy(), 2)
    np.testing.assert_array_equal(got.data, F.max_unpool2d(pooled, idx, 2).numpy())
    with pytest.raises(ValueError, match="indices must lie in the output plane"):
        sadl.ops.max_unpool2d(sadl.tensor(pooled.numpy()), idx.numpy() + 100, 2)
    with pytest.raises(TypeError, match="indices must be an integer array"):
        sadl.ops.max_unpool2d(sadl.tensor(pooled.numpy()), pooled.numpy(), 2)


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        ({"kernel_size": 2}, (2, 3, 4, 5)),
        ({"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": (2, 1)}, (1, 2, 5, 6)),
        ({"kernel_size": 3, "padding": 1}, (2, 4, 4)),  # unbatched
    ],
)
def test_unfold_op_and_layer(kwargs, shape):
    parity(lambda t: sadl.ops.unfold(t, **kwargs), lambda t: F.unfold(t, **kwargs), _rand(*shape))
    parity(Unfold(**kwargs), torch.nn.Unfold(**kwargs), _rand(*shape, seed=1))
