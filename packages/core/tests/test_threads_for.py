"""``sadl.backends.threads_for``: the BLAS thread policy's count for other parallel work
(sadl-kernels' numba loops, sadl-compile's fused chains)."""

from __future__ import annotations

import pytest
from sadl import _threads
from sadl.backends import threads_for

threadpoolctl = pytest.importorskip("threadpoolctl")
PER = 1000


@pytest.fixture
def policy(monkeypatch):
    """A fresh process's policy (no thread variable, no set_num_threads), 2 cores free."""
    for var in _threads._ENV:
        monkeypatch.delenv(var, raising=False)
    for name in ("_blas", "_limits"):
        monkeypatch.setattr(_threads, name, None)
    monkeypatch.setattr(_threads, "_chosen", [])
    monkeypatch.setattr(_threads, "_free_cores", lambda: 2)
    if not _threads._find_blas():
        pytest.skip("no BLAS thread functions found")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        yield
        if _threads._limits is not None:  # (before the block puts back the count it found)
            _threads._limits.restore_original_limits()


def test_small_work_gets_one_thread_large_work_the_free_cores(policy, monkeypatch):
    assert threads_for(2 * PER - 1, PER) == 1
    assert threads_for(2 * PER, PER) == 2
    assert threads_for(100 * PER, PER) == 2  # no more than the cores free
    monkeypatch.setattr(_threads, "_free_cores", lambda: 1)  # other processes keep one busy
    assert threads_for(100 * PER, PER) == 1


def test_a_threadpoolctl_limit_and_set_num_threads_are_respected(policy):
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert threads_for(100 * PER, PER) == 1
    assert threads_for(100 * PER, PER) == 2
    _threads.set_num_threads(1)
    assert threads_for(100 * PER, PER) == 1
    _threads.set_num_threads(3)
    assert threads_for(100 * PER, PER) == 3  # the user's count, even above the cores free
    assert threads_for(PER, PER) == 1


@pytest.mark.parametrize("var", _threads._ENV)
def test_a_thread_variable_is_the_users_count(policy, monkeypatch, var):
    monkeypatch.setattr(_threads, "_blas", None)
    monkeypatch.setenv(var, "1")
    assert threads_for(100 * PER, PER) == 1
    monkeypatch.setattr(_threads, "_blas", None)
    monkeypatch.setenv(var, "3,1")  # (OpenMP's nested form: the outer count)
    assert threads_for(100 * PER, PER) == 3
