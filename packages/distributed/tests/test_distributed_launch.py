"""The launcher: which mpiexec, which flags, what it says when a job fails; `sadl launch`."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sadl_distributed import launch
from sadl_distributed.faults import Peers, machine_id, process_alive
from sadl_distributed.reports import RankRecord, read_ranks


def test_find_mpiexec_prefers_the_environment_then_this_python(monkeypatch, tmp_path):
    fake = tmp_path / "my-mpiexec"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert launch.find_mpiexec({"SADL_MPIEXEC": str(fake)}) == str(fake)
    with pytest.raises(FileNotFoundError, match="SADL_MPIEXEC='nope' is not an executable"):
        launch.find_mpiexec({"SADL_MPIEXEC": "nope"})
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():  # the test group installs the mpich wheel next to python
        assert launch.find_mpiexec({"PATH": ""}) == str(beside)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(FileNotFoundError, match=r"install .*distributed\[mpich\]'"):
        launch.find_mpiexec({"PATH": str(tmp_path / "empty")})


def test_command_for_mpich_runs_each_rank_supervised():
    command = launch.mpiexec_command(3, ["python", "train.py"])
    assert launch.launcher_kind(command[0]) == "hydra"
    assert command[1:5] == ["-n", "3", "-disable-auto-cleanup", sys.executable]
    assert command[5:] == ["-m", "sadl_distributed.supervise", "python", "train.py"]
    with pytest.raises(ValueError, match="positive integer"):
        launch.mpiexec_command(0, ["x"])
    with pytest.raises(ValueError, match="nothing to launch"):
        launch.mpiexec_command(2, [])


def test_command_for_open_mpi_and_unknown_launchers(tmp_path):
    for banner, flags in (("mpirun (Open MPI) 5.0.3", ["--oversubscribe"]), ("who knows", [])):
        fake = tmp_path / "mpiexec"
        fake.write_text(f"#!/bin/sh\necho '{banner}'\n")
        fake.chmod(0o755)
        command = launch.mpiexec_command(2, ["a"], mpiexec=str(fake))
        assert command == [str(fake), "-n", "2", *flags, "a"]


def test_ranks_share_the_cores_unless_told_otherwise():
    env = launch.rank_environment(2, {"PATH": "/bin"})
    assert env["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))
    assert launch.rank_environment(2, {"OMP_NUM_THREADS": "7"})["OMP_NUM_THREADS"] == "7"
    assert "OPENBLAS_NUM_THREADS" not in launch.rank_environment(2, {"OMP_NUM_THREADS": "7"})


def test_failure_summary_names_the_first_dead_rank_first():
    ranks = {
        0: RankRecord(0, 10, 1, failure="rank 0 of 2: RankFailedError: rank 1 ... died"),
        1: RankRecord(1, 11, 1, failure="rank 1 of 2: killed by SIGKILL, process 11"),
        2: RankRecord(2, 12, 1),
        3: RankRecord(3, 13, 1, done=True),
    }
    assert launch._failure_summary(ranks, [1, 0, 2]) == [
        "rank 1 of 2: killed by SIGKILL, process 11",
        "rank 0 of 2: RankFailedError: rank 1 ... died",
        "ranks [2] ended without a report (killed along with the job)",
    ]
    assert launch._failure_summary({}, []) == ["no rank got as far as sadl_distributed.init()"]


def test_reports_round_trip(tmp_path, monkeypatch):
    from sadl_distributed import reports

    monkeypatch.setenv(reports.REPORTS_VARIABLE, str(tmp_path))
    reports.register_rank(1, 42)
    reports.write_ended(1, 2, 999, -9)
    try:
        raise KeyError("lost")
    except KeyError as exc:
        reports.write_failure(0, 2, KeyError, exc, exc.__traceback__)
    (tmp_path / "rank0.pid").write_text("123 42")
    found = read_ranks(tmp_path)
    assert found[1].pid == os.getpid() and found[1].machine == 42
    assert found[1].failure.startswith("rank 1 of 2: killed by SIGKILL")
    assert found[0].failure == "rank 0 of 2: KeyError: 'lost'"
    assert "Traceback" in (tmp_path / "rank0.txt").read_text()


def test_liveness_of_processes_and_peers():
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    stat = Path(f"/proc/{zombie.pid}/stat")
    while stat.read_text().split(")")[1].split()[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)  # exited, not yet reaped: a zombie is dead too
    assert not process_alive(zombie.pid)
    zombie.wait()
    here = machine_id()
    assert here == machine_id() and here >= 0
    peers = Peers(0, [os.getpid(), child.pid, 1], [here, here, here + 1])
    assert peers.neighbours == [1]  # rank 2 is elsewhere: not checked here
    assert peers.dead() == [1]
    from sadl_distributed import RankFailedError

    with pytest.raises(RankFailedError, match=r"rank 1 \(process \d+ on this machine\) died"):
        peers.check("all_reduce")


def test_sadl_launch_command():
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "launch", "--nproc", "2"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "give a script to run" in result.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "sadl", "plugins"], capture_output=True, text=True, check=True
    )
    assert "distributed" in listed.stdout


def test_supervisor_passes_status_and_reports_a_killing_signal(tmp_path):
    from sadl_distributed import supervise

    assert supervise.main([sys.executable, "-c", "raise SystemExit(3)"]) == 3
    env = {**os.environ, "SADL_DISTRIBUTED_REPORTS": str(tmp_path)}
    env.update(PMI_RANK="1", PMI_SIZE="2")
    suicide = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    command = [sys.executable, "-m", "sadl_distributed.supervise", sys.executable, "-c", suicide]
    result = subprocess.run(command, env=env)
    assert result.returncode == 128 + 9
    assert (tmp_path / "rank1.txt").read_text().startswith("rank 1 of 2: killed by SIGKILL")


def test_ctrl_c_goes_to_the_ranks_first_then_to_mpiexec(tmp_path):
    listener = (
        "import signal, sys, time, pathlib\n"
        "mark = pathlib.Path(sys.argv[1])\n"
        "signal.signal(signal.SIGINT, lambda *a: mark.write_text('interrupted'))\n"
        "mark.with_suffix('.up').write_text('')\n"
        "deadline = time.monotonic() + 30\n"
        "while not mark.exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
    )
    ranks = []
    for r in range(2):
        mark = tmp_path / f"mark{r}"
        ranks.append(subprocess.Popen([sys.executable, "-c", listener, str(mark)]))
        (tmp_path / f"rank{r}.pid").write_text(f"{ranks[-1].pid} {machine_id()}")
    for r in range(2):
        while not (tmp_path / f"mark{r}.up").exists():
            time.sleep(0.01)

    class Mpiexec:
        def __init__(self):
            self.signals = []

        def send_signal(self, signum):
            self.signals.append(signum)

    mpiexec = Mpiexec()
    assert launch._interrupt(mpiexec, tmp_path, again=False)
    for rank in ranks:
        rank.wait(timeout=30)
    assert [(tmp_path / f"mark{r}").read_text() for r in range(2)] == ["interrupted"] * 2
    assert mpiexec.signals == []
    launch._interrupt(mpiexec, tmp_path, again=True)  # the second Ctrl-C
    assert mpiexec.signals == [signal.SIGINT]


def test_after_the_launchers_signal_a_dying_neighbour_is_looked_for_again():
    from sadl_distributed import RankFailedError

    here = machine_id()
    exiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    peers = Peers(0, [os.getpid(), exiting.pid], [here, here])
    peers.failure_reported = True  # the launcher's SIGUSR1, before the process is gone
    try:
        with pytest.raises(RankFailedError, match=r"rank 1 \(process \d+ on this machine\) died"):
            peers.check("all_reduce")
    finally:
        exiting.wait()


def _sadl(*args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "sadl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "2"], "give a script to run (or -m MODULE)"),
        (
            ["--nproc", "2", "missing.py", "--lr", "1"],
            "missing.py: no such file (the script to run in every rank)",
        ),
        (
            ["--nproc", "2", "-m", "no_such_module_here"],
            "-m no_such_module_here: no module named 'no_such_module_here'",
        ),
        (["--nproc", "0", "script.py"], "--nproc must be at least 1, got 0"),
    ],
)
def test_sadl_launch_refuses_bad_usage_once_before_starting_anything(tmp_path, args, message):
    # An mpiexec that would leave a mark: it must never be started.
    fake = tmp_path / "mpiexec"
    fake.write_text(f"#!/bin/sh\ntouch {tmp_path / 'started'}\n")
    fake.chmod(0o755)
    result = _sadl("launch", *args, env={"SADL_MPIEXEC": str(fake)})
    assert result.returncode == 2
    assert result.stderr == f"sadl launch: error: {message}\n"
    assert not (tmp_path / "started").exists()


#: An mpiexec stand-in (of an unknown kind: no flags added): runs the command N times and, on
#: SIGTERM, passes it on to them, waits, and only then ends, leaving ``ended`` behind.
FAKE_MPIEXEC = """\
import pathlib, signal, subprocess, sys, time
here = pathlib.Path(sys.argv[0]).parent
if sys.argv[1] == "--version":
    raise SystemExit(0)
got = []
signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
children = [subprocess.Popen(sys.argv[3:]) for _ in range(int(sys.argv[2]))]
while not got and any(child.poll() is None for child in children):
    time.sleep(0.05)
if got:
    (here / "terminated").write_text(str(got[0]))
    for child in children:
        child.terminate()
        child.wait()
    time.sleep(0.5)  # slow to end: the launcher must wait for it
    (here / "ended").write_text("")
    raise SystemExit(128 + got[0])
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_the_launcher_ends_the_job_before_the_launcher(tmp_path, signum):
    fake = tmp_path / "mpiexec"
    fake.write_text(f"#!{sys.executable}\n{FAKE_MPIEXEC}")
    fake.chmod(0o755)
    script = tmp_path / "rank.py"
    script.write_text(
        "import os, pathlib, sys, time\n"
        f"pathlib.Path({str(tmp_path)!r}, f'up{{os.getpid()}}').touch()\n"
        "time.sleep(60)\n"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-m", "sadl", "launch", "--nproc", "2", str(script)],
        env={**os.environ, "SADL_MPIEXEC": str(fake)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("up*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the launcher is in its watch loop
        launcher.send_signal(signum)
        _, stderr = launcher.communicate(timeout=30)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signum, stderr
    assert (tmp_path / "terminated").read_text() == str(int(signal.SIGTERM))
    assert (tmp_path / "ended").exists()  # mpiexec had ended before the launcher did
    assert f"sadl launch: {signal.Signals(signum).name}: ending the job" in stderr
