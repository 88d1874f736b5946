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
from sadl_kernels import _elementwise, _jit, _norm, _optim, _softmax
from sadl_kernels._jit import prange

numba = pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(bool(_jit.numba_error()), reason="numba is not available")

BIG = 2 * _jit.PER_THREAD + 4 * 130  # just above a second thread's share, not a round size


@pytest.fixture(autouse=True)
def _threads_opted_in(monkeypatch):
    """These tests run the kernels as ``SADL_KERNELS_THREADS=1`` does."""
    monkeypatch.setitem(_jit.THREADS, "on", True)


def test_kernels_stay_on_one_thread_unless_opted_in(monkeypatch):
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: 2)
    monkeypatch.setitem(_jit.THREADS, "on", False)
    assert _softmax._softmax_grad.threads(10**9) == 1
    monkeypatch.setitem(_jit.THREADS, "on", True)
    assert _softmax._softmax_grad.threads(10**9) == 2


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


def test_kernels_ask_the_policy_only_above_two_threads_share(monkeypatch):
    asked = []
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: asked.append(work) or 2)
    assert _softmax._softmax_grad.threads(10**9) == 2
    _probe(2 * _jit.PER_THREAD - 1)  # (one thread's work: no policy call, the serial code)
    assert asked == [10**9]


CHUNK = _elementwise.CHUNK
#: Sizes around the GELU kernels' chunk boundaries, odd ones, and one above two threads' share.
EDGES = [1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 3, 5 * CHUNK - 1, BIG + 3]


def _serial_and_parallel(kernel, make, threads=2):
    """``kernel`` on the arrays ``make()`` returns (outputs filled with NaN), by its serial
    compilation and its parallel one on ``threads`` numba threads; both results.
    """
    if kernel.parallel is None:  # (made once per kernel, as Kernel.launch makes it)
        kernel.parallel = kernel._compile(parallel=True)
    parallel = kernel.parallel
    results = []
    for run in (kernel.dispatcher(), parallel):
        args = make()
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        try:
            run(*args)
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
            _jit._SET.n = numba.config.NUMBA_NUM_THREADS
        results.append(args)
    return results


@pytest.mark.parametrize("n", EDGES)
def test_gelu_kernels_write_every_element_with_the_same_bits_on_one_and_two_threads(n):
    from sadl_kernels._gelu import AC, C

    x = np.linspace(-6, 6, n, dtype=np.float32)
    g = np.cos(x)
    cases = {
        _elementwise._gelu_forward: lambda: (x, np.full(n, np.nan, np.float32), AC, C),
        _elementwise._gelu_backward: lambda: (
            x,
            g,
            np.full(n, np.nan, np.float32),
            AC,
            C,
            3 * AC,
            C,
        ),
    }
    for kernel, make in cases.items():
        serial, parallel = _serial_and_parallel(kernel, make)
        for a, b in zip(serial, parallel, strict=True):
            if isinstance(a, np.ndarray):
                assert not np.isnan(b).any(), (kernel.__name__, n, np.flatnonzero(np.isnan(b))[:5])
                assert a.tobytes() == b.tobytes(), (kernel.__name__, n)


@pytest.mark.parametrize("rows", [1, 3, 129, 515])
@pytest.mark.parametrize("width", [1, 100])
def test_gelu_with_the_folded_bias_writes_every_element_on_one_and_two_threads(rows, width):
    from sadl_kernels import _bias
    from sadl_kernels._gelu import AC, C

    h = np.linspace(-5, 5, rows * width, dtype=np.float32).reshape(rows, width)
    bias = np.linspace(-1, 1, width, dtype=np.float32)
    serial, parallel = _serial_and_parallel(
        _bias._gelu_bias, lambda: (h.copy(), bias, np.full(h.shape, np.nan, np.float32), AC, C)
    )
    for k in (0, 2):  # the biased h, stored back, and the GELU
        assert not np.isnan(parallel[k]).any()
        assert serial[k].tobytes() == parallel[k].tobytes()
    assert serial[0].tobytes() == (h + bias).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, _norm.ROWS - 1, _norm.ROWS + 1, 5 * _norm.ROWS + 7])
def test_norm_kernels_give_the_same_bits_on_one_and_two_threads(dtype, rows):
    d = 37
    rng = _rng()
    x = (rng.standard_normal((rows, d)) * 3 + 1).astype(dtype)
    w, b = rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype)
    g = rng.standard_normal((rows, d)).astype(dtype)
    for centered, affine in ((True, 2), (True, 1), (False, 1), (True, 0)):
        stats = [np.full((4, rows), np.nan, dtype) for _ in range(2)]
        serial, parallel = _serial_and_parallel(
            _norm._forward,
            lambda stats=stats, c=centered, a=affine: (
                (x, w, b, stats.pop(), np.full(x.shape, np.nan, dtype))
                + (rows, d, c, a, 1.0 / d, 1e-5)
            ),
        )
        assert not np.isnan(parallel[4]).any() and serial[4].tobytes() == parallel[4].tobytes()
        assert serial[3][:2].tobytes() == parallel[3][:2].tobytes()
        saved = serial[3]
        grads = []
        for shared in (True, False):
            flags = np.array([shared, centered, affine == 2, affine > 0])
            size = rows * d + d * (int(flags[2]) + int(flags[3]))
            s, p = _serial_and_parallel(
                _norm._backward,
                lambda saved=saved, size=size, flags=flags: (
                    (g, w, x, saved.copy())
                    + (
                        np.full(size, np.nan, dtype),
                        np.full((2, rows // _norm.ROWS + 1, d), np.nan),
                    )
                    + (rows, d, flags)
                    + (1.0 / d, 1e-5)
                ),
            )
            assert not np.isnan(p[4]).any(), (centered, affine, shared)
            assert s[4].tobytes() == p[4].tobytes(), (centered, affine, shared)
            grads.append(p[4].tobytes())
        assert grads[0] == grads[1]  # the kept statistics are the recomputed ones, bit for bit


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
    monkeypatch.setattr(_jit, "_SET", threading.local())
    kernel.launch(out.size, out)  # (first: numba's thread ids exist once its pool started)
    _jit._SET.n = 0  # (numba's count of this thread is left at 2)
    assert set(out.tolist()) == set(range(min(2, numba.config.NUMBA_NUM_THREADS)))
    monkeypatch.setattr(_jit, "threads_for", lambda work, per: 1)
    kernel.launch(out.size, out)
    assert set(out.tolist()) == {0}
