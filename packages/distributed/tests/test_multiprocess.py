"""Two ranks for real: ``sadl launch --nproc 2`` (mpiexec on this machine) runs mpi_scenarios.py.

Marked ``mpi``: ``nox -s distributed`` runs these (with every sibling package installed);
``nox -s "tests(package='distributed')"`` runs the rest. They need mpiexec (the mpich wheel of
the test group provides it); without one they fail, they are not skipped.
"""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.mpi

SCENARIOS = Path(__file__).with_name("mpi_scenarios.py")


def launch(*args, timeout=120):
    """``python -m sadl launch --nproc 2 mpi_scenarios.py ARGS``: (status, output, seconds)."""
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "launch", "--nproc", "2", str(SCENARIOS), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return result.returncode, result.stdout + result.stderr, time.monotonic() - start


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    """Run every correctness scenario once; facts[name] = [rank 0's facts, rank 1's]."""
    out = tmp_path_factory.mktemp("mpi")
    status, output, _ = launch("all", str(out))
    assert status == 0, output
    found = {}
    for path in sorted(out.glob("*.json")):
        name, rank = path.stem.rsplit(".rank", 1)
        found.setdefault(name, [None, None])[int(rank)] = json.loads(path.read_text())
    return found


def both(facts, name):
    pair = facts[name]
    assert pair[0] is not None and pair[1] is not None, f"{name}: a rank wrote no facts"
    assert pair[0]["world_size"] == pair[1]["world_size"] == 2
    return pair


def test_gradients_of_two_half_batches_equal_one_full_batch(facts):
    for rank_facts in both(facts, "ddp_gradients"):
        assert rank_facts["max_grad_diff"] <= 1e-10
        assert rank_facts["local_batch"] == [4, 16]  # B/2 per rank
        assert len(rank_facts["buckets"]) > 3


def test_parameters_identical_on_every_rank_after_20_adamw_steps(facts):
    for rank_facts in both(facts, "ddp_adamw"):
        assert rank_facts["steps"] == 20
        assert rank_facts["max_param_diff_between_ranks"] == 0.0
        assert rank_facts["max_param_diff_vs_one_process"] < 1e-9


def test_sharded_optimizer_equals_unsharded_with_half_the_memory(facts):
    pair = both(facts, "sharded_optimizer")
    for rank_facts in pair:
        assert rank_facts["max_param_diff"] == 0.0
        assert rank_facts["full_state_equal"]
    total = pair[0]["unsharded_state_bytes"]
    assert pair[0]["state_bytes"] + pair[1]["state_bytes"] == total
    for rank_facts in pair:
        assert rank_facts["state_bytes"] < 0.55 * total


def test_no_sync_accumulation_and_unused_parameters(facts):
    for rank_facts in both(facts, "no_sync_and_unused"):
        assert rank_facts["accumulated_grad_diff"] <= 1e-10
        assert rank_facts["a_grad"] == [3.0, 3.0, 3.0]
        assert rank_facts["b_grad"] == [2.0, 2.0, 2.0]  # rank 0's 4.0, averaged with nothing
        assert rank_facts["never_grad_is_none"]


def test_checkpoint_written_by_rank_0_resumes_bit_identically_on_every_rank(facts):
    for rank_facts in both(facts, "checkpoint_resume"):
        assert rank_facts["written_before_return"]
        assert rank_facts["step"] == 3
        assert rank_facts["bit_identical"]
        assert 0 < rank_facts["state_entries_here"] < 28  # this rank's share of the state
        assert rank_facts["one_rank_failed"].startswith("rank 1 failed loading the checkpoint ")


def test_collectives_on_two_ranks(facts):
    r0, r1 = both(facts, "collectives")
    for f in (r0, r1):
        assert f["sum"] == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
        assert f["mean_f16"] == ["float16", [0.5, 0.5, 0.5]]
        assert f["max_strided"] == [[0.0, 4.0], [8.0, 12.0], [16.0, 20.0]]
        assert f["prod_tensor"] == [2.0, 2.0]
        assert f["broadcast_from_1"] == [1, 1, 1, 1]
        assert f["all_gather"] == ["Tensor", [[0, 0], [1, 10]]]
        assert f["async_completed"]
        assert "the ranks disagree on the configuration (ranks [0] vs [1]" in f["check_same"]
    assert r0["reduce_scatter"] == [[0.0, 3.0], [6.0, 9.0]]
    assert r1["reduce_scatter"] == [[12.0, 15.0], [18.0, 21.0]]


def test_sampler_shards_and_mismatched_data(facts):
    r0, r1 = both(facts, "sampler")
    assert sorted(r0["indices"] + r1["indices"]) == list(range(10))
    for f in (r0, r1):
        assert "the ranks disagree on the batch of token windows" in f["different_seeds"]
        assert "cannot be split evenly over 2 ranks" in f["indivisible_batch"]


def test_mismatched_models_are_a_clear_error_on_every_rank(facts):
    for f in both(facts, "mismatched_models"):
        assert "rank 1's model differs from rank 0's" in f["error"]
        assert "'transformer.wte.weight' is (23, 16) float64 on rank 0 and (23, 8)" in f["error"]


def test_a_dying_rank_is_named_by_the_survivor_within_60_seconds(tmp_path):
    status, output, seconds = launch("dying_rank", str(tmp_path))
    assert status != 0
    assert seconds < 60, output
    # The survivor's own error, and the launcher's summary, both name rank 1.
    assert "RankFailedError: rank 1 (process" in output
    assert "died while rank 0 was waiting for it in all_reduce" in output
    assert "sadl launch: rank 1 of 2: killed by SIGKILL" in output


def test_an_exception_on_one_rank_ends_the_job_with_its_traceback(tmp_path):
    status, output, seconds = launch("raising_rank", str(tmp_path))
    assert status != 0 and seconds < 60, output
    assert "sadl_distributed: rank 1 of 2 stopped with an error" in output
    assert "ValueError: a bug in rank 1's code" in output
    assert "sadl launch: rank 1 of 2: ValueError: a bug in rank 1's code" in output


def test_same_parameters_in_another_order_are_a_mismatch_not_stop_iteration(facts):
    for f in both(facts, "ddp_parameter_order"):
        assert "the same names in a different order" in f["error"], f["error"]
        assert "number 0 is parameter 'a' on rank 0 and parameter 'b' on rank 1" in f["error"]


def test_a_rank_that_raises_before_init_ends_the_job_promptly(tmp_path):
    status, output, seconds = launch("raising_before_init", str(tmp_path), timeout=60)
    assert status != 0 and seconds < 45, output
    assert "ValueError: a bug in rank 1's code, before init" in output
    assert "sadl launch: rank 1 of 2: exited with status 1 before sadl_distributed.init()" in output


def test_sys_exit_on_one_rank_ends_the_job_naming_rank_and_status(tmp_path, monkeypatch):
    monkeypatch.setenv("SADL_DISTRIBUTED_TIMEOUT", "120")  # must end long before this
    status, output, seconds = launch("exiting_rank", str(tmp_path), timeout=100)
    assert status != 0 and seconds < 45, output
    assert "CollectiveTimeoutError" not in output
    assert "RankFailedError: rank 1 (process" in output
    assert "(rank 1 of 2: exited with status 3, process" in output
    assert "sadl launch: rank 1 of 2: exited with status 3" in output
    assert "stopping the job" not in output  # rank 0 ended it, not the launcher's backstop


def test_a_failed_rank_still_visible_at_the_launchers_signal_is_named(tmp_path):
    status, output, seconds = launch("lingering_rank", str(tmp_path), timeout=60)
    assert status != 0 and seconds < 45, output
    assert "on another machine" not in output
    assert "RankFailedError: rank 1 (process" in output
    assert "stopping the job" not in output


TINY_GPT = ["--batch-size", "4", "--block-size", "16", "--n-layer", "1", "--n-head", "2",
            "--n-embd", "16", "--eval-interval", "3", "--eval-batches", "1",
            "--sample-tokens", "10", "--no-progress"]  # fmt: skip


def sadl_cli(*args, timeout=120):
    result = subprocess.run(
        [sys.executable, "-m", "sadl", *args], capture_output=True, text=True, timeout=timeout
    )
    return result.returncode, result.stdout, result.stderr


def test_sadl_train_gpt_nproc_2_logs_once_and_matches_one_process(tmp_path):
    from sadl_models.train import TrainConfig, train
    from sadl_serialize import load_checkpoint

    out = tmp_path / "two"
    status, stdout, stderr = sadl_cli(
        "train", "gpt", "--nproc", "2", "--steps", "6", "--stop-after", "3", *TINY_GPT,
        "--out", str(out),
    )  # fmt: skip
    assert status == 0, stderr
    assert stdout.count("data parallel: 2 processes") == 1  # rank 0 only
    assert stdout.count("training GPT") == 1
    status, stdout, stderr = sadl_cli(
        "train", "gpt", "--nproc", "2", "--resume", "--out", str(out), "--no-progress"
    )
    assert status == 0, stderr
    assert "resuming" in stdout and stdout.count("done: step 6") == 1
    assert stdout.count("sample:") == 1
    two = load_checkpoint(out / "checkpoint.sadl")

    one = TrainConfig(steps=6, batch_size=4, block_size=16, n_layer=1, n_head=2, n_embd=16,
                      eval_interval=3, eval_batches=1, sample_tokens=0)  # fmt: skip
    train(one, tmp_path / "one", progress=False, plot=False, stream=io.StringIO())
    single = load_checkpoint(tmp_path / "one" / "checkpoint.sadl")
    # The same batches, the gradient averaged over two halves: the same run, to float32
    # rounding (the logged loss is the mean over the ranks, i.e. the whole batch's).
    np.testing.assert_allclose(
        two["extra"]["history"]["train"], single["extra"]["history"]["train"], rtol=1e-5
    )
    for key, value in single["model"].items():
        np.testing.assert_allclose(two["model"][key].numpy(), value.numpy(), atol=1e-4)


def _job_processes(marker):
    """(pid, environ) of every process of this user whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append((int(entry.name), cmdline, environ))
    return found


def _end_job(marker):
    """Leave nothing behind (mpiexec runs in a session of its own)."""
    for pid, _, _ in _job_processes(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_sadl_train_gpt_nproc_2_ends_when_a_rank_is_killed(tmp_path):
    out = tmp_path / "killed"
    env = {**os.environ, "SADL_DISTRIBUTED_TIMEOUT": "120"}  # must end long before this
    command = [sys.executable, "-m", "sadl", "train", "gpt", "--nproc", "2",
               "--steps", "100000", *TINY_GPT, "--out", str(out)]  # fmt: skip
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out / "checkpoint.sadl").exists():
            time.sleep(0.1)  # both ranks are in the training loop once it is there
        ranks = [pid for pid, cmdline, environ in _job_processes(str(out))
                 if b"PMI_RANK=1\0" in environ and b"supervise" not in cmdline]  # fmt: skip
        assert len(ranks) == 1, ranks
        os.kill(ranks[0], signal.SIGKILL)
        stdout, stderr = job.communicate(timeout=60)
    finally:
        job.kill()
        _end_job(str(out))
    text = stdout.decode() + stderr.decode()
    assert job.returncode != 0, text
    assert "RankFailedError: rank 1 (process" in text and "died while rank 0" in text, text
    assert "sadl launch: rank 1 of 2: killed by SIGKILL" in text
    assert "stopping the job" not in text  # the survivor ended it, not the launcher's backstop


def test_a_kill_between_checkpoint_and_metrics_line_loses_no_line(tmp_path):
    out = tmp_path / "run"
    flags = ["train", "gpt", "--steps", "6", *TINY_GPT, "--out", str(out)]
    status, output, _ = launch("sadl_killed_after_checkpoint", *flags, timeout=120)
    assert status != 0, output  # rank 0 was killed just after step 3's checkpoint
    status, stdout, stderr = sadl_cli(
        "train", "gpt", "--nproc", "2", "--resume", "--out", str(out), "--no-progress"
    )
    assert status == 0, stderr
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]


def _wait_gone(marker, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _job_processes(marker):
        time.sleep(0.1)
    return [cmdline for _, cmdline, _ in _job_processes(marker)]


def test_sigterm_to_sadl_train_gpt_nproc_2_ends_mpiexec_and_both_ranks(tmp_path):
    out = tmp_path / "terminated"
    command = [sys.executable, "-m", "sadl", "train", "gpt", "--nproc", "2",
               "--steps", "100000", *TINY_GPT, "--out", str(out)]  # fmt: skip
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out / "checkpoint.sadl").exists():
            time.sleep(0.1)  # both ranks are in the training loop once it is there
        assert (out / "checkpoint.sadl").exists()
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=60)
        left = _wait_gone(str(out), seconds=2)  # the launcher waited: nothing is left
    finally:
        job.kill()
        _end_job(str(out))
    assert job.returncode == 128 + signal.SIGTERM, stderr.decode()
    assert left == [], left
    assert "sadl launch: SIGTERM: ending the job (passed on to its 2 running ranks)" in (
        stderr.decode()
    )
    metrics = (out / "metrics.jsonl").read_bytes()
    time.sleep(1.0)
    assert (out / "metrics.jsonl").read_bytes() == metrics  # nobody trains into --out any more


def test_sighup_to_sadl_launch_ends_mpiexec_and_both_ranks(tmp_path):
    script = tmp_path / "forever.py"
    script.write_text(
        "import pathlib, sys, time\n"
        "import sadl_distributed as dist\n"
        "dist.init()\n"
        f"pathlib.Path({str(tmp_path)!r}, f'up{{dist.rank()}}').touch()\n"
        "time.sleep(120)\n"
    )
    command = [sys.executable, "-m", "sadl", "launch", "--nproc", "2", str(script)]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(tmp_path.glob("up*"))) < 2:
            time.sleep(0.1)
        job.send_signal(signal.SIGHUP)
        _, stderr = job.communicate(timeout=60)
        left = _wait_gone(str(script), seconds=2)
    finally:
        job.kill()
        _end_job(str(script))
    assert job.returncode == 128 + signal.SIGHUP, stderr.decode()
    assert left == [], left
