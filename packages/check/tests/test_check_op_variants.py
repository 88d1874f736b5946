"""``check_op`` derives OpInfo-style variants of each example and checks singular points.

Each buggy op below is right on its own examples and wrong on one class of call users make; the
variants ``check_op`` derives by itself must catch every one of them. Singular points must have
finite gradients within the one-sided derivatives.
"""

import numpy as np
import pytest
from sadl.plugins import Example, OpDef
from sadl.testing import check_op


def failing_kinds(report):
    return {r.example.rsplit("[", 1)[-1].rstrip("]") for r in report.failures()}


def _transpose_grad_raw_axes(g, out, x, *, axes):
    return np.transpose(g, tuple(np.argsort(axes)))  # the permute bug: raw negative axes


def _sum_grad_modulo(g, out, x, *, axis):
    axis = axis % x.ndim  # ZeroDivisionError on a 0-d input
    return np.broadcast_to(np.expand_dims(g, axis), x.shape)


BUGGY = {
    "negative axes": OpDef(
        "bad_permute",
        lambda x, *, axes: np.transpose(x, axes),
        (_transpose_grad_raw_axes,),
        examples=(Example((2, 3, 4), axes=(2, 0, 1)),),
    ),
    "0-d inputs": OpDef(
        "bad_sum",
        lambda x, *, axis: np.sum(x, axis=axis),
        (_sum_grad_modulo,),
        examples=(Example((3, 4), axis=1),),
    ),
    "empty dimension": OpDef(
        "bad_mean",
        lambda x: np.mean(x, axis=0),
        (lambda g, out, x: np.broadcast_to(g * (1.0 / x.shape[0]), x.shape),),
        examples=(Example((3, 4)),),
    ),
    "transposed inputs": OpDef(
        "bad_layout",
        lambda x: np.reshape(x, (-1,), order="A"),  # reads memory order, not index order
        (lambda g, out, x: np.reshape(g, x.shape, order="A"),),
        examples=(Example((3, 4)),),
    ),
    "strided inputs": OpDef(
        "bad_strides",
        lambda x: (
            np.frombuffer(np.ascontiguousarray(x).tobytes(), x.dtype)
            if x.flags.c_contiguous
            else np.zeros(x.size)
        ),
        (lambda g, out, x: np.reshape(g, x.shape),),
        examples=(Example((5,)),),
    ),
    "broadcast input": OpDef(
        "bad_multiply",
        np.multiply,
        # assumes b has the output's shape: a broadcast b cannot take the reshape
        (lambda g, out, a, b: g * b, lambda g, out, a, b: np.reshape(g * a, b.shape)),
        examples=(Example((3, 4), (3, 4)),),
    ),
}


@pytest.mark.parametrize("kind", sorted(BUGGY))
def test_a_variant_catches_the_bug_the_examples_miss(kind):
    op = BUGGY[kind]
    assert check_op(op, variants=False, raise_exception=False).ok  # the examples pass
    report = check_op(op, raise_exception=False)
    assert not report.ok
    assert kind in failing_kinds(report), str(report)


def test_variants_are_counted_and_right_ops_pass_them():
    op = OpDef(
        "good_permute",
        lambda x, *, axes: np.transpose(x, axes),
        (lambda g, out, x, *, axes: np.transpose(g, tuple(np.argsort(np.mod(axes, x.ndim)))),),
        examples=(Example((2, 3, 4), axes=(2, 0, 1)),),
    )
    report = check_op(op)
    assert report.ok and report.variants >= 4
    kinds = {r.example for r in report.results}
    assert any("[negative axes]" in k for k in kinds) and any("[strided" in k for k in kinds)


def test_float32_and_the_default_dtype_are_checked():
    import sadl

    up = OpDef(
        "upcasts",
        lambda x: x.astype(np.float64) * 2,
        (lambda g, out, x: 2 * g,),
        examples=(Example((3,)),),
    )
    report = check_op(up, raise_exception=False)
    assert {r.check for r in report.failures()} == {"float32"}
    good = OpDef("twice", lambda x: x * 2, (lambda g, out, x: 2 * g,), examples=(Example((3,)),))
    assert "float64" not in {r.check for r in check_op(good).results}
    sadl.set_default_dtype(np.float64)
    try:
        checks = {r.check for r in check_op(good).results}
    finally:
        sadl.set_default_dtype(np.float32)
    assert {"float32", "float64"} <= checks  # the default dtype is checked too


# ------------------------------------------------------------------------ singular points
def _naive_norm(x):
    return np.sqrt(np.sum(x * x))


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            OpDef(
                "naive_norm",
                _naive_norm,
                (lambda g, out, x: g * x / out,),  # 0 / 0 at x == 0
                examples=(Example((3,)),),
                singular_points=(Example(np.zeros(3)),),
            ),
            "is nan",
        ),
        (
            OpDef(
                "steep_relu",
                lambda x: np.maximum(x, 0),
                (lambda g, out, x: g * np.where(x == 0, 5.0, x > 0),),  # 5 is no subgradient
                examples=(Example((3,)),),
                singular_points=(Example(np.array([0.0, 1.0])),),
            ),
            "outside the one-sided derivatives",
        ),
    ],
    ids=["nan", "not-a-subgradient"],
)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the naive 0/0
def test_a_bad_gradient_at_a_singular_point_fails(op, message):
    report = check_op(op, raise_exception=False)
    assert report.singular_points == 1
    (failure,) = report.failures()
    assert failure.check == "singular_point" and message in failure.message


def test_singular_points_need_a_differentiable_op():
    with pytest.raises(TypeError, match="singular_points need a gradient"):
        OpDef(
            "flat",
            np.sign,
            differentiable=False,
            examples=(Example((3,)),),
            singular_points=(Example(np.zeros(2)),),
        )
