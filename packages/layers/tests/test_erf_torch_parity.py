"""PyTorch parity of the erf family (sadl-layers' ``erf``, ``erfc``, ``erfinv``, ``ndtr``, also
as ``Tensor.erf`` ...): forward, backward and double backward in float64, float32 forward."""

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(1234)


def _close(ours, theirs, what):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    ours = ours.numpy() if hasattr(ours, "numpy") else np.asarray(ours)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12, err_msg=what)


def _as_float(grads, inputs):
    return [np.zeros(x.shape) if g is None else g for g, x in zip(grads, inputs)]


def check(ours, theirs, *inputs, double=True):
    """Compare forward, first and (``double``) second derivatives of two float64 functions."""
    xs = [sadl.tensor(a, requires_grad=True) for a in inputs]
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    out, ref = ours(*xs), theirs(*ts)
    _close(out, ref, "forward")
    w = RNG.normal(size=out.shape)
    grads = sadl.grad((out * w).sum(), xs, create_graph=double, allow_unused=True)
    ref_grads = torch.autograd.grad(
        (ref * torch.tensor(w)).sum(), ts, create_graph=double, allow_unused=True
    )
    for g, r, x in zip(grads, ref_grads, inputs):
        _close(np.zeros(x.shape) if g is None else g, np.zeros(x.shape) if r is None else r, "grad")
    if not double:
        return
    vs = [RNG.normal(size=np.shape(a)) for a in inputs]
    ours2 = [(g * v).sum() for g, v in zip(grads, vs) if g is not None and g.requires_grad]
    theirs2 = [(g * torch.tensor(v)).sum() for g, v in zip(ref_grads, vs) if g is not None]
    theirs2 = [t for t in theirs2 if t.requires_grad]
    second = [None] * len(xs)
    if ours2:
        second = sadl.grad(sum(ours2[1:], ours2[0]), xs, allow_unused=True)
    ref_second = [None] * len(ts)
    if theirs2:
        ref_second = torch.autograd.grad(sum(theirs2[1:], theirs2[0]), ts, allow_unused=True)
    for g, r in zip(_as_float(second, inputs), _as_float(ref_second, inputs)):
        _close(g, r, "double backward")


def normal(*shape):
    return RNG.normal(size=shape)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv"])
def test_erf_family(name):
    x = RNG.uniform(-0.95, 0.95, size=(4, 6)) if name == "erfinv" else normal(4, 6) * 2
    check(lambda t: getattr(t, name)(), lambda t: getattr(t, name)(), x)
    x32 = x.astype(np.float32)
    ours = getattr(sadl.tensor(x32), name)()
    assert ours.dtype == np.float32
    np.testing.assert_allclose(
        ours.numpy(), getattr(torch.tensor(x32), name)().numpy(), rtol=2e-6, atol=1e-7
    )


def test_ndtr_is_torch_special_ndtr():
    ndtr = sadl.ops.ndtr
    x = normal(4, 6) * 3
    check(lambda t: ndtr(t), lambda t: torch.special.ndtr(t), x)
    x32 = x.astype(np.float32)
    ours = ndtr(sadl.tensor(x32))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(
        ours.numpy(), torch.special.ndtr(torch.tensor(x32)).numpy(), rtol=2e-6, atol=1e-7
    )
