"""Bad arguments raise errors that name the layer or function, the argument and what was
expected (the shape, the dtype, the range)."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers import (
    GELU,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    CausalSelfAttention,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MaxPool2d,
    ModuleDict,
    ModuleList,
    MSELoss,
    MultiHeadAttention,
    NLLLoss,
    RMSNorm,
    Sequential,
    Softmax,
)

F32 = np.float32


def _zeros(*shape):
    return np.zeros(shape, F32)


# --------------------------------------------------------------------- shape mismatch


@pytest.mark.parametrize(
    "call, pattern",
    [
        (
            lambda: Linear(4, 3)(_zeros(2, 5)),
            r"Linear\(in_features=4, out_features=3, bias=True\): input has shape \(2, 5\), "
            r"expected \(\.\.\., 4\)",
        ),
        (
            lambda: LayerNorm(4)(_zeros(2, 3)),
            r"LayerNorm\(\(4,\).*\): input has shape \(2, 3\), expected \(\.\.\., 4\)",
        ),
        (
            lambda: RMSNorm((2, 3))(_zeros(3, 2)),
            r"RMSNorm\(\(2, 3\).*\): input has shape \(3, 2\), expected \(\.\.\., 2, 3\)",
        ),
        (
            lambda: BatchNorm2d(3)(_zeros(2, 4, 5, 5)),
            r"BatchNorm2d\(3,.*\): input has shape \(2, 4, 5, 5\), expected \(N, 3, H, W\)",
        ),
        (
            lambda: BatchNorm1d(3)(_zeros(2, 3, 4, 5)),
            r"BatchNorm1d\(3,.*\): input has shape \(2, 3, 4, 5\), expected \(N, 3\) or "
            r"\(N, 3, L\)",
        ),
        (
            lambda: Conv2d(3, 8, 3)(_zeros(1, 4, 8, 8)),
            r"Conv2d\(3, 8, .*\): input has shape \(1, 4, 8, 8\), expected \(N, 3, H, W\)",
        ),
        (
            lambda: Conv2d(3, 8, 5)(_zeros(1, 3, 3, 3)),
            r"Conv2d\(3, 8, .*\): conv2d: the 5x5 kernel .* does not fit the padded input of "
            r"spatial size 3x3",
        ),
        (
            lambda: MaxPool2d(2)(_zeros(4, 4)),
            r"MaxPool2d\(.*\): input has shape \(4, 4\), expected \(N, C, H, W\)",
        ),
        (
            lambda: AvgPool2d(3, padding=2)(_zeros(1, 1, 6, 6)),
            r"AvgPool2d\(.*\): avg_pool2d: padding \(2, 2\) must be at most half the kernel",
        ),
        (
            lambda: CausalSelfAttention(8, 2)(_zeros(2, 3, 6)),
            r"CausalSelfAttention\(n_embd=8, n_head=2.*\): input has shape \(2, 3, 6\), "
            r"expected \(B, T, 8\)",
        ),
        (
            lambda: MultiHeadAttention(8, 2)(_zeros(2, 3, 8), _zeros(2, 4, 6)),
            r"MultiHeadAttention\(embed_dim=8, num_heads=2\): key has shape \(2, 4, 6\), "
            r"expected \(B, T, 8\)",
        ),
        (
            lambda: MSELoss()(_zeros(2, 3), _zeros(3, 2)),
            r"MSELoss\(reduction='mean'\): mse_loss: target has shape \(3, 2\), expected "
            r"\(2, 3\)",
        ),
        (
            lambda: CrossEntropyLoss()(_zeros(4, 5), np.zeros(3, np.int64)),
            r"CrossEntropyLoss\(.*\): cross_entropy: targets has shape \(3,\), expected \(4,\)",
        ),
        (
            lambda: Flatten(2, 5)(_zeros(2, 3)),
            r"Flatten\(start_dim=2, end_dim=5\): cannot flatten axes 2\.\.5 of an input of "
            r"shape \(2, 3\)",
        ),
        (
            lambda: Softmax(dim=3)(_zeros(2, 3)),
            r"Softmax\(dim=3\): dim=3 is out of range for an input of shape \(2, 3\)",
        ),
    ],
)
def test_layer_shape_errors_name_layer_argument_and_expected_shape(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.parametrize(
    "call, pattern",
    [
        (
            lambda: sadl.ops.linear(_zeros(2, 3), _zeros(4, 5), None),
            r"linear: input has shape \(2, 3\), expected \(\.\.\., 5\) to match weight of "
            r"shape \(4, 5\)",
        ),
        (
            lambda: sadl.ops.linear(_zeros(2, 5), _zeros(4, 5), _zeros(3)),
            r"linear: bias has shape \(3,\), expected \(4,\)",
        ),
        (
            lambda: sadl.ops.layer_norm(_zeros(2, 4), _zeros(3), None),
            r"layer_norm: input has shape \(2, 4\), expected \(\.\.\., 3\)",
        ),
        (
            lambda: sadl.ops.scaled_dot_product_attention(
                _zeros(2, 3, 4), _zeros(2, 5, 3), _zeros(2, 5, 4)
            ),
            r"scaled_dot_product_attention: k has shape \(2, 5, 3\), expected \(\.\.\., Tk, 4\)",
        ),
        (
            lambda: sadl.ops.scaled_dot_product_attention(_zeros(3, 4), _zeros(5, 4), _zeros(6, 2)),
            r"scaled_dot_product_attention: v has shape \(6, 2\), expected \(\.\.\., 5, dv\)",
        ),
        (
            lambda: sadl.ops.scaled_dot_product_attention(
                _zeros(3, 4), _zeros(5, 4), _zeros(5, 2), mask=np.ones((3, 4), bool)
            ),
            r"scaled_dot_product_attention: mask has shape \(3, 4\), expected a shape that "
            r"broadcasts to \(3, 5\)",
        ),
        (
            lambda: sadl.ops.conv2d(_zeros(1, 4, 5, 5), _zeros(2, 3, 3, 3), None),
            r"conv2d: input has shape \(1, 4, 5, 5\) with 4 channels, expected \(N, 3, H, W\)",
        ),
        (
            lambda: sadl.ops.conv2d(_zeros(4, 5, 5), _zeros(2, 3, 3, 3), None),
            r"conv2d: input must have shape \(N, C, H, W\), got \(4, 5, 5\)",
        ),
        (
            lambda: sadl.ops.binary_cross_entropy_with_logits(_zeros(2, 3), _zeros(2)),
            r"binary_cross_entropy_with_logits: targets has shape \(2,\), expected \(2, 3\)",
        ),
        (
            lambda: sadl.ops.batch_norm(_zeros(4, 3), _zeros(2), None, training=True),
            r"batch_norm: weight has shape \(2,\), expected \(3,\)",
        ),
        (
            lambda: sadl.ops.dropout(_zeros(2, 3), p=0.5, mask=np.ones((3, 2), bool)),
            r"dropout: mask has shape \(3, 2\), expected a shape that broadcasts to the "
            r"input's \(2, 3\)",
        ),
    ],
)
def test_op_shape_errors_name_function_argument_and_expected_shape(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


# ------------------------------------------------------------------- wrong target dtype


def test_float_targets_to_cross_entropy_raise_type_error():
    with pytest.raises(
        TypeError,
        match=r"cross_entropy: targets must be an integer array of "
        r"shape \(4,\) .*got float32",
    ):
        sadl.ops.cross_entropy(_zeros(4, 3), _zeros(4))
    with pytest.raises(
        TypeError,
        match=r"CrossEntropyLoss\(.*\): cross_entropy: targets must "
        r"be an integer array",
    ):
        CrossEntropyLoss()(_zeros(4, 3), sadl.tensor([0.0, 1.0, 2.0, 0.0]))
    with pytest.raises(TypeError, match=r"NLLLoss\(.*\): nll_loss: targets must be an integer"):
        NLLLoss()(_zeros(2, 3), np.array([0.5, 1.0]))


def test_float_ids_to_embedding_raise_type_error():
    with pytest.raises(
        TypeError,
        match=r"Embedding\(5, 3\): embedding: ids must be an integer "
        r"array .*got float64",
    ):
        Embedding(5, 3)(np.array([0.0, 1.0]))


def test_float_logits_required():
    with pytest.raises(
        TypeError,
        match=r"cross_entropy: logits must be a floating-point array, "
        r"got int64",
    ):
        sadl.ops.cross_entropy(np.zeros((2, 3), np.int64), np.array([0, 1]))


# ----------------------------------------------------------------- out-of-range class ids


@pytest.mark.parametrize(
    "call, pattern",
    [
        (
            lambda: sadl.ops.cross_entropy(_zeros(3, 4), np.array([0, 4, 1])),
            r"cross_entropy: targets holds class id 4, expected ids in \[0, 4\) "
            r"\(or ignore_index=-100\)",
        ),
        (
            lambda: CrossEntropyLoss()(_zeros(3, 4), np.array([0, -1, 1])),
            r"CrossEntropyLoss\(.*\): cross_entropy: targets holds class id -1, expected ids "
            r"in \[0, 4\)",
        ),
        (
            lambda: sadl.ops.nll_loss(_zeros(2, 3), np.array([3, 0])),
            r"nll_loss: targets holds class id 3, expected ids in \[0, 3\)",
        ),
        (
            lambda: Embedding(5, 3)(np.array([[0, 5]])),
            r"Embedding\(5, 3\): embedding: ids holds 5, expected ids in \[0, 5\) "
            r"\(num_embeddings=5\)",
        ),
        (
            lambda: Embedding(5, 3)(np.array([-1])),
            r"embedding: ids holds -1, expected ids in \[0, 5\)",
        ),
    ],
)
def test_out_of_range_ids_raise(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_ignore_index_is_not_out_of_range():
    loss = sadl.ops.cross_entropy(_zeros(3, 4), np.array([0, -100, 3]))
    assert np.isfinite(loss.item())


# ----------------------------------------------------------------------- negative dims


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: Linear(-1, 3), r"Linear: in_features must be an integer >= 0, got -1"),
        (lambda: Linear(3, -2), r"Linear: out_features must be an integer >= 0, got -2"),
        (lambda: Linear(dim_in=3, dim_out=-2), r"Linear: out_features must be an integer >= 0"),
        (lambda: Embedding(5, -3), r"Embedding: embedding_dim must be an integer >= 1, got -3"),
        (lambda: Embedding(-5, 3), r"Embedding: num_embeddings must be an integer >= 1, got -5"),
        (lambda: LayerNorm(-4), r"LayerNorm: normalized_shape must be an integer >= 1, got -4"),
        (lambda: LayerNorm((3, -1)), r"LayerNorm: normalized_shape must be an integer >= 1"),
        (lambda: RMSNorm(0), r"RMSNorm: normalized_shape must be an integer >= 1, got 0"),
        (lambda: BatchNorm1d(-2), r"BatchNorm1d: num_features must be an integer >= 1, got -2"),
        (lambda: Conv2d(3, -8, 3), r"Conv2d: out_channels must be an integer >= 1, got -8"),
        (lambda: Conv2d(3, 8, -3), r"Conv2d: kernel_size must be non-negative, got -3"),
        (
            lambda: Conv2d(3, 8, 3, stride=0),
            r"Conv2d: kernel_size, stride and dilation must be "
            r"positive",
        ),
        (lambda: Conv2d(3, 8, 3, groups=2), r"Conv2d: groups=2 must divide in_channels=3"),
        (lambda: MaxPool2d((2, -1)), r"MaxPool2d: kernel_size must be non-negative"),
        (
            lambda: MultiHeadAttention(8, -2),
            r"MultiHeadAttention: num_heads must be an integer "
            r">= 1, got -2",
        ),
        (
            lambda: MultiHeadAttention(8, 3),
            r"MultiHeadAttention: embed_dim=8 must be divisible "
            r"by num_heads=3",
        ),
        (
            lambda: CausalSelfAttention(-8, 2),
            r"CausalSelfAttention: n_embd must be an integer "
            r">= 1, got -8",
        ),
        (lambda: Dropout(1.5), r"Dropout: p must be a probability in \[0, 1\], got 1.5"),
        (lambda: GELU("fast"), r"GELU: approximate must be 'none' or 'tanh', got 'fast'"),
        (
            lambda: CrossEntropyLoss(reduction="avg"),
            r"CrossEntropyLoss: reduction must be one "
            r"of 'mean', 'sum', 'none', got 'avg'",
        ),
        (
            lambda: CrossEntropyLoss(label_smoothing=2.0),
            r"CrossEntropyLoss: label_smoothing "
            r"must be in \[0, 1\]",
        ),
    ],
)
def test_bad_constructor_arguments_raise(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_linear_needs_its_sizes():
    with pytest.raises(TypeError, match="Linear: missing in_features"):
        Linear(out_features=3)
    with pytest.raises(TypeError, match="Linear: give in_features or dim_in, not both"):
        Linear(3, 4, dim_in=3)


def test_containers_reject_non_layers_and_bad_keys():
    with pytest.raises(
        TypeError,
        match=r"Sequential: layer 1 must be a layer \(a sadl.nn.Module\), "
        r"got function",
    ):
        Sequential(Linear(2, 2), lambda x: x)
    with pytest.raises(TypeError, match=r"ModuleList: item 0 must be a layer"):
        ModuleList([3])
    with pytest.raises(KeyError, match=r"keys must be non-empty strings without '\.'"):
        ModuleDict({"a.b": Linear(2, 2)})
    with pytest.raises(KeyError, match=r"key 'train' would shadow an attribute"):
        ModuleDict({"train": Linear(2, 2)})
    with pytest.raises(IndexError, match=r"Sequential: index 5 out of range for 1 layers"):
        Sequential(Linear(2, 2))[5]


def test_op_bad_reduction_and_params():
    with pytest.raises(ValueError, match="mse_loss: reduction must be one of"):
        sadl.ops.mse_loss(_zeros(2), _zeros(2), reduction="avg")
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh'"):
        sadl.ops.gelu(_zeros(2), approximate="erf")
    with pytest.raises(ValueError, match=r"dropout: p must be a probability in \[0, 1\]"):
        sadl.ops.dropout(_zeros(2), p=-0.1, seed=0)
    with pytest.raises(ValueError, match="batch_norm: evaluation .* needs running_mean"):
        sadl.ops.batch_norm(_zeros(2, 3), None, None, training=False)
    with pytest.raises(ValueError, match="batch_norm: training needs more than one value"):
        sadl.ops.batch_norm(_zeros(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match=r"conv2d: groups=2 must be positive and divide"):
        sadl.ops.conv2d(_zeros(1, 3, 4, 4), _zeros(2, 1, 1, 1), None, groups=2)
