"""Tensor's two faces: NumPy functions and torch-like methods reach the same ops."""

import inspect

import numpy as np
import pytest
import sadl

X = np.arange(1.0, 13.0).reshape(3, 4) / 13.0

# Extra arguments for methods whose NumPy twin needs them (same arguments for both calls).
ARGS = {
    "reshape": ((4, 3),),
    "transpose": ((1, 0),),
    "swapaxes": (0, 1),
    "moveaxis": (0, 1),
    "expand_dims": (0,),
    "broadcast_to": ((2, 3, 4),),
    "repeat": (2,),
    "tile": (2,),
    "roll": (1,),
    "maximum": (0.5,),
    "minimum": (0.5,),
    "divide": (0.5,),
    "floor_divide": (0.07,),
    "matmul": (np.ones((4, 2)),),
    "dot": (np.ones((4, 2)),),
    "pow": None,
    "astype": (np.float32,),
    "round": (1,),
    "clip": (0.2, 0.5),
    "take": (np.array([0, 5, 5]),),
    "take_along_axis": (np.array([[0], [3], [1]]), 1),
    "tril": (),
    "triu": (),
    "flip": (),
    "squeeze": (),
    "diagonal": (),
    "trace": (),
    "ravel": (),
}
# Methods with a NumPy twin whose NumPy call differs in meaning (documented torch-style aliases:
# ``t.split(2)`` is torch's pieces of size 2, ``t.where(cond, other)`` torch's argument order).
NOT_NUMPY_SEMANTICS = {"pow", "copy", "split", "where"}


def numpy_twins():
    names = []
    for name, member in inspect.getmembers(sadl.Tensor):
        if name.startswith("_") or not callable(member) or isinstance(member, property):
            continue
        twin = getattr(np, name, None)
        if callable(twin) and not isinstance(twin, type) and name not in NOT_NUMPY_SEMANTICS:
            names.append(name)
    return names


@pytest.mark.parametrize("name", numpy_twins())
def test_every_method_with_a_numpy_name_is_reachable_through_numpy(name):
    t = sadl.Tensor(X)
    args = ARGS.get(name, ())
    if name in ("tril", "triu", "flip", "squeeze", "diagonal", "trace", "ravel"):
        args = ()
    via_method = getattr(t, name)(*args)
    via_numpy = getattr(np, name)(t, *args)
    if isinstance(via_method, tuple):  # nonzero: one index array per axis
        assert len(via_numpy) == len(via_method)
        via_method, via_numpy = via_method[0], via_numpy[0]
    assert isinstance(via_numpy, sadl.Tensor), f"np.{name}(t) did not return a Tensor"
    np.testing.assert_allclose(
        np.asarray(via_numpy.data, float), np.asarray(via_method.data, float)
    )


def test_numpy_style_and_method_style_build_the_same_graph():
    a = sadl.Tensor(X, requires_grad=True)
    b = sadl.Tensor(X, requires_grad=True)
    np.sum(np.exp(np.tanh(a)) * 2, axis=1).mean().backward()
    (b.tanh().exp() * 2).sum(dim=1).mean().backward()
    np.testing.assert_allclose(a.grad, b.grad)


def test_numpy_functions_on_tensors():
    t = sadl.Tensor(X, requires_grad=True)
    out = np.concatenate([t, t * 2], axis=1)
    assert out.shape == (3, 8)
    out = np.stack([t, t])
    assert out.shape == (2, 3, 4)
    parts = np.split(t, 2, axis=1)
    assert [p.shape for p in parts] == [(3, 2), (3, 2)]
    assert np.where(t > 0.5, t, 0).requires_grad
    assert np.matmul(t, np.swapaxes(t, 0, 1)).shape == (3, 3)
    assert np.shape(t) == (3, 4) and np.ndim(t) == 2
    assert isinstance(np.max(t, axis=0), sadl.Tensor)
    assert np.add.reduce(t, axis=0).shape == (4,)


def test_unregistered_numpy_function_refuses_to_lose_a_gradient():
    t = sadl.Tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match="not a registered sadl op"):
        np.cross(t[:, :3], t[:, 1:])
    assert isinstance(np.cross(t.detach()[:, :3], t.detach()[:, 1:]), sadl.Tensor)
    assert np.allclose(t, X)  # returns a plain bool: fine with grad


def test_unsupported_numpy_keyword_is_reported():
    t = sadl.Tensor(X)
    with pytest.raises(TypeError, match="dtype"):
        np.sum(t, dtype=np.float32)


def test_max_returns_values_over_an_axis_and_values_with_indices_for_dim():
    t = sadl.Tensor(X)
    assert t.max(1).shape == (3,)
    np.testing.assert_array_equal(t.max(dim=1).values.data, X.max(axis=1))
    np.testing.assert_array_equal(t.max(dim=1).indices.data, X.argmax(axis=1))
    with pytest.raises(TypeError, match="axis= or dim="):
        t.sum(axis=0, dim=1)


def test_basic_attributes_and_conversions():
    t = sadl.tensor([[1.5, 2.5]])
    assert t.dtype == np.float32 and t.shape == (1, 2) and t.ndim == 2 and t.size == 2
    assert t.T.shape == (2, 1) and len(t) == 1
    assert t.tolist() == [[1.5, 2.5]] and float(t[0, 1]) == 2.5
    assert t.sum().item() == 4.0 and str(t.device) == "cpu"
    assert np.asarray(t).dtype == np.float32
    assert "Tensor(" in repr(t) and "grad_fn" in repr(sadl.tensor([1.0], requires_grad=True) * 2)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t)


def test_fancy_indexing_negative_steps_and_masks():
    t = sadl.Tensor(X, requires_grad=True)
    t[::-1, ::-2].sum().backward()
    assert t.grad.sum() == 6
    t.grad = None
    t[t > 0.5].sum().backward()
    np.testing.assert_array_equal(t.grad, (X > 0.5).astype(float))


def test_detach_shares_memory():
    t = sadl.Tensor(X.copy(), requires_grad=True)
    d = t.detach()
    assert d.data is t.data and not d.requires_grad


def test_requires_grad_only_for_floats():
    with pytest.raises(TypeError, match="floating"):
        sadl.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="floating"):
        sadl.Parameter(np.array([1, 2]))


def test_parameter_requires_grad_unless_frozen_and_every_way_is_checked():
    p = sadl.Parameter(np.zeros(2, np.float32))
    assert p.requires_grad and p.is_leaf
    p.requires_grad = False  # py-sadl's and torch's freeze idiom: a constant from now on
    y = (p * 2).sum()
    assert not p.requires_grad and not y.requires_grad
    p.requires_grad_(True)
    assert (p * 2).sum().requires_grad
    with pytest.raises(TypeError, match="True or False"):
        p.requires_grad = "no"
    frozen = sadl.Parameter(np.ones(2), requires_grad=False)
    assert not frozen.requires_grad


def test_factories():
    assert sadl.zeros(2, 3).shape == (2, 3) and sadl.zeros((2, 3)).dtype == np.float32
    assert sadl.ones(2, dtype=np.float64).dtype == np.float64
    assert sadl.full((2, 2), 7.0).data.sum() == 28
    assert sadl.eye(3).data.trace() == 3
    assert sadl.arange(5).dtype == np.int64 and sadl.arange(0.0, 1.0, 0.25).size == 4
    assert sadl.linspace(0, 1, 5).data[-1] == 1
    assert sadl.randn(3, 4, requires_grad=True).requires_grad
    assert sadl.zeros_like(sadl.ones(2, 2)).shape == (2, 2)
    with pytest.raises(ValueError, match="negative"):
        sadl.zeros(-1)


def test_manual_seed_makes_runs_reproducible():
    sadl.manual_seed(3)
    a = sadl.randn(4).data
    sadl.manual_seed(3)
    b = sadl.randn(4).data
    np.testing.assert_array_equal(a, b)
    g = np.random.default_rng(5)
    c = sadl.rand(3, rng=g).data
    np.testing.assert_array_equal(c, sadl.rand(3, rng=np.random.default_rng(5)).data)


def test_devices():
    assert sadl.device("cuda:1") == sadl.Device("cuda", 1)
    assert sadl.device("cuda") == "cuda:0"
    with pytest.raises(ValueError, match="unknown device"):
        sadl.device("tpu")
    t = sadl.tensor([1.0], requires_grad=True)
    assert t.to("cpu") is t
    if not sadl.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            t.to("cuda")


def test_import_is_silent_and_loads_no_plugin():
    import subprocess
    import sys

    code = (
        "import sadl, sys; from sadl import _host as manager; "
        "assert manager._registry is None, 'plugins loaded at import'; "
        "assert 'cupy' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
