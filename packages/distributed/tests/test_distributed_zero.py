"""ShardedOptimizer in one process (the two-rank behaviour is in test_multiprocess.py)."""

import numpy as np
import pytest
import sadl
import sadl_distributed as dist
from distributed_fakes import mlp
from sadl_distributed.zero import partition

pytestmark = pytest.mark.usefixtures("world_of_one")


def test_partition_balances_sizes_deterministically():
    owners = partition([10, 1, 1, 8, 2], 2)
    load = [sum(s for s, o in zip([10, 1, 1, 8, 2], owners) if o == r) for r in range(2)]
    assert owners == partition([10, 1, 1, 8, 2], 2)
    assert sorted(load) == [11, 11]
    assert partition([5, 5, 5], 1) == [0, 0, 0]
    assert sorted(partition([3, 3, 3, 3], 4)) == [0, 1, 2, 3]


def train(model, opt, steps=5):
    x = sadl.tensor(np.random.default_rng(1).normal(size=(16, 4)))
    for _ in range(steps):
        opt.zero_grad()
        model(x).backward()
        opt.step()


def test_world_of_one_equals_the_wrapped_optimizer_bit_for_bit():
    a, b = mlp(), mlp()
    train(a, sadl.Adam(a.parameters(), lr=0.01, weight_decay=0.1))
    sharded = dist.ShardedOptimizer(sadl.Adam(b.parameters(), lr=0.01, weight_decay=0.1))
    train(b, sharded)
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    assert all(sharded.owner_of(p) == 0 for p in b.parameters())
    assert sharded.param_groups is sharded.optimizer.param_groups


def test_state_dict_is_the_unsharded_format_and_loads_both_ways():
    model = mlp()
    sharded = dist.ShardedOptimizer(sadl.Adam(model.parameters(), lr=0.01))
    train(model, sharded, steps=2)
    state = sharded.state_dict()
    plain = sadl.Adam(mlp().parameters(), lr=0.01)
    plain.load_state_dict(state)  # a sharded run's state resumes without sharding
    assert sorted(plain.state_dict()["state"]) == sorted(state["state"])
    again = dist.ShardedOptimizer(sadl.Adam(mlp().parameters(), lr=0.5))
    again.load_state_dict(plain.state_dict())
    assert again.param_groups[0]["lr"] == 0.01
    assert len(again.state) == len(state["state"])
    assert sharded.gather_state_dict(dst=0)["param_groups"] == state["param_groups"]


def test_learning_rate_changes_reach_the_wrapped_optimizer():
    model = mlp()
    inner = sadl.SGD(model.parameters(), lr=0.1)
    sharded = dist.ShardedOptimizer(inner)
    sharded.param_groups[0]["lr"] = 0.0  # what a scheduler does
    before = [p.numpy().copy() for p in model.parameters()]
    train(model, sharded, steps=1)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
    assert inner.param_groups[0]["lr"] == 0.0


def test_add_param_group_and_closure():
    model = mlp()
    sharded = dist.ShardedOptimizer(sadl.SGD([model.w1], lr=0.1))
    sharded.add_param_group({"params": [model.w2]})
    assert len(sharded.param_groups) == 2
    x = sadl.tensor(np.ones((2, 4)))
    loss = sharded.step(lambda: model(x))
    assert isinstance(loss, sadl.Tensor)


def test_bad_arguments():
    with pytest.raises(TypeError, match="wraps a sadl Optimizer"):
        dist.ShardedOptimizer(object())
    sharded = dist.ShardedOptimizer(sadl.SGD(mlp().parameters(), lr=0.1))
    with pytest.raises(TypeError, match="wraps a sadl Optimizer"):
        dist.ShardedOptimizer(sharded)
