"""Memory-mapped loading and the memory a load needs (peak RSS measured in subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sadl
import sadl_serialize as ss


def test_mmap_tensors_are_copy_on_write_views_of_the_file(tmp_path):
    path = tmp_path / "m.sadl"
    original = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4, np.int64)}
    sadl.save(original, path)
    before = path.read_bytes()
    loaded = sadl.load(path, mmap=True)
    data = loaded["w"].data
    assert data.base is not None and not data.flags.owndata  # a view, not a copy
    np.testing.assert_array_equal(data, original["w"])
    data[0, 0] = 99.0  # allowed: private to this process
    loaded["b"] += 1
    assert path.read_bytes() == before  # the file never changes
    np.testing.assert_array_equal(sadl.load(path)["w"].numpy(), original["w"])


def test_mmap_survives_the_file_being_replaced_by_a_new_save(tmp_path):
    path = tmp_path / "r.sadl"
    sadl.save({"w": np.zeros(1000)}, path)
    mapped = sadl.load(path, mmap=True)
    sadl.save({"w": np.ones(1000)}, path)  # atomic: a new inode, the old mapping stays valid
    assert float(mapped["w"].numpy().sum()) == 0.0
    assert float(sadl.load(path, mmap=True)["w"].numpy().sum()) == 1000.0


def test_mmap_of_a_single_tensor_and_of_empty_tensors(tmp_path):
    path = tmp_path / "s.sadl"
    sadl.save({"e": np.zeros((0, 4), np.float32), "s": np.float64(2.0)}, path)
    loaded = ss.load(path, mmap=True)
    assert loaded["e"].shape == (0, 4) and loaded["s"].item() == 2.0
    sadl.save(sadl.tensor(np.arange(5)), path)
    single = ss.load(path, mmap=True)
    assert isinstance(single, sadl.Tensor)
    np.testing.assert_array_equal(single.numpy(), np.arange(5))


_MEASURE = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    import sadl, sadl_serialize

    def rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    path, mode = sys.argv[1], sys.argv[2]
    sadl_serialize.load(sys.argv[3])  # warm up every import and code path on a tiny file
    base = rss()
    loaded = sadl.load(path, mmap=(mode != "copy"))
    lazy = rss()
    total = sum(float(np.sum(t.numpy(), dtype=np.float64)) for t in loaded.values())
    print(json.dumps({"base": base, "lazy": lazy, "touched": rss(), "total": total}))
    """
)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """A 200 MB state dict, written by a separate process (so no test process holds it)."""
    path = tmp_path_factory.mktemp("big") / "big.sadl"
    tiny = path.with_name("tiny.sadl")
    script = (
        "import numpy as np, sadl, sys; "
        "sadl.save({f'layer{i}.weight': np.full((1000, 10000), i, np.float32) for i in range(5)}, "
        "sys.argv[1]); sadl.save({'t': np.ones(1)}, sys.argv[2])"
    )
    subprocess.run([sys.executable, "-c", script, str(path), str(tiny)], check=True)
    return path, tiny


@pytest.mark.parametrize("mode", ["copy", "mmap"])
def test_peak_memory_of_loading_200_mb_stays_near_1x_the_file(big_file, mode):
    path, tiny = big_file
    size = path.stat().st_size
    assert size > 200_000_000
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), mode, str(tiny)],
        check=True,
        capture_output=True,
        text=True,
    )
    m = json.loads(out.stdout)
    assert m["total"] == sum(i * 10_000_000 for i in range(5))
    grew = m["touched"] - m["base"]
    # One copy of the data (plus interpreter noise): never the 2x of read-then-copy.
    assert grew < 1.1 * size + 16e6, (
        f"{mode}: peak RSS grew {grew / 1e6:.0f} MB for {size / 1e6:.0f}"
    )
    if mode == "mmap":
        # Mapping reads nothing: memory only grows once the data are used.
        assert m["lazy"] - m["base"] < 0.05 * size, m
