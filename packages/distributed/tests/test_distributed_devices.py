"""The device matrix for sadl-distributed: collectives, DDP and the sharded optimizer with their
arrays on a device, in one process (the world of one, and the mirrored pair of ranks).

``device`` is "cpu", "strict" (the strict CuPy stand-in) or "cuda" (where a GPU is). The mirrored
pair is a host-staged group (not NCCL): device arrays travel through the host and come back.
"""

import numpy as np
import pytest
import sadl
import sadl_distributed as dist
from distributed_fakes import MirrorGroup, mlp
from sadl.backends import device_of
from sadl.testing import assert_close

pytestmark = pytest.mark.usefixtures("world_of_one")


def on(device, values):
    return sadl.tensor(np.asarray(values, dtype=np.float64), device=device)


def test_collectives_keep_device_arrays_on_their_device(device):
    g = MirrorGroup()
    x = on(device, np.arange(4.0)).data
    assert dist.all_reduce(x, group=g) is x
    assert_close(x, 2 * np.arange(4.0), device=device)
    t = on(device, [1.0, 2.0, 3.0, 4.0])
    dist.all_reduce(t, "mean", group=g)
    assert_close(t, np.array([1.0, 2.0, 3.0, 4.0]), device=device)
    dist.broadcast(t, group=g)
    gathered = dist.all_gather(t, group=g)
    assert isinstance(gathered, sadl.Tensor) and gathered.shape == (2, 4)
    assert_close(gathered, np.array([[1.0, 2.0, 3.0, 4.0]] * 2), device=device)
    chunk = dist.reduce_scatter(on(device, np.arange(4.0)).data, "mean", group=g)
    assert_close(chunk, np.array([0.0, 1.0]), device=device)
    half = sadl.tensor(np.arange(8, dtype=np.float16)[::2], device=device).data
    dist.all_reduce(half, group=g)
    assert half.dtype == np.float16 and device_of(half).type == device


def test_world_of_one_collectives_on_device_are_identities(device):
    x = on(device, np.arange(6.0).reshape(2, 3)).data
    assert dist.all_reduce(x, "mean") is x
    assert_close(dist.all_gather(x)[0], np.arange(6.0).reshape(2, 3), device=device)


def grads(model):
    return [p.grad for p in model.parameters() if p.grad is not None]


def test_ddp_averages_device_gradients_like_the_cpu(device):
    x = np.random.default_rng(9).normal(size=(16, 4))
    plain = mlp()
    plain(sadl.tensor(x)).backward()
    wrapped = dist.DistributedDataParallel(
        mlp().to(device), bucket_cap_mb=8 / 2**20, group=MirrorGroup()
    )
    assert all(device_of(b.buffer).type == device for b in wrapped._reducer.buckets)
    wrapped(sadl.tensor(x, device=device)).backward()
    assert_close(grads(wrapped.module), grads(plain), device=device)


def test_sharded_optimizer_on_device_equals_the_cpu_run(device):
    x = np.random.default_rng(3).normal(size=(16, 4))
    results = []
    for where in ("cpu", device):
        model = mlp().to(where)
        opt = dist.ShardedOptimizer(sadl.Adam(model.parameters(), lr=0.01, weight_decay=0.1))
        for _ in range(3):
            opt.zero_grad()
            model(sadl.tensor(x, device=where)).backward()
            opt.step()
        results.append(list(model.parameters()))
    assert_close(results[1], results[0], device=device)
