"""tensordot, einsum, outer and inner (sadl-layers' ``ops/contractions.py``) against
torch (float64; skipped without torch): forward values, first and second
derivatives, reached through NumPy's functions on Tensors."""

from __future__ import annotations

import numpy as np
import pytest
from test_layer_vocabulary_torch_parity import _rand, parity

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
pytestmark = pytest.mark.torch


@pytest.mark.parametrize(
    ("spec", "shapes"),
    [
        ("ii->", [(4, 4)]),
        ("ii->i", [(4, 4)]),
        ("iij->j", [(3, 3, 2)]),
        ("ij,ii->j", [(3, 2), (3, 3)]),
        ("...ij->ij", [(2, 3, 4)]),
        ("b...i,...i->b", [(2, 3, 4), (3, 4)]),
    ],
)
def test_einsum_repeated_index_and_summed_ellipsis(spec, shapes):
    arrays = [_rand(*s, seed=k) for k, s in enumerate(shapes)]
    parity(lambda *t: np.einsum(spec, *t), lambda *t: torch.einsum(spec, *t), *arrays)


def test_tensordot_outer_and_inner():
    a, b = _rand(2, 3, 4), _rand(3, 4, 5, seed=1)
    parity(lambda x, y: np.tensordot(x, y), lambda x, y: torch.tensordot(x, y), a, b)
    u, v = _rand(3), _rand(4, seed=2)
    parity(np.outer, torch.outer, u, v)
    m, n = _rand(2, 3), _rand(4, 3, seed=3)
    parity(np.inner, torch.inner, m, n)
