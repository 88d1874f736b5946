"""docs/pytorch.md: every row of its tables runs under PyTorch and under sadl with one result.

The left cell is run with torch, the right cell with sadl, on the same inputs (``x``, ``y``,
``ids``, ``img``, ``w``, ``k``, as the page says); tensors, numbers, shapes and dtypes must agree.
A result that is another object (a context manager, an optimizer) must only be produced.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the page compares sadl with PyTorch")
import sadl  # noqa: E402
import sadl.nn.functional as sadl_functional  # noqa: E402

PAGE = Path(__file__).with_name("pytorch.md")
ROW = re.compile(r"^\| `(.+?)` \| `(.+?)` \|$", re.M)
ROWS = ROW.findall(PAGE.read_text())

rng = np.random.default_rng(0)
DATA = {
    "x": rng.random((2, 3)).astype(np.float32),
    "y": rng.random((2, 3)).astype(np.float32),
    "ids": np.array([1, 0]),
    "img": rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
    "w": rng.standard_normal((2, 3)).astype(np.float32),
    "k": rng.standard_normal((1, 1, 2, 2)).astype(np.float32),
}


def _namespace(lib, functional):
    names = {name: lib.tensor(value) for name, value in DATA.items()}
    names.update(torch=torch, sadl=sadl, F=functional, nn=lib.nn, np=np, inspect=inspect)
    return names


def _plain(value):
    """A comparable form: arrays for tensors, lists for sequences, NumPy dtypes, else a tag."""
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if isinstance(value, sadl.Tensor):
        return value.numpy()
    if isinstance(value, torch.dtype):
        return np.dtype(torch.empty(0, dtype=value).numpy().dtype)
    if (isinstance(value, type) and issubclass(value, np.generic)) or isinstance(value, np.dtype):
        return np.dtype(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, bool | int | float | str | np.number | np.bool_) or value is None:
        return value
    return "an object"


def _same(got, want, where):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for g, w in zip(got, want):
            _same(g, w, where)
    elif isinstance(want, np.ndarray):
        got = np.asarray(got)
        assert got.shape == want.shape, where
        assert got.dtype == want.dtype, f"{where}: {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=where)
    elif isinstance(want, float | np.floating):
        assert float(got) == pytest.approx(float(want), rel=1e-6), where
    else:
        assert got == want, where


def test_the_page_has_its_tables():
    assert len(ROWS) > 60


@pytest.mark.parametrize(("theirs", "ours"), ROWS, ids=[r[1][:60] for r in ROWS])
def test_each_row_gives_torchs_result(theirs, ours):
    sadl.manual_seed(0)
    torch.manual_seed(0)
    want = _plain(eval(theirs, _namespace(torch, torch.nn.functional)))
    got = _plain(eval(ours, _namespace(sadl, sadl_functional)))
    _same(got, want, ours)
