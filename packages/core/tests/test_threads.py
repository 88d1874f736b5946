"""sadl's BLAS thread policy: the count per product, the user's choice wins, restored after.

Each product's thread count is read inside the product (through threadpoolctl) by a stand-in
for ``np.matmul`` that records it; the BLAS starts each test at 2 threads, as NumPy starts it
on a 2-core machine.
"""

from __future__ import annotations

import os
import time
import types

import numpy as np
import pytest
import sadl
from sadl import _threads
from sadl.backends import matmul
from threadpoolctl import threadpool_info, threadpool_limits

BLAS = [p for p in threadpool_info() if p["user_api"] == "blas"]
needs_blas = pytest.mark.skipif(
    not any(p["internal_api"] in ("openblas", "mkl") for p in BLAS),
    reason="NumPy's BLAS is neither OpenBLAS nor MKL: sadl leaves its threads alone",
)
pytestmark = needs_blas


def blas_threads() -> int:
    """NumPy's BLAS's thread count (not another library's, torch's MKL, loaded beside it)."""
    pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
    mine = [p for p in pools if "numpy" in p["filepath"]] or pools
    return max(int(p["num_threads"]) for p in mine)


def ones(*shape: int) -> np.ndarray:
    return np.ones(shape, dtype=np.float32)


@pytest.fixture
def seen(monkeypatch):
    """The policy as a fresh process gets it (no thread variable) on an idle 2-core machine;
    the list of BLAS thread counts the products ran on."""
    for var in _threads._ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(_threads, "_blas", None)
    monkeypatch.setattr(_threads, "_limits", None)
    monkeypatch.setattr(_threads, "_decided", [2])  # judged once per process: 2 cores free
    monkeypatch.setattr(_threads, "_chosen", [])  # (no set_num_threads of an earlier test)
    counts: list[int] = []

    def recording(a, b, **kwargs):
        if type(a) is np.ndarray:  # (Tensors and traced arrays pass through to the arrays)
            counts.append(blas_threads())
        return np.matmul(a, b, **kwargs)

    monkeypatch.setattr(_threads, "_matmul", recording)
    with threadpool_limits(2, user_api="blas"):
        yield counts
        assert blas_threads() == 2  # every product gave the count back


def test_small_products_run_on_one_thread_large_ones_on_the_free_cores(seen):
    matmul(ones(128, 128), ones(128, 128))  # 2.1 M multiply-adds
    matmul(ones(8, 128, 128), ones(8, 128, 128))  # a batch of such: counted per matrix
    matmul(ones(4096), ones(4096, 512))  # a GEMV of 2.1 M
    matmul(ones(256, 256), ones(256, 256))  # 16.8 M
    matmul(ones(4096, 128), ones(128, 512))  # 268 M
    matmul(ones(10, 10), ones(10, 10))  # tiny: OpenBLAS keeps it on one thread itself
    assert seen == [1, 1, 1, 2, 2, 2]
    assert 2 * _threads.PER_THREAD > 128**3 and 2 * _threads.PER_THREAD <= 256**3


def test_a_busy_machine_keeps_large_products_on_one_thread(seen):
    _threads._decided[0] = 1  # other processes keep a core busy
    matmul(ones(512, 512), ones(512, 512))
    assert seen == [1]


def test_the_count_never_goes_above_what_the_blas_had(seen):
    with threadpool_limits(1, user_api="blas"):  # the user's own limit
        matmul(ones(512, 512), ones(512, 512))
        assert blas_threads() == 1
    assert seen == [1]


@pytest.mark.parametrize("var", _threads._ENV)
def test_a_thread_variable_the_user_set_wins(seen, monkeypatch, var):
    monkeypatch.setenv(var, "2")
    matmul(ones(128, 128), ones(128, 128))
    assert seen == [2] and _threads._blas is False


def test_set_num_threads_wins(seen):
    sadl.set_num_threads(2)
    matmul(ones(128, 128), ones(128, 128))
    matmul(ones(4096, 128), ones(128, 512))
    assert seen == [2, 2]


def test_the_count_comes_back_when_a_product_raises(seen):
    with pytest.raises(ValueError):
        matmul(ones(128, 128), ones(64, 128))
    assert seen == [1]  # (the fixture checks the BLAS is back at 2)


def test_tensors_and_other_arrays_pass_through(seen):
    x = sadl.tensor(ones(128, 128), requires_grad=True)
    out = matmul(x, x)  # the op's forward picks the count, on the arrays
    assert isinstance(out, sadl.Tensor) and seen == [1]
    out.sum().backward()  # and both gradients
    assert seen == [1, 1, 1]

    class Sub(np.ndarray):
        pass

    assert type(matmul(ones(2, 2).view(Sub), ones(2, 2))) is Sub


def test_sadl_matmul_and_its_gradients_follow_the_policy(seen):
    a = sadl.tensor(ones(256, 512), requires_grad=True)
    b = sadl.tensor(ones(512, 128), requires_grad=True)
    (a @ b).sum().backward()  # 16.8 M multiply-adds, and as many for each gradient
    np.dot(sadl.tensor(ones(64, 512)), b).sum().backward()  # 4.2 M
    assert seen == [2, 2, 2, 1, 1]


def test_the_blas_numpy_loaded_is_found(monkeypatch):
    monkeypatch.setattr(_threads, "_blas", None)
    for var in _threads._ENV:
        monkeypatch.delenv(var, raising=False)
    get, put = _threads._find_blas()
    with threadpool_limits(1, user_api="blas"):
        assert get() == 1
    put(2)
    try:
        assert blas_threads() == 2 and get() == 2
    finally:
        put(BLAS[0]["num_threads"])


def _stat(path, *rows):
    path.write_text("".join(f"{name} {' '.join(map(str, t))}\n" for name, *t in rows))
    return str(path)


def test_busy_ticks_count_every_state_but_idle_of_the_given_cores(tmp_path):
    # user nice system idle iowait irq softirq steal guest guest_nice
    path = _stat(
        tmp_path / "stat",
        ("cpu", 99, 99, 99, 99, 99, 99, 99, 99, 0, 0),
        ("cpu0", 1, 2, 3, 1000, 500, 4, 5, 6, 7, 8),
        ("cpu1", 10, 0, 0, 1000, 0, 0, 0, 0, 0, 0),
        ("cpu2", 100, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        ("intr", 12345),
    )
    assert _threads._busy_ticks({0, 1}, path) == 1 + 2 + 3 + 4 + 5 + 6 + 10
    assert _threads._busy_ticks({2}, path) == 100
    assert _threads._busy_ticks({0}, str(tmp_path / "missing")) is None


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A fake root of ``cores`` cores: /proc/stat, /proc/loadavg and the cgroup files written
    by ``set``; ``busy`` cores of other processes' work pass while the judgement samples."""
    hz = os.sysconf("SC_CLK_TCK")
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/job\n")
    state = {"cores": 2, "busy": 0.0, "runnable": 1, "ticks": 0}

    def write():
        rows = [("cpu", 0, 0, 0, 0, 0, 0, 0, 0)]
        rows += [(f"cpu{i}", state["ticks"], 0, 0, 9999, 0, 0, 0, 0) for i in range(4)]
        _stat(tmp_path / "proc/stat", *rows)
        (tmp_path / "proc/loadavg").write_text(f"0.00 0.00 0.00 {state['runnable']}/99 123\n")

    def sleep(seconds):  # the sample: each other process's busy core gives its ticks
        state["ticks"] += round(state["busy"] * seconds * hz / state["cores"])
        clock[0] += seconds
        write()

    clock = [0.0]
    fake = types.SimpleNamespace(sleep=sleep, monotonic=lambda: clock[0], process_time=lambda: 0)

    def judge(cores=2, busy=0.0, runnable=1, cpu_count=None):
        state.update(cores=cores, busy=busy, runnable=runnable)
        write()
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
        monkeypatch.setattr(os, "cpu_count", lambda: cpu_count or cores)
        return _threads._measure_free_cores(f"{tmp_path}/")

    monkeypatch.setattr(_threads, "SAMPLE", 1.0)
    monkeypatch.setattr(_threads, "time", fake)
    judge.root = tmp_path
    return judge


def test_free_cores_are_the_cores_other_processes_keep_busy_now(machine):
    assert machine(busy=0) == 2
    assert machine(busy=1) == 1
    assert machine(busy=2) == 1  # (at least one)
    assert machine(cores=4, busy=1.2) == 3


def test_runnable_tasks_count_where_the_mask_holds_every_core(machine):
    # two busy processes just started: the load average shows nothing, the runnable count does
    assert machine(cores=4, runnable=3) == 2
    assert machine(cores=4, runnable=3, cpu_count=8) == 4  # (other cores' tasks may be those)


def test_the_processs_own_running_threads_are_not_other_work(machine):
    # a product of the user's own NumPy code left this process's BLAS thread spinning: the
    # runnable count holds it and this thread, and no other process
    for tid, state in ((1, "R"), (2, "R"), (3, "S")):
        (machine.root / f"proc/self/task/{tid}").mkdir(parents=True)
        (machine.root / f"proc/self/task/{tid}/stat").write_text(f"{tid} (py thon) {state} 1 1\n")
    assert machine(cores=2, runnable=2) == 2
    assert machine(cores=2, runnable=3) == 1  # and one other process's task


def test_a_cgroup_quota_caps_the_cores(machine):
    job = machine.root / "sys/fs/cgroup/job"
    job.mkdir(parents=True)
    (job / "cpu.max").write_text("max 100000\n")
    assert machine(cores=4) == 4
    (job / "cpu.max").write_text("250000 100000\n")  # two and a half cores
    assert machine(cores=4) == 2
    assert machine(cores=4, busy=1) == 1
    v1 = machine.root / "sys/fs/cgroup/cpu"
    v1.mkdir()
    (job / "cpu.max").unlink()
    (v1 / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert machine(cores=4) == 1


def test_without_proc_stat_every_core_is_free(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert _threads._measure_free_cores(f"{tmp_path}/") == 3


def test_the_judgement_is_a_short_look(monkeypatch):
    start = time.monotonic()
    free = _threads._measure_free_cores()  # the real machine's files
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert 1 <= free <= (cores or 1)
    assert time.monotonic() - start < 0.5


def test_tensordot_and_its_gradients_follow_the_policy(seen, monkeypatch):
    pytest.importorskip("sadl_layers", reason="tensordot is an op of sadl-layers")
    counts = []
    tensordot = np.tensordot

    def recording(a, b, axes=2):
        if type(a) is np.ndarray:  # the op's forward and backward, on the arrays
            counts.append(blas_threads())
        return tensordot(a, b, axes)

    monkeypatch.setattr(np, "tensordot", recording)
    a = sadl.tensor(ones(16, 32, 512), requires_grad=True)  # 16 x 16384 x 64 multiply-adds
    b = sadl.tensor(ones(32, 512, 64), requires_grad=True)
    tensordot(a, b, axes=2).sum().backward()
    small = sadl.tensor(ones(8, 32, 16), requires_grad=True)  # 8 x 512 x 64
    tensordot(small, sadl.tensor(ones(32, 16, 64)), axes=([1, 2], [0, 1])).sum().backward()
    assert counts == [2, 2, 2, 1, 1]


def test_the_free_cores_are_judged_once_so_the_same_product_gives_the_same_bits(monkeypatch):
    looks = iter([2, 1, 2])
    monkeypatch.setattr(_threads, "_decided", [])
    monkeypatch.setattr(_threads, "_measure_free_cores", lambda: next(looks))
    assert [_threads._free_cores() for _ in range(3)] == [2, 2, 2]
