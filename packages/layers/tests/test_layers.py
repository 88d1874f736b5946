"""Every layer: float64 gradcheck and gradgradcheck w.r.t. its inputs and its parameters, plus
the behaviour each layer promises (modes, buffers, caches, dtypes)."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from layer_helpers import check_layer, rand
from sadl_layers import (
    CELU,
    ELU,
    GELU,
    SELU,
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    BCELoss,
    BCEWithLogitsLoss,
    CausalSelfAttention,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    Identity,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    L1Loss,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSigmoid,
    LogSoftmax,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool2d,
    Mish,
    Mlp,
    MSELoss,
    MultiHeadAttention,
    NLLLoss,
    QuickGELU,
    ReLU,
    ReLU6,
    RMSNorm,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softsign,
    Tanh,
    Unfold,
    Upsample,
)

# (layer factory, inputs) — inputs are float64 arrays (differentiated) or constants.
GRAD_CASES = {
    "Linear": (lambda: Linear(4, 3, rng=0), (rand(2, 3, 4),)),
    "Linear-nobias-dim_in": (lambda: Linear(dim_in=3, dim_out=2, bias=False, rng=0), (rand(5, 3),)),
    "Embedding": (lambda: Embedding(5, 3, rng=0), (np.array([[0, 4, 4], [2, 0, 4]]),)),
    "LayerNorm": (lambda: LayerNorm(4), (rand(2, 3, 4),)),
    "LayerNorm-2d-shape": (lambda: LayerNorm((3, 4), bias=False), (rand(2, 3, 4),)),
    "RMSNorm": (lambda: RMSNorm(4, eps=1e-6), (rand(2, 3, 4),)),
    "BatchNorm1d": (lambda: BatchNorm1d(3), (rand(4, 3),)),
    "BatchNorm1d-3d": (lambda: BatchNorm1d(2), (rand(3, 2, 4),)),
    "BatchNorm2d": (lambda: BatchNorm2d(2), (rand(2, 2, 3, 3),)),
    "Flatten": (Flatten, (rand(2, 3, 2, 2),)),
    "Identity": (Identity, (rand(2, 3),)),
    "ReLU": (ReLU, (rand(3, 4),)),
    "GELU": (GELU, (rand(3, 4, lo=-3, hi=3),)),
    "GELU-tanh": (lambda: GELU("tanh"), (rand(3, 4, lo=-3, hi=3),)),
    "SiLU": (SiLU, (rand(3, 4, lo=-3, hi=3),)),
    "Tanh": (Tanh, (rand(3, 4),)),
    "Sigmoid": (Sigmoid, (rand(3, 4),)),
    "Softmax": (lambda: Softmax(dim=0), (rand(3, 4),)),
    "LogSoftmax": (LogSoftmax, (rand(3, 4),)),
    "LeakyReLU": (lambda: LeakyReLU(0.1), (rand(3, 4),)),
    "MultiHeadAttention-self": (lambda: MultiHeadAttention(4, 2, rng=0), (rand(2, 3, 4),)),
    "MultiHeadAttention-cross": (
        lambda: MultiHeadAttention(4, 2, rng=0),
        (rand(1, 2, 4), rand(1, 3, 4, seed=1), rand(1, 3, 4, seed=2)),
    ),
    "CausalSelfAttention": (lambda: CausalSelfAttention(4, 2, rng=0), (rand(2, 3, 4),)),
    "Conv2d": (lambda: Conv2d(2, 3, 3, padding=1, rng=0), (rand(1, 2, 4, 4),)),
    "Conv2d-strided-grouped": (
        lambda: Conv2d(4, 2, (2, 3), stride=2, dilation=(1, 2), groups=2, rng=0),
        (rand(1, 4, 5, 7),),
    ),
    "MaxPool2d": (lambda: MaxPool2d(2), (rand(1, 2, 4, 4),)),
    "MaxPool2d-padded": (lambda: MaxPool2d(3, stride=2, padding=1), (rand(1, 1, 5, 5),)),
    "AvgPool2d": (lambda: AvgPool2d(2, stride=1), (rand(1, 2, 3, 3),)),
    "AvgPool2d-exclude-pad": (
        lambda: AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        (rand(1, 1, 5, 5),),
    ),
    "ELU": (lambda: ELU(0.7), (rand(3, 4, lo=-3, hi=3),)),
    "SELU": (SELU, (rand(3, 4, lo=-3, hi=3),)),
    "CELU": (lambda: CELU(1.5), (rand(3, 4, lo=-3, hi=3),)),
    "Mish": (Mish, (rand(3, 4, lo=-3, hi=3),)),
    "Softplus": (lambda: Softplus(beta=2.0, threshold=4.0), (rand(3, 4, lo=-3, hi=3),)),
    "LogSigmoid": (LogSigmoid, (rand(3, 4, lo=-3, hi=3),)),
    "Hardtanh": (lambda: Hardtanh(-0.5, 0.5), (rand(3, 4),)),
    "ReLU6": (ReLU6, (rand(3, 4, lo=-2, hi=8),)),
    "Hardsigmoid": (Hardsigmoid, (rand(3, 4, lo=-5, hi=5),)),
    "Hardswish": (Hardswish, (rand(3, 4, lo=-5, hi=5),)),
    "Conv1d": (lambda: Conv1d(2, 3, 3, padding=1, rng=0), (rand(2, 2, 5),)),
    "ConvTranspose2d": (
        lambda: ConvTranspose2d(2, 2, 3, stride=2, padding=1, output_padding=1, rng=0),
        (rand(1, 2, 2, 3),),
    ),
    "ConvTranspose1d": (lambda: ConvTranspose1d(2, 3, 2, stride=2, rng=0), (rand(2, 4),)),
    "MaxPool2d-ceil": (lambda: MaxPool2d(2, ceil_mode=True), (rand(1, 2, 3, 5),)),
    "MaxPool1d": (lambda: MaxPool1d(3, stride=2, padding=1), (rand(2, 2, 6),)),
    "AvgPool2d-ceil": (lambda: AvgPool2d(2, ceil_mode=True), (rand(1, 1, 5, 3),)),
    "AvgPool1d": (lambda: AvgPool1d(2, ceil_mode=True), (rand(2, 2, 5),)),
    "AdaptiveAvgPool2d": (lambda: AdaptiveAvgPool2d((2, 3)), (rand(1, 2, 5, 4),)),
    "AdaptiveAvgPool1d": (lambda: AdaptiveAvgPool1d(2), (rand(2, 5),)),
    "Conv3d": (lambda: Conv3d(2, 3, (2, 3, 2), padding=1, rng=0), (rand(1, 2, 3, 4, 3),)),
    "Conv3d-same": (lambda: Conv3d(2, 2, 2, padding="same", rng=0), (rand(2, 3, 3, 2),)),
    "Conv2d-same": (lambda: Conv2d(2, 2, (2, 3), padding="same", rng=0), (rand(1, 2, 4, 5),)),
    "Conv1d-valid": (lambda: Conv1d(2, 2, 3, padding="valid", rng=0), (rand(2, 2, 5),)),
    "ConvTranspose3d": (
        lambda: ConvTranspose3d(2, 2, 2, stride=(2, 1, 2), padding=(0, 1, 0), rng=0),
        (rand(1, 2, 2, 3, 2),),
    ),
    "MaxPool3d": (lambda: MaxPool3d(2, stride=(1, 2, 2)), (rand(1, 2, 3, 4, 4),)),
    "AvgPool3d": (
        lambda: AvgPool3d(3, stride=2, padding=1, count_include_pad=False),
        (rand(1, 1, 4, 5, 3),),
    ),
    "BatchNorm3d": (lambda: BatchNorm3d(2), (rand(2, 2, 3, 2, 2),)),
    "GroupNorm": (lambda: GroupNorm(2, 4), (rand(2, 4, 3),)),
    "Softmin": (lambda: Softmin(dim=0), (rand(3, 4),)),
    "Softsign": (Softsign, (rand(3, 4, lo=-3, hi=3),)),
    "QuickGELU": (QuickGELU, (rand(3, 4, lo=-3, hi=3),)),
    "Unfold": (lambda: Unfold((2, 3), padding=1, stride=2), (rand(1, 2, 4, 5),)),
    "MaxUnpool2d": (
        lambda: MaxUnpool2d(2),
        (rand(1, 2, 2, 2), np.array([[[[5, 7], [13, 15]], [[0, 3], [9, 10]]]])),
    ),
    "InstanceNorm1d-affine": (lambda: InstanceNorm1d(3, affine=True), (rand(2, 3, 4),)),
    "InstanceNorm2d-tracked": (
        lambda: InstanceNorm2d(2, track_running_stats=True),
        (rand(2, 2, 3, 3),),
    ),
    "InstanceNorm3d": (lambda: InstanceNorm3d(2, affine=True), (rand(1, 2, 2, 3, 2),)),
    "BCELoss": (
        lambda: BCELoss(weight=rand(3, lo=0.5, hi=2.0)),
        (rand(4, 3, lo=0.1, hi=0.9), rand(4, 3, lo=0, hi=1)),
    ),
    "Upsample-nearest": (lambda: Upsample(scale_factor=2), (rand(1, 2, 2, 3),)),
    "Upsample-bilinear": (
        lambda: Upsample(size=(3, 5), mode="bilinear", align_corners=True),
        (rand(1, 1, 2, 3),),
    ),
    "Upsample-linear": (lambda: Upsample(scale_factor=1.5, mode="linear"), (rand(1, 2, 3),)),
    "Sequential": (
        lambda: Sequential(Linear(3, 4, rng=0), GELU(), LayerNorm(4), Linear(4, 2, rng=1)),
        (rand(2, 3),),
    ),
    "CrossEntropyLoss": (
        lambda: CrossEntropyLoss(label_smoothing=0.1, ignore_index=1),
        (rand(2, 3, 4), np.array([[0, 1, 3], [2, 2, 1]])),
    ),
    "NLLLoss": (lambda: NLLLoss(), (rand(3, 4), np.array([0, 3, 1]))),
    "NLLLoss-weighted": (
        lambda: NLLLoss(weight=np.array([1.0, 2.0, 0.5, 1.5])),
        (rand(3, 4), np.array([0, 3, 1])),
    ),
    "CrossEntropyLoss-weighted": (
        lambda: CrossEntropyLoss(weight=np.array([1.0, 2.0, 0.5, 1.5]), label_smoothing=0.1),
        (rand(2, 3, 4), np.array([[0, 1, 3], [2, 2, 1]])),
    ),
    "CrossEntropyLoss-probabilities": (
        CrossEntropyLoss,
        (rand(2, 4), np.array([[0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 0.0, 0.0]])),
    ),
    "MSELoss": (lambda: MSELoss(reduction="sum"), (rand(3, 4), rand(3, 4, seed=1))),
    "L1Loss": (L1Loss, (rand(3, 4), rand(3, 4, seed=1))),
    "BCEWithLogitsLoss": (
        lambda: BCEWithLogitsLoss(pos_weight=np.array([2.0, 0.5, 1.0])),
        (rand(2, 3), rand(2, 3, seed=1, lo=0, hi=1)),
    ),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_layer_gradcheck_and_gradgradcheck(name):
    make, inputs = GRAD_CASES[name]
    check_layer(make(), *inputs)


def test_dropout_gradcheck_in_training_mode_with_a_fixed_mask():
    layer = Dropout(0.4)
    x = rand(4, 5)

    def reseed() -> None:
        layer._rng = np.random.default_rng(3)

    check_layer(layer, x, before=reseed)


def test_attention_dropout_gradcheck_with_a_fixed_mask():
    layer = CausalSelfAttention(4, 2, dropout=0.3, rng=0)

    def reseed() -> None:
        layer.attn_dropout._rng = np.random.default_rng(5)
        layer.resid_dropout._rng = np.random.default_rng(6)

    check_layer(layer, rand(1, 3, 4), before=reseed)


def test_batchnorm_eval_gradcheck():
    layer = BatchNorm2d(2)
    layer.running_mean.data[:] = [0.3, -0.1]
    layer.running_var.data[:] = [0.5, 2.0]
    layer.eval()
    check_layer(layer, rand(2, 2, 3, 3))


# --------------------------------------------------------------------------- behaviour


def test_linear_init_is_reproducible_and_bounded():
    a, b = Linear(50, 20, rng=3), Linear(50, 20, rng=3)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert a.weight.dtype == np.float32 and a.weight.shape == (20, 50)
    assert np.abs(a.weight.data).max() <= 1 / np.sqrt(50)
    assert a.bias.shape == (20,)
    sadl.manual_seed(1)
    c = Linear(5, 5)
    sadl.manual_seed(1)
    d = Linear(5, 5)
    np.testing.assert_array_equal(c.weight.data, d.weight.data)


def test_linear_accepts_any_leading_dims_and_arrays():
    layer = Linear(3, 2, rng=0)
    for shape in [(3,), (4, 3), (2, 4, 3), (2, 1, 4, 3)]:
        x = rand(*shape).astype(np.float32)
        out = layer(x)
        assert isinstance(out, sadl.Tensor) and out.shape == (*shape[:-1], 2)
        np.testing.assert_allclose(out.data, x @ layer.weight.data.T + layer.bias.data, rtol=1e-6)


def test_embedding_accepts_int_tensors_and_any_shape():
    emb = Embedding(10, 4, rng=0)
    ids = sadl.tensor(np.array([[[1, 2], [3, 9]]]))
    out = emb(ids)
    assert out.shape == (1, 2, 2, 4)
    np.testing.assert_array_equal(out.data[0, 1, 1], emb.weight.data[9])


def test_embedding_padding_idx_row_is_zero_and_gets_no_gradient():
    emb = Embedding(5, 3, padding_idx=1, rng=0)
    np.testing.assert_array_equal(emb.weight.data[1], 0.0)
    emb(np.array([1, 2, 1])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad[1], 0.0)
    np.testing.assert_array_equal(emb.weight.grad[2], 1.0)


def test_dropout_train_eval_and_reproducibility():
    x = sadl.Tensor(np.ones((100, 100), np.float32))
    layer = Dropout(0.25, rng=11)
    out = layer(x)
    assert out.dtype == np.float32
    kept = out.data != 0
    assert 0.7 < kept.mean() < 0.8
    np.testing.assert_allclose(out.data[kept], 1 / 0.75)
    again = Dropout(0.25, rng=11)(x)
    np.testing.assert_array_equal(out.data, again.data)
    layer.eval()
    assert layer(x) is x
    sadl.manual_seed(4)
    a = Dropout(0.5)(x).data
    sadl.manual_seed(4)
    b = Dropout(0.5)(x).data
    np.testing.assert_array_equal(a, b)
    assert Dropout(0.0)(x) is x


def test_batchnorm_updates_running_stats_only_in_training():
    layer = BatchNorm1d(2, momentum=0.5)
    x = np.array([[1.0, 10.0], [3.0, 20.0]], dtype=np.float32)
    layer(x)
    np.testing.assert_allclose(layer.running_mean.data, [1.0, 7.5])
    np.testing.assert_allclose(layer.running_var.data, [0.5 + 0.5 * 2.0, 0.5 + 0.5 * 50.0])
    assert int(layer.num_batches_tracked.data) == 1
    layer.eval()
    before = layer.running_mean.data.copy()
    out = layer(x)
    np.testing.assert_array_equal(layer.running_mean.data, before)
    expected = (x - before) / np.sqrt(layer.running_var.data + 1e-5)
    np.testing.assert_allclose(out.data, expected, rtol=1e-6)
    assert set(layer.state_dict()) == {
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    }


def test_batchnorm_cumulative_average_when_momentum_is_none():
    layer = BatchNorm1d(1, momentum=None)
    for value in (2.0, 4.0, 6.0):
        layer(np.array([[value - 1], [value + 1]], dtype=np.float32))
    np.testing.assert_allclose(layer.running_mean.data, [4.0], rtol=1e-6)


def test_causal_self_attention_kv_cache_matches_full_sequence():
    layer = CausalSelfAttention(8, 2, rng=0)
    x = rand(2, 5, 8).astype(np.float32)
    full = layer(x).data
    cache: dict = {}
    with sadl.no_grad():
        first = layer(x[:, :3], cache=cache).data
        steps = [layer(x[:, t : t + 1], cache=cache).data for t in (3, 4)]
    np.testing.assert_allclose(first, full[:, :3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.concatenate(steps, 1), full[:, 3:], rtol=1e-5, atol=1e-6)
    assert cache["k"].shape == (2, 2, 5, 4)


def test_causal_self_attention_with_a_preallocated_cache_matches_full_sequence():
    """A cache that keeps keys and values itself (``store(k, v)``, as sadl-models' KVCache
    slots do) gives what the full sequence gives, one position at a time."""

    class Preallocated:
        def __init__(self):
            self.k = np.zeros((2, 2, 5, 4), np.float32)
            self.v = np.zeros((2, 2, 5, 4), np.float32)
            self.length = 0

        def store(self, k, v):
            stop = self.length + k.shape[2]
            self.k[:, :, self.length : stop], self.v[:, :, self.length : stop] = k, v
            self.length = stop
            return sadl.Tensor(self.k[:, :, :stop]), sadl.Tensor(self.v[:, :, :stop])

    layer = CausalSelfAttention(8, 2, rng=0)
    x = rand(2, 5, 8).astype(np.float32)
    full = layer(x).data
    cache = Preallocated()
    with sadl.no_grad():
        steps = [layer(x[:, :2], cache=cache).data]
        steps += [layer(x[:, t : t + 1], cache=cache).data for t in (2, 3, 4)]
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-5, atol=1e-6)
    assert cache.length == 5


def test_causal_self_attention_draws_dropout_from_its_dropout_rng():
    x = rand(2, 4, 8).astype(np.float32)
    a = CausalSelfAttention(8, 2, dropout=0.5, rng=0, dropout_rng=np.random.default_rng(7))
    b = CausalSelfAttention(8, 2, dropout=0.5, rng=0, dropout_rng=np.random.default_rng(7))
    c = CausalSelfAttention(8, 2, dropout=0.5, rng=0)
    np.testing.assert_array_equal(a.c_attn.weight.data, c.c_attn.weight.data)  # same init
    np.testing.assert_array_equal(a(x).data, b(x).data)
    assert not np.array_equal(a(x).data, c(x).data)


def test_causal_self_attention_is_causal():
    layer = CausalSelfAttention(6, 3, rng=1)
    x = rand(1, 4, 6)
    y = layer(x).data
    x2 = x.copy()
    x2[:, 3] += 5.0  # changing the last token must not change earlier outputs
    y2 = layer(x2).data
    np.testing.assert_allclose(y[:, :3], y2[:, :3], rtol=1e-6)
    assert not np.allclose(y[:, 3], y2[:, 3])


def test_multihead_self_attention_equals_explicit_key_value():
    layer = MultiHeadAttention(6, 3, rng=0)
    x = rand(2, 4, 6)
    packed = layer(x, causal=True).data
    explicit = layer(x, sadl.Tensor(x.copy()), sadl.Tensor(x.copy()), causal=True).data
    np.testing.assert_allclose(packed, explicit, rtol=1e-6)


def test_layers_keep_float32_end_to_end():
    """No float64 NumPy promotion anywhere in a transformer-ish stack."""
    model = Sequential(
        Linear(8, 8, rng=0),
        LayerNorm(8),
        GELU(),
        CausalSelfAttention(8, 2, dropout=0.1, rng=1),
        RMSNorm(8),
        SiLU(),
        Dropout(0.1, rng=2),
        Linear(8, 5, rng=3),
    )
    x = sadl.Tensor(rand(2, 3, 8).astype(np.float32), requires_grad=True)
    out = model(x)
    assert out.dtype == np.float32
    loss = CrossEntropyLoss(label_smoothing=0.1)(out, np.array([[0, 1, 2], [3, 4, 0]]))
    assert loss.dtype == np.float32
    loss.backward()
    assert x.grad.dtype == np.float32
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == np.float32, name


def test_conv_net_end_to_end_float32():
    model = Sequential(
        Conv2d(3, 4, 3, padding=1, rng=0),
        BatchNorm2d(4),
        ReLU(),
        MaxPool2d(2),
        AvgPool2d(2),
        Flatten(),
        Linear(4 * 2 * 2, 3, rng=1),
    )
    x = rand(2, 3, 8, 8).astype(np.float32)
    out = model(x)
    assert out.shape == (2, 3) and out.dtype == np.float32
    CrossEntropyLoss()(out, np.array([0, 2])).backward()
    assert all(p.grad.dtype == np.float32 for p in model.parameters())
    # Unbatched (C, H, W) inputs work like a batch of one.
    conv = model[0]
    np.testing.assert_allclose(conv(x[0]).data, conv(x[:1]).data[0], rtol=1e-6)


def test_loss_layers_cast_float_targets_to_the_input_dtype():
    x = sadl.Tensor(np.zeros((2, 3), np.float32), requires_grad=True)
    loss = MSELoss()(x, np.ones((2, 3)))  # float64 target
    assert loss.dtype == np.float32
    loss.backward()
    assert x.grad.dtype == np.float32


def test_mlp_is_sequential_and_takes_a_list():
    model = Mlp([Linear(dim_in=2, dim_out=4, rng=0), ReLU(), Linear(dim_in=4, dim_out=1, rng=1)])
    assert isinstance(model, Sequential) and len(model) == 3
    assert sadl.Mlp is Sequential and sadl.nn.Mlp is Sequential
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert model(np.ones((3, 2), np.float32)).shape == (3, 1)


def test_causal_self_attention_cached_path_gradcheck():
    """With cached keys/values the layer still differentiates (queries see the whole cache)."""
    layer = CausalSelfAttention(4, 2, rng=0)
    past_k, past_v = rand(1, 2, 3, 2, seed=4), rand(1, 2, 3, 2, seed=5)

    class WithCache(sadl.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = layer

        def forward(self, x):
            return self.attn(x, cache={"k": past_k.copy(), "v": past_v.copy()})

    check_layer(WithCache(), rand(1, 2, 4))


def test_convolutions_take_an_empty_batch():
    for layer, shape in (
        (Conv2d(2, 3, 3, rng=0), (0, 2, 5, 5)),
        (Conv1d(2, 3, 3, rng=0), (0, 2, 5)),
        (ConvTranspose2d(2, 3, 3, stride=2, rng=0), (0, 2, 3, 3)),
    ):
        x = sadl.Tensor(np.zeros(shape, np.float32), requires_grad=True)
        out = layer(x)
        assert out.shape[0] == 0
        out.sum().backward()
        assert not layer.weight.grad.any()
