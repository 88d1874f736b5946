"""Every registered layer on a zero-size batch against torch.nn (skipped without torch).

Each layer is built from its registered examples (``modules/examples.py``) with the batch axis
of every input cut to zero. Where torch's layer of the same name returns an empty result, sadl's
must return the same shapes and values, and its backward the same (zero) parameter gradients;
where torch refuses the input, sadl must refuse it too with a ValueError that says why, never
a ZeroDivisionError or a NumPy reshape error from deep inside. Where torch has no such layer (or
crashes), an empty batch in must give an empty batch out and zero parameter gradients.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sadl
from sadl_layers.modules import LAYERS
from sadl_layers.modules.examples import EXAMPLES

torch = pytest.importorskip("torch", reason="PyTorch is the reference for empty batches")
pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore::UserWarning:torch")]

#: sadl layers that torch.nn has under another name or with other defaults.
_TORCH_NAMES = {"MultiHeadAttention": "MultiheadAttention", "Mlp": "Sequential"}
_TORCH_KWARGS: dict[str, dict[str, Any]] = {"MultiHeadAttention": {"batch_first": True}}
#: Layers without a forward pass (only built) or without a torch.nn counterpart.
_NO_FORWARD = {"ModuleList", "ModuleDict"}
_SEQUENCE_FIRST = {"RNN", "LSTM", "GRU"}  # (T, B, ...) unless batch_first
#: Layers torch gets wrong on an empty batch: PixelUnshuffle of [0, 2, 4, 6] returns [0, 2, 4, 6]
#: (not [0, 8, 2, 3]) and PixelShuffle's backward a gradient of the wrong shape; checked as
#: layers without a torch counterpart.
_TORCH_WRONG_ON_EMPTY = {"PixelShuffle", "PixelUnshuffle"}


def _cases() -> list[Any]:
    cases = []
    for name in sorted(LAYERS):
        if name in _NO_FORWARD:
            continue
        for i, example in enumerate(EXAMPLES[name]):
            axes = [0]
            if name in _SEQUENCE_FIRST and not example.params.get("batch_first", False):
                axes = [1]
            if name == "MultiHeadAttention":
                axes = [0, 1]  # an empty batch and an empty sequence
            cases += [
                pytest.param(name, example, axis, id=f"{name}-{i}-axis{axis}") for axis in axes
            ]
    return cases


def _emptied(example: Any, axis: int) -> list[Any]:
    """The example's inputs as float32 (or its own integer arrays) with ``axis`` cut to zero."""
    rng = np.random.default_rng(0)
    out = []
    for x in example.inputs:
        if isinstance(x, tuple):
            x = rng.uniform(-1.0, 1.0, size=x)
        if isinstance(x, np.ndarray):
            if x.dtype.kind == "f":
                x = x.astype(np.float32)
            x = np.take(x, np.arange(0), axis=axis if x.ndim > axis else 0)
        out.append(x)
    return out


def _torch_value(v: Any) -> Any:
    return torch.from_numpy(v.astype(np.float32)) if isinstance(v, np.ndarray) else v


def _flat(result: Any) -> list[Any]:
    if isinstance(result, tuple | list):
        return [r for item in result for r in _flat(item)]
    return [result]


@pytest.mark.parametrize("name, example, axis", _cases())
def test_layer_on_an_empty_batch_matches_torch(name, example, axis):
    inputs = _emptied(example, axis)
    torch_name = _TORCH_NAMES.get(name, name)
    torch_cls = None if name in _TORCH_WRONG_ON_EMPTY else getattr(torch.nn, torch_name, None)
    tlayer = None
    if torch_cls is not None:
        kwargs = {k: _torch_value(v) for k, v in example.params.items()}
        tlayer = torch_cls(**kwargs, **_TORCH_KWARGS.get(name, {}))
    layer = LAYERS[name](**example.params)
    if tlayer is not None:  # the same parameters, so the values compare too
        state = {k: v.detach().numpy().copy() for k, v in tlayer.state_dict().items()}
        sadl_state = layer.state_dict()
        layer.load_state_dict({k: v.astype(sadl_state[k].dtype) for k, v in state.items()})
    xs = [sadl.Tensor(x, requires_grad=True) if x.dtype.kind == "f" else x for x in inputs]
    txs = [
        torch.from_numpy(x).requires_grad_() if x.dtype.kind == "f" else torch.from_numpy(x)
        for x in inputs
    ]
    refused = None
    if tlayer is not None:
        try:
            touts = [t for t in _flat(tlayer(*txs)) if t is not None]
            if name == "MultiHeadAttention":  # torch also returns the averaged weights
                touts = touts[:1]
        except IndexError:
            # not a refusal but a crash in torch (InstanceNorm with affine=True indexes sample 0
            # of the batch): sadl gives the empty result torch gives without affine
            tlayer = None
        except (RuntimeError, ValueError) as exc:
            refused = exc
    if refused is not None:
        with pytest.raises(ValueError) as info:
            layer(*xs)
        assert str(info.value), f"torch refuses it ({refused}); sadl must say why"
        return
    outs = _flat(layer(*xs))
    floats = [o for o in outs if o.dtype.kind == "f"]
    if tlayer is None:  # no torch counterpart: an empty batch in, an empty batch out
        assert all(o.shape[axis] == 0 for o in floats if o.ndim > axis)
    else:
        assert len(outs) == len(touts)
        for o, t in zip(outs, touts):
            assert o.shape == tuple(t.shape), (o.shape, tuple(t.shape))
            want = t.detach().numpy()
            np.testing.assert_array_equal(np.asarray(o.data, dtype=want.dtype), want)
    total = sum((o.sum() for o in floats[1:]), start=floats[0].sum())
    total.backward()
    for x in xs:
        if isinstance(x, sadl.Tensor):
            assert x.grad is not None and x.grad.shape == x.shape
    if tlayer is None:
        for pname, p in layer.named_parameters():
            np.testing.assert_array_equal(p.grad, np.zeros(p.shape), err_msg=pname)
        return
    tfloats = [t for t in touts if t.dtype.is_floating_point]
    sum(t.sum() for t in tfloats).backward()
    tparams = dict(tlayer.named_parameters())
    for pname, p in layer.named_parameters():
        tg = tparams[pname].grad
        want = np.zeros(p.shape) if tg is None else tg.numpy()
        np.testing.assert_array_equal(np.asarray(p.grad), want, err_msg=pname)


def test_attention_over_no_keys_is_zero_with_zero_gradients_of_every_order_like_torch():
    q = np.random.default_rng(0).standard_normal((2, 3, 4))
    k, v = np.zeros((2, 0, 4)), np.zeros((2, 0, 5))
    xs = [sadl.Tensor(a, requires_grad=True) for a in (q, k, v)]
    txs = [torch.from_numpy(a).requires_grad_() for a in (q, k, v)]
    out = sadl.ops.scaled_dot_product_attention(*xs)
    tout = torch.nn.functional.scaled_dot_product_attention(*txs)
    np.testing.assert_array_equal(out.data, tout.detach().numpy())
    grads = sadl.grad(out.sum(), xs, create_graph=True)
    tgrads = torch.autograd.grad(tout.sum(), txs)
    for g, tg in zip(grads, tgrads):
        np.testing.assert_array_equal(g.data, tg.numpy())
    (second,) = sadl.grad(sum(g.sum() for g in grads), [xs[0]], allow_unused=True)
    assert second is None or not np.asarray(second.data).any()
