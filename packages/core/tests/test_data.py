import numpy as np
import pytest
import sadl


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
