"""How many threads NumPy's BLAS uses: sadl's per-product policy, ``sadl.set_num_threads(n)``.

Matrix products run in the BLAS library NumPy loaded (OpenBLAS in the PyPI wheels, MKL in some
distributions), which starts one thread per core. Below a few million multiply-adds a second
thread buys nothing, and on a machine whose cores are busy with other work the threads spin
waiting for one another: a GPT step then takes 7 to 13 times as long (docs/getting-started.md,
"Threads"). So sadl's own products go through :func:`matmul`, which picks the count per call:

* one thread for a product under ``2 * PER_THREAD`` multiply-adds (per matrix of a batch);
* above that, one thread per ``PER_THREAD`` multiply-adds, at most the cores that other
  processes leave free when the process first needs to know (its affinity mask and cgroup
  CPU quota, less what a 50 ms ``/proc/stat`` sample and ``/proc/loadavg``'s runnable count
  show busy; on other systems all the cores: judged once, so the same products always get the
  same count and the same bits) and never more than the BLAS had before the call.

The count goes back to what it was after every product, so NumPy code of the user's own runs as
it did. The switch is two C calls, skipped when the count would not change. sadl leaves the
BLAS alone when the user chose: an ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS`` or
``MKL_NUM_THREADS`` in the environment, or a call to ``sadl.set_num_threads(n)``; and when it
cannot find the BLAS's own thread functions (``*openblas*_set_num_threads*``, MKL's).

``set_num_threads`` and ``get_num_threads`` go through threadpoolctl, which changes the running
process whichever BLAS it is (the environment variables only work before NumPy is imported).
threadpoolctl is optional for sadl-core (its runtime dependencies stay numpy and pluggy): the
``threads`` extra of sadl-core installs it, and sadl-models depends on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import operator
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from sadl._install import install_command

__all__ = [
    "PER_THREAD",
    "get_num_threads",
    "matmul",
    "on_threads",
    "set_num_threads",
    "threads_for",
]

#: Multiply-adds each BLAS thread of a product must get, so a second thread from 8.4 M on: on a
#: nearly idle 2-core machine a (512, 64) @ (64, 256) product (8.4 M) ran 1.9x faster on two
#: threads, from about 2 M the gain was there but noisy (``python bench/threads.py --crossover``).
PER_THREAD = 1 << 22
_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_SYMBOLS = [  # (get, set) in the OpenBLAS builds NumPy wheels ship (64-bit ints, renamed) and MKL
    (f"{p}openblas_get_num_threads{s}", f"{p}openblas_set_num_threads{s}")
    for p in ("scipy_", "")
    for s in ("64_", "")
] + [("MKL_Get_Max_Threads", "MKL_Set_Num_Threads")]
_matmul = np.matmul
_blas: Any = None  # (get, set) of the BLAS's thread count; False: sadl leaves the count alone


def matmul(a: Any, b: Any, /, **kwargs: Any) -> Any:
    """``np.matmul(a, b, **kwargs)`` on the BLAS thread count sadl picks for the product's size.

    sadl's products and first-party plugin ops call it, and a plugin op's rules or a compiler's
    replay should too. Anything but two NumPy arrays (Tensors, CuPy or traced arrays) goes to
    ``np.matmul`` untouched.
    """
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim and b.ndim:
        m = b.shape[-1] if b.ndim > 1 else 1
        macs = (a.shape[-2] if a.ndim > 1 else 1) * a.shape[-1] * m  # per matrix of a batch
        return on_threads(macs, _matmul, a, b, **kwargs)
    return _matmul(a, b, **kwargs)


def on_threads(macs: int, func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, a BLAS call of ``macs`` multiply-adds per product, on the
    thread count sadl picks for it (``macs`` 0: as it is).
    """
    blas = _blas if _blas is not None else _find_blas()
    if blas and macs > 8192:  # (OpenBLAS runs smaller products on one thread itself)
        have = blas[0]()
        want = 1 if macs < 2 * PER_THREAD else min(have, macs // PER_THREAD, _free_cores())
        if want != have:
            blas[1](want)
            try:
                return func(*args, **kwargs)
            finally:
                blas[1](have)
    return func(*args, **kwargs)


def _find_blas() -> Any:
    """The BLAS's (get, set) thread-count functions, or False (found once, on first use)."""
    global _blas
    _blas = False  # (the thread variables are read here, once, as the BLAS reads them)
    env = [os.environ.get(var, "").split(",")[0].strip() for var in _ENV]
    _from_env[:] = [int(v) for v in env if v.isdigit()][:1]
    if any(env):
        return False
    here = os.path.dirname(np.__file__)
    paths = glob.glob(f"{here}.libs/*openblas*") + glob.glob(f"{here}/.dylibs/*openblas*")
    try:
        with open("/proc/self/maps") as maps:  # Linux: every library loaded (conda, system)
            paths += [line.split()[-1] for line in maps if "blas" in line or "mkl_rt" in line]
    except OSError:
        pass
    for path in dict.fromkeys(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _SYMBOLS:  # (ctypes passes and returns a C int by default)
            if hasattr(lib, get_name) and hasattr(lib, set_name):
                _blas = (getattr(lib, get_name), getattr(lib, set_name))
                return _blas
    return False


def _free_cores() -> int:
    """Cores other processes leave idle, judged once, at this process's first large product.

    Once: a BLAS product's bits depend on its thread count, so a count that followed the load
    from call to call would make a run's results (and a compiled step against eager) depend on
    what else the machine was doing.
    """
    if not _decided:
        _decided.append(_measure_free_cores())
    return _decided[0]


_decided: list[int] = []
#: Seconds :func:`_measure_free_cores` watches the cores for (paid once per process).
SAMPLE = 0.05


def _measure_free_cores(root: str = "/") -> int:
    """Cores this process may use (affinity mask, cgroup CPU quota) that other processes keep
    idle now (at least 1): their busy share of those cores over the next ``SAMPLE`` seconds
    (``/proc/stat``, less this process's own CPU time) or, where the mask holds every core,
    the runnable tasks ``/proc/loadavg`` counts (less this process's), whichever is more.

    Not the load average: it lags by a minute, so busy processes started with this one would
    not show and its products would wait on threads the busy cores cannot run.
    """
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if cpus is None or not os.path.exists(f"{root}proc/stat"):  # not Linux: every core
        return os.cpu_count() or 1
    cores = min(len(cpus), _quota_cores(root))
    runnable = [_runnable(root)]
    busy, cpu, when = _busy_ticks(cpus, f"{root}proc/stat"), time.process_time(), time.monotonic()
    time.sleep(SAMPLE)
    ticks = (_busy_ticks(cpus, f"{root}proc/stat") or 0) - (busy or 0)
    seconds, runnable = time.monotonic() - when, runnable + [_runnable(root)]
    others = (ticks / os.sysconf("SC_CLK_TCK") - (time.process_time() - cpu)) / seconds
    # (the runnable count is of the whole machine's tasks: only where the mask holds every core)
    others = max(others, min(runnable) if len(cpus) >= (os.cpu_count() or 1) else 0)
    return max(1, cores - int(max(others, 0) + 0.5))


def _quota_cores(root: str = "/") -> int:
    """Whole cores the cgroup's CPU quota allows (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``);
    a large number where there is no quota.
    """
    cgroups = Path(f"{root}proc/self/cgroup")
    lines = cgroups.read_text().splitlines() if cgroups.exists() else []
    own = next((ln[3:].strip().rstrip("/") for ln in lines if ln.startswith("0::")), "")
    v1 = f"{root}sys/fs/cgroup/cpu/cpu.cfs_"
    for files in ([f"{root}sys/fs/cgroup{own}/cpu.max"], [f"{v1}quota_us", f"{v1}period_us"]):
        try:
            quota, period = " ".join(Path(name).read_text() for name in files).split()[:2]
            if quota not in ("max", "-1"):
                return max(1, int(quota) // int(period))
        except (OSError, ValueError):
            continue
    return 1 << 16


def _runnable(root: str = "/") -> int:
    """Other processes' tasks running or ready to run now: ``/proc/loadavg``'s fourth field
    (machine-wide) less this process's own running threads (at least this one: its BLAS
    threads, still spinning after a product of the user's, are no other process's work).
    """
    try:
        tasks = int(Path(f"{root}proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return 0
    own = 0
    for stat in glob.glob(f"{root}proc/self/task/*/stat"):
        with contextlib.suppress(OSError, IndexError):  # (a thread may end meanwhile)
            own += Path(stat).read_text().rsplit(")", 1)[1].split()[0] == "R"
    return tasks - max(own, 1)


def _busy_ticks(cpus: Any, path: str = "/proc/stat") -> int | None:
    """Clock ticks the cores ``cpus`` spent busy since boot (None: no /proc/stat)."""
    try:
        with open(path) as stat:
            rows = [line.split() for line in stat if line.startswith("cpu")]
    except OSError:
        return None
    mine = {f"cpu{i}" for i in cpus or ()}
    # user nice system idle iowait irq softirq steal (guest time is counted in user already)
    return sum(sum(map(int, r[1:9])) - int(r[4]) - int(r[5]) for r in rows if r[0] in mine)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s; elsewhere the machine's architecture)."""
    rows = Path("/proc/cpuinfo").read_text().split("\n") if os.path.exists("/proc/cpuinfo") else []
    return next((r.split(":")[1].strip() for r in rows if "model name" in r), os.uname().machine)


def blas_description() -> str:
    """NumPy's BLAS libraries, their versions and (in brackets) the CPU kernels they picked."""
    try:
        pools = _threadpoolctl("info").threadpool_info()
    except ModuleNotFoundError as e:
        return str(e)
    blas = [p for p in pools if p["user_api"] == "blas"]
    return "; ".join(f"{p['internal_api']} {p['version']} ({p.get('architecture')})" for p in blas)


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in the BLAS (and OpenMP) thread pools of this process from now on.

    sadl's per-product policy then stays off: every product runs on ``n`` threads.
    """
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"set_num_threads: n must be an integer, got {n!r}") from None
    if n < 1:
        raise ValueError(f"set_num_threads: n must be at least 1, got {n}")
    global _limits, _blas
    _limits = _threadpoolctl("set_num_threads").threadpool_limits(limits=n)
    _blas, _chosen[:] = False, [n]


_chosen: list[int] = []  # the count of the last set_num_threads
_from_env: list[int] = []  # the thread variables' count, read once (by _find_blas)


def threads_for(work: int, per_thread: int) -> int:
    """Threads the policy gives parallel work that is not a BLAS call (sadl-kernels' numba
    loops): ``work`` units, ``per_thread`` of them at least per thread, as :func:`on_threads`
    counts a product's: 1 below ``2 * per_thread``; else at most the free cores and the BLAS's
    count now (a threadpoolctl limit lowers it), or the count the user chose
    (``set_num_threads``, ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``).
    """
    if work < 2 * per_thread:
        return 1
    blas = _blas if _blas is not None else _find_blas()
    if blas:  # sadl's own policy: no more than the BLAS has now, nor the cores free
        limit = min(int(blas[0]()), _free_cores())
    else:  # the user's count (no BLAS found and none chosen: the cores free)
        limit = (_chosen or _from_env or [0])[0] or _free_cores()
    return max(1, min(work // per_thread, limit))


_limits: Any = None  # the active threadpool_limits, kept so it is not garbage collected


def get_num_threads() -> int:
    """The most threads any BLAS thread pool of this process uses (1 when none is loaded)."""
    pools = _threadpoolctl("get_num_threads").threadpool_info()
    return max((int(p["num_threads"]) for p in pools if p.get("user_api") == "blas"), default=1)


def _threadpoolctl(caller: str) -> Any:
    try:
        import threadpoolctl
    except ImportError:
        raise ModuleNotFoundError(
            f"sadl.{caller} needs threadpoolctl, which is not installed: "
            f"{install_command('threadpoolctl')}"
        ) from None
    return threadpoolctl
