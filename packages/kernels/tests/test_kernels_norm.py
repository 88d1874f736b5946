"""Layer norm and RMS norm kernels: used for every recorded application of the ops, within 2e-5
of eager in float32 and 1e-12 in float64, forward and backward, and gradient-checked."""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest
import sadl
from kernel_cases import assert_close, eager_and_compiled, kernels_in, numerical_gradient

TOL = {np.float32: 2e-5, np.float64: 1e-12}


def layer_norm_step(x, w, b, g):
    y = sadl.ops.layer_norm(x, w, b)
    (y * g).sum().backward()
    return y


def layer_norm_weight_only(x, w, g):
    y = sadl.ops.layer_norm(x, w, None)
    (y * g).sum().backward()
    return y


def rms_norm_step(x, w, g):
    y = sadl.ops.rms_norm(x, w)
    (y * g).sum().backward()
    return y


def _calls_from(compiled, source):
    """What the graph calls on the lines made by ``source`` (a file name), with counts."""
    lines = [line for line in str(compiled.graph).splitlines() if source in line]
    return collections.Counter(re.sub(r"^\s*(%\d+ = )?", "", ln).split("(")[0] for ln in lines)


def _data(rows, width, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, width)) * 3 + 1).astype(dtype)
    w = (1 + 0.1 * rng.standard_normal(width)).astype(dtype)
    b = (0.1 * rng.standard_normal(width)).astype(dtype)
    g = rng.standard_normal((rows, width)).astype(dtype)
    return x, w, b, g


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [48, 2500])  # one block; several, the last one partial
def test_layer_norm_forward_and_backward_match_eager(dtype, rows):
    x, w, b, g = _data(rows, 32, dtype)
    out_e, out_c, ge, gc, compiled = eager_and_compiled(layer_norm_step, [x, w, b, g])
    # one kernel per application, however many row blocks sadl-layers' NumPy code takes
    assert kernels_in(compiled, "layer_norm") == 1
    assert kernels_in(compiled, "layer_norm_backward") == 1
    # every computing call of the norm is in a kernel (the statistics, the backward's recomputed
    # rows, dweight and dbias included): only views, zeroing and allocation stay
    assert set(_calls_from(compiled, "normalization.py")) <= {
        "kernel[layer_norm]",
        "kernel[layer_norm_backward]",
        "reshape",
        "__getitem__",
        "__setitem__",
        "empty",
    }
    assert out_c.dtype == dtype
    assert_close(out_c, out_e, TOL[dtype])
    for e, c in zip(ge[:3], gc[:3]):
        assert_close(c, e, TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_without_bias_and_rms_norm_match_eager(dtype):
    x, w, _, g = _data(40, 24, dtype, seed=1)
    for step, op in ((layer_norm_weight_only, "layer_norm"), (rms_norm_step, "rms_norm")):
        out_e, out_c, ge, gc, compiled = eager_and_compiled(step, [x, w, g])
        assert kernels_in(compiled, op) == 1, step.__name__
        assert kernels_in(compiled, "layer_norm_backward") == 1, step.__name__
        assert_close(out_c, out_e, TOL[dtype])
        for e, c in zip(ge[:2], gc[:2]):
            assert_close(c, e, TOL[dtype])


def test_layer_norm_kernel_gradients_pass_a_numerical_gradcheck():
    """float64: the kernels' dx and dweight against central differences of the loss."""
    x, w, b, g = _data(16, 12, np.float64, seed=2)
    _, _, _, grads, compiled = eager_and_compiled(layer_norm_step, [x, w, b, g])
    assert kernels_in(compiled, "layer_norm") == kernels_in(compiled, "layer_norm_backward") == 1

    def loss_x(xv):
        return float(
            (sadl.ops.layer_norm(sadl.tensor(xv), sadl.tensor(w), sadl.tensor(b)).numpy() * g).sum()
        )

    def loss_w(wv):
        return float(
            (sadl.ops.layer_norm(sadl.tensor(x), sadl.tensor(wv), sadl.tensor(b)).numpy() * g).sum()
        )

    for loss, arg, grad in ((loss_x, x, grads[0]), (loss_w, w, grads[1])):
        for idx, value in numerical_gradient(loss, arg).items():
            assert abs(grad[idx] - value) <= 1e-7 * max(1.0, abs(value)), idx


def test_shapes_that_do_not_qualify_stay_numpy():
    """Mixed dtypes are not what the kernels handle: the NumPy calls stay, results bit for bit."""
    x, w, b, g = _data(8, 16, np.float32)
    w, b = w.astype(np.float64), b.astype(np.float64)  # float32 rows, a float64 affine map
    out_e, out_c, _, _, compiled = eager_and_compiled(layer_norm_step, [x, w, b, g])
    assert kernels_in(compiled, "layer_norm") == 0
    np.testing.assert_array_equal(out_c.numpy(), out_e.numpy())


def test_float16_norms_run_the_float32_kernels_on_the_widened_rows():
    """sadl-layers computes a float16 norm in float32 (as torch): the kernels take those calls,
    and the float16 results are eager's to within one float16 rounding."""
    x, w, b, g = (a.astype(np.float16) for a in _data(8, 16, np.float32))
    out_e, out_c, grads_e, grads_c, compiled = eager_and_compiled(layer_norm_step, [x, w, b, g])
    assert kernels_in(compiled, "layer_norm") > 0
    assert out_c.dtype == np.float16 and all(gr.dtype == np.float16 for gr in grads_c)
    for got, want in ((out_c.numpy(), out_e.numpy()), *zip(grads_c, grads_e)):
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("offset, spread", [(100.0, 0.01), (1000.0, 1.0), (-30.0, 0.003)])
def test_float32_rows_far_from_zero_stay_within_the_stated_conditioned_bound(offset, spread):
    # Found by hand: rows 100 + 0.01 * noise differed from eager by 8e-4, forty times the
    # flat 2e-5 the docs stated. Neither side is wrong: a float32 row mean is rounded to one
    # ulp of |mean| (the kernel sums in float64, NumPy's GEMV in float32), and x - mean carries
    # that ulp, amplified by 1/std. The stated bound: 2e-5 + 1.2e-7 * |mean| / std (eps32),
    # for a gradient relative to its largest element (it sums and subtracts such rows).
    rng = np.random.default_rng(3)
    x = (offset + spread * rng.standard_normal((48, 64))).astype(np.float32)
    w = np.ones(64, np.float32)
    b = np.zeros(64, np.float32)
    g = rng.standard_normal((48, 64)).astype(np.float32)
    out_e, out_c, ge, gc, compiled = eager_and_compiled(layer_norm_step, [x, w, b, g])
    assert kernels_in(compiled, "layer_norm") == kernels_in(compiled, "layer_norm_backward") == 1
    bound = 2e-5 + np.finfo(np.float32).eps * abs(offset) / spread
    assert_close(out_c, out_e, bound)
    for e, c in zip(ge[:3], gc[:3]):
        np.testing.assert_allclose(c, e, rtol=bound, atol=bound * np.abs(e).max())
    x64 = x.astype(np.float64)  # both sides are as far from the exact result
    exact = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    for out in (out_e, out_c):
        assert_close(out, exact, bound)


def test_the_norm_kernels_fire_whatever_numpy_calls_sadl_layers_makes(monkeypatch):
    """The kernels replace the recorded ``layer_norm`` application, not a call sequence: the
    op's rows computed another way (np.mean and np.var, no blocks) still get both kernels."""
    from sadl_layers.ops import normalization

    def other_rows(x2, eps, centered=True, weight=None, bias=None):
        mean = np.mean(x2, axis=1, keepdims=True) if centered else 0.0
        var = np.mean(np.square(x2 - mean), axis=1, keepdims=True)
        out = (x2 - mean) / np.sqrt(var + eps)
        return out * weight + bias

    monkeypatch.setattr(normalization, "_normalized_rows", other_rows)
    x, w, b, g = _data(48, 32, np.float32)
    out_e, out_c, ge, gc, compiled = eager_and_compiled(layer_norm_step, [x, w, b, g])
    assert kernels_in(compiled, "layer_norm") == kernels_in(compiled, "layer_norm_backward") == 1
    assert not any(
        "mean(" in line or "var(" in line or "sqrt(" in line
        for line in str(compiled.graph).splitlines()
    )
    assert_close(out_c, out_e, TOL[np.float32])
    for e, c in zip(ge[:3], gc[:3]):
        assert_close(c, e, TOL[np.float32])


def _backward_kernels(compiled):
    from sadl_kernels import _norm

    return [n for n in compiled.graph.nodes if n.func is _norm.norm_backward_into]


def layer_norm_step_returning_nothing(x, w, b, g):
    (sadl.ops.layer_norm(x, w, b) * g).sum().backward()


@pytest.mark.parametrize("step", [layer_norm_step, layer_norm_step_returning_nothing])
def test_the_backward_kernel_reads_the_statistics_its_forward_kept(step):
    x, w, b, g = _data(300, 40, np.float32, seed=3)
    _, _, ge, gc, compiled = eager_and_compiled(step, [x, w, b, g])
    (node,) = _backward_kernels(compiled)
    assert node.args[8][0], "the backward recomputes the statistics"
    assert "norm statistics shared x1" in str(compiled.graph)
    # the forward kernel stays (its statistics are read) even when nothing reads its result
    assert kernels_in(compiled, "layer_norm") == 1
    for e, c in zip(ge[:3], gc[:3]):
        assert_close(c, e, TOL[np.float32])


def test_two_norms_of_one_input_each_read_their_own_statistics():
    def step(x, w, b, g):
        y = sadl.ops.rms_norm(x, b) * 2.0
        (sadl.ops.layer_norm(x, b, w, eps=1e-3) * g + y).sum().backward()

    x, w, b, g = _data(64, 16, np.float64, seed=4)
    _, _, ge, gc, compiled = eager_and_compiled(step, [x, w, b, g])
    from sadl_kernels import _norm

    kept = {
        id(n.args[3]): n.args[-1] for n in compiled.graph.nodes if n.func is _norm.norm_forward_into
    }
    shared = [n for n in _backward_kernels(compiled) if n.args[8][0]]
    assert shared
    assert all(kept[id(n.args[3])] == n.args[-1] for n in shared)  # its own forward's (same eps)
    assert len({id(n.args[3]) for n in shared}) == len(shared)
    for e, c in zip(ge[:3], gc[:3]):
        assert_close(c, e, TOL[np.float64])
