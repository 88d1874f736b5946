"""micrograd's demo reproduced by sadl: every step's loss within 1e-12 of micrograd's.

test_examples.py runs the script as a user would (micrograd's first 2 steps where installed,
the demo's published first and last losses always); these tests check the comparison itself.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn", reason="make_moons: pip install -r docs/requirements.txt")
spec = importlib.util.spec_from_file_location(
    "micrograd_moons", Path(__file__).with_name("micrograd_moons.py")
)
assert spec is not None and spec.loader is not None
moons = importlib.util.module_from_spec(spec)
sys.modules["micrograd_moons"] = moons
spec.loader.exec_module(moons)


@pytest.fixture(scope="module")
def history() -> list[tuple[float, float]]:
    return moons.train_sadl()


def test_sadl_reaches_the_demos_published_first_and_last_losses(history) -> None:
    assert len(history) == 100
    assert abs(history[0][0] - 0.8958441028683222) <= 1e-12 and history[0][1] == 0.5
    assert abs(history[99][0] - 0.010978370135492717) <= 1e-12 and history[99][1] == 1.0


def test_the_comparison_refuses_a_loss_off_by_more_than_1e_12(history) -> None:
    wrong = list(history)
    wrong[99] = (wrong[99][0] + 1e-11, wrong[99][1])
    with pytest.raises(AssertionError, match="step 99"):
        moons.compare(wrong, micrograd_steps=0)


def test_every_step_equals_micrograds_first_steps(history) -> None:
    pytest.importorskip("micrograd", reason="pip install micrograd==0.1.0")
    theirs = moons.train_micrograd(3)
    for ours, ref in zip(history, theirs, strict=False):
        assert abs(ours[0] - ref[0]) <= 1e-12 and ours[1] == ref[1]
