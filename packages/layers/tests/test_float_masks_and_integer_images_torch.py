"""Against torch: a learned float attention mask gets its gradient; integer images pool and
resize."""

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")
F = torch.nn.functional
pytestmark = pytest.mark.torch


@pytest.mark.parametrize(
    ("mask_shape", "causal", "blocked"),
    [((2, 1, 3, 4), False, False), ((3, 4), False, True), ((1, 2, 3, 4), True, False)],
    ids=["per-batch-bias", "shared-bias-with-inf", "causal"],
)
def test_a_float_mask_that_requires_grad_gets_torchs_gradient(mask_shape, causal, blocked):
    rng = np.random.default_rng(0)
    q, k, v = (
        rng.normal(size=(2, 2, 3, 5)),
        rng.normal(size=(2, 2, 4, 5)),
        rng.normal(size=(2, 2, 4, 3)),
    )
    m = rng.normal(size=mask_shape)
    if blocked:
        m[0, 1] = -np.inf
    ours = [sadl.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    out = sadl.ops.scaled_dot_product_attention(*ours[:3], mask=ours[3], causal=causal)
    tm = theirs[3]
    if causal:  # torch takes one or the other: the causal mask as an additive -inf bias
        tm = tm + torch.full((3, 4), -torch.inf, dtype=torch.float64).triu(2)
    ref = F.scaled_dot_product_attention(*theirs[:3], attn_mask=tm)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=1e-12)
    w = rng.normal(size=out.shape)
    (out * w).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    for mine, reference in zip(ours, theirs):
        assert mine.grad.shape == reference.shape
        np.testing.assert_allclose(mine.grad, reference.grad.numpy(), atol=1e-12)


def test_the_mask_gradient_is_gradchecked_to_second_order():
    op = sadl.ops.get("scaled_dot_product_attention")
    learned = [e for e in op.examples if len(e.inputs) == 4]
    assert learned, "an example with a float mask as the fourth input"
    report = sadl.testing.check_op(op, raise_exception=False)
    assert report.ok, report


def test_a_boolean_mask_still_works_and_asks_for_no_gradient():
    q = sadl.tensor(np.ones((3, 2)), requires_grad=True)
    keep = np.array([[True, False, True]] * 3)
    out = sadl.ops.scaled_dot_product_attention(q, q, q, mask=keep)
    out.sum().backward()
    assert q.grad.shape == (3, 2)


IMAGE = np.random.default_rng(1).integers(0, 256, size=(2, 3, 7, 9)).astype(np.uint8)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
def test_max_pool2d_takes_integer_images_with_indices(dtype):
    x = IMAGE.astype(dtype)
    for kw in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1}):
        values, indices = sadl.ops.max_pool2d(sadl.tensor(x), return_indices=True, **kw)
        ref_values, ref_indices = F.max_pool2d(torch.from_numpy(x), return_indices=True, **kw)
        assert values.dtype == dtype
        np.testing.assert_array_equal(values.numpy(), ref_values.numpy())
        np.testing.assert_array_equal(indices.numpy(), ref_indices.numpy())
    layer = sadl.nn.MaxPool2d(2)
    np.testing.assert_array_equal(
        layer(sadl.tensor(x)).numpy(), F.max_pool2d(torch.from_numpy(x), 2)
    )


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear"])
@pytest.mark.parametrize("size", [(10, 13), (4, 5)])
def test_interpolate_takes_uint8_images(mode, size):
    out = sadl.ops.interpolate(sadl.tensor(IMAGE), size=size, mode=mode)
    ref = F.interpolate(torch.from_numpy(IMAGE), size=size, mode=mode).numpy()
    assert out.dtype == np.uint8 and out.shape == ref.shape
    diff = np.abs(out.numpy().astype(int) - ref.astype(int))
    # nearest is exact; bilinear is rounded to nearest, torch's uint8 fixed point within 1
    assert diff.max() <= (0 if mode.startswith("nearest") else 1)
    if mode == "bilinear":  # rounded to nearest: torch's float result, rounded, but for ties
        exact = F.interpolate(torch.from_numpy(IMAGE).float(), size=size, mode=mode).numpy()
        rounded = np.clip(np.rint(exact), 0, 255)
        assert np.abs(out.numpy() - rounded).max() <= 1
        assert (out.numpy() == rounded).mean() > 0.98


def test_integer_pooling_refuses_booleans_clearly():
    with pytest.raises(TypeError, match="floating-point or integer array, got bool"):
        sadl.ops.max_pool2d(sadl.tensor(IMAGE > 100), kernel_size=2)


def test_multi_head_attention_learns_a_float_mask_in_self_and_cross_attention():
    rng = np.random.default_rng(2)
    mha = sadl.nn.MultiHeadAttention(8, 2).to(dtype=np.float64)
    x = sadl.tensor(rng.normal(size=(2, 3, 8)))
    bias = sadl.tensor(rng.normal(size=(2, 3, 3)), requires_grad=True)
    assert sadl.testing.gradcheck(lambda b: mha(x, mask=b), bias)
    assert sadl.testing.gradcheck(lambda b: mha(x, x * 2.0, x * 3.0, mask=b), bias)
    np.testing.assert_allclose(mha(x, mask=bias).numpy(), mha(x, mask=bias.detach()).numpy())
