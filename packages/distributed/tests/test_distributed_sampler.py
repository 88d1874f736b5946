"""DistributedSampler and windows: each rank its share, together the single-process batch."""

import numpy as np
import pytest
import sadl
import sadl_distributed as dist

pytestmark = pytest.mark.usefixtures("world_of_one")


def shards(n, world, **kwargs):
    return [dist.DistributedSampler(n, rank=r, world_size=world, **kwargs) for r in range(world)]


def test_shards_cover_the_epoch_permutation_and_are_deterministic():
    samplers = shards(10, 3, seed=4)
    for s in samplers:
        s.set_epoch(1)
    parts = [s.indices() for s in samplers]
    assert [len(s) for s in samplers] == [4, 4, 4]
    assert set(np.concatenate(parts)) == set(range(10))  # padded by repeating the start
    again = shards(10, 3, seed=4)
    for s in again:
        s.set_epoch(1)
    assert all(np.array_equal(a.indices(), b.indices()) for a, b in zip(samplers, again))
    samplers[0].set_epoch(2)
    assert not np.array_equal(samplers[0].indices(), parts[0])


def test_kth_local_batches_make_the_kth_global_batch():
    n, world, local = 24, 2, 4
    x = np.arange(n)
    single = dist.DistributedSampler(n, seed=7, rank=0, world_size=1)
    global_batches = list(single.batches(x, batch_size=local * world))
    locals_ = [list(s.batches(x, batch_size=local)) for s in shards(n, world, seed=7)]
    for k, (batch,) in enumerate(global_batches):
        together = np.concatenate([locals_[r][k][0] for r in range(world)])
        assert sorted(together.tolist()) == sorted(batch.tolist())


def test_drop_last_and_no_shuffle():
    samplers = shards(10, 3, drop_last=True, shuffle=False)
    assert [s.indices().tolist() for s in samplers] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert list(samplers[0]) == [0, 3, 6]


def test_sampler_errors():
    with pytest.raises(ValueError, match="give both rank= and world_size="):
        dist.DistributedSampler(5, rank=0)
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        dist.DistributedSampler(5, rank=2, world_size=2)
    with pytest.raises(ValueError, match="n must be a row count"):
        dist.DistributedSampler(-1)
    with pytest.raises(ValueError, match="seed must be an integer"):
        dist.DistributedSampler(5, seed=1.5)
    s = dist.DistributedSampler(5)
    with pytest.raises(ValueError, match="epoch must be an integer"):
        s.set_epoch(-1)
    with pytest.raises(ValueError, match="has 4 rows but the sampler was made for 5"):
        next(s.batches(np.arange(4), batch_size=2))


def test_windows_shares_are_the_single_process_batch():
    tokens = np.random.default_rng(0).integers(0, 50, size=500)
    x, y = sadl.data.windows(tokens, 8, 6, np.random.default_rng(3))
    parts = [
        dist.windows(tokens, 8, 6, np.random.default_rng(3), rank=r, world_size=3) for r in range(3)
    ]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), x)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), y)
    mine, _ = dist.windows(tokens, 8, 6, 3)  # an int seed, world of one
    np.testing.assert_array_equal(mine, x)
    with pytest.raises(ValueError, match="global batch_size 7 cannot be split evenly over 3"):
        dist.windows(tokens, 8, 7, 0, rank=0, world_size=3)
