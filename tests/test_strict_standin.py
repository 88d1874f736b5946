"""The strict CuPy stand-in refuses what CuPy refuses and acts like CuPy where sadl relies on it.

Each test runs on the stand-in ("strict") and, where CuPy sees a GPU, on CuPy itself, so the
stand-in's strictness is checked against the real thing wherever one is at hand.
"""

import numpy as np
import pytest
import sadl

strict_xp = pytest.importorskip(
    "sadl_strictcuda.xp",
    reason="the strict CuPy stand-in (tests/fixtures/plugins/sadl-strictcuda) is not installed: "
    ".venv/bin/python -m pip install -r requirements-dev.txt",
)


def libraries():
    found = [pytest.param(strict_xp, id="strict")]
    if sadl.cuda.is_available():
        import cupy

        found.append(pytest.param(cupy, id="cupy"))
    return found


@pytest.fixture(params=libraries())
def xp(request):
    return request.param


def device_array(xp):
    return xp.asarray(np.arange(6.0).reshape(2, 3))


def test_implicit_conversion_to_numpy_raises(xp):
    a = device_array(xp)
    for convert in (np.asarray, np.array, lambda a: a.__array__(), np.ascontiguousarray):
        with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
            convert(a)
    # sadl's Tensor says what to do instead
    t = sadl.Tensor(a)
    with pytest.raises(TypeError, match=r"\.numpy\(\)"):
        np.asarray(t)


def test_mixing_with_numpy_arrays_raises(xp):
    a, host = device_array(xp), np.ones((2, 3))
    mixes = [
        lambda: a + host,
        lambda: host + a,
        lambda: a * host,
        lambda: np.add(a, host),
        lambda: np.maximum(host, a),
        lambda: np.where(a > 0, a, host),
        lambda: np.concatenate([a, host]),
        lambda: xp.concatenate([a, host]),
        lambda: np.matmul(a, host.T),
    ]
    for mix in mixes:
        with pytest.raises(TypeError):
            mix()
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        a[...] = host
    a[...] = np.float64(2.0)  # a host scalar fills
    a[np.array([0, 1]), 1] = np.array([5.0, 6.0])  # advanced indexing converts host values
    assert a.get()[:, 1].tolist() == [5.0, 6.0]


def test_python_and_numpy_scalars_mix_fine(xp):
    a = device_array(xp)
    assert isinstance(a * 2.0 + np.float32(1.0), xp.ndarray)
    assert isinstance(np.exp(a), xp.ndarray)  # NumPy's functions dispatch to the device


def test_it_lacks_what_cupy_lacks(xp):
    a = device_array(xp)
    assert a.flags.c_contiguous and a.flags.owndata
    with pytest.raises(AttributeError):
        a.flags.writeable  # noqa: B018
    for name in ("ctypes", "setflags", "itemset", "resize", "__array_interface__"):
        assert not hasattr(a, name), name
    with pytest.raises(TypeError):
        np.vecdot(a, a)  # NumPy has it, CuPy does not
    with pytest.raises(AttributeError):
        xp.vecdot  # noqa: B018


def test_results_stay_device_arrays(xp):
    a = device_array(xp)
    total = a.sum()
    assert isinstance(total, xp.ndarray) and total.ndim == 0  # not a NumPy scalar
    assert isinstance(a[1, 2], xp.ndarray)
    assert float(total) == 15.0 and total.item() == 15.0
    view = a[0]
    assert view.base is a and not view.flags.owndata
    assert a.T.T.base is a and view.T is view  # a 1-d array's .T is the array itself
    assert a.astype(a.dtype, copy=False) is a


def test_get_is_the_way_to_the_host(xp):
    a = device_array(xp)
    host = a.get()
    assert isinstance(host, np.ndarray)
    host[0, 0] = 100.0
    assert a.get()[0, 0] == 0.0  # a copy, never shared
    assert xp.asnumpy(a).tolist() == a.tolist()
    made = xp.asarray(host)
    host[0, 1] = -1.0
    assert made.get()[0, 1] == 1.0  # asarray copies host data to the device


def test_device_ids(xp):
    a = device_array(xp)
    assert a.device.id == 0
    if xp is strict_xp:
        b = sadl.tensor([1.0], device="strict:1").data
        assert b.device.id == 1
        with pytest.raises(ValueError, match="Peer access"):
            a[0, :1] + b


def test_generators_draw_on_the_device(xp):
    g = xp.random.default_rng(3)
    for draw in (g.random((4,), dtype=np.float32), g.standard_normal(4), g.integers(0, 5, 4)):
        assert isinstance(draw, xp.ndarray)
    assert g.random(3, dtype=np.float32).dtype == np.float32
    same = xp.random.default_rng(3).random(5).get()
    np.testing.assert_array_equal(xp.random.default_rng(3).random(5).get(), same)
    assert not np.array_equal(np.random.default_rng(3).random(5), same)  # its own stream


def test_keyword_arguments_cupy_lacks_raise(xp):
    a = device_array(xp)
    calls = [
        lambda: np.einsum("ij->i", a, out=xp.zeros(2)),  # CuPy's einsum has no out=
        lambda: np.count_nonzero(a, axis=0, keepdims=True),
        lambda: np.add(a, a, where=a > 1),  # CuPy's ufuncs take no where=
        lambda: a.sum(initial=0.0),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()
    assert np.einsum("ij->i", a).shape == (2,)  # without them all is well
