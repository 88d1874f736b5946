"""tinygrad's beautiful_mnist network trains in sadl as in PyTorch: same init, same batches.

A few Adam steps on synthetic 28x28 images (so it runs wherever torch is, without the data
set), sadl eager and compiled against ``torch.nn`` from the same weights: every step's loss,
every parameter and BatchNorm buffer after the steps, and the evaluation-mode logits (the
running statistics) agree to float64 rounding, and to float32 rounding in float32. A
comparison this tight tells a real difference (BatchNorm's eps, say) from rounding; the
70-step test accuracy cannot (bench/mnist_fashion_parity.py: one run of PyTorch against
itself from an init perturbed by 1e-6 moves it by more than 0.02).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch reference: pip install torch")
spec = importlib.util.spec_from_file_location(
    "fashion_mnist", Path(__file__).with_name("fashion_mnist.py")
)
assert spec is not None and spec.loader is not None
example = importlib.util.module_from_spec(spec)
sys.modules.setdefault("fashion_mnist", example)
spec.loader.exec_module(example)

import sadl  # noqa: E402  (after the skip: the example module imports it too)

#: Three steps over 24 synthetic images in batches of 8, the second epoch repeating the first
#: batch (Adam's moments then differ from the first visit).
BATCHES = (slice(0, 8), slice(8, 16), slice(16, 24), slice(0, 8))
#: (loss, parameters and buffers relative to their largest value, logits) per dtype. Measured:
#: float64 7e-14, 4e-13, 1e-14; float32 1e-6 on the loss and 6e-7 on the logits. float32's
#: weights are not compared: where Adam divides a near-zero gradient by its own size, the
#: gradient's rounding moves the weight by up to lr a step (3e-5 here, 4e-4 on real images).
TOLERANCE = {"float64": (1e-10, 1e-9, 1e-9), "float32": (2e-5, None, 2e-5)}


def _data(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((24, 1, 28, 28)).astype(dtype), rng.integers(0, 10, 24)


def _torch_run(dtype: str, **bn: Any) -> tuple[list[float], dict[str, np.ndarray], np.ndarray]:
    torch.manual_seed(0)
    model = example.beautiful_mnist(torch.nn).to(getattr(torch, dtype))
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.eps, m.momentum = bn.get("eps", m.eps), bn.get("momentum", m.momentum)
    x, y = (torch.from_numpy(a) for a in _data(dtype))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for b in BATCHES:
        loss = torch.nn.functional.cross_entropy(model(x[b]), y[b])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits = model(x).numpy()
    return losses, {k: v.numpy() for k, v in model.state_dict().items()}, logits


def _initial_state(dtype: str) -> dict[str, np.ndarray]:
    torch.manual_seed(0)
    model = example.beautiful_mnist(torch.nn).to(getattr(torch, dtype))
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _sadl_run(dtype: str, compiled: bool) -> tuple[list[float], dict[str, np.ndarray], np.ndarray]:
    model = example.beautiful_mnist().to(dtype=np.dtype(dtype))
    model.load_state_dict(_initial_state(dtype))
    optimizer = sadl.optim.Adam(model.parameters(), lr=1e-3)
    step = example.training_step(model, optimizer)
    run = sadl.compile(step) if compiled else step
    x, y = _data(dtype)
    losses = [float(run(x[b], y[b]).item()) for b in BATCHES]
    if compiled:
        assert run.stats.traces == 1 and run.stats.fallbacks == 0, run.stats
    model.eval()
    with sadl.no_grad():
        logits = model(sadl.tensor(x)).numpy()
    state = {k: np.asarray(v.numpy()) for k, v in model.state_dict().items()}
    return losses, state, logits


def _differences(ours: Any, theirs: Any) -> tuple[float, float, float]:
    (l1, s1, o1), (l2, s2, o2) = ours, theirs
    assert s1.keys() == s2.keys()
    loss = max(abs(a - b) for a, b in zip(l1, l2, strict=True))
    state = max(
        float(np.abs(s1[k].astype(np.float64) - s2[k]).max() / max(np.abs(s2[k]).max(), 1e-30))
        for k in s2
    )
    return loss, state, float(np.abs(o1 - o2).max())


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return {dtype: _torch_run(dtype) for dtype in TOLERANCE}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", list(TOLERANCE))
def test_training_steps_follow_torch_from_the_same_init(reference, dtype, compiled) -> None:
    ours = _sadl_run(dtype, compiled)
    loss, state, logits = _differences(ours, reference[dtype])
    loss_tol, state_tol, logits_tol = TOLERANCE[dtype]
    assert loss <= loss_tol, f"losses differ by {loss:.3g} (steps: {ours[0]})"
    assert state_tol is None or state <= state_tol, f"weights or buffers differ by {state:.3g}"
    assert logits <= logits_tol, f"evaluation-mode logits differ by {logits:.3g}"
    assert ours[0][-1] < ours[0][0], "the loss did not fall on the repeated batch"


@pytest.mark.parametrize("change", [{"eps": 1e-4}, {"momentum": 0.11}], ids=["eps", "momentum"])
def test_the_comparison_tells_a_batchnorm_setting_from_rounding(reference, change) -> None:
    # torch with one BatchNorm setting changed a little: a real difference, far outside the
    # float64 tolerances. A momentum of 0.11 leaves every loss as it was (training uses the
    # batch statistics): only the buffers and the evaluation-mode logits show it.
    loss, state, logits = _differences(_torch_run("float64", **change), reference["float64"])
    loss_tol, state_tol, logits_tol = TOLERANCE["float64"]
    assert state > 100 * state_tol and logits > 100 * logits_tol
    if "momentum" in change:
        assert loss <= loss_tol
    else:
        assert loss > 100 * loss_tol
