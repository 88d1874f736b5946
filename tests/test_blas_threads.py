"""A GPT step's every product runs on the BLAS thread count sadl's policy picks for its size.

The products of sadl-layers' ops (linear, attention) and of sadl-models' GPT go through
``sadl.backends.matmul``, and so does a compiled replay (it calls that in place of
``np.matmul``). A stand-in for ``np.matmul`` reads the BLAS's thread count (threadpoolctl)
inside each product; the BLAS starts at 2 threads, as NumPy starts it on a 2-core machine, and
the machine counts as idle.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import sadl
from sadl import _threads
from threadpoolctl import threadpool_info, threadpool_limits

pytestmark = pytest.mark.skipif(
    not any(p["internal_api"] in ("openblas", "mkl") for p in threadpool_info()),
    reason="NumPy's BLAS is neither OpenBLAS nor MKL: sadl leaves its threads alone",
)


def blas_threads() -> int:
    """The thread count of NumPy's own BLAS: another library's (SciPy's OpenBLAS, which numba
    loads for sadl-kernels) is a second pool that ``np.matmul`` never uses."""
    pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
    numpy_libs = os.path.dirname(np.__file__) + ".libs"
    own = [p for p in pools if p["filepath"].startswith(numpy_libs)] or pools
    return max(int(p["num_threads"]) for p in own)


@pytest.fixture
def products(monkeypatch):
    """(multiply-adds per matrix, BLAS threads) of every product on NumPy arrays."""
    for var in _threads._ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(_threads, "_blas", None)
    monkeypatch.setattr(_threads, "_decided", [2])  # judged once per process: here, 2 free
    seen: list[tuple[int, int]] = []

    def recording(a, b, **kwargs):
        if type(a) is np.ndarray:
            n = a.shape[-2] if a.ndim > 1 else 1
            seen.append((n * a.shape[-1] * (b.shape[-1] if b.ndim > 1 else 1), blas_threads()))
        return np.matmul(a, b, **kwargs)

    monkeypatch.setattr(_threads, "_matmul", recording)
    with threadpool_limits(2, user_api="blas"):
        yield seen
        assert blas_threads() == 2


def expected(macs: int) -> int:
    return 2 if macs >= 2 * _threads.PER_THREAD else 1 if macs > 8192 else 2


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_gpt_step_runs_each_product_on_the_threads_its_size_calls_for(products, compiled):
    model = sadl.nn.GPT(vocab=65, block_size=64, n_layer=1, n_head=4, n_embd=128, rng=0)
    opt = sadl.optim.AdamW(model.parameters(), lr=1e-3)
    x = np.random.default_rng(0).integers(0, 65, size=(32, 65))

    def step(x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = sadl.compile(step) if compiled else step
    for _ in range(3 if compiled else 1):
        products.clear()
        run(x[:, :-1], x[:, 1:])
    assert products and all(threads == expected(macs) for macs, threads in products)
    macs = {m for m, _ in products}
    assert 2048 * 128 * 512 in macs  # the MLP's linear layer: two threads
    assert 64 * 32 * 64 in macs  # attention's per-head products: one thread


@pytest.fixture
def tensordot_products(products, monkeypatch):
    """(multiply-adds, BLAS threads) of every product np.tensordot makes (its inner ``dot``)."""
    numeric = sys.modules["numpy._core.numeric"]  # where np.tensordot finds dot
    real = numeric.dot
    seen: list[tuple[int, int]] = []

    def recording(a, b, *args):
        seen.append((a.shape[0] * a.shape[1] * b.shape[1], blas_threads()))
        return real(a, b, *args)

    monkeypatch.setattr(numeric, "dot", recording)
    return seen


def test_a_compiled_tensordot_runs_on_eagers_threads_with_eagers_bits(tensordot_products):
    rng = np.random.default_rng(0)
    # Products of 4.2 M and 6.6 M multiply-adds: one thread by the policy, where two threads (the
    # BLAS's own count) give other bits in the last place at these sizes.
    x = rng.standard_normal((32, 64, 64)).astype(np.float32)
    k = [sadl.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((128, 256), (256, 200))]
    start = rng.standard_normal((64, 64, 32)).astype(np.float32)

    def run(compiled):
        w = sadl.Parameter(start.copy())
        opt = sadl.SGD([w], lr=0.01)

        def step(x):
            folded = np.tensordot(k[0], k[1], axes=1)  # constants only: kept from the trace
            loss = (np.tensordot(x, w, axes=2) ** 2).mean() + (folded * folded).mean()
            opt.zero_grad()
            loss.backward()  # one more tensordot: the gradient of w
            opt.step()
            return loss

        fn = sadl.compile(step) if compiled else step
        losses = [fn(x).numpy() for _ in range(3)]
        return losses, w.numpy()

    eager = run(False)
    tensordot_products.clear()
    compiled = run(True)
    assert tensordot_products and all(t == expected(m) for m, t in tensordot_products)
    assert {m for m, _ in tensordot_products} >= {32 * 4096 * 32, 128 * 256 * 200}
    for got, want in zip(compiled[0], eager[0]):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(compiled[1], eager[1])
