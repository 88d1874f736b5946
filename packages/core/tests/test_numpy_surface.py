"""The NumPy surface contract (docs/concepts/tensors.md, "NumPy functions on tensors").

Every NumPy function or ufunc that reaches a Tensor either maps to a registered op (the result is
on the graph), or only reads and returns Tensors that need no grad when no input requires grad,
or raises an error naming the function. Functions that write into a Tensor bump its version
counter and refuse a leaf that requires grad. Tested as classes: every NumPy ufunc, a sweep of
reading functions, every in-place function.
"""

import numpy as np
import pytest
import sadl

RNG = np.random.default_rng(0)


def T(a, grad=True):
    return sadl.Tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def outputs(result):
    return list(result) if isinstance(result, tuple | list) else [result]


def is_float(t):
    return t.dtype.kind in "fc"


# ------------------------------------------------------------------------ every ufunc
UFUNCS = sorted(
    (v for k, v in vars(np).items() if isinstance(v, np.ufunc) and not k.startswith("_")),
    key=lambda u: u.__name__,
)
UFUNCS = list({u.__name__: u for u in UFUNCS}.values())


def ufunc_inputs(ufunc, make):
    values = [RNG.uniform(0.5, 0.9, size=(3, 3)) for _ in range(ufunc.nin)]
    return [make(v) for v in values]


def registered_op(func):
    """The registered op that implements ``func`` under dispatch, or None."""
    for name in sadl.ops.names():
        op = sadl.ops.get(name)
        if func in op.numpy_funcs:
            return op
    return None


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
def test_every_ufunc_is_an_op_or_reads_or_raises_naming_itself(ufunc):
    xs = ufunc_inputs(ufunc, T)
    op = registered_op(ufunc)
    try:
        with np.errstate(all="ignore"):
            result = ufunc(*xs)
    except TypeError as exc:
        assert ufunc.__name__ in str(exc)
        assert op is None or not op.differentiable
        return
    for out in outputs(result):
        assert isinstance(out, sadl.Tensor), f"np.{ufunc.__name__} returned {type(out)}"
        if is_float(out) and (op is None or op.differentiable):
            assert out.requires_grad, f"np.{ufunc.__name__} dropped the gradient"
    # the same call on tensors that need no gradient always answers, with Tensors
    with np.errstate(all="ignore"):
        try:
            plain = ufunc(*ufunc_inputs(ufunc, lambda v: T(v, grad=False)))
        except TypeError as exc:  # NumPy has no loop for floats (bitwise ops)
            assert "not supported for the input types" in str(exc)
            return
    for out in outputs(plain):
        assert isinstance(out, sadl.Tensor) and not out.requires_grad


@pytest.mark.parametrize(
    "ufunc", [u for u in UFUNCS if u.nin == 2 and u.signature is None], ids=lambda u: u.__name__
)
def test_every_binary_ufunc_on_0d_integer_tensors_returns_a_tensor(ufunc):
    a, b = sadl.tensor(np.int64(300)), sadl.tensor(np.int64(3))
    with np.errstate(all="ignore"):
        try:
            expected = ufunc(np.int64(300), np.int64(3))
        except TypeError:
            return
        result = ufunc(a, b)
    for out, exp in zip(outputs(result), outputs(expected)):
        assert isinstance(out, sadl.Tensor) and out.shape == ()
        # float results of integer inputs take the default dtype (float32), as in torch
        np.testing.assert_allclose(out.numpy(), exp, rtol=1e-6)


def test_operators_on_0d_integer_tensors_return_tensors():
    t = sadl.tensor(np.int64(300))
    for result, expected in [
        (t & 0xFF, 44),
        (t << 1, 600),
        (t >> 2, 75),
        (t | 1, 301),
        (t ^ 1, 301),
        (~t, -301),
        (divmod(t, 7)[0], 42),
    ]:
        assert isinstance(result, sadl.Tensor) and result.item() == expected


# ------------------------------------------------------------------------ reading functions
SQUARE = RNG.uniform(0.5, 1.5, size=(3, 3)) + 3 * np.eye(3)
READING = {
    "median": np.median,
    "average": np.average,
    "percentile": lambda t: np.percentile(t, 30),
    "quantile": lambda t: np.quantile(t, 0.3),
    "ptp": np.ptp,
    "nanmean": np.nanmean,
    "nansum": np.nansum,
    "nanmax": np.nanmax,
    "nanstd": np.nanstd,
    "nanprod": np.nanprod,
    "nancumsum": np.nancumsum,
    "nanmedian": np.nanmedian,
    "diff": np.diff,
    "gradient": np.gradient,
    "trapezoid": np.trapezoid,
    "atleast_3d": np.atleast_3d,
    "rot90": np.rot90,
    "fliplr": np.fliplr,
    "unique": np.unique,
    "cov": np.cov,
    "corrcoef": np.corrcoef,
    "det": np.linalg.det,
    "inv": np.linalg.inv,
    "slogdet": np.linalg.slogdet,
    "svd": np.linalg.svd,
    "eigh": np.linalg.eigh,
    "vdot": lambda t: np.vdot(t, t),
    "cross": lambda t: np.cross(t, t[::-1]),
    "convolve": lambda t: np.convolve(t[0], t[1]),
    "fft": np.fft.fft,
    "sinc": np.sinc,
    "i0": np.i0,
    "nan_to_num": np.nan_to_num,
    "interp": lambda t: np.interp(t, [0.0, 10.0], [1.0, 2.0]),
    "histogram": np.histogram,
    "real": np.real,
    "angle": np.angle,
    "add.outer": lambda t: np.add.outer(t, t),
    "multiply.reduceat": lambda t: np.multiply.reduceat(t, [0, 1]),
    "logaddexp.reduce": lambda t: np.logaddexp.reduce(t),
}


@pytest.mark.parametrize("name", sorted(READING))
def test_a_reading_function_returns_tensors_without_grad_or_raises_naming_itself(name):
    func = READING[name]
    expected = func(SQUARE.copy())
    plain = func(T(SQUARE, grad=False))
    for out, exp in zip(outputs(plain), outputs(expected)):
        assert isinstance(out, sadl.Tensor), f"{name} returned {type(out).__name__}"
        assert not out.requires_grad
        np.testing.assert_allclose(out.numpy(), exp)
    x = T(SQUARE)
    try:
        result = func(x)
    except TypeError as exc:
        label = name if "." in name else name.split("_")[0]
        assert label in str(exc) and "detach" in str(exc), str(exc)
    else:
        for out in outputs(result):
            assert isinstance(out, sadl.Tensor)
            assert not is_float(out) or out.requires_grad, f"{name} dropped the gradient"
    with sadl.no_grad():
        for out in outputs(func(x)):
            assert isinstance(out, sadl.Tensor) and not out.requires_grad


def test_an_unregistered_scalar_reduction_never_drops_a_gradient_silently():
    x = T([1.0, 2.0, 4.0])
    with pytest.raises(TypeError, match=r"np\.median is not a registered sadl op.*detach"):
        (x**2).sum() + np.median(x)
    total = (x**2).sum() + np.median(x.detach())  # a constant on purpose
    total.backward()
    np.testing.assert_allclose(x.grad, [2.0, 4.0, 8.0])
    assert f"{np.median(x.detach()):.2f}" == "2.00"  # a 0-d Tensor formats like a number


@pytest.mark.parametrize(
    ("func", "kind"),
    [
        (np.argwhere, "i"),
        (lambda t: np.searchsorted(t, 1.5), "i"),
        (np.nonzero, "i"),
        (lambda t: np.digitize(t, [1.5]), "i"),
        (lambda t: np.array_equal(t, t), None),
        (lambda t: np.allclose(t, t), None),
        (np.shape, None),
        (np.ndim, None),
    ],
)
def test_non_float_results_need_no_gradient_and_never_raise(func, kind):
    x = T([1.0, 2.0, 0.0])
    for out in outputs(func(x)):
        if kind is None:
            assert not isinstance(out, sadl.Tensor | np.ndarray | np.generic)
        else:
            assert isinstance(out, sadl.Tensor) and out.dtype.kind == kind
            assert not out.requires_grad


def test_a_view_returned_by_an_unregistered_function_shares_the_version_counter():
    w = T([1.0, 2.0])
    t = T([3.0, 4.0], grad=False)
    y = (w * t).sum()  # saves t for w's gradient
    view = np.atleast_2d(t)
    assert np.shares_memory(view.numpy(), t.numpy())
    view[0, 0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_unsupported_keywords_of_a_registered_function_name_it():
    with pytest.raises(TypeError, match=r"np\.sum.*'dtype'"):
        np.sum(T([1.0]), dtype=np.float32)
    with pytest.raises(TypeError, match=r"np\.exp.*keyword"):
        np.exp(T([1.0]), where=np.array([True]))


# ------------------------------------------------------------------------ functions that write
WRITERS = {
    "copyto": lambda t: np.copyto(t, np.zeros(4)),
    "copyto-where": lambda t: np.copyto(t, 7.0, where=np.array([True, False, True, False])),
    "put": lambda t: np.put(t, [0, 2], [5.0, 6.0]),
    "place": lambda t: np.place(t, np.array([True, False, False, True]), [9.0]),
    "putmask": lambda t: np.putmask(t, np.array([True, False, False, True]), 9.0),
    "put_along_axis": lambda t: np.put_along_axis(t, np.array([1]), 5.0, axis=0),
    "ufunc-out": lambda t: np.multiply(t, 2.0, out=t),
    "ufunc-out-unregistered": lambda t: np.heaviside(t, 0.5, out=t),
    "function-out": lambda t: np.nancumsum(t, out=t),
    "ufunc.at": lambda t: np.add.at(t, [0, 0], 1.0),
    "setitem": lambda t: t.__setitem__(slice(None), 0.0),
}


def reference(name):
    """What the write does to a plain array holding [1, 2, 3, 4]."""
    a = np.array([1.0, 2.0, 3.0, 4.0])
    WRITERS[name](a)
    return a


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_write_into_a_saved_tensor_bumps_its_version(name):
    w = T([1.0, 1.0, 1.0, 1.0])
    t = T([1.0, 2.0, 3.0, 4.0], grad=False)
    y = (w * t).sum()  # multiply saves t for w's gradient
    WRITERS[name](t)
    np.testing.assert_array_equal(t.numpy(), reference(name))  # the write really happened
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_fill_diagonal_bumps_the_version_of_a_2d_tensor():
    w = T(np.ones((2, 2)))
    t = T([[1.0, 2.0], [3.0, 4.0]], grad=False)
    y = (w * t).sum()
    np.fill_diagonal(t, 0.0)
    np.testing.assert_array_equal(t.numpy(), [[0.0, 2.0], [3.0, 0.0]])
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


LEAF_WRITERS = {**WRITERS, "fill_diagonal": lambda t: np.fill_diagonal(t, 0.0)}


@pytest.mark.parametrize("name", sorted(LEAF_WRITERS))
def test_a_write_into_a_leaf_that_requires_grad_is_refused(name):
    w = T(np.arange(1.0, 5.0).reshape((2, 2) if name == "fill_diagonal" else (4,)))
    before = w.numpy().copy()
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        LEAF_WRITERS[name](w)
    np.testing.assert_array_equal(w.numpy(), before)  # nothing was written
    with sadl.no_grad():  # how optimizers update parameters
        LEAF_WRITERS[name](w)
    assert not np.array_equal(w.numpy(), before)


@pytest.mark.parametrize("name", ["put", "place", "putmask", "put_along_axis", "ufunc.at"])
def test_a_write_that_cannot_be_recorded_raises_on_a_tensor_on_the_graph(name):
    w = T([1.0, 2.0, 3.0, 4.0])
    h = w * 2
    z = (h * h).sum()
    with pytest.raises(TypeError, match="not differentiable"):
        WRITERS[name](h)
    z.backward()  # nothing was written, the graph is intact
    np.testing.assert_allclose(w.grad, 8 * w.numpy())


def test_copyto_on_the_graph_is_recorded_and_caught_by_the_version_counter():
    w = sadl.tensor(np.ones(4), requires_grad=True)
    h = w * 2
    z = (h * h).sum()
    np.copyto(h, np.zeros(4))  # the example: w.grad silently became 0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.backward()

    w = sadl.tensor(np.ones(4), requires_grad=True)
    v = sadl.tensor(np.full(4, 3.0), requires_grad=True)
    h = w * 2
    np.copyto(h, v * v, where=np.array([True, True, False, False]))
    h.sum().backward()
    np.testing.assert_allclose(v.grad, [6.0, 6.0, 0.0, 0.0])
    np.testing.assert_allclose(w.grad, [0.0, 0.0, 2.0, 2.0])


def test_ufunc_out_into_an_array_refuses_a_result_that_requires_grad():
    x = T([1.0, 2.0])
    buffer = np.zeros(2)
    with pytest.raises(TypeError, match=r"np\.exp\(\.\.\., out=array\)"):
        np.exp(x, out=buffer)
    np.exp(x.detach(), out=buffer)
    np.testing.assert_allclose(buffer, np.exp([1.0, 2.0]))


def test_ufunc_out_into_a_tensor_is_recorded():
    x = T([1.0, 2.0])
    out = T([0.0, 0.0], grad=False)
    np.exp(x, out=out)
    out.sum().backward()
    np.testing.assert_allclose(x.grad, np.exp([1.0, 2.0]))
