"""erf, erfc, erfinv and ndtr against Python's math module over dense sweeps, tails included."""

import math

import numpy as np
import pytest
import sadl

SWEEP = np.concatenate(
    [
        np.linspace(-9.0, 9.0, 60001),
        np.geomspace(1e-308, 30.0, 20001),
        -np.geomspace(1e-308, 30.0, 20001),
        [0.0, -0.0, 0.84375, 1.25, 1 / 0.35, 6.0, 28.0],
    ]
)


def ulp_error(values, reference, dtype=np.float64):
    """|values - reference| in units of the reference's last place (in ``dtype``)."""
    values, reference = np.asarray(values, np.float64), np.asarray(reference, np.float64)
    spacing = np.spacing(np.abs(reference).astype(dtype)).astype(np.float64)
    spacing[reference == 0] = float(np.spacing(dtype(0)))
    return np.where(values == reference, 0.0, np.abs(values - reference) / spacing)


def test_erf_float64_within_one_ulp():
    reference = np.array([math.erf(v) for v in SWEEP])
    assert ulp_error(sadl.ops.erf(SWEEP), reference).max() <= 1.0


def test_erfc_float64_keeps_relative_accuracy_in_the_tail():
    reference = np.array([math.erfc(v) for v in SWEEP])
    errors = ulp_error(sadl.ops.erfc(SWEEP), reference)
    assert errors.max() <= 4.0  # math.erfc itself is within 2 ulp of the exact value here
    tail = SWEEP > 20
    assert (reference[tail] > 0).any() and errors[tail].max() <= 4.0


def test_erf_float32_is_fast_and_within_13_ulp():
    x = SWEEP.astype(np.float32)
    reference = np.array([math.erf(float(v)) for v in x]).astype(np.float32)
    out = sadl.ops.erf(x)
    assert out.dtype == np.float32
    errors = ulp_error(out, reference, np.float32)
    assert errors.max() <= 13.0 and errors.mean() < 1.0


def test_ndtr_is_the_normal_cdf_in_both_precisions():
    x = SWEEP[np.abs(SWEEP) < 38.0]
    # float64: erfc's accuracy, relative in the left tail, for the argument as torch scales it
    # (x * -(1 / sqrt 2): deep in the tail that rounding alone moves the exact CDF by 100s of ulp)
    reference = np.array([0.5 * math.erfc(v * -(1.0 / math.sqrt(2.0))) for v in x])
    assert ulp_error(sadl.ops.ndtr(x), reference).max() <= 4.0
    x32 = x.astype(np.float32)
    reference32 = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2.0)) for v in x32])
    out = sadl.ops.ndtr(x32)
    assert out.dtype == np.float32
    # float32: (1 + erf) / 2 as torch computes it, absolute error at float32's resolution
    assert np.abs(out - reference32).max() <= 2.5e-7
    assert ((out >= 0) & (out <= 1)).all()


def test_erfinv_lands_within_two_ulp_of_the_root():
    y = np.concatenate([np.linspace(-1, 1, 40001), 1 - np.geomspace(1.2e-16, 0.5, 2001)])
    x = sadl.ops.erfinv(y)
    assert np.isposinf(x[y == 1]).all() and np.isneginf(x[y == -1]).all()
    inside = np.abs(y) < 1
    x, y = x[inside], y[inside]
    # x is within 2 ulp of the exact root when the residual is no larger than what moving x by
    # 2 ulp changes (plus the residual's own rounding); near 1 the residual is erfc's.
    slope = 2 / math.sqrt(math.pi) * np.exp(-x * x)
    moved = slope * 2 * np.spacing(np.abs(x))
    near_one = np.abs(y) > 0.5
    q = 1 - np.abs(y[near_one])
    residual = np.abs(sadl.ops.erfc(np.abs(x[near_one])) - q)
    assert (residual <= moved[near_one] + 4 * np.spacing(q)).all()
    residual = np.abs(sadl.ops.erf(x[~near_one]) - y[~near_one])
    assert (residual <= moved[~near_one] + 2 * np.spacing(np.abs(y[~near_one]))).all()
    xs = np.linspace(-1.5, 1.5, 2001)
    np.testing.assert_allclose(sadl.ops.erfinv(sadl.ops.erf(xs)), xs, rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv"])
def test_special_values(name):
    op = getattr(sadl.ops, name)
    x = np.array([np.nan, np.inf, -np.inf, 2.0, -2.0, 0.0])
    out = op(x)
    expected = {
        "erf": [np.nan, 1.0, -1.0, math.erf(2.0), -math.erf(2.0), 0.0],
        "erfc": [np.nan, 0.0, 2.0, math.erfc(2.0), math.erfc(-2.0), 1.0],
        "erfinv": [np.nan, np.nan, np.nan, np.nan, np.nan, 0.0],
    }[name]
    np.testing.assert_allclose(out, expected, rtol=1e-15)
    assert op(np.array([1, 0])).dtype == np.float64  # integers compute in float64
    half = op(np.array([0.5], np.float16))
    assert half.dtype == np.float16
