"""``sadl train gpt`` and several processes: what happens without sadl-distributed.

Training on several processes itself is tested with sadl-distributed installed, in
packages/distributed/tests/test_multiprocess.py (``nox -s distributed``).
"""

import shutil

import pytest
from sadl.cli import main
from sadl.plugins import install_command
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
    # The installer this interpreter has (pip, or uv in a venv without pip), from this checkout.
    command = install_command("sadl-models", "distributed")
    assert f"({command});" in err and command.endswith(" 'packages/models[distributed]'")
    assert shutil.which(command.split()[0]), f"{command!r} names a tool that is not here"


def test_an_mpi_launch_without_sadl_distributed_refuses_to_train_alone(
    without_sadl_distributed, monkeypatch, tmp_path
):
    monkeypatch.setenv("PMI_RANK", "1")
    with pytest.raises(TrainError, match="started by an MPI launcher .* every process would"):
        train(TrainConfig(steps=1), tmp_path, progress=False, plot=False)


def test_nproc_refuses_an_uneven_batch_before_starting_anything(capsys):
    assert main(["train", "gpt", "--nproc", "2", "--batch-size", "3", "--out", "unused"]) == 2
    assert "--batch-size 3 cannot be split evenly over 2 processes" in capsys.readouterr().err


#: One value for every option of ``sadl train gpt`` (None: a switch), none of them its default.
EVERY_OPTION = {
    "--config": "run.toml",
    "--text": "corpus.txt",
    "--tokenizer": "byte",
    "--steps": "7",
    "--batch-size": "4",
    "--block-size": "8",
    "--n-layer": "1",
    "--n-head": "1",
    "--n-embd": "8",
    "--dropout": "0.1",
    "--no-bias": None,
    "--lr": "0.01",
    "--min-lr": "0.001",
    "--warmup-steps": "2",
    "--weight-decay": "0.05",
    "--grad-clip": "0.5",
    "--eval-interval": "3",
    "--eval-batches": "2",
    "--sample-tokens": "5",
    "--seed": "9",
    "--device": "cpu",
    "--checkpoint-activations": None,
    "--out": "runs/elsewhere",
    "--resume": None,
    "--overwrite": None,
    "--stop-after": "2",
    "--no-progress": None,
    "--compile": None,
    "--threads": "1",
}


def test_the_ranks_get_every_option_but_nproc():
    import argparse

    from sadl_models import cli

    parser = cli._add_train_gpt(argparse.ArgumentParser().add_subparsers())
    options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    # A switch's other spelling (--progress, --bias, ...) is covered by the one listed.
    other = {"--progress", "--bias", "--no-checkpoint-activations"}
    assert options - {"--help", "--nproc", *other} == set(EVERY_OPTION)
    argv = [item for k, v in EVERY_OPTION.items() for item in (k, v) if item is not None]
    ours = parser.parse_args([*argv, "--nproc", "2"])
    rank_argv = cli._train_flags(ours)
    assert "--nproc" not in rank_argv
    theirs = vars(parser.parse_args(rank_argv))
    assert theirs == {**vars(ours), "nproc": None}
    assert theirs["compile"] and theirs["checkpoint_activations"] and theirs["progress"] is False
    assert theirs["bias"] is False and theirs["config"] == "run.toml"
    plain = cli._train_flags(parser.parse_args(["--out", "o", "--progress"]))
    assert plain == ["--out", "o", "--progress"]  # nothing else: the ranks keep the defaults


def test_nproc_launches_the_ranks_with_the_options_and_refuses_compile_first(monkeypatch, capsys):
    launched = []
    monkeypatch.setattr(parallel, "launch", lambda n, argv: launched.append((n, argv)) or 0)
    options = ["--steps", "5", "--checkpoint-activations", "--out", "o", "--threads", "1"]
    assert main(["train", "gpt", "--nproc", "2", *options]) == 0
    [(nproc, argv)] = launched
    assert nproc == 2 and argv[:2] == ["train", "gpt"]
    assert sorted(argv[2:]) == sorted(options)
    assert main(["train", "gpt", "--nproc", "2", "--compile", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--compile trains in one process" in err
    assert len(launched) == 1  # no process was started
