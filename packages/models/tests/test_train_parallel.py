"""``sadl train gpt`` and several processes: what happens without sadl-distributed.

Training on several processes itself is tested with sadl-distributed installed, in
packages/distributed/tests/test_multiprocess.py (``nox -s distributed``).
"""

import pytest
from sadl.cli import main
from sadl_models.train import TrainConfig, TrainError, parallel, train
from sadl_models.train.parallel import SingleProcess, launched_by_mpi, setup


@pytest.fixture
def without_sadl_distributed(monkeypatch):
    def missing():
        raise ImportError("No module named 'sadl_distributed'")

    monkeypatch.setattr(parallel, "_import_sadl_distributed", missing)
    for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_a_plain_run_is_a_single_process(without_sadl_distributed):
    assert not launched_by_mpi()
    assert isinstance(setup(), SingleProcess)


def test_nproc_without_sadl_distributed_is_a_one_line_error(without_sadl_distributed, capsys):
    assert main(["train", "gpt", "--nproc", "2", "--steps", "1", "--out", "unused"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--nproc 2, which needs sadl-distributed" in err
    assert "install 'packages/models[distributed]'" in err  # from this checkout


def test_an_mpi_launch_without_sadl_distributed_refuses_to_train_alone(
    without_sadl_distributed, monkeypatch, tmp_path
):
    monkeypatch.setenv("PMI_RANK", "1")
    with pytest.raises(TrainError, match="started by an MPI launcher .* every process would"):
        train(TrainConfig(steps=1), tmp_path, progress=False, plot=False)


def test_nproc_refuses_an_uneven_batch_before_starting_anything(capsys):
    assert main(["train", "gpt", "--nproc", "2", "--batch-size", "3", "--out", "unused"]) == 2
    assert "--batch-size 3 cannot be split evenly over 2 processes" in capsys.readouterr().err
