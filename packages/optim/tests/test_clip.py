"""clip_grad_norm and clip_grad_value: torch parity, in-place updates, properties, errors."""

import math

import numpy as np
import pytest
import sadl
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sadl_optim import clip_grad_norm, clip_grad_value


def params_with_grads(grads):
    params = [sadl.Parameter(np.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.copy()
    return params


def random_grads(seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) * scale for s in [(3, 4), (4,), (2, 2, 2)]]


@pytest.mark.torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_equals_torch(norm_type, max_norm):
    torch = pytest.importorskip("torch", reason="torch is the reference for this parity test")
    grads = random_grads()
    params = params_with_grads(grads)
    tparams = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for t, g in zip(tparams, grads):
        t.grad = torch.tensor(g)
    total = clip_grad_norm(params, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type=norm_type)
    assert isinstance(total, float)
    assert total == pytest.approx(float(ttotal), rel=1e-12)
    for p, t in zip(params, tparams):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12, atol=0)


@pytest.mark.torch
@pytest.mark.parametrize("clip_value", [0.0, 0.3, 10.0])
def test_clip_grad_value_equals_torch(clip_value):
    torch = pytest.importorskip("torch", reason="torch is the reference for this parity test")
    grads = random_grads(1)
    params = params_with_grads(grads)
    tparams = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for t, g in zip(tparams, grads):
        t.grad = torch.tensor(g)
    clip_grad_value(params, clip_value)
    torch.nn.utils.clip_grad_value_(tparams, clip_value)
    for p, t in zip(params, tparams):
        np.testing.assert_array_equal(p.grad, t.grad.numpy())


@settings(max_examples=60, deadline=None)
@given(
    grads=st.lists(
        arrays(
            np.float64,
            st.tuples(st.integers(1, 4), st.integers(1, 3)),
            elements=st.floats(-1e3, 1e3, allow_nan=False),
        ),
        min_size=1,
        max_size=4,
    ),
    max_norm=st.floats(1e-3, 1e3),
)
def test_clip_grad_norm_properties(grads, max_norm):
    params = params_with_grads(grads)
    arrays_before = [p.grad for p in params]
    total = clip_grad_norm(params, max_norm)
    flat = np.concatenate([g.ravel() for g in grads])
    assert total == pytest.approx(float(np.linalg.norm(flat)), rel=1e-12, abs=1e-300)
    after = float(np.linalg.norm(np.concatenate([p.grad.ravel() for p in params])))
    assert after <= max_norm * (1 + 1e-9) or after == pytest.approx(total)
    factor = min(1.0, max_norm / (total + 1e-6))
    for p, before, g in zip(params, arrays_before, grads):
        assert p.grad is before  # scaled in place
        np.testing.assert_allclose(p.grad, g * factor, rtol=1e-12)


def test_clip_keeps_dtype_and_skips_params_without_grad():
    a = sadl.Parameter(np.full(4, 3.0, np.float32))
    b = sadl.Parameter(np.ones(2, np.float32))
    a.grad = np.full(4, 3.0, np.float32)
    total = clip_grad_norm([a, b], 1.0)
    assert total == pytest.approx(6.0)
    assert a.grad.dtype == np.float32 and b.grad is None
    np.testing.assert_allclose(a.grad, 0.5, rtol=1e-6)
    clip_grad_value([a, b], 0.25)
    assert a.grad.dtype == np.float32 and np.all(a.grad == np.float32(0.25))
    assert clip_grad_norm([b], 1.0) == 0.0


def test_tensor_gradients_are_clipped_in_place():
    p = sadl.Parameter(np.array([3.0, 4.0]))
    (p * p).sum().backward(create_graph=True)
    grad = p.grad
    assert isinstance(grad, sadl.Tensor)
    assert clip_grad_norm(p, 5.0) == pytest.approx(10.0)
    assert p.grad is grad
    np.testing.assert_allclose(grad.data, [3.0, 4.0], rtol=1e-6)
    clip_grad_value(p, 3.5)
    np.testing.assert_allclose(grad.data, [3.0, 3.5], rtol=1e-6)


def test_module_and_scalar_parameters():
    class Model(sadl.Module):
        def __init__(self):
            self.w = sadl.Parameter(np.array([[6.0, 8.0]]))
            self.s = sadl.Parameter(np.array(0.0))

    model = Model()
    model.w.grad = np.array([[6.0, 8.0]])
    model.s.grad = np.float64(0.0)  # what backward leaves on a 0-d parameter
    assert clip_grad_norm(model, 5.0) == pytest.approx(10.0)
    np.testing.assert_allclose(model.w.grad, [[3.0, 4.0]], rtol=1e-6)
    model.s.grad = np.float64(-7.0)
    clip_grad_value(model, 2.0)
    assert float(model.s.grad) == -2.0


def test_nonfinite_norm():
    params = params_with_grads([np.array([1.0, np.inf]), np.array([np.nan])])
    with pytest.raises(RuntimeError, match="clip_grad_norm: the total norm of order 2.0"):
        clip_grad_norm(params, 1.0, error_if_nonfinite=True)
    total = clip_grad_norm(params, 1.0)  # torch's behaviour: scale by the non-finite factor
    assert math.isnan(total)
    assert np.all(np.isnan(params[0].grad))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda ps: clip_grad_norm(ps, -1.0),
            ValueError,
            r"clip_grad_norm: invalid max_norm=-1\.0",
        ),
        (lambda ps: clip_grad_norm(ps, 1.0, norm_type=0), ValueError, r"invalid norm_type=0"),
        (lambda ps: clip_grad_norm(ps, 1.0, norm_type="l2"), ValueError, r"invalid norm_type='l2'"),
        (lambda ps: clip_grad_norm(3.0, 1.0), TypeError, r"clip_grad_norm: params must be"),
        (lambda ps: clip_grad_norm([*ps, 3.0], 1.0), TypeError, r"params\[3\] is a float"),
        (lambda ps: clip_grad_value(ps, -0.5), ValueError, r"clip_grad_value: invalid clip_value"),
    ],
)
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(params_with_grads(random_grads()))


def test_infinite_max_norm_never_clips():
    grads = random_grads(scale=1e6)
    params = params_with_grads(grads)
    total = clip_grad_norm(params, math.inf)
    assert total > 1e6
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(p.grad, g)


def test_float32_gradients_are_scaled_in_float32_and_the_norm_is_a_float():
    rng = np.random.default_rng(5)
    grads = [rng.standard_normal(s).astype(np.float32) * 4 for s in [(3, 4), (5,)]]
    params = params_with_grads(grads)
    total = clip_grad_norm(params, 1.0)
    assert type(total) is np.float64 and isinstance(total, float)
    factor = np.float32(1.0 / (total + 1e-6))  # the float64 factor, cast to the gradients' dtype
    for p, g in zip(params, grads):
        assert p.grad.dtype == np.float32
        assert p.grad.tobytes() == (g * factor).tobytes()


def test_half_precision_norm_is_summed_in_float32():
    g = np.full(400, 100.0, np.float16)  # the sum of squares, 4e6, overflows float16
    (p,) = params_with_grads([g])
    total = clip_grad_norm(p, 1.0)
    assert total == pytest.approx(2000.0)
    assert p.grad.dtype == np.float16
    np.testing.assert_allclose(p.grad.astype(np.float64), 100.0 / 2000.0, rtol=1e-3)
