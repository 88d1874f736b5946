"""Every kernel can be switched off; without numba the graph is left as it is; the plugin is
found through its entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import sadl_kernels
from kernel_cases import eager_and_compiled, kernels_in
from test_kernels_elementwise import gelu_step
from test_kernels_norm import _data, layer_norm_step


def _gelu_data():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((32, 64)).astype(np.float32) for _ in range(2)]


def test_loading_the_plugin_does_not_import_numba():
    code = (
        "import sys, sadl; sadl.nn.Linear; "
        "assert 'sadl_kernels.plugin' in sys.modules and 'numba' not in sys.modules"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "SADL_PLUGINS_STRICT": "1"}
    )


def test_the_passes_are_registered_through_the_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "sadl", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (entry,) = [p for p in json.loads(out.stdout) if p["name"] == "kernels"]
    assert entry["status"] == "ok" and entry["distribution"] == "sadl-kernels"
    assert sadl_kernels.available() and set(sadl_kernels.KERNELS) == {
        "layer_norm",
        "softmax",
        "gelu",
        "bias",
        "optimizer",
    }


def test_sadl_kernels_0_turns_every_kernel_off_and_results_are_eager_bit_for_bit(monkeypatch):
    monkeypatch.setenv("SADL_KERNELS", "0")
    out_e, out_c, ge, gc, compiled = eager_and_compiled(layer_norm_step, _data(24, 16, np.float32))
    assert kernels_in(compiled, "layer_norm") == 0 and "sadl_kernels" not in str(compiled.graph)
    np.testing.assert_array_equal(out_c.numpy(), out_e.numpy())
    for e, c in zip(ge[:3], gc[:3]):
        np.testing.assert_array_equal(c, e)


def test_disable_names_one_kernel(monkeypatch):
    monkeypatch.setenv("SADL_KERNELS_DISABLE", "gelu")
    *_, compiled = eager_and_compiled(gelu_step, _gelu_data())
    assert kernels_in(compiled, "gelu") == 0
    *_, compiled = eager_and_compiled(layer_norm_step, _data(24, 16, np.float32))
    assert kernels_in(compiled, "layer_norm") == kernels_in(compiled, "layer_norm_backward") == 1
    assert not sadl_kernels.enabled("gelu") and sadl_kernels.enabled("softmax")


def test_fusion_false_and_passes_skip_the_kernels():
    *_, compiled = eager_and_compiled(gelu_step, _gelu_data(), fusion=False)
    assert kernels_in(compiled, "gelu") == 0
    chosen = ("fold_constants", "dead_code", "memory_plan")
    *_, compiled = eager_and_compiled(gelu_step, _gelu_data(), passes=chosen)
    assert kernels_in(compiled, "gelu") == 0
    *_, compiled = eager_and_compiled(gelu_step, _gelu_data(), passes=(*chosen, "kernels_ops"))
    assert kernels_in(compiled, "gelu") == kernels_in(compiled, "gelu_backward") == 1


def test_without_numba_the_graph_is_left_as_it_is(monkeypatch):
    from sadl_kernels import _jit

    monkeypatch.setitem(_jit.STATE, "error", "numba is not available (ImportError: test)")
    out_e, out_c, ge, gc, compiled = eager_and_compiled(gelu_step, _gelu_data())
    assert kernels_in(compiled, "gelu") == 0
    assert "sadl_kernels: off, numba is not available" in str(compiled.graph)
    assert not sadl_kernels.enabled("optimizer")
    np.testing.assert_array_equal(out_c.numpy(), out_e.numpy())
    np.testing.assert_array_equal(gc[0], ge[0])


@pytest.mark.parametrize("value", ["off", "false", "no"])
def test_other_spellings_of_off(monkeypatch, value):
    monkeypatch.setenv("SADL_KERNELS", value)
    assert not sadl_kernels.enabled("layer_norm")
