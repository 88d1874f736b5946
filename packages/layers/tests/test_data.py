"""sadl.data (sadl-layers' ``sadl_layers.data``): minibatches, a train/validation split,
next-token windows, on every device of the matrix."""

import numpy as np
import pytest
import sadl
import sadl_layers.data
from sadl.backends import device_of
from sadl.testing import assert_close


def test_sadl_data_serves_sadl_layers_data():
    assert sadl.data.windows is sadl_layers.data.windows
    assert sadl.data.batches is sadl_layers.data.batches
    from sadl.data import train_val_split

    assert train_val_split is sadl_layers.data.train_val_split


def test_batches_cover_everything_once():
    x = np.arange(10)
    y = np.arange(10) * 2
    seen = []
    for bx, by in sadl.data.batches(x, y, batch_size=3, shuffle=True, rng=0):
        np.testing.assert_array_equal(by, bx * 2)
        seen.extend(bx.tolist())
    assert sorted(seen) == list(range(10))
    sizes = [len(b[0]) for b in sadl.data.batches(x, batch_size=3, drop_last=True)]
    assert sizes == [3, 3, 3]
    with pytest.raises(ValueError, match="differ in length"):
        list(sadl.data.batches(x, y[:3], batch_size=2))


def test_train_val_split_is_disjoint_and_reproducible():
    x = np.arange(100)
    (tr,), (va,) = sadl.data.train_val_split(x, val_fraction=0.2, rng=1)
    assert len(va) == 20 and not set(tr) & set(va)
    (tr2,), _ = sadl.data.train_val_split(x, val_fraction=0.2, rng=1)
    np.testing.assert_array_equal(tr, tr2)


def test_windows_are_next_token_pairs():
    tokens = np.arange(50)
    x, y = sadl.data.windows(tokens, block_size=8, batch_size=4, rng=0)
    assert x.shape == y.shape == (4, 8) and x.dtype == np.int64
    np.testing.assert_array_equal(y, x + 1)
    with pytest.raises(ValueError, match="too few"):
        sadl.data.windows(np.arange(5), block_size=8, batch_size=1)


def test_autodidact_windows_bs():
    x, y = sadl.data.windows(np.arange(50), 8, bs=16, rng=0)
    assert x.shape == (16, 8) and (y[:, :-1] == x[:, 1:]).all()
    with pytest.raises(TypeError, match="not both"):
        sadl.data.windows(np.arange(50), 8, 4, bs=16)


def test_data_helpers_index_device_arrays_in_place(device):
    tokens = sadl.tensor(np.arange(100), device=device)
    x, y = sadl.data.windows(tokens, block_size=8, batch_size=4, rng=0)
    assert device_of(x).type == device and x.shape == (4, 8)
    assert_close(y, sadl.tensor(x).numpy() + 1, device=device)
    rows = sadl.tensor(np.random.default_rng(0).normal(size=(10, 2)), device=device)
    labels = sadl.tensor(np.arange(10), device=device).data
    batches = list(sadl.data.batches(rows.data, labels, batch_size=4, shuffle=True, rng=0))
    assert [len(b[0]) for b in batches] == [4, 4, 2]
    assert all(device_of(a).type == device for b in batches for a in b)
    (train_x, train_y), (val_x, val_y) = sadl.data.train_val_split(
        rows.data, labels, val_fraction=0.2, rng=0
    )
    assert len(val_x) == 2 and device_of(val_y).type == device
