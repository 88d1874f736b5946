"""Checkpoints in a world of one: the same file as a single-process run; bit-identical resume."""

import numpy as np
import pytest
import sadl
import sadl_distributed as dist
import sadl_serialize
from distributed_fakes import mlp

pytestmark = pytest.mark.usefixtures("world_of_one")


def setup():
    model = dist.DistributedDataParallel(mlp())
    return model, dist.ShardedOptimizer(sadl.Adam(model.parameters(), lr=0.01))


def train(model, opt, rng, steps):
    for _ in range(steps):
        x = sadl.tensor(rng.normal(size=(8, 4)))
        opt.zero_grad()
        model(x).backward()
        opt.step()


def test_resume_is_bit_identical(tmp_path):
    path = tmp_path / "ckpt.sadl"
    model, opt = setup()
    rng = np.random.default_rng(0)
    train(model, opt, rng, 2)
    dist.save_checkpoint(path, model=model, optimizer=opt, step=2, rng=rng, extra={"note": "x"})
    train(model, opt, rng, 3)

    model2, opt2 = setup()
    rng2 = np.random.default_rng(123)
    info = dist.load_checkpoint(path, model=model2, optimizer=opt2, rng=rng2)
    assert info["step"] == 2 and info["extra"] == {"note": "x"}
    train(model2, opt2, rng2, 3)
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    # The file is an ordinary checkpoint of the bare module (no "module." prefix).
    plain = mlp()
    sadl_serialize.load_checkpoint(path, model=plain)


def test_errors_are_the_serializers_own(tmp_path):
    model, opt = setup()
    with pytest.raises(FileNotFoundError):
        dist.load_checkpoint(tmp_path / "missing.sadl", model=model)
    with pytest.raises(FileNotFoundError):
        dist.save_checkpoint(tmp_path / "no" / "dir.sadl", model=model)
