"""Seeded random windowed ops against PyTorch: convolutions, transposed convolutions, pools,
resizing and padding.

The hand-picked parity tests check the shapes someone thought of; these draw them: 1-, 2- and
3-d inputs, kernels 1 to 4, strides, dilations, groups, integer or "same"/"valid" padding,
output padding, ceil mode, ``count_include_pad`` and ``divisor_override``, every resize mode
with a size or a scale factor, every padding mode, and compare in
float64 the forward and every gradient (input, weight, bias under a random upstream gradient)
with PyTorch's to RTOL relative to the largest value. A failing case prints its seed, index and
arguments, so it replays alone. ``SADL_TORCH_WINDOW_CASES`` (default 300) cases per seed of
``SADL_TORCH_WINDOW_SEEDS`` (default 0,1); ``nox -s fuzz`` runs 5,000 on each of its 10 seeds.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import sadl
from sadl.nn import functional

torch = pytest.importorskip("torch", reason="the reference is PyTorch (the local CPU wheel)")

CASES = int(os.environ.get("SADL_TORCH_WINDOW_CASES", "300"))
SEEDS = [int(s) for s in os.environ.get("SADL_TORCH_WINDOW_SEEDS", "0,1").split(",")]
RTOL = 1e-9  # float64, relative to the largest magnitude of each compared array
KINDS = (
    "conv", "conv_transpose", "max_pool", "avg_pool", "interpolate", "pad",
    "adaptive_avg_pool2d", "unfold",
)  # fmt: skip
RESIZE = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _per_dim(rng: np.random.Generator, d: int, low: int, high: int) -> tuple[int, ...]:
    """A value per spatial dimension, sometimes one value for all (both spellings)."""
    if rng.random() < 0.4:
        return (int(rng.integers(low, high + 1)),) * d
    return tuple(int(v) for v in rng.integers(low, high + 1, size=d))


def _spell(value: tuple[int, ...]) -> Any:
    """An int where all dimensions agree (sometimes), else the tuple."""
    return value[0] if len(set(value)) == 1 and len(value) > 0 and value[0] % 2 else value


def _case(rng: np.random.Generator) -> tuple[str, int, dict[str, Any]]:
    """One random windowed call: its kind, spatial dims and arguments (shapes included)."""
    kind = KINDS[int(rng.integers(len(KINDS)))]
    d = 2 if kind in ("adaptive_avg_pool2d", "unfold") else int(rng.integers(1, 4))
    small = d == 3  # (3-d volumes stay small: the test must stay fast)
    k = _per_dim(rng, d, 1, 3 if small else 4)
    dil = _per_dim(rng, d, 1, 2 if small else 3) if rng.random() < 0.5 else (1,) * d
    stride = _per_dim(rng, d, 1, 3) if rng.random() < 0.6 else (1,) * d
    n = int(rng.integers(1, 3))
    args: dict[str, Any] = {"n": n, "k": k, "stride": stride}
    if kind in ("conv", "conv_transpose"):
        groups = int(rng.choice([1, 1, 2, 3]))
        args.update(
            groups=groups,
            cin=groups * int(rng.integers(1, 3)),
            cout=groups * int(rng.integers(1, 3)),
            bias=bool(rng.random() < 0.7),
            dilation=dil,
        )
        reach = tuple(di * (ki - 1) for di, ki in zip(dil, k, strict=True))
        if kind == "conv":
            choice = rng.random()
            if choice < 0.2:
                args.update(padding="same", stride=(1,) * d)
            elif choice < 0.3:
                args["padding"] = "valid"
            else:
                args["padding"] = tuple(int(rng.integers(0, r + 1)) for r in reach)
            pad = (0,) * d if isinstance(args["padding"], str) else args["padding"]
            args["size"] = tuple(
                max(r + 1 - 2 * p, 1) + int(rng.integers(0, 5 if small else 7))
                for r, p in zip(reach, pad, strict=True)
            )
        else:
            args["padding"] = tuple(int(rng.integers(0, r + 1)) for r in reach)
            args["output_padding"] = tuple(
                int(rng.integers(0, max(s, di))) for s, di in zip(stride, dil, strict=True)
            )
            args["size"] = _per_dim(rng, d, 1, 3 if small else 5)
            # the output must have at least one element along each dimension
            for i in range(d):
                while (
                    (args["size"][i] - 1) * stride[i] - 2 * args["padding"][i] + reach[i]
                    + args["output_padding"][i] + 1 < 1
                ):  # fmt: skip
                    args["padding"] = args["padding"][:i] + (0,) + args["padding"][i + 1 :]
    elif kind == "max_pool" or kind == "avg_pool":
        dil = dil if kind == "max_pool" else (1,) * d
        pad = tuple(int(rng.integers(0, ki // 2 + 1)) for ki in k)
        args.update(
            c=int(rng.integers(1, 3)),
            padding=pad,
            dilation=dil,
            ceil_mode=bool(rng.random() < 0.4),
            stride=stride if rng.random() < 0.8 else None,
        )
        reach = tuple(di * (ki - 1) + 1 for di, ki in zip(dil, k, strict=True))
        # (PyTorch's 3-d average pool wants the input itself as large as the kernel)
        bare = kind == "avg_pool" and d == 3
        args["size"] = tuple(
            max(r - (0 if bare else 2 * p), 1) + int(rng.integers(0, 5 if small else 7))
            for r, p in zip(reach, pad, strict=True)
        )
        if kind == "avg_pool":
            args["count_include_pad"] = bool(rng.random() < 0.5)
            if d > 1 and rng.random() < 0.2:
                args["divisor_override"] = int(rng.integers(1, 7))
    elif kind == "interpolate":
        mode = str(rng.choice(["nearest", "nearest-exact", RESIZE[d], RESIZE[d], "area"]))
        args.update(c=int(rng.integers(1, 3)), size=_per_dim(rng, d, 1, 4 if small else 7))
        args["mode"] = mode
        if rng.random() < 0.4:
            args["out"] = _per_dim(rng, d, 1, 5 if small else 10)
        else:  # a scale factor, its output at least one element along each axis
            args["scale_factor"] = tuple(
                float(np.round(rng.uniform(1.0 / n + 0.01, 3.0), 2)) for n in args["size"]
            )
            if rng.random() < 0.4:
                args["recompute_scale_factor"] = bool(rng.random() < 0.5)
        if mode == RESIZE[d] and rng.random() < 0.7:
            args["align_corners"] = bool(rng.random() < 0.5)
    elif kind == "pad":
        args.update(c=int(rng.integers(1, 3)), size=_per_dim(rng, d, 1, 4 if small else 6))
        args["mode"] = str(rng.choice(["constant", "reflect", "replicate", "circular"]))
        limit = {"reflect": -1, "circular": 0}.get(args["mode"])  # (reflect: below the size)
        args["pad"] = tuple(
            int(rng.integers(0, 4 if limit is None else n + limit + 1))
            for n in args["size"][::-1]
            for _ in (0, 1)
        )
        if args["mode"] == "constant" and rng.random() < 0.5:
            args["value"] = float(rng.standard_normal())
    elif kind == "adaptive_avg_pool2d":
        args.update(c=int(rng.integers(1, 3)), size=_per_dim(rng, 2, 1, 9))
        args["output_size"] = tuple(int(rng.integers(1, 2 * s + 1)) for s in args["size"])
    else:  # unfold
        pad = _per_dim(rng, 2, 0, 2)
        reach = tuple(di * (ki - 1) + 1 for di, ki in zip(dil, k, strict=True))
        args.update(c=int(rng.integers(1, 3)), padding=pad, dilation=dil)
        args["size"] = tuple(
            max(r - 2 * p, 1) + int(rng.integers(0, 6)) for r, p in zip(reach, pad, strict=True)
        )
    return kind, d, args


def _inputs(rng: np.random.Generator, kind: str, d: int, a: dict[str, Any]) -> list[np.ndarray]:
    """The arrays of a case: distinct values, so a max is never a tie."""
    channels = a.get("cin", a.get("c"))
    x = rng.permutation(int(np.prod((a["n"], channels, *a["size"])))).astype(np.float64)
    arrays = [(x / x.size - 0.5).reshape(a["n"], channels, *a["size"]) + 0.01]
    if kind == "conv":
        arrays.append(rng.standard_normal((a["cout"], a["cin"] // a["groups"], *a["k"])))
    elif kind == "conv_transpose":
        arrays.append(rng.standard_normal((a["cin"], a["cout"] // a["groups"], *a["k"])))
    if a.get("bias"):
        arrays.append(rng.standard_normal(a["cout"]))
    return arrays


def _call(lib: Any, kind: str, d: int, a: dict[str, Any], xs: list[Any]) -> Any:
    """The case through ``lib`` (sadl.nn.functional or torch.nn.functional)."""
    if kind == "conv":
        pad = a["padding"] if isinstance(a["padding"], str) else _spell(a["padding"])
        return getattr(lib, f"conv{d}d")(
            *xs[:2], xs[2] if len(xs) > 2 else None, stride=_spell(a["stride"]),
            padding=pad, dilation=_spell(a["dilation"]), groups=a["groups"],
        )  # fmt: skip
    if kind == "conv_transpose":
        return getattr(lib, f"conv_transpose{d}d")(
            *xs[:2], xs[2] if len(xs) > 2 else None, stride=_spell(a["stride"]),
            padding=_spell(a["padding"]), output_padding=_spell(a["output_padding"]),
            groups=a["groups"], dilation=_spell(a["dilation"]),
        )  # fmt: skip
    stride = None if a.get("stride") is None else _spell(a["stride"])
    if kind == "max_pool":
        return getattr(lib, f"max_pool{d}d")(
            xs[0], _spell(a["k"]), stride, _spell(a["padding"]), _spell(a["dilation"]),
            ceil_mode=a["ceil_mode"],
        )  # fmt: skip
    if kind == "avg_pool":
        extra = {"divisor_override": a["divisor_override"]} if "divisor_override" in a else {}
        return getattr(lib, f"avg_pool{d}d")(
            xs[0], _spell(a["k"]), stride, _spell(a["padding"]), ceil_mode=a["ceil_mode"],
            count_include_pad=a["count_include_pad"], **extra,
        )  # fmt: skip
    if kind == "interpolate":
        keys = ("scale_factor", "recompute_scale_factor", "align_corners")
        extra = {k: a[k] for k in keys if k in a}
        return lib.interpolate(xs[0], a.get("out"), mode=a["mode"], **extra)
    if kind == "pad":
        return lib.pad(xs[0], a["pad"], mode=a["mode"], value=a.get("value"))
    if kind == "adaptive_avg_pool2d":
        return lib.adaptive_avg_pool2d(xs[0], a["output_size"])
    return lib.unfold(
        xs[0], _spell(a["k"]), dilation=_spell(a["dilation"]), padding=_spell(a["padding"]),
        stride=_spell(a["stride"]),
    )  # fmt: skip


def _close(name: str, got: Any, want: Any, where: str) -> None:
    want = np.asarray(want)
    assert np.shape(got) == want.shape, f"{where}: {name} shape {np.shape(got)} != {want.shape}"
    got = np.asarray(got)
    finite = np.isfinite(want)  # (a max-pool window wholly in the padding: -inf, as torch)
    assert np.array_equal(got[~finite], want[~finite]), f"{where}: {name} infinities differ"
    got, want = got[finite], want[finite]
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-30)
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= RTOL * scale, f"{where}: {name} off by {err:.3g} (largest {scale:.3g})"


def _check(seed: int, index: int) -> None:
    rng = np.random.default_rng([seed, index])
    kind, d, a = _case(rng)
    where = f"seed {seed} case {index}: {kind}{'' if kind[-2:] == '2d' else f' {d}-d'} {a}"
    arrays = _inputs(rng, kind, d, a)
    ours = [sadl.tensor(x, requires_grad=True) for x in arrays]
    theirs = [torch.tensor(x, requires_grad=True) for x in arrays]
    want = _call(torch.nn.functional, kind, d, a, theirs)
    got = _call(functional, kind, d, a, ours)
    _close("forward", got.data, want.detach().numpy(), where)
    g = rng.standard_normal(tuple(want.shape))
    g[~np.isfinite(want.detach().numpy())] = 0.0  # (a window wholly in the padding)
    want.backward(torch.tensor(g))
    got.backward(sadl.tensor(g))
    if _torch_nearest_backward_differs(kind, d, a):
        return  # (torch's backward is not the gradient of its forward there: see below)
    for i, (mine, ref) in enumerate(zip(ours, theirs, strict=True)):
        _close(f"gradient of argument {i}", mine.grad.data, ref.grad.numpy(), where)


def _torch_nearest_backward_differs(kind: str, d: int, a: dict[str, Any]) -> bool:
    """torch's 1-d and 3-d nearest upsampling read the input at the scale_factor's positions
    in the forward, but its backward copies an axis whose size stays or doubles, whatever the
    scale (``torch.autograd.gradcheck`` of its own forward fails there); sadl's gradient is
    the forward's, so only the forward is compared.
    """
    if kind != "interpolate" or a["mode"] != "nearest" or d == 2 or "scale_factor" not in a:
        return False
    out = [int(np.floor(n * s)) for n, s in zip(a["size"], a["scale_factor"], strict=True)]
    return not a.get("recompute_scale_factor") and any(
        o in (n, 2 * n) for n, o in zip(a["size"], out, strict=True)
    )


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel:UserWarning")
@pytest.mark.parametrize("seed", SEEDS)
def test_random_windowed_calls_match_torch(seed: int) -> None:
    for index in range(CASES):
        _check(seed, index)


def test_every_kind_and_dimension_is_drawn() -> None:
    drawn = set()
    for index in range(CASES):
        kind, d, _ = _case(np.random.default_rng([SEEDS[0], index]))
        drawn.add((kind, d))
    want = {(k, d) for k in KINDS[:6] for d in (1, 2, 3)} | {(k, 2) for k in KINDS[6:]}
    assert drawn == want, want - drawn


def test_transposed_conv_with_output_padding_past_the_stride_and_padding() -> None:
    # output_padding at or above the stride (allowed below the dilation) reaches rows the
    # padding crops: sadl once left them to the bias alone (found by the random cases)
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 4, 3, 5)), rng.standard_normal((4, 3, 2, 3)), np.ones(6)
    params = {"stride": (1, 2), "padding": (2, 1), "output_padding": (2, 1), "groups": 2}
    layer = sadl.nn.ConvTranspose2d(4, 6, (2, 3), dilation=(3, 2), **params)
    layer.weight.data[...], layer.bias.data[...] = w, b
    want = torch.nn.functional.conv_transpose2d(
        torch.tensor(x), torch.tensor(w), torch.tensor(b), dilation=(3, 2), **params
    )
    got = layer(sadl.tensor(x)).data  # (the layer's float32 parameters)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
