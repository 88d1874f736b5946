"""3-D convolutions, pools and batch norm, and ``padding="same"``/``"valid"`` for every
convolution, against torch (float64; skipped without torch): forward values, first and
second derivatives of the ops, and the layers' outputs, input and parameter gradients with
torch's own layer loaded from sadl's ``state_dict`` (so names and shapes match torch's).
"""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers import (
    AvgPool3d,
    BatchNorm3d,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose2d,
    ConvTranspose3d,
    MaxPool3d,
)
from test_layer_vocabulary_torch_parity import ATOL, RTOL, _rand, parity

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
F = torch.nn.functional
pytestmark = pytest.mark.torch


def layer_parity(layer, tlayer, x, *, second=True, rtol=RTOL, atol=ATOL):
    """torch's layer loaded from sadl's state_dict gives the same output, input gradient (and
    second derivative) and parameter gradients.
    """
    tlayer.load_state_dict(
        {k: torch.from_numpy(np.array(v.numpy())) for k, v in layer.state_dict().items()}
    )
    parity(layer, tlayer, x, second=second, rtol=rtol, atol=atol)
    out = layer(sadl.Tensor(x.copy(), requires_grad=True))
    tout = tlayer(torch.from_numpy(x.copy()).requires_grad_())
    w = np.random.default_rng(5).uniform(0.5, 1.5, size=out.shape)
    (out * w).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    named, tnamed = list(layer.named_parameters()), list(tlayer.named_parameters())
    assert [n for n, _ in named] == [n for n, _ in tnamed]
    for (name, p), (_, tp) in zip(named, tnamed):
        np.testing.assert_allclose(p.grad, tp.grad.numpy(), rtol=rtol, atol=atol, err_msg=name)
    for name, buf in tlayer.state_dict().items():  # running statistics after the same calls
        np.testing.assert_allclose(np.asarray(layer.state_dict()[name].numpy()), buf.numpy())


# --------------------------------------------------------------------------------- conv3d

CONV3D = [
    ((2, 3, (2, 3, 2)), {}, (2, 2, 4, 5, 4)),
    ((4, 2, 3), {"stride": (2, 1, 2), "padding": (1, 0, 1), "groups": 2}, (1, 4, 5, 4, 5)),
    ((2, 2, 2), {"dilation": (2, 1, 2), "bias": False}, (1, 2, 5, 3, 5)),
    ((2, 3, (2, 3, 4)), {"padding": "same", "dilation": (1, 2, 1)}, (1, 2, 3, 5, 4)),
    ((2, 3, 2), {"padding": "valid"}, (2, 3, 3, 4)),  # unbatched
]


@pytest.mark.parametrize("args, kwargs, shape", CONV3D)
def test_conv3d_op_and_layer(args, kwargs, shape):
    layer = Conv3d(*args, rng=0, dtype=np.float64, **kwargs)
    params = {k: v for k, v in kwargs.items() if k != "bias"}
    b = None if layer.bias is None else layer.bias.data
    parity(
        lambda x, w: sadl.ops.conv3d(x, w, b, **params),
        lambda x, w: F.conv3d(x, w, None if b is None else torch.from_numpy(b), **params),
        _rand(*shape),
        layer.weight.data.copy(),
    )
    layer_parity(layer, torch.nn.Conv3d(*args, **kwargs).double(), _rand(*shape, seed=1))


CONV_TRANSPOSE3D = [
    ((2, 3, 2), {}, (2, 2, 2, 3, 2)),
    ((2, 2, (3, 2, 2)), {"stride": 2, "padding": 1, "output_padding": 1}, (1, 2, 3, 2, 3)),
    ((4, 2, 2), {"groups": 2, "stride": (3, 1, 2), "dilation": (2, 1, 1)}, (1, 4, 2, 2, 2)),
    ((2, 2, 2), {"dilation": 3, "output_padding": (2, 0, 1), "bias": False}, (1, 2, 2, 3, 2)),
    ((2, 2, 3), {"stride": 2, "padding": 2}, (2, 3, 3, 3)),  # unbatched
]


@pytest.mark.parametrize("args, kwargs, shape", CONV_TRANSPOSE3D)
def test_conv_transpose3d_op_and_layer(args, kwargs, shape):
    layer = ConvTranspose3d(*args, rng=0, dtype=np.float64, **kwargs)
    params = {k: v for k, v in kwargs.items() if k != "bias"}
    b = None if layer.bias is None else layer.bias.data
    parity(
        lambda x, w: sadl.ops.conv_transpose3d(x, w, b, **params),
        lambda x, w: F.conv_transpose3d(x, w, None if b is None else torch.from_numpy(b), **params),
        _rand(*shape),
        layer.weight.data.copy(),
    )
    layer_parity(layer, torch.nn.ConvTranspose3d(*args, **kwargs).double(), _rand(*shape, seed=1))


def test_conv_transpose3d_output_size_picks_the_padding():
    layer = ConvTranspose3d(2, 3, 3, stride=2, padding=1, rng=0, dtype=np.float64)
    tlayer = torch.nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1).double()
    tlayer.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in layer.state_dict().items()})
    x = _rand(1, 2, 3, 2, 3)
    for size in [(5, 3, 5), (6, 4, 6), (6, 3, 5)]:
        out = layer(x, output_size=size)
        tout = tlayer(torch.from_numpy(x), output_size=size)
        np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------------- pools


POOL3D = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (2, 3, 2), "stride": 1, "ceil_mode": True},
    {"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True},
]


@pytest.mark.parametrize("kwargs", [*POOL3D, {"kernel_size": 2, "stride": 1, "dilation": 2}])
def test_max_pool3d_values_indices_and_layer(kwargs):
    x = _rand(2, 2, 5, 6, 5)
    parity(
        lambda t: sadl.ops.max_pool3d(t, return_indices=True, **kwargs),
        lambda t: F.max_pool3d(t, return_indices=True, **kwargs),
        x,
    )
    parity(MaxPool3d(**kwargs), torch.nn.MaxPool3d(**kwargs), x[0])  # unbatched


def test_max_pool3d_ties_route_to_the_first_maximum_like_torch():
    x = np.zeros((1, 1, 4, 4, 4))
    x[0, 0, 1:3, 1:3, 1:3] = 1.0
    parity(
        lambda t: sadl.ops.max_pool3d(t, kernel_size=2, stride=1, return_indices=True),
        lambda t: F.max_pool3d(t, kernel_size=2, stride=1, return_indices=True),
        x,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        *POOL3D,
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        {"kernel_size": (3, 2, 2), "stride": 1, "padding": (1, 1, 0), "divisor_override": 5},
    ],
)
def test_avg_pool3d_and_layer(kwargs):
    x = _rand(2, 2, 5, 6, 5)
    parity(lambda t: sadl.ops.avg_pool3d(t, **kwargs), lambda t: F.avg_pool3d(t, **kwargs), x)
    parity(AvgPool3d(**kwargs), torch.nn.AvgPool3d(**kwargs), x[1])  # unbatched


# ----------------------------------------------------------------------------- batch norm


@pytest.mark.parametrize("kwargs", [{}, {"affine": False}, {"momentum": None}])
def test_batch_norm3d_train_then_eval(kwargs):
    layer = BatchNorm3d(3, dtype=np.float64, **kwargs)
    tlayer = torch.nn.BatchNorm3d(3, **kwargs).double()
    layer_parity(layer, tlayer, _rand(2, 3, 3, 2, 4))
    layer.eval()
    tlayer.eval()
    layer_parity(layer, tlayer, _rand(2, 3, 2, 2, 3, seed=3))


# -------------------------------------------------------------------- padding same / valid


@pytest.mark.parametrize(
    "cls, tcls, kernel, kwargs, shape",
    [
        (Conv1d, torch.nn.Conv1d, 4, {"padding": "same"}, (2, 2, 7)),
        (Conv1d, torch.nn.Conv1d, 3, {"padding": "same", "dilation": 3}, (2, 2, 7)),
        (Conv1d, torch.nn.Conv1d, 3, {"padding": "valid"}, (2, 2, 7)),
        (Conv2d, torch.nn.Conv2d, 3, {"padding": "same"}, (1, 2, 5, 6)),
        (Conv2d, torch.nn.Conv2d, (2, 4), {"padding": "same", "dilation": (1, 3)}, (1, 2, 5, 6)),
        (Conv2d, torch.nn.Conv2d, (2, 3), {"padding": "same", "groups": 2}, (2, 5, 6)),
        (Conv2d, torch.nn.Conv2d, 3, {"padding": "valid", "stride": 2}, (1, 2, 5, 6)),
        (Conv3d, torch.nn.Conv3d, (2, 3, 4), {"padding": "same"}, (1, 2, 3, 4, 5)),
    ],
)
def test_padding_same_and_valid(cls, tcls, kernel, kwargs, shape):
    layer = cls(2, 4, kernel, rng=0, dtype=np.float64, **kwargs)
    out = layer(_rand(*shape))
    if kwargs["padding"] == "same":  # the spatial size is kept
        assert out.shape[-layer.spatial :] == shape[-layer.spatial :]
    layer_parity(layer, tcls(2, 4, kernel, **kwargs).double(), _rand(*shape))
    params = {k: v for k, v in kwargs.items()}
    op = {Conv1d: sadl.ops.conv1d, Conv2d: sadl.ops.conv2d, Conv3d: sadl.ops.conv3d}[cls]
    top = {Conv1d: F.conv1d, Conv2d: F.conv2d, Conv3d: F.conv3d}[cls]
    x = _rand(*shape) if len(shape) == layer.spatial + 2 else _rand(1, *shape)
    parity(
        lambda t, w: op(t, w, None, **params),
        lambda t, w: top(t, w, None, **params),
        x,
        layer.weight.data.copy(),
    )


def test_padding_strings_are_checked_like_torch():
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        Conv2d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        sadl.ops.conv2d(_rand(1, 2, 4, 4), _rand(2, 2, 3, 3), None, stride=2, padding="same")
    with pytest.raises(ValueError, match=r"'same' or 'valid', got 'full'"):
        Conv1d(2, 2, 3, padding="full")
    with pytest.raises(ValueError, match=r"'same' or 'valid', got 'full'"):
        sadl.ops.conv3d(_rand(1, 2, 3, 3, 3), _rand(2, 2, 2, 2, 2), None, padding="full")
    with pytest.raises(ValueError, match="not transposed ones"):
        ConvTranspose2d(2, 2, 3, padding="same")
    assert Conv2d(2, 2, 3, padding="same").padding == "same"  # as torch stores it
