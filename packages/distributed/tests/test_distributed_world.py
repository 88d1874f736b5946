"""The world: a plain run is a world of one without MPI; launcher detection; bad settings."""

import os
import subprocess
import sys
import textwrap

import pytest
import sadl_distributed as dist
from sadl_distributed.mpi import launched_by_mpi, launcher_world_size

CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(("PMI", "OMPI_", "PMIX", "MV2_", "SLURM_", "SADL_DISTRIBUTED"))
}


def run_python(code, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**CLEAN_ENV, **(env or {})},
    )


@pytest.fixture(autouse=True)
def fresh_world():
    dist.shutdown()
    yield
    dist.shutdown()


def test_a_plain_run_is_a_world_of_one_without_mpi():
    result = run_python(
        """
        import sys
        import numpy as np
        import sadl_distributed as dist
        assert "mpi4py" not in sys.modules  # importing the package initializes nothing
        group = dist.init()
        x = np.arange(3.0)
        dist.all_reduce(x, "mean")
        print(group.backend, dist.rank(), dist.world_size(), dist.local_rank(), x.tolist())
        print("mpi4py" in sys.modules)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["local 0 1 0 [0.0, 1.0, 2.0]", "False"]
    assert result.stderr == ""


def test_mpi_backend_without_a_launcher_is_mpis_world_of_one_and_silent():
    # MPI's singleton start: no mpiexec, no hang, nothing printed.
    result = run_python(
        """
        import numpy as np
        import sadl_distributed as dist
        group = dist.init(backend="mpi")
        x = np.ones(2)
        dist.all_reduce(x)
        dist.barrier()
        print(group.backend, dist.world_size(), x.tolist())
        """,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "mpi 1 [1.0, 1.0]"
    assert result.stderr == ""


def test_a_launcher_that_started_more_processes_than_mpi_sees_is_a_clear_error():
    # What happens when mpi4py's MPI is not the one whose mpiexec started the job: each
    # process would believe it is alone. Open MPI's variable with MPICH underneath shows it.
    result = run_python(
        """
        import sadl_distributed as dist
        dist.init()
        """,
        env={"OMPI_COMM_WORLD_SIZE": "2"},
    )
    assert result.returncode != 0
    assert "the launcher started 2 processes, but MPI says this world has 1" in result.stderr
    assert "mpiexec" in result.stderr


def test_launcher_detection():
    assert not launched_by_mpi({})
    assert launched_by_mpi({"PMI_RANK": "0"})
    assert launched_by_mpi({"OMPI_COMM_WORLD_SIZE": "4"})
    assert launched_by_mpi({"SLURM_STEP_NUM_TASKS": "8"})
    assert not launched_by_mpi({"SLURM_STEP_NUM_TASKS": "1"})
    assert not launched_by_mpi({"SLURM_STEP_NUM_TASKS": "many"})
    assert launcher_world_size({"PMI_SIZE": "3"}) == 3
    assert launcher_world_size({"OMPI_COMM_WORLD_SIZE": "5"}) == 5
    assert launcher_world_size({}) is None


def test_init_is_idempotent_and_other_calls_initialize_it():
    assert not dist.is_initialized()
    assert dist.world_size() == 1  # initializes
    group = dist.get_group()
    assert dist.init() is group
    assert dist.init("local") is group
    assert dist.is_main_process()
    dist.barrier()
    assert dist.default_device() == "cpu"
    with pytest.raises(dist.DistributedError, match="already initialized with the 'local'"):
        dist.init("mpi")


def test_bad_backend_and_timeout(monkeypatch):
    with pytest.raises(ValueError, match="unknown backend 'nccl'"):
        dist.init("nccl")
    with pytest.raises(ValueError, match="positive number of seconds"):
        dist.init(timeout=0)
    monkeypatch.setenv("SADL_DISTRIBUTED_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="SADL_DISTRIBUTED_TIMEOUT must be a number"):
        dist.init()
    monkeypatch.setenv("SADL_DISTRIBUTED_TIMEOUT", "12.5")
    assert dist.init().timeout == 12.5


def test_backend_from_the_environment(monkeypatch):
    monkeypatch.setenv("SADL_DISTRIBUTED_BACKEND", "local")
    assert dist.init().backend == "local"
