"""Collectives in one process: the world of one, and the staging logic on a mirrored pair."""

import numpy as np
import pytest
import sadl
import sadl_distributed as dist
from distributed_fakes import MirrorGroup
from sadl_distributed.collectives import gather_bytes

pytestmark = pytest.mark.usefixtures("world_of_one")


def test_world_of_one_collectives_are_identities():
    x = np.arange(6.0).reshape(2, 3)
    assert dist.all_reduce(x, "mean") is x
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3))
    assert dist.broadcast(x) is x
    gathered = dist.all_gather(x)
    assert gathered.shape == (1, 2, 3)
    np.testing.assert_array_equal(gathered[0], x)
    np.testing.assert_array_equal(dist.reduce_scatter(x), x)
    t = sadl.tensor([1.0, 2.0])
    assert dist.all_reduce(t) is t
    assert isinstance(dist.all_gather(t), sadl.Tensor)
    work = dist.all_reduce(x, async_op=True)
    assert work.is_completed()
    work.wait()
    dist.check_same("anything")
    assert gather_bytes(b"abc") == [b"abc"]


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="expected a sadl Tensor or an array, got list"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="unknown op 'avg'"):
        dist.all_reduce(np.ones(2), "avg")
    with pytest.raises(TypeError, match="mean of int64 arrays is not an integer"):
        dist.all_reduce(np.ones(2, dtype=np.int64), "mean")
    with pytest.raises(TypeError, match="cannot reduce bool arrays"):
        dist.all_reduce(np.ones(2, dtype=bool))
    with pytest.raises(ValueError, match="src=1 does not exist in a world of 1"):
        dist.broadcast(np.ones(2), src=1)
    with pytest.raises(TypeError, match="cannot compare 'object' values"):
        dist.check_same(object())


def test_reductions_over_a_mirrored_pair():
    g = MirrorGroup()
    x = np.arange(4.0)
    dist.all_reduce(x, group=g)
    np.testing.assert_array_equal(x, 2 * np.arange(4.0))
    dist.all_reduce(x, "mean", group=g)
    np.testing.assert_array_equal(x, 2 * np.arange(4.0))
    # Strided arrays and float16 travel through a contiguous (float32) copy, then come back.
    half = np.arange(8, dtype=np.float16)[::2]
    dist.all_reduce(half, "sum", group=g)
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, [0, 4, 8, 12])
    assert g.calls[-1][1].dtype == np.float32 and g.calls[-1][1].flags.c_contiguous
    # reduce_scatter keeps chunk 0 of the reduced array (this is rank 0).
    np.testing.assert_array_equal(dist.reduce_scatter(np.arange(4.0), "mean", group=g), [0.0, 1.0])
    with pytest.raises(ValueError, match="must be a multiple of the world size 2"):
        dist.reduce_scatter(np.arange(3.0), group=g)


def test_a_tensor_is_written_back_through_copy_so_its_version_moves():
    g = MirrorGroup()
    w = sadl.Parameter(np.array([1.0, 2.0]))
    y = w * w  # saves w for backward
    dist.all_reduce(w, group=g)  # changes w in place
    np.testing.assert_array_equal(w.numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_async_work_finishes_on_wait():
    g = MirrorGroup()
    x = np.ones(3)
    work = dist.all_reduce(x, "mean", group=g, async_op=True)
    work.wait()
    work.wait()  # a second wait does nothing more
    np.testing.assert_array_equal(x, np.ones(3))


def test_check_same_digest_depends_on_dtype_shape_and_content():
    from sadl_distributed.collectives import _digest

    a = np.arange(4, dtype=np.int64)
    assert _digest(a) == _digest(a.copy())
    assert _digest(a) != _digest(a.astype(np.int32))
    assert _digest(a) != _digest(a.reshape(2, 2))
    assert _digest(a) != _digest(a + 1)
    assert _digest(sadl.tensor(a)) == _digest(a)
    assert _digest("x") != _digest(b"x")
    assert _digest(1) != _digest(1.0)
