"""How many threads NumPy's BLAS uses: ``sadl.set_num_threads(n)``, ``sadl.get_num_threads()``.

Matrix products run in the BLAS library NumPy loaded (OpenBLAS, MKL, ...), which starts one
thread per core by default. At the sizes sadl trains on a laptop, that is often slower than one
thread, and on a machine shared with other work it can be many times slower (see the speed notes
in docs/getting-started.md). The environment variables (``OPENBLAS_NUM_THREADS=1``) only work
before NumPy is imported; threadpoolctl changes the running process, whichever BLAS it is.

threadpoolctl is optional for sadl-core (its runtime dependencies stay numpy and pluggy): the
``threads`` extra of sadl-core installs it, and sadl-models, whose ``sadl train --threads`` uses
it, depends on it.
"""

from __future__ import annotations

import operator
from typing import Any

from sadl._known import install_command

__all__ = ["get_num_threads", "set_num_threads"]

_limits: Any = None  # the active threadpool_limits, kept so it is not garbage collected


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in the BLAS (and OpenMP) thread pools of this process from now on."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"set_num_threads: n must be an integer, got {n!r}") from None
    if n < 1:
        raise ValueError(f"set_num_threads: n must be at least 1, got {n}")
    global _limits
    _limits = _threadpoolctl("set_num_threads").threadpool_limits(limits=n)


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
