"""``sadl.nn.functional`` takes torch.nn.functional's arguments and gives its results."""

import numpy as np
import pytest
import sadl
import sadl.nn.functional as F  # noqa: N812 (torch's spelling)
from sadl.testing import gradcheck

torch = pytest.importorskip("torch", reason="torch.nn.functional is the reference")
TF = torch.nn.functional
pytestmark = pytest.mark.torch

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 6, 6))
W = rng.standard_normal((4, 3, 3, 3))
B = rng.standard_normal(4)
LOGITS = rng.standard_normal((5, 4))
IDS = np.array([0, 3, 1, 1, 2])
IDS_IGNORED = np.array([0, -1, 1, 3, -1])
SPATIAL = rng.standard_normal((2, 4, 3))  # (N, C, d): classes at dim 1
SPATIAL_IDS = np.array([[0, 3, 1], [2, 2, 0]])
Q, K, V = (rng.standard_normal((2, 2, 5, 4)) for _ in range(3))
PROBS = 1 / (1 + np.exp(-rng.standard_normal((3, 4))))
TARGET01 = (rng.random((3, 4)) > 0.5).astype(np.float64)
EMB = rng.standard_normal((7, 3))
LN_W, LN_B = rng.standard_normal(6), rng.standard_normal(6)

# name -> (args, kwargs); arrays become tensors of each framework, ints stay ints
CASES = {
    "relu": ((X,), {}),
    "relu6": ((X * 4,), {}),
    "gelu": ((X,), {}),
    "gelu-tanh": ((X,), {"approximate": "tanh"}),
    "silu": ((X,), {}),
    "elu": ((X,), {"alpha": 0.5}),
    "selu": ((X,), {}),
    "celu": ((X,), {"alpha": 2.0}),
    "leaky_relu": ((X, 0.2), {}),
    "hardtanh": ((X, -0.5, 0.5), {}),
    "softplus": ((X,), {"beta": 2.0, "threshold": 5.0}),
    "softsign": ((X,), {}),
    "logsigmoid": ((X,), {}),
    "mish": ((X,), {}),
    "sigmoid": ((X,), {}),
    "tanh": ((X,), {}),
    "hardswish": ((X,), {}),
    "hardsigmoid": ((X,), {}),
    "softmax": ((X, 1), {}),
    "softmax-dim": ((X,), {"dim": -1}),
    "log_softmax": ((X,), {"dim": 1}),
    "softmin": ((X,), {"dim": 2}),
    "cross_entropy": ((LOGITS, IDS), {}),
    "cross_entropy-options": (
        (LOGITS, IDS_IGNORED),
        {"ignore_index": -1, "label_smoothing": 0.1, "reduction": "sum"},
    ),
    "cross_entropy-weight": ((LOGITS, IDS), {"weight": np.array([1.0, 2.0, 0.5, 1.5])}),
    "cross_entropy-spatial": ((SPATIAL, SPATIAL_IDS), {"reduction": "none"}),
    "cross_entropy-probabilities": (
        (LOGITS, np.abs(LOGITS) / np.abs(LOGITS).sum(1, keepdims=True)),
        {},
    ),
    "nll_loss": ((np.log(PROBS / PROBS.sum(1, keepdims=True)), np.array([0, 3, 2])), {}),
    "nll_loss-spatial": ((SPATIAL, SPATIAL_IDS), {"reduction": "sum"}),
    "mse_loss": ((PROBS, TARGET01), {}),
    "mse_loss-none": ((PROBS, TARGET01), {"reduction": "none"}),
    "l1_loss": ((PROBS, TARGET01), {"reduction": "sum"}),
    "binary_cross_entropy": ((PROBS, TARGET01), {}),
    "binary_cross_entropy-weight": ((PROBS, TARGET01, np.array([1.0, 2.0, 3.0, 4.0])), {}),
    "binary_cross_entropy_with_logits": ((LOGITS[:3], TARGET01), {"pos_weight": np.ones(4) * 2}),
    "layer_norm": ((X, (6,), LN_W, LN_B, 1e-5), {}),
    "layer_norm-no-affine": ((X, [6, 6]), {}),
    "group_norm": ((X, 3), {"eps": 1e-3}),
    "linear": ((X, rng.standard_normal((2, 6)), rng.standard_normal(2)), {}),
    "linear-no-bias": ((X, rng.standard_normal((2, 6))), {}),
    "embedding": ((np.array([[1, 6], [0, 0]]), EMB), {}),
    "conv2d": ((X, W), {}),
    "conv2d-bias": ((X, W, B), {"stride": 2, "padding": 1}),
    "conv1d": ((X[:, :, 0], W[:, :, 0]), {"padding": 1}),
    "conv3d": ((X[:, :, None], W[:, :, None]), {}),
    "max_pool2d": ((X, 2), {}),
    "max_pool2d-stride": ((X, 3, 2), {"padding": 1}),
    "avg_pool2d": ((X, 2), {}),
    "avg_pool1d": ((X[:, :, 0], 3), {"stride": 1}),
    "adaptive_avg_pool2d": ((X, (2, 3)), {}),
    "scaled_dot_product_attention": ((Q, K, V), {}),
    "scaled_dot_product_attention-causal": ((Q, K, V), {"is_causal": True}),
    "scaled_dot_product_attention-mask": ((Q, K, V), {"attn_mask": np.tril(np.ones((5, 5))) > 0}),
    "scaled_dot_product_attention-scale": ((Q, K, V), {"scale": 0.3}),
    "pad": ((X, (1, 2)), {}),
    "pad-value": ((X, (1, 0, 2, 1)), {"value": 3.5}),
    "pad-reflect": ((X, (1, 1, 2, 2)), {"mode": "reflect"}),
    "pad-replicate": ((X, (1, 2, 0, 1)), {"mode": "replicate"}),
    "pad-circular": ((X, (1, 2, 1, 1)), {"mode": "circular"}),
    "one_hot": ((IDS,), {"num_classes": 6}),
    "normalize": ((X,), {}),
    "normalize-p": ((X,), {"p": 1.0, "dim": -1}),
    "interpolate": ((X,), {"scale_factor": 2}),
    "interpolate-bilinear": ((X,), {"size": (4, 5), "mode": "bilinear", "align_corners": False}),
    "unfold": ((X, 3), {"padding": 1}),
    "dropout-eval": ((X, 0.5, False), {}),
}


def _as(lib, value):
    if isinstance(value, np.ndarray):
        return lib.tensor(value)
    return value


@pytest.mark.parametrize("case", sorted(CASES))
def test_functional_matches_torch(case):
    name = case.split("-")[0]
    args, kwargs = CASES[case]
    got = getattr(F, name)(
        *(_as(sadl, a) for a in args), **{k: _as(sadl, v) for k, v in kwargs.items()}
    )
    want = getattr(TF, name)(
        *(_as(torch, a) for a in args), **{k: _as(torch, v) for k, v in kwargs.items()}
    )
    want = want.detach().numpy()
    assert got.shape == want.shape, case
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-9, err_msg=case)


def test_losses_with_classes_at_dim_1_have_the_right_gradient():
    x = sadl.tensor(SPATIAL, requires_grad=True)
    y = sadl.tensor(SPATIAL_IDS)
    assert gradcheck(lambda t: F.cross_entropy(t, y, label_smoothing=0.1), x)
    assert gradcheck(lambda t: F.nll_loss(F.log_softmax(t, dim=1), y), x)
    tx = torch.tensor(SPATIAL, requires_grad=True)
    TF.cross_entropy(tx, torch.tensor(SPATIAL_IDS)).backward()
    F.cross_entropy(x, y).backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-9)


def test_dropout_scales_kept_elements_and_follows_the_seed():
    x = sadl.ones(20000)
    sadl.manual_seed(3)
    y = F.dropout(x, 0.25).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    sadl.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, p=0.25, training=True).numpy(), y)
    assert F.dropout(x, 0.25, training=False) is x
    with pytest.raises(ValueError, match="probability"):
        F.dropout(x, 1.5)


def test_attention_dropout_is_drawn_and_scaled():
    q = sadl.tensor(Q)
    sadl.manual_seed(1)
    dropped = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    plain = F.scaled_dot_product_attention(q, q, q).numpy()
    assert not np.allclose(dropped, plain)
    sadl.manual_seed(1)
    again = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    np.testing.assert_array_equal(again, dropped)


def test_refused_arguments_say_what_to_do():
    x = sadl.tensor(X)
    with pytest.raises(TypeError, match="reduction="):
        F.mse_loss(x, x, size_average=True)
    with pytest.raises(NotImplementedError, match="inplace"):
        F.dropout(x, inplace=True)
    with pytest.raises(TypeError, match="dim="):
        F.softmax(x)
    with pytest.raises(NotImplementedError, match="max_norm"):
        F.embedding(sadl.tensor(IDS), sadl.tensor(EMB), max_norm=1.0)


def test_a_torch_function_sadl_lacks_names_the_nearest_spelling():
    with pytest.raises(AttributeError, match=r"poisson_nll_loss.*exp\(input\)"):
        F.poisson_nll_loss  # noqa: B018
    with pytest.raises(AttributeError, match=r"no 'not_a_function'.*docs"):
        F.not_a_function  # noqa: B018
    assert hasattr(F, "scaled_dot_product_attention")  # nanoGPT's feature test


def test_functional_is_reachable_every_way_torch_spells_it():
    import sadl.nn.functional as by_import
    from sadl.nn import functional as by_from

    assert by_import is by_from is sadl.nn.functional
    assert sadl.nn.functional.relu is F.relu


def test_top_level_topk_and_tril_take_torchs_arguments():
    x = rng.standard_normal((3, 5))
    values, indices = sadl.topk(sadl.tensor(x), 2, dim=0, largest=False)
    tv, ti = torch.topk(torch.tensor(x), 2, dim=0, largest=False)
    np.testing.assert_array_equal(values.numpy(), tv.numpy())
    np.testing.assert_array_equal(indices.numpy(), ti.numpy())
    np.testing.assert_array_equal(
        sadl.tril(sadl.tensor(x), diagonal=1).numpy(), torch.tril(torch.tensor(x), 1).numpy()
    )
    np.testing.assert_array_equal(
        sadl.triu(sadl.tensor(x), -1).numpy(), torch.triu(torch.tensor(x), diagonal=-1).numpy()
    )


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_as_torch_spells_it(batch_first):
    E, H = 8, 2
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=batch_first).double()
    ours = sadl.nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = rng.standard_normal((5, 3, E) if not batch_first else (3, 5, E))
    kpm = np.zeros((3, 5), dtype=bool)
    kpm[0, -2:] = True
    blocked = np.triu(np.ones((5, 5), dtype=bool), 1)
    masks = [{}, {"key_padding_mask": kpm}, {"attn_mask": blocked}, {"attn_mask": blocked * -1.5}]
    for mask in masks:
        for average in (True, False):
            t_out, t_w = theirs(
                *(torch.tensor(x),) * 3,
                **{k: torch.tensor(v) for k, v in mask.items()},
                average_attn_weights=average,
            )
            s_out, s_w = ours(*(sadl.tensor(x),) * 3, **mask, average_attn_weights=average)
            np.testing.assert_allclose(s_out.numpy(), t_out.detach().numpy(), rtol=1e-9)
            np.testing.assert_allclose(s_w.numpy(), t_w.detach().numpy(), rtol=1e-9)
    out, weights = ours(*(sadl.tensor(x),) * 3, need_weights=False)
    assert weights is None and out.shape == x.shape
    q = sadl.tensor(x, requires_grad=True)
    assert gradcheck(lambda t: ours(t, t, t, key_padding_mask=kpm)[0], q)


def test_a_torch_layer_sadl_lacks_names_the_nearest_spelling():
    with pytest.raises(AttributeError, match=r"for torch's ParameterList, use a plain list"):
        sadl.nn.ParameterList  # noqa: B018
    with pytest.raises(AttributeError, match=r"MultiheadAttention, LayerNorm and Linear"):
        sadl.nn.TransformerEncoderLayer  # noqa: B018
