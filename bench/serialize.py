"""sadl-serialize: save and load of a ~200 MB float32 state dict, next to numpy.save / numpy.load.

Rows are throughputs in MB/s (10**6 bytes per second) of the same arrays in the same run; the
ratio is sadl's time over the reference's. sadl's save is atomic and fsyncs the file and its
directory (durable on return); numpy.save does neither, so the save ratio includes that price.
Loads read a file that was just written (the OS page cache is warm for both).

Usage: python bench/serialize.py [--threads N] [--quick]
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import sadl
import sadl_serialize
from _common import header, parse_args, peak_rss_mib, row


def state_dict(scale: float) -> dict[str, np.ndarray]:
    """float32 tensors of a few transformer-like shapes: ~201 MB at scale 1."""
    rng = np.random.default_rng(0)
    rows = max(1, int(32768 * scale))
    out = {"embed.weight": rng.standard_normal((rows, 1024), dtype=np.float32)}
    for i in range(4):
        out[f"blocks.{i}.fc.weight"] = rng.standard_normal(
            (max(1, int(1024 * scale)), 4096), dtype=np.float32
        )
        out[f"blocks.{i}.fc.bias"] = rng.standard_normal(4096, dtype=np.float32)
        out[f"blocks.{i}.ln.weight"] = np.ones(1024, dtype=np.float32)
    return out


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time of ``repeat`` calls (one call is already ~0.1-1 s at full size)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def touch(arrays: Any) -> float:
    """Read every byte (forces memory-mapped pages in)."""
    return float(sum(np.add.reduce(a.reshape(-1), dtype=np.float64) for a in arrays))


def main() -> None:
    args = parse_args(__doc__ or "")
    scale = 0.1 if args.quick else 1.0
    repeat = 1 if args.quick else 3
    arrays = state_dict(scale)
    nbytes = sum(a.nbytes for a in arrays.values())
    mb = nbytes / 1e6
    header(f"sadl-serialize: {mb:.0f} MB float32 state dict, {len(arrays)} tensors", args.threads)

    with tempfile.TemporaryDirectory(prefix="sadl-bench-") as tmp:
        root = Path(tmp)
        sadl_path = root / "state.sadl"
        npy_dir = root / "npy"
        npy_dir.mkdir()

        def numpy_save() -> None:
            for key, value in arrays.items():
                np.save(npy_dir / f"{key}.npy", value, allow_pickle=False)

        def numpy_save_fsync() -> None:
            for key, value in arrays.items():
                with open(npy_dir / f"{key}.npy", "wb") as fh:
                    np.save(fh, value, allow_pickle=False)
                    fh.flush()
                    os.fsync(fh.fileno())

        def numpy_load() -> list[np.ndarray]:
            return [np.load(npy_dir / f"{k}.npy", allow_pickle=False) for k in arrays]

        def numpy_load_mmap_touch() -> float:
            maps = [np.load(npy_dir / f"{k}.npy", mmap_mode="r") for k in arrays]
            return touch(maps)

        def sadl_save() -> None:
            sadl.save(arrays, sadl_path)

        def sadl_load() -> Any:
            return sadl.load(sadl_path)

        def sadl_load_mmap_touch() -> float:
            return touch(t.data for t in sadl.load(sadl_path, mmap=True).values())

        t_save = timed(sadl_save, repeat)
        t_np_save = timed(numpy_save, repeat)
        t_np_save_sync = timed(numpy_save_fsync, repeat)
        # Check before timing: both loads give back exactly what was saved.
        loaded = sadl_load()
        assert all(np.array_equal(loaded[k].numpy(), v) for k, v in arrays.items())
        t_load = timed(sadl_load, repeat)
        t_np_load = timed(numpy_load, repeat)
        t_mmap = timed(sadl_load_mmap_touch, repeat)
        t_np_mmap = timed(numpy_load_mmap_touch, repeat)
        t_lazy = timed(lambda: sadl.load(sadl_path, mmap=True), repeat)

        st_path = root / "state.safetensors"
        t_st_save = timed(lambda: sadl_serialize.save_safetensors(arrays, st_path), repeat)
        t_st_load = timed(lambda: sadl_serialize.load_safetensors(st_path), repeat)

    def rate(seconds: float) -> str:
        return f"{mb / seconds:,.0f} MB/s"

    row("save (sadl.save vs numpy.save)", rate(t_save), rate(t_np_save),
        f"{t_save / t_np_save:.2f}", "sadl: atomic + fsync; numpy.save: neither")  # fmt: skip
    row("save (sadl.save vs numpy.save + os.fsync)", rate(t_save), rate(t_np_save_sync),
        f"{t_save / t_np_save_sync:.2f}", "both durable on return")  # fmt: skip
    row("load (sadl.load vs numpy.load)", rate(t_load), rate(t_np_load),
        f"{t_load / t_np_load:.2f}", "warm page cache")  # fmt: skip
    row("load mmap=True + read all (vs np.load mmap_mode='r')", rate(t_mmap), rate(t_np_mmap),
        f"{t_mmap / t_np_mmap:.2f}", f"mapping alone: {t_lazy * 1e3:.2f} ms")  # fmt: skip
    row("save .safetensors (vs numpy.save)", rate(t_st_save), rate(t_np_save),
        f"{t_st_save / t_np_save:.2f}", "through the safetensors package, atomic")  # fmt: skip
    row("load .safetensors (vs numpy.load)", rate(t_st_load), rate(t_np_load),
        f"{t_st_load / t_np_load:.2f}", f"peak RSS {peak_rss_mib():.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
