"""The torch.nn.functional names sadl composes from its ops (``functional/composites.py``):
forward and every input's gradient against PyTorch in float64, and sadl's own gradcheck."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import sadl
import sadl.testing
from sadl.nn import functional

torch = pytest.importorskip("torch", reason="the reference is PyTorch (the local CPU wheel)")
T = torch.nn.functional
rng = np.random.default_rng(0)
X, Y = rng.standard_normal((3, 4, 5, 6)), rng.standard_normal((3, 4, 5, 6))
LOGP = np.log(rng.dirichlet(np.ones(5), size=4))
P = rng.dirichlet(np.ones(5), size=4)
P[0, 1] = 0.0  # a zero probability: no term, whatever the input there
LOGQ = LOGP[::-1].copy()
IMG = rng.standard_normal((2, 8, 3, 5))


def _both(name: str, **kw: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    return (lambda *a: getattr(functional, name)(*a, **kw)), (lambda *a: getattr(T, name)(*a, **kw))


CASES: dict[str, tuple[tuple[Callable[..., Any], Callable[..., Any]], list[np.ndarray]]] = {
    "hardshrink": (_both("hardshrink", lambd=0.3), [X]),
    "softshrink": (_both("softshrink", lambd=0.3), [X]),
    "tanhshrink": (_both("tanhshrink"), [X]),
    "threshold": (_both("threshold", threshold=0.1, value=-2.0), [X]),
    "glu": (_both("glu"), [X]),
    "glu-dim1": (_both("glu", dim=1), [X]),
    "prelu-per-channel": (_both("prelu"), [X, rng.standard_normal(4)]),
    "prelu-one": (_both("prelu"), [X, rng.standard_normal(1)]),
    "smooth_l1_loss": (_both("smooth_l1_loss", beta=0.5), [X, Y]),
    "smooth_l1_loss-sum": (_both("smooth_l1_loss", reduction="sum"), [X, Y]),
    "smooth_l1_loss-beta0": (_both("smooth_l1_loss", beta=0.0, reduction="none"), [X, Y]),
    "huber_loss": (_both("huber_loss", delta=0.7), [X, Y]),
    "huber_loss-none": (_both("huber_loss", delta=2.0, reduction="none"), [X, Y]),
    "kl_div-batchmean": (_both("kl_div", reduction="batchmean"), [LOGP, P]),
    "kl_div-mean": (_both("kl_div", reduction="mean"), [LOGP, P]),
    "kl_div-none": (_both("kl_div", reduction="none"), [LOGP, P]),
    "kl_div-log-target": (_both("kl_div", reduction="sum", log_target=True), [LOGP, LOGQ]),
    "cosine_similarity": (_both("cosine_similarity"), [X, Y]),
    "cosine_similarity-broadcast": (_both("cosine_similarity", dim=-1), [X, Y[:1]]),
    "pairwise_distance": (_both("pairwise_distance"), [X[:, :, 0], Y[:, :, 0]]),
    "pairwise_distance-p1": (_both("pairwise_distance", p=1.0, keepdim=True), [X[0], Y[0]]),
    "pixel_shuffle": (_both("pixel_shuffle", upscale_factor=2), [IMG]),
    "pixel_shuffle-3d": (_both("pixel_shuffle", upscale_factor=3), [IMG[0, :1].repeat(9, 0)]),
    "pixel_unshuffle": (_both("pixel_unshuffle", downscale_factor=2), [X[:, :3, :4]]),
}  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_composite_functional_matches_torch(name: str) -> None:
    (ours_fn, torch_fn), arrays = CASES[name]
    ours = [sadl.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():  # (torch warns that kl_div's 'mean' is not the divergence)
        warnings.simplefilter("ignore", UserWarning)
        want = torch_fn(*theirs)
    got = ours_fn(*ours)
    np.testing.assert_allclose(got.data, want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(1).standard_normal(tuple(want.shape))
    want.backward(torch.tensor(g))
    got.backward(sadl.tensor(g))
    for mine, ref in zip(ours, theirs, strict=True):
        want_grad = ref.grad.numpy()
        if name.startswith("kl_div") and mine is ours[1] and "log" not in name:
            # the target's gradient where the target is 0 (no derivative: x log x): torch's
            # nan, sadl's 0, like the term's value there
            assert np.isnan(want_grad[P == 0]).all() and (np.asarray(mine.grad)[P == 0] == 0).all()
            want_grad = np.where(P == 0, 0.0, want_grad)
        np.testing.assert_allclose(mine.grad.data, want_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith("pixel")])
def test_composite_functional_gradcheck(name: str) -> None:
    (ours_fn, _), arrays = CASES[name]
    small = [a[:2] if a.ndim > 1 else a for a in arrays]
    if name.startswith("kl_div") and "log" not in name:  # (x log x has no derivative at 0)
        small[1] = np.random.default_rng(2).dirichlet(np.ones(5), size=2)
    sadl.testing.gradcheck(ours_fn, *[sadl.tensor(a, requires_grad=True) for a in small])


def test_bad_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="even size"):
        functional.glu(sadl.tensor(np.ones((2, 3))))
    with pytest.raises(ValueError, match="one per channel"):
        functional.prelu(sadl.tensor(X), sadl.tensor(np.ones(3)))
    with pytest.raises(ValueError, match="divisible"):
        functional.pixel_shuffle(sadl.tensor(np.ones((1, 3, 2, 2))), 2)
    with pytest.raises(ValueError, match="non-negative"):
        functional.smooth_l1_loss(sadl.tensor(X), sadl.tensor(Y), beta=-1.0)


MODULES: dict[str, tuple[dict[str, Any], list[np.ndarray]]] = {
    "Hardshrink": ({"lambd": 0.3}, [X]),
    "Softshrink": ({}, [X]),
    "Tanhshrink": ({}, [X]),
    "Threshold": ({"threshold": 0.2, "value": 3.0}, [X]),
    "GLU": ({"dim": 1}, [X]),
    "PReLU": ({"num_parameters": 4, "init": 0.1}, [X]),
    "PixelShuffle": ({"upscale_factor": 2}, [IMG]),
    "PixelUnshuffle": ({"downscale_factor": 2}, [X[:, :3, :4]]),
    "CosineSimilarity": ({"dim": 2}, [X, Y]),
    "PairwiseDistance": ({"p": 3.0}, [X, Y]),
    "SmoothL1Loss": ({"beta": 0.3, "reduction": "sum"}, [X, Y]),
    "HuberLoss": ({"delta": 0.3}, [X, Y]),
    "KLDivLoss": ({"reduction": "batchmean"}, [LOGP, P]),
    "Unflatten": ({"dim": 2, "unflattened_size": (5, 1)}, [X]),
    "ZeroPad1d": ({"padding": (2, 1)}, [X[0]]),
    "ZeroPad2d": ({"padding": (1, 0, 2, 3)}, [X]),
    "ZeroPad3d": ({"padding": 1}, [X]),
    "ConstantPad1d": ({"padding": 2, "value": 0.5}, [X[0]]),
    "ConstantPad2d": ({"padding": (1, 2, 0, 1), "value": -1.5}, [X]),
    "ConstantPad3d": ({"padding": (1, 1, 0, 2, 1, 0), "value": 2.0}, [X]),
    "ReflectionPad1d": ({"padding": (3, 1)}, [X[0]]),
    "ReflectionPad2d": ({"padding": (2, 1, 3, 4)}, [X]),
    "ReflectionPad3d": ({"padding": (1, 2, 1, 0, 2, 1)}, [X]),
    "ReplicationPad1d": ({"padding": 3}, [X[0]]),
    "ReplicationPad2d": ({"padding": (2, 0, 1, 3)}, [X]),
    "ReplicationPad3d": ({"padding": 2}, [X]),
    "CircularPad1d": ({"padding": (2, 3)}, [X[0]]),
    "CircularPad2d": ({"padding": (1, 2, 2, 1)}, [X]),
    "CircularPad3d": ({"padding": 1}, [X]),
}


@pytest.mark.parametrize("name", MODULES)
def test_layer_matches_torch(name: str) -> None:
    kwargs, arrays = MODULES[name]
    layer = getattr(sadl.nn, name)(**kwargs, **({"dtype": np.float64} if name == "PReLU" else {}))
    reference = getattr(torch.nn, name)(**kwargs).double()
    for (_, p), (_, q) in zip(layer.named_parameters(), reference.named_parameters(), strict=True):
        p.data[...] = q.detach().numpy()  # (torch made its init in float32)
    inputs = [sadl.tensor(a, requires_grad=True) for a in arrays]
    got = layer(*inputs)
    want = reference(*[torch.tensor(a, requires_grad=True) for a in arrays])
    np.testing.assert_allclose(got.data, want.detach().numpy(), rtol=1e-12, atol=1e-12)
    got.sum().backward()
    want.sum().backward()
    for (pname, p), (_, q) in zip(
        layer.named_parameters(), reference.named_parameters(), strict=True
    ):
        np.testing.assert_allclose(np.asarray(p.grad), q.grad.numpy(), rtol=1e-12, err_msg=pname)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_channel_dropout_drops_whole_channels_scaled_and_reproducibly(d: int) -> None:
    x = sadl.tensor(np.ones((64, 8) + (3,) * d), requires_grad=True)
    layer = getattr(sadl.nn, f"Dropout{d}d")(p=0.25)
    sadl.manual_seed(0)
    y = np.asarray(layer(x).data)
    per_channel = y.reshape(64, 8, -1)
    assert (per_channel == per_channel[..., :1]).all()  # one draw per channel
    assert set(np.unique(y)) <= {0.0, 1 / 0.75}
    assert 0.15 < (y == 0).mean() < 0.35
    sadl.manual_seed(0)
    np.testing.assert_array_equal(np.asarray(layer(x).data), y)
    layer(x).sum().backward()
    assert set(np.unique(np.asarray(x.grad))) <= {0.0, 1 / 0.75}
    layer.eval()
    assert layer(x) is x or np.array_equal(np.asarray(layer(x).data), np.asarray(x.data))
    unbatched = getattr(functional, f"dropout{d}d")(sadl.tensor(np.ones((8,) + (3,) * d)), 1.0)
    assert not np.asarray(unbatched.data).any()
    with pytest.raises(ValueError, match="dims"):
        getattr(functional, f"dropout{d}d")(sadl.tensor(np.ones((3,) * (d + 3))))
