"""Every kernel fires on the standard GPT training step (sadl_models' GPT, AdamW, compiled).

A change to how sadl-layers computes an op, or to how a model calls it, cannot turn a kernel
off unseen: each kernel's count of firings per traced step is checked here, one test each.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import sadl

pytest.importorskip("numba")
GPT = pytest.importorskip("sadl_models.gpt").GPT
optim = pytest.importorskip("sadl_optim")

N_LAYER = 2
_STEP: list[tuple[collections.Counter[str], str]] = []


def _compiled_gpt(n_layer):
    """A GPT of ``n_layer`` blocks, its compiled AdamW training step and a batch of tokens."""
    model = GPT(65, 16, n_layer, 4, 32, rng=0)
    opt = optim.AdamW(optim.param_groups_for_weight_decay(model, 0.1), lr=1e-3)

    def train_step(x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    tokens = np.random.default_rng(0).integers(0, 65, size=(8, 17))
    return model, sadl.compile(train_step), tokens


def _fired() -> tuple[collections.Counter[str], str]:
    """Kernel calls by label in the compiled GPT step's graph, and the printed graph."""
    if not _STEP:
        _, step, tokens = _compiled_gpt(N_LAYER)
        for _ in range(2):
            step(tokens[:, :-1], tokens[:, 1:])
        labels = collections.Counter(n.label for n in step.graph.nodes)
        _STEP.append((labels, str(step.graph)))
    return _STEP[0]


@pytest.mark.parametrize(
    "kernel, count",
    [
        ("layer_norm", 2 * N_LAYER + 1),  # two per block and the final one
        ("layer_norm_backward", 2 * N_LAYER + 1),
        ("gelu+bias", N_LAYER),  # the MLP's GELU, with its Linear's bias-add folded in
        ("gelu recomputed", N_LAYER - 1),  # for c_proj's backward, all but the last block's
        ("gelu_backward", N_LAYER),
        ("masked_softmax", N_LAYER + 1),  # the attention's, and the loss gradient's
        ("softmax_backward", N_LAYER),  # the attention's
        ("masked_log_softmax", 1),  # the cross-entropy's
    ],
)
def test_each_kernel_fires_on_the_gpt_training_step(kernel, count):
    labels, _ = _fired()
    assert labels[f"kernel[{kernel}]"] == count, labels


def test_the_optimizer_kernel_fires_on_the_gpt_training_step():
    _, graph = _fired()
    assert "sadl_kernels.optimizer: numba updates for AdamW (2 flat groups)" in graph


def test_recomputing_the_gelu_for_the_backward_changes_no_bit(monkeypatch):
    import sadl_kernels._passes as passes

    def trained(recompute):
        if not recompute:
            monkeypatch.setattr(passes, "recompute_gelu_outputs", lambda graph: 0)
        model, step, tokens = _compiled_gpt(3)
        losses = [step(tokens[:, :-1], tokens[:, 1:]).item() for _ in range(3)]
        notes = "\n".join(step.graph.notes)
        assert ("gelu recomputed for the backward x2" in notes) == recompute, notes
        return losses, [p.data.copy() for p in model.parameters()]

    (losses, params), (losses0, params0) = trained(True), trained(False)
    assert losses == losses0
    assert all(np.array_equal(a, b) for a, b in zip(params, params0))
