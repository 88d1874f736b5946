"""DistributedDataParallel in one process: the world of one, and a mirrored pair of ranks."""

import numpy as np
import pytest
import sadl
import sadl_distributed as dist
from distributed_fakes import MirrorGroup, mlp
from sadl_distributed.ddp import plan_buckets

pytestmark = pytest.mark.usefixtures("world_of_one")


def grads(model):
    return {n: p.grad for n, p in model.named_parameters()}


def x_batch():
    return sadl.tensor(np.random.default_rng(9).normal(size=(16, 4)))


def test_world_of_one_wrapper_is_transparent():
    plain, wrapped = mlp(), dist.DistributedDataParallel(mlp())
    plain(x_batch()).backward()
    wrapped(x_batch()).backward()
    for name, p in plain.named_parameters():
        q = dict(wrapped.named_parameters())[f"module.{name}"]
        if p.grad is None:
            assert q.grad is None
        else:
            np.testing.assert_array_equal(p.grad, q.grad)
    assert wrapped.bucket_sizes == []  # nothing to average: no buckets, no hooks
    assert list(wrapped.state_dict())[:2] == ["module.unused", "module.w1"]
    with wrapped.no_sync():
        wrapped(x_batch()).backward()
    assert "world_size=1" in repr(wrapped)


def test_gradients_are_averaged_during_backward_in_bucket_order():
    group = MirrorGroup()
    plain = mlp()
    plain(x_batch()).backward()
    # 8-byte cap: one parameter per bucket, so buckets go out while backward is running.
    wrapped = dist.DistributedDataParallel(mlp(seed=0), bucket_cap_mb=8 / 2**20, group=group)
    reducer = wrapped._reducer
    group.calls.clear()
    wrapped(x_batch()).backward()
    for name, p in plain.named_parameters():
        q = wrapped.module.__dict__[name]
        if p.grad is None:
            assert q.grad is None  # "unused" had no gradient on any rank: stays None
        else:
            np.testing.assert_allclose(q.grad, p.grad, rtol=0, atol=1e-15)
    sent = [buffer for kind, buffer in group.calls if kind == "all_reduce"]
    assert [id(b) for b in sent] == [id(b.buffer) for b in reducer.buckets]
    assert reducer.sent_during_backward >= 2  # overlap: sent before backward had finished
    assert not reducer.active


def test_plan_buckets_reverse_order_dtype_and_caps():
    params = [
        sadl.Parameter(np.zeros(100, dtype=np.float32)),  # 400 bytes
        sadl.Parameter(np.zeros(100, dtype=np.float64)),  # 800 bytes
        sadl.Parameter(np.zeros(50, dtype=np.float32)),  # 200 bytes
        sadl.Parameter(np.zeros(300, dtype=np.float32)),  # 1200 bytes
    ]
    assert plan_buckets(params, 10_000) == [[3, 2, 0], [1]]
    assert plan_buckets(params, 1000) == [[3], [2, 0], [1]]
    assert plan_buckets(params, 1) == [[3], [2], [1], [0]]  # open ones: backward order


def test_no_sync_accumulates_locally_then_one_backward_averages_everything():
    group = MirrorGroup()
    model = dist.DistributedDataParallel(mlp(), group=group)
    x = x_batch()
    with model.no_sync():
        model(x[:8]).backward()
    assert not any(kind == "all_reduce" for kind, _ in group.calls[1:])
    model(x[8:]).backward()
    reference = mlp()
    reference(x[:8]).backward()
    reference(x[8:]).backward()
    for name, p in reference.named_parameters():
        if p.grad is not None:
            np.testing.assert_allclose(model.module.__dict__[name].grad, p.grad, atol=1e-15)


def test_wrapping_twice_is_refused_until_close():
    group = MirrorGroup()
    inner = mlp()
    first = dist.DistributedDataParallel(inner, group=group)
    with pytest.raises(dist.DistributedError, match="already wrapped"):
        dist.DistributedDataParallel(inner, group=group)
    first.close()
    dist.DistributedDataParallel(inner, group=group)


def test_a_failed_backward_is_reported_at_the_next_forward():
    group = MirrorGroup()
    model = dist.DistributedDataParallel(mlp(), group=group)

    def broken(p):
        raise RuntimeError("boom")

    handle = model.module.w1.register_post_accumulate_grad_hook(broken)
    with pytest.raises(RuntimeError, match="boom"):
        model(x_batch()).backward()
    handle.remove()
    with pytest.raises(dist.DistributedError, match="out of step"):
        model(x_batch())


def test_bad_arguments():
    with pytest.raises(TypeError, match="wraps a sadl Module"):
        dist.DistributedDataParallel(lambda x: x)
    with pytest.raises(ValueError, match="bucket_cap_mb must be a positive number"):
        dist.DistributedDataParallel(mlp(), bucket_cap_mb=0)
