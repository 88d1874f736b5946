"""copysign, lerp, logcumsumexp, softmin, quick_gelu, softsign, normalize, diag, meshgrid and
masked_select against torch (float64; skipped without torch): forward values, first and second
derivatives."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers import QuickGELU, Softmin, Softsign
from test_layer_vocabulary_torch_parity import _rand, parity

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
F = torch.nn.functional
pytestmark = pytest.mark.torch


# ------------------------------------------------------------------------------- copysign
@pytest.mark.parametrize(
    "x, y",
    [
        (_rand(3, 4), _rand(3, 4, seed=1)),
        (_rand(3, 4), _rand(4, seed=2)),  # broadcast
        (np.array([-2.0, -0.0, 0.0, 1.5, 3.0, -1.0]), np.array([1.0, -1.0, 1.0, -0.0, 0.0, -2.0])),
    ],
)
def test_copysign(x, y):
    zero = bool((x == 0).any())  # torch's second derivative is NaN at x = 0 (ratio result/x)
    parity(sadl.ops.copysign, torch.copysign, x, y, second=not zero)
    if zero:
        t = sadl.Tensor(x.copy(), requires_grad=True)
        (g,) = sadl.grad(sadl.ops.copysign(t, y).sum(), [t], create_graph=True)
        (h,) = sadl.grad(g.sum(), [t], allow_unused=True)
        assert h is None or np.array_equal(np.asarray(h.data), np.zeros_like(x))
    out = np.copysign(sadl.tensor(x), y)  # NumPy's function reaches the op
    np.testing.assert_array_equal(
        np.signbit(out.data),
        np.signbit(torch.copysign(torch.from_numpy(x), torch.from_numpy(y)).numpy()),
    )


def test_copysign_of_infinities():
    x, y = np.array([np.inf, -np.inf, 2.0]), np.array([-1.0, 1.0, -np.inf])
    t = sadl.Tensor(x, requires_grad=True)
    out = sadl.ops.copysign(t, y)
    np.testing.assert_array_equal(
        out.data, torch.copysign(torch.from_numpy(x), torch.from_numpy(y))
    )
    out.backward(np.ones(3))  # torch's gradient is NaN here (inf / inf); the slope is -1, -1, -1
    np.testing.assert_array_equal(t.grad, [-1.0, -1.0, -1.0])


def test_copysign_scalar_and_integer_inputs_follow_torch():
    x = _rand(5)
    parity(lambda t: sadl.ops.copysign(t, -1.0), lambda t: torch.copysign(t, -1.0), x)
    ints = np.array([-3, 0, 2])
    got = sadl.ops.copysign(sadl.tensor(ints), sadl.tensor(np.array([1, -1, -1])))
    want = torch.copysign(torch.tensor(ints), torch.tensor([1, -1, -1]))
    assert got.dtype == np.float32 and want.dtype == torch.float32
    np.testing.assert_array_equal(got.data, want.numpy())


def test_copysign_gradient_for_the_sign_input_is_zeros_like_torch():
    x, y = _rand(3, 4), _rand(4, seed=1)
    tx, ty = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, y))
    want = torch.autograd.grad(torch.copysign(tx, ty).sum(), [tx, ty])
    sx, sy = sadl.tensor(x, requires_grad=True), sadl.tensor(y, requires_grad=True)
    got = sadl.grad(sadl.ops.copysign(sx, sy).sum(), [sx, sy])  # no allow_unused needed
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_array_equal(g.data, w.numpy())


# ------------------------------------------------------------------------ composites
def test_lerp():
    a, b, w = _rand(3, 4), _rand(3, 4, seed=1), _rand(3, 4, seed=2)
    parity(sadl.ops.lerp, torch.lerp, a, b, w)
    parity(lambda s, e: sadl.ops.lerp(s, e, 0.3), lambda s, e: torch.lerp(s, e, 0.3), a, b)


@pytest.mark.parametrize(
    "x, dim",
    [
        (_rand(3, 6, scale=3.0), 1),
        (_rand(4, 2, 3), 0),
        (_rand(2, 3, 4), -1),
        (np.array([-1000.0, 0.0, 1000.0, -5.0, 999.0]), 0),
    ],
)
def test_logcumsumexp(x, dim):
    parity(lambda t: sadl.ops.logcumsumexp(t, dim), lambda t: torch.logcumsumexp(t, dim), x)


@pytest.mark.parametrize("dim", [0, -1])
def test_logcumsumexp_of_a_0d_tensor_is_the_tensor_like_torch(dim):
    parity(
        lambda t: sadl.ops.logcumsumexp(t, dim),
        lambda t: torch.logcumsumexp(t, dim),
        np.array(-1.25),
    )
    with pytest.raises(ValueError, match="out of range"):
        sadl.ops.logcumsumexp(sadl.tensor(np.array(1.0)), 1)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmin(dim):
    parity(lambda t: sadl.ops.softmin(t, dim), lambda t: F.softmin(t, dim), _rand(3, 5, scale=2.0))


def test_softsign_matches_torch_forward_backward_and_double_backward():
    parity(sadl.ops.softsign, F.softsign, _rand(4, 30, scale=4.0))
    extreme = np.array([-1e30, -1000.0, -1e-3, 0.0, 1e-3, 1000.0, 1e30])
    parity(sadl.ops.softsign, F.softsign, extreme)
    x = sadl.tensor(np.array([-1e30, 0.0, 1e30], dtype=np.float32), requires_grad=True)
    sadl.ops.softsign(x).sum().backward()  # float32: the squared denominator would overflow
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 0.0])


def test_quick_gelu_equals_clips_formula():
    parity(sadl.ops.quick_gelu, lambda t: t * torch.sigmoid(1.702 * t), _rand(4, 30, scale=4.0))


@pytest.mark.parametrize(
    "kwargs", [{}, {"p": 1.0, "dim": -1}, {"p": 3.0, "dim": 0}, {"p": float("inf")}, {"eps": 0.5}]
)
def test_normalize(kwargs):
    parity(
        lambda t: sadl.ops.normalize(t, **kwargs), lambda t: F.normalize(t, **kwargs), _rand(3, 4)
    )


def test_normalize_of_a_zero_row_has_a_zero_gradient_like_torch():
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]])
    parity(sadl.ops.normalize, F.normalize, x, second=False)


@pytest.mark.parametrize("dim", [1, 0, -1])
def test_normalize_with_p0_divides_by_the_count_of_nonzeros_like_torch(dim):
    x = np.array([[1.0, 0.0, -2.0, 0.5], [0.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]])
    parity(
        lambda t: sadl.ops.normalize(t, p=0, dim=dim),
        lambda t: F.normalize(t, p=0, dim=dim),
        x,
        rtol=1e-12,
        atol=0.0,
    )


@pytest.mark.parametrize(
    "shape, k", [((4,), 0), ((3,), 2), ((3,), -1), ((3, 4), 0), ((4, 3), -1), ((3, 5), 2)]
)
def test_diag(shape, k):
    parity(lambda t: sadl.ops.diag(t, k), lambda t: torch.diag(t, k), _rand(*shape))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    xs = [_rand(3), _rand(4, seed=1), _rand(2, seed=2)]
    for n in (2, 3):
        got = sadl.ops.meshgrid(*[sadl.tensor(x) for x in xs[:n]], indexing=indexing)
        want = torch.meshgrid(*[torch.from_numpy(x) for x in xs[:n]], indexing=indexing)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.data, w.numpy())
    parity(
        lambda a, b: sum(
            (g * (i + 1)).sum(0) for i, g in enumerate(sadl.ops.meshgrid(a, b, indexing=indexing))
        ),
        lambda a, b: sum(
            (g * (i + 1)).sum(0) for i, g in enumerate(torch.meshgrid(a, b, indexing=indexing))
        ),
        xs[0],
        xs[1],
    )


def test_masked_select():
    x = _rand(3, 4)
    mask = np.random.default_rng(3).random((3, 4)) > 0.5
    parity(
        lambda t: sadl.ops.masked_select(t, mask),
        lambda t: torch.masked_select(t, torch.from_numpy(mask)),
        x,
    )
    row = np.array([True, False, True, True])  # broadcast over the rows
    parity(
        lambda t: sadl.ops.masked_select(t, row),
        lambda t: torch.masked_select(t, torch.from_numpy(row)),
        x,
    )
    with pytest.raises(TypeError, match="mask must be a boolean array"):
        sadl.ops.masked_select(sadl.tensor(x), np.ones((3, 4)))


def test_softmin_softsign_and_quick_gelu_layers():
    x = _rand(3, 5, scale=3.0)
    parity(Softmin(dim=1), torch.nn.Softmin(dim=1), x)
    parity(Softsign(), torch.nn.Softsign(), x)
    parity(QuickGELU(), lambda t: t * torch.sigmoid(1.702 * t), x)


@pytest.mark.parametrize("size", [2, 4, 7])
def test_nonzero_with_a_static_size_matches_torch_nonzero_static(size):
    values = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    want = torch.nonzero_static(torch.tensor(values), size=size, fill_value=-1).numpy()
    got = sadl.ops.nonzero(sadl.tensor(values), size=size, fill_value=-1)
    np.testing.assert_array_equal(np.stack([g.numpy() for g in got], axis=1), want)
    padded = sadl.ops.nonzero(sadl.tensor(values), size=size)  # JAX's default fill: 0
    assert all(p.shape == (size,) for p in padded)
    assert all((p.numpy()[3:] == 0).all() for p in padded)
