"""The kernels on threads: bit for bit the same results on 1 thread and on 2, and the thread
count taken from sadl's policy (``sadl.set_num_threads``, threadpoolctl, size).

Each kernel runs two ways on inputs above the size that gets a second thread: its serial
compilation (what one thread runs) and its ``parallel=True`` compilation on two threads. The
serial compilation is checked against eager by the other test files, at their stated
tolerances; here both must agree to the bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from sadl_kernels import _jit, _optim, _softmax
from sadl_kernels._jit import prange

numba = pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(bool(_jit.numba_error()), reason="numba is not available")

BIG = 2 * _jit.PER_THREAD + 4 * 130  # just above a second thread's share, not a round size


def _three_ways(monkeypatch, run):
    """``run()`` (returning arrays) serially and in parallel on 2 threads. (The parallel
    compilation on one numba thread is never launched: it left GELU's output partly unwritten
    in a first launch on numba 0.68.1.)
    """
    real = numba.set_num_threads
    results = []
    for threads, numba_threads in ((1, 1), (2, 2)):
        with monkeypatch.context() as m:
            m.setattr(_jit, "threads_for", lambda work, per, t=threads: t)
            m.setenv("SADL_KERNELS_THREADS", "1")
            m.setattr(_jit, "_SET", threading.local())  # (the count is set anew)
            m.setattr(numba, "set_num_threads", lambda n, k=numba_threads: real(min(n, k)))
            results.append([np.array(a, copy=True) for a in run()])
    real(numba.config.NUMBA_NUM_THREADS)
    _jit._SET.n = numba.config.NUMBA_NUM_THREADS
    for way, other in enumerate(results[1:], 1):
        for k, (a, b) in enumerate(zip(results[0], other, strict=True)):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (way, k)
    return results[0]


def _probe(n):
    """A threaded kernel (the softmax backward) on ``n`` elements; returns its output."""
    pt = np.linspace(-4, 4, n, dtype=np.float32).reshape(1, 1, 1, n)
    dst = np.empty_like(pt)
    _softmax.softmax_backward_into(pt[..., ::-1].copy(), pt, dst, 2, False)
    return dst


def _rng():
    return np.random.default_rng(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_softmax_is_bit_identical_on_one_and_two_threads(monkeypatch, dtype):
    shape = (2, 4, 64, BIG // (8 * 64) + 1)
    scores = _rng().standard_normal(shape).astype(dtype) * 4
    bias = np.where(_rng().random(shape[2:]) < 0.2, -np.inf, 0.0).astype(dtype)
    g = _rng().standard_normal(shape).astype(dtype)

    def forward():
        out, log = np.empty_like(scores), np.empty_like(scores)
        _softmax.softmax_into(scores, bias, out, 2, False)
        _softmax.softmax_into(scores, bias, log, 2, True)
        return out, log

    def backward():
        p = np.abs(scores) * 0.1
        out, log = np.empty_like(scores), np.empty_like(scores)
        _softmax.softmax_backward_into(g, p, out, 2, False)
        _softmax.softmax_backward_into(g, -p, log, 2, True)
        return out, log

    _three_ways(monkeypatch, forward)
    _three_ways(monkeypatch, backward)


def test_flat_optimizer_updates_are_bit_identical_on_one_and_two_threads(monkeypatch):
    dtype = np.float32
    rng = _rng()
    data, grad = rng.standard_normal(BIG).astype(dtype), rng.standard_normal(BIG).astype(dtype)
    m, v = rng.standard_normal(BIG).astype(dtype), rng.random(BIG).astype(dtype)

    def adam():
        state = {"step": 3, "exp_avg": m.copy(), "exp_avg_sq": v.copy()}
        state["max_exp_avg_sq"] = v[::-1].copy()
        group = {"lr": 1e-3, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.1}
        p = data.copy()
        assert _optim._run_adam(p, grad, state, {**group, "amsgrad": True}, decoupled=True)
        return p, state["exp_avg"], state["exp_avg_sq"], state["max_exp_avg_sq"]

    def sgd():
        state = {"momentum_buffer": m.copy()}
        group = {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 1e-2}
        p = data.copy()
        assert _optim._run_sgd(p, grad, state, {**group, "nesterov": True})
        return p, state["momentum_buffer"]

    _three_ways(monkeypatch, adam)
    _three_ways(monkeypatch, sgd)


def test_kernels_stay_on_one_thread_unless_threads_are_switched_on(monkeypatch):
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: 2)
    monkeypatch.delenv("SADL_KERNELS_THREADS", raising=False)
    assert _softmax._softmax_grad.threads(10**9) == 1
    monkeypatch.setenv("SADL_KERNELS_THREADS", "1")
    assert _softmax._softmax_grad.threads(10**9) == 2


_POLICY_SCRIPT = """
import numba, numpy as np, sadl
from sadl_kernels import _jit, _softmax

entered = []
real = numba.set_num_threads
numba.set_num_threads = lambda n: (entered.append(n), real(n))


def probe(n):
    pt = np.linspace(-4, 4, n, dtype=np.float32).reshape(1, 1, 1, n)
    _softmax.softmax_backward_into(pt[..., ::-1].copy(), pt, pt * 0.5, 2, False)


per = _jit.PER_THREAD
big = 2 * per + 4 * 130
probe(2 * per - 1)
assert sadl.backends.threads_for(2 * per - 1, per) == 1
assert entered == [], entered
sadl.set_num_threads(1)
assert sadl.backends.threads_for(10**9, per) == 1
probe(big)
assert entered == [], entered
sadl.set_num_threads(2)
assert sadl.backends.threads_for(big, per) == 2
probe(big)
assert entered == [2], entered
"""


def test_small_arrays_and_set_num_threads_1_keep_kernels_on_one_thread():
    """The policy: under two threads' share one thread; ``sadl.set_num_threads(1)`` one thread
    for any size (the parallel compilation is never entered). In a process of its own: the
    thread choice it makes stays for the rest of the process.
    """
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["SADL_KERNELS_THREADS"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", _POLICY_SCRIPT], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_the_kernels_on_one_thread_with_the_same_bits(monkeypatch):
    """numba documents its GNU OpenMP layer as not fork-safe (and its workqueue as not
    thread-safe): a child of a process whose kernels ran in parallel runs them serially.
    """
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: 2)
    monkeypatch.setenv("SADL_KERNELS_THREADS", "1")
    out = _probe(BIG)  # the pool is started
    assert _jit.POOL["started"]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the kernel again, its bytes to the parent
        try:
            out2 = _probe(BIG)
            os.write(write, b"1" if _jit.POOL["forked"] else b"0")
            os.write(write, out2.tobytes())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        got = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert got[:1] == b"1" and got[1:] == out.tobytes()


def test_kernels_called_from_two_threads_at_once_give_the_serial_bits(monkeypatch):
    """One launch at a time enters numba's pool (numba documents its workqueue layer as not
    thread-safe); the others run serially, with the same bits.
    """
    expected = _probe(BIG)  # (one thread: serial)
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: 2)
    monkeypatch.setenv("SADL_KERNELS_THREADS", "1")
    outs = [None] * 4

    def work(k):
        for _ in range(10):
            outs[k] = _probe(BIG)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o.tobytes() == expected.tobytes() for o in outs)


def _thread_ids(out):  # type: ignore[no-untyped-def]
    for i in prange(out.size):  # (numba.prange once compiled)
        out[i] = numba.get_thread_id()


def test_the_parallel_compilation_runs_on_the_threads_it_is_given(monkeypatch):
    kernel = _jit.jit(_thread_ids, per_thread=1)
    out = np.full(1 << 12, -1, np.int64)
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: 2)
    monkeypatch.setenv("SADL_KERNELS_THREADS", "1")
    monkeypatch.setattr(_jit, "_SET", threading.local())
    kernel.launch(out.size, out)  # (first: numba's thread ids exist once its pool started)
    _jit._SET.n = 0  # (numba's count of this thread is left at 2)
    assert set(out.tolist()) == set(range(min(2, numba.config.NUMBA_NUM_THREADS)))
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: 1)
    kernel.launch(out.size, out)
    assert set(out.tolist()) == {0}
