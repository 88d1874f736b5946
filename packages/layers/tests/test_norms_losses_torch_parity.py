"""GroupNorm, InstanceNorm1d/2d/3d and binary cross-entropy on probabilities against torch
(float64; skipped without torch): ops with first and second derivatives, layers loaded from
sadl's state_dict with their parameter gradients and running statistics."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers import BCELoss, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from test_layer_vocabulary_torch_parity import _rand, parity
from test_vocabulary_3d_torch_parity import layer_parity

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
F = torch.nn.functional
pytestmark = pytest.mark.torch


# ----------------------------------------------------------------------------- group norm
@pytest.mark.parametrize(
    "groups, shape, eps", [(2, (2, 4, 5), 1e-5), (3, (2, 6, 2, 3), 1e-3), (1, (3, 2, 4), 1e-5)]
)
def test_group_norm_op(groups, shape, eps):
    C = shape[1]
    parity(
        lambda x, w, b: sadl.ops.group_norm(x, groups, w, b, eps=eps),
        lambda x, w, b: F.group_norm(x, groups, w, b, eps=eps),
        _rand(*shape, scale=2.0),
        _rand(C, seed=1),
        _rand(C, seed=2),
    )


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_layer(affine):
    layer = GroupNorm(2, 4, affine=affine, dtype=np.float64)
    if affine:
        layer.weight.data[:] = _rand(4, seed=3)
        layer.bias.data[:] = _rand(4, seed=4)
    layer_parity(layer, torch.nn.GroupNorm(2, 4, affine=affine).double(), _rand(3, 4, 2, 3))


# -------------------------------------------------------------------------- instance norm
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 3), (1, 2, 3, 2, 3)])
def test_instance_norm_op(shape):
    C = shape[1]
    parity(
        lambda x, w, b: sadl.ops.instance_norm(x, None, None, w, b),
        lambda x, w, b: F.instance_norm(x, None, None, w, b),
        _rand(*shape, scale=2.0),
        _rand(C, seed=1),
        _rand(C, seed=2),
    )


def test_instance_norm_op_with_running_statistics():
    x = _rand(3, 2, 5, scale=2.0)
    rm, rv = np.array([0.1, -0.2]), np.array([0.5, 2.0])
    trm, trv = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())
    sadl.ops.instance_norm(sadl.tensor(x), rm, rv, momentum=0.3)
    F.instance_norm(torch.from_numpy(x), trm, trv, momentum=0.3)
    np.testing.assert_allclose(rm, trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(rv, trv.numpy(), rtol=1e-12)
    parity(
        lambda t: sadl.ops.instance_norm(t, rm, rv, use_input_stats=False),
        lambda t: F.instance_norm(t, trm, trv, use_input_stats=False),
        x,
    )


@pytest.mark.parametrize(
    "cls, tcls, shape",
    [
        (InstanceNorm1d, torch.nn.InstanceNorm1d, (2, 3, 5)),
        (InstanceNorm2d, torch.nn.InstanceNorm2d, (2, 3, 4, 3)),
        (InstanceNorm3d, torch.nn.InstanceNorm3d, (2, 3, 2, 3, 2)),
        (InstanceNorm2d, torch.nn.InstanceNorm2d, (3, 4, 3)),  # unbatched
    ],
)
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"affine": True},
        {"track_running_stats": True, "momentum": 0.2},
        {"track_running_stats": True, "momentum": None, "affine": True},
    ],
)
def test_instance_norm_layers_train_then_eval(cls, tcls, shape, kwargs):
    layer = cls(3, dtype=np.float64, **kwargs)
    tlayer = tcls(3, **kwargs).double()
    layer_parity(layer, tlayer, _rand(*shape, scale=2.0))
    layer.eval()
    tlayer.eval()
    layer_parity(layer, tlayer, _rand(*shape, seed=5))


# ------------------------------------------------------------------------------------ BCE
PROBS = np.array([[0.0, 1e-30, 0.2, 0.5], [0.9, 1.0 - 1e-12, 1.0, 0.3]])
TARGETS = np.array([[0.0, 1.0, 0.3, 1.0], [0.0, 1.0, 1.0, 0.5]])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction):
    p = np.random.default_rng(0).uniform(0.05, 0.95, size=(4, 3))
    t = np.random.default_rng(1).uniform(0.0, 1.0, size=(4, 3))
    w = np.array([0.5, 2.0, 1.0])
    parity(
        lambda a, b: sadl.ops.binary_cross_entropy(a, b, reduction=reduction),
        lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
        p,
        t,
    )
    parity(
        lambda a, b: sadl.ops.binary_cross_entropy(a, b, w, reduction=reduction),
        lambda a, b: F.binary_cross_entropy(a, b, torch.from_numpy(w), reduction=reduction),
        p,
        t,
    )


def test_binary_cross_entropy_at_zero_and_one_clamps_like_torch():
    # torch clamps the logs at -100 and its input gradient's denominator at 1e-12
    parity(
        lambda a, b: sadl.ops.binary_cross_entropy(a, b, reduction="sum"),
        lambda a, b: F.binary_cross_entropy(a, b, reduction="sum"),
        PROBS,
        TARGETS,
        second=False,
        rtol=1e-7,
        atol=1e-6,
    )


def test_bce_loss_layer_and_errors():
    p = np.random.default_rng(2).uniform(0.05, 0.95, size=(4, 3))
    t = (np.random.default_rng(3).random((4, 3)) > 0.5).astype(np.float64)
    w = np.array([1.0, 0.5, 2.0])
    got = BCELoss(weight=w)(sadl.tensor(p), t)
    want = torch.nn.BCELoss(weight=torch.from_numpy(w))(torch.from_numpy(p), torch.from_numpy(t))
    np.testing.assert_allclose(got.data, want.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*binary_cross_entropy_with_logits"):
        sadl.ops.binary_cross_entropy(sadl.tensor(p * 3), t)
