"""numba, imported when a kernel is first needed, and the switches that turn kernels off.

``SADL_KERNELS=0`` turns every kernel off; ``SADL_KERNELS_DISABLE=layer_norm,gelu`` turns off
the named ones (the names of :data:`sadl_kernels.KERNELS`). Both are read when a function is
compiled, so they can be changed between two ``sadl.compile`` calls. Without numba (not
installed, or failing to import) every pass leaves the graph as it is and says why in the
graph's notes.

numba takes about a second to import, so loading the plugin does not import it: the first
``sadl.compile`` trace that runs a pass does, and each kernel is compiled at its first call.

Threads (opt-in, ``SADL_KERNELS_THREADS=1``: :data:`THREADS` says why): a kernel made with
``per_thread=`` has a second, ``parallel=True`` compilation whose
outer ``prange`` loop (rows, or fixed chunks of a flat array) numba spreads over threads.
:meth:`Kernel.launch` asks sadl's thread policy (``sadl.backends.threads_for``: the BLAS's
rules, so ``sadl.set_num_threads``, ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/
``MKL_NUM_THREADS``, a threadpoolctl limit and the cores other processes leave free all count;
numba's own ``NUMBA_NUM_THREADS`` caps it) how many threads work of that size gets, and runs the
serial compilation on one (work under two threads' share runs it without asking). Every
iteration of a ``prange`` does the same float operations whichever thread runs it, and no kernel
reduces across its iterations (the norms' weight sums are per fixed block of rows, added in
order after the loop), so the results are bit for bit the same on any thread count (tested).
numba picks its threading layer as it does by default (``NUMBA_THREADING_LAYER`` chooses): TBB
where installed, else OpenMP (GNU libgomp on Linux: about 1 us a launch), else its own
workqueue. The workqueue must not be entered by two threads at once and numba documents GNU
OpenMP as not safe after a ``fork``: so a launch that finds another thread's parallel kernel
running, or runs in a forked child of a process that had started numba's threads, runs the
serial compilation (the same bits).
"""

from __future__ import annotations

import os
import threading
import types
from collections.abc import Callable
from typing import Any

from sadl.backends import threads_for

__all__ = ["PER_THREAD", "THREADS", "Kernel", "prange", "enabled", "jit", "jit_sums", "numba_error"]

#: ``numba``: the module once imported; ``error``: "" when it imported, the reason otherwise,
#: None before the first try.
STATE: dict[str, Any] = {"numba": None, "error": None}
#: Held while a parallel kernel runs (numba's workqueue layer must not be entered twice at once).
_LAUNCH = threading.Lock()
#: ``n``: the numba thread count this thread last set (numba's count is per thread).
_SET = threading.local()
#: ``started``: a parallel kernel ran in this process (its thread pool is up); ``forked``: this
#: process is a fork of one that had (GNU OpenMP's pool does not survive a fork).
POOL = {"started": False, "forked": False}


def _after_fork() -> None:
    POOL["forked"] = POOL["forked"] or POOL["started"]
    global _LAUNCH
    _LAUNCH = threading.Lock()  # a lock held by a thread of the parent is never released here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def numba_error() -> str:
    """Why numba cannot be used ("" when it can); imports it on the first call."""
    if STATE["error"] is None:
        try:
            import numba

            STATE["numba"], STATE["error"] = numba, ""
        except Exception as exc:  # pragma: no cover - exercised by patching STATE in the tests
            STATE["error"] = f"numba is not available ({type(exc).__name__}: {exc})"
    return str(STATE["error"])


class Kernel:
    """A function compiled by ``numba.njit`` at its first call (and cached on disk).

    Kernels called from other kernels (module globals of the same kind) are compiled first and
    put in place of their lazy stand-ins, so numba sees dispatchers.
    """

    def __init__(self, fn: Callable[..., Any], fastmath: frozenset[str], per_thread: int) -> None:
        self.fn = fn
        self.fastmath = fastmath
        self.per_thread = per_thread  #: work units (elements) a thread must get; 0: serial only
        self.compiled: Callable[..., Any] | None = None
        self.parallel: Callable[..., Any] | None = None
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def _compile(self, parallel: bool) -> Callable[..., Any]:
        if numba_error():
            raise RuntimeError(f"sadl-kernels: {numba_error()}")
        scope = self.fn.__globals__
        for name in self.fn.__code__.co_names:  # the kernels this one calls
            value = scope.get(name)
            if isinstance(value, Kernel):
                scope[name] = value.dispatcher()
        if "prange" in self.fn.__code__.co_names:  # the module's stand-in, ``range``
            scope["prange"] = STATE["numba"].prange
        options: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}
        if self.fastmath:
            options["fastmath"] = set(self.fastmath)
        fn = self.fn
        if parallel:  # a copy named apart: numba's disk cache keys on the name and the bytecode,
            # not on the options, so the two compilations would load each other's code
            options["parallel"] = True
            fn = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__)
            fn.__qualname__ = f"{self.fn.__qualname__}_parallel"
        return STATE["numba"].njit(**options)(fn)  # type: ignore[no-any-return]

    def dispatcher(self) -> Callable[..., Any]:
        """The serial numba dispatcher (made on the first call; ``prange`` runs as ``range``)."""
        if self.compiled is None:
            self.compiled = self._compile(parallel=False)
        return self.compiled

    def __call__(self, *args: Any) -> Any:
        return (self.compiled or self.dispatcher())(*args)

    def threads(self, work: int) -> int:
        """The threads :meth:`launch` asks for, for ``work`` elements (1 for a serial kernel,
        and for every kernel unless ``SADL_KERNELS_THREADS=1``: see :data:`THREADS`).
        """
        return threads_for(work, self.per_thread) if self.per_thread and THREADS["on"] else 1

    def launch(self, work: int, *args: Any) -> Any:
        """``self(*args)`` on the threads sadl's policy gives ``work`` elements (see above)."""
        small = work < 2 * self.per_thread
        n = 1 if small or POOL["forked"] else self.threads(work)  # (small: no policy call)
        if n > 1:  # (never the parallel compilation on one numba thread: see the tests)
            n = min(n, STATE["numba"].config.NUMBA_NUM_THREADS) if STATE["numba"] else n
        if n > 1 and _LAUNCH.acquire(blocking=False):
            try:
                if self.parallel is None:
                    self.parallel = self._compile(parallel=True)  # (imports numba)
                numba = STATE["numba"]
                POOL["started"] = True
                n = min(n, numba.config.NUMBA_NUM_THREADS)
                if getattr(_SET, "n", 0) != n:  # (a few microseconds: only when it changes)
                    numba.set_num_threads(n)
                    _SET.n = n
                return self.parallel(*args)
            finally:
                _LAUNCH.release()
        return (self.compiled or self.dispatcher())(*args)


#: Kernels run on one thread unless ``SADL_KERNELS_THREADS=1`` (read once, at import): on a
#: quiet 2-core AMD EPYC the compiled GPT steps at 2 threads ran 8.6x (S: 84 ms against 9.7 ms
#: for PyTorch eager) and 2.1x (M: 669 ms against 311 ms with ``SADL_KERNELS=0``) slower with
#: the parallel kernels than without any kernel: OpenMP's workers, spinning after each parallel
#: loop, against OpenBLAS's (``python bench/models.py --threads 2``). Opted in, every kernel
#: keeps its bits (the parallel compilations are tested at 1 and 2 threads).
THREADS = {"on": os.environ.get("SADL_KERNELS_THREADS", "0") == "1"}

#: Elements a thread of a parallel kernel must get, so a second thread from 64 Ki elements:
#: one block of sadl-layers' norms, GELU and attention softmax (256 KiB of float32, 20-40 us of
#: work on one thread), against about 1-2 us for an OpenMP launch. ``python
#: bench/kernel_threads.py --sizes`` times GELU at 1 and 2 threads on growing arrays, to check
#: where a second thread starts to pay on a quiet machine.
PER_THREAD = 1 << 15


#: What kernels loop over with ``for i in prange(n)``: ``range`` until numba is imported, then
#: ``numba.prange`` (put in each kernel's module when the kernel is compiled).
prange = range


def jit(fn: Callable[..., Any] | None = None, *, per_thread: int = 0) -> Any:
    """``numba.njit(cache=True)``, compiled once per dtype at the first call; with
    ``per_thread`` (elements per thread), also ``parallel=True`` for :meth:`Kernel.launch`.
    """
    if fn is None:
        return lambda f: Kernel(f, frozenset(), per_thread)
    return Kernel(fn, frozenset(), per_thread)


def jit_sums(fn: Callable[..., Any] | None = None, *, per_thread: int = 0) -> Any:
    """:func:`jit` allowing sums to be reassociated (so their loops vectorize): only the order
    of additions changes, never an elementwise operation.
    """
    fastmath = frozenset({"reassoc", "nsz"})
    if fn is None:
        return lambda f: Kernel(f, fastmath, per_thread)
    return Kernel(fn, fastmath, per_thread)


def enabled(name: str) -> bool:
    """Whether kernel ``name`` may be used: no switch turns it off and numba imports."""
    if os.environ.get("SADL_KERNELS", "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    off = {n.strip() for n in os.environ.get("SADL_KERNELS_DISABLE", "").split(",")}
    return name not in off and "all" not in off and not numba_error()
