"""Recurrent ops: one layer, one direction, a whole sequence per op (Elman RNN, LSTM, GRU).

Each op takes a time-major input ``x`` of shape (T, B, I), the initial state(s) (B, H) (None:
zeros) and torch's weights, gates stacked in torch's order: ``w_ih`` (G*H, I), ``w_hh`` (G*H, H),
``b_ih``/``b_hh`` (G*H,), with G = 1 (RNN), 4 (LSTM: i, f, g, o) or 3 (GRU: r, z, n). One graph
node covers all T steps, instead of a dozen nodes per step:

* the forward projects every input step at once (one GEMM) and then runs the recurrence, one
  small GEMM and a few in-place NumPy calls per step (the gates of all kinds share ONE tanh
  call: sigmoid(x) = tanh(x / 2) / 2 + 1/2);
* the output keeps, for every step, what the backward needs: the hidden state (RNN), the
  hidden and cell states and the gates i, f, g, o (LSTM, (6, T, B, H)), the hidden state,
  r, z, n and h W_hn + b_hn (GRU, (5, T, B, H)). The layers take ``out[0]`` (and ``out[1]``).
  The backward therefore recomputes nothing: it computes everything that does not depend on
  the recurrence for all steps at once, walks back through time with one GEMM and a few
  products per step, and gets the weight gradients as large GEMMs over all steps.

The backward is written in NumPy vocabulary, so under ``create_graph=True`` the same rule runs
on Tensors and records an ordinary graph: second derivatives (gradgradcheck) need no extra code.
Because that graph reads the kept gates from the output, a second derivative sends gradient
INTO the gate part of the output too; the rules take it (the ``direct`` terms), and on a plain
first-order backward, where that part is all zeros, they skip it.
With ``reverse=True`` the op runs from the last step to the first (the backward direction of a
bidirectional layer); its output stays aligned with the input's time axis, as in torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import array_module, matmul
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, const, shape_of

__all__ = ["rnn_sequence", "lstm_sequence", "gru_sequence"]

_NONLINEARITIES = ("tanh", "relu")


# ------------------------------------------------------------------------------- checks


def _check(fn, gates, x, states, w_ih, w_hh, b_ih, b_hh):
    """(T, B, I, H) after checking every shape against torch's layout; clear errors."""
    check_float(fn, "input", x)
    if np.ndim(x) != 3:
        raise ValueError(
            f"{fn}: input must have shape (time, batch, input_size), got {shape_of(x)}"
        )
    T, B, n_in = shape_of(x)
    check_float(fn, "w_hh", w_hh)
    if np.ndim(w_hh) != 2 or shape_of(w_hh)[0] != gates * shape_of(w_hh)[1]:
        raise ValueError(
            f"{fn}: w_hh must have shape ({gates} * hidden_size, hidden_size), got {shape_of(w_hh)}"
        )
    H = shape_of(w_hh)[1]
    expected = {"w_ih": (gates * H, n_in), "b_ih": (gates * H,), "b_hh": (gates * H,)}
    for name, value in (("w_ih", w_ih), ("b_ih", b_ih), ("b_hh", b_hh)):
        if value is None and name != "w_ih":
            continue
        if value is None or shape_of(value) != expected[name]:
            got = "None" if value is None else shape_of(value)
            raise ValueError(
                f"{fn}: {name} has shape {got}, expected {expected[name]} ({gates} gates of "
                f"hidden size {H}, input size {n_in})"
            )
    for name, value in states:
        if value is not None and shape_of(value) != (B, H):
            raise ValueError(
                f"{fn}: {name} has shape {shape_of(value)}, expected ({B}, {H}) (batch, "
                "hidden_size)"
            )
    return T, B, n_in, H


def _steps(T, reverse):
    return range(T - 1, -1, -1) if reverse else range(T)


def _state(value, B, H, like):
    """An initial state, or zeros (a fresh array: the forward never writes into an input)."""
    if value is None:
        return array_module(like).zeros((B, H), dtype=like.dtype)
    return value


def _project(x, w_ih, b_ih, b_hh, fold_hidden_bias=True):
    """The input projection ``x @ w_ih.T`` (+ b_ih, + b_hh when it can be folded in) of all
    steps: one GEMM.
    """
    T, B, n_in = x.shape
    pre = matmul(x.reshape(T * B, n_in), w_ih.T).reshape(T, B, w_ih.shape[0])
    if b_ih is not None:
        pre += b_ih
    if fold_hidden_bias and b_hh is not None:
        pre += b_hh
    return pre


def _gate_constants(pattern, H, dtype, like):
    """(scale, shift) for gates activated by ONE tanh call: ``tanh(pre * scale) * scale +
    shift`` is sigmoid(x) = tanh(x / 2) / 2 + 1/2 for an 's' gate and tanh(x) for a 't' gate.
    """
    xp = array_module(like)
    per_gate = {"s": (0.5, 0.5), "t": (1.0, 0.0)}
    return tuple(
        xp.concatenate([xp.full(H, per_gate[kind][k], dtype=dtype) for kind in pattern])
        for k in range(2)
    )


def _activate_(gates, scale, shift):
    """Activate stacked gate pre-activations in place (see :func:`_gate_constants`)."""
    gates *= scale
    np.tanh(gates, out=gates)
    gates *= scale
    gates += shift
    return gates


def _sigmoid(a):
    return 0.5 * np.tanh(0.5 * a) + 0.5


def _transposed(w):
    """w.T as a contiguous array (a GEMM per step reads it faster than the strided view)."""
    return array_module(w).ascontiguousarray(w.T)


def _previous(states, first, reverse, like):
    """The state each step starts from, (T, B, H): ``first`` then the outputs, shifted by one
    step in the direction of processing (arrays and Tensors).
    """
    B, H = shape_of(states)[1:]
    if first is None:
        first = array_module(const(like)).zeros((1, B, H), dtype=const(like).dtype)
    else:
        first = np.reshape(first, (1, B, H))
    if reverse:
        return np.concatenate([states[1:], first], axis=0)
    return np.concatenate([first, states[:-1]], axis=0)


def _rows(a):
    """A (T, B, K) array as (T * B, K)."""
    shape = shape_of(a)
    return np.reshape(a, (shape[0] * shape[1], shape[2]))


def _input_grads(dpre, x, w_ih, b_ih, needs, index):
    """The gradients of x, w_ih and b_ih from that of the input projection (all steps)."""
    dx = np.reshape(matmul(_rows(dpre), w_ih), shape_of(x)) if needs[0] else None
    dw = matmul(_rows(dpre).T, _rows(x)) if needs[index] else None
    db = np.sum(_rows(dpre), axis=0) if b_ih is not None and needs[index + 2] else None
    return dx, dw, db


def _hidden_grads(dgh, h_prev, b_hh, needs, index):
    """The gradients of w_hh and b_hh from that of the hidden projection (all steps)."""
    dw = matmul(_rows(dgh).T, _rows(h_prev)) if needs[index + 1] else None
    db = np.sum(_rows(dgh), axis=0) if b_hh is not None and needs[index + 3] else None
    return dw, db


def _walk_back(T, reverse):
    """The steps of the backward pass: the forward's steps in the opposite order."""
    return _steps(T, not reverse)


def _in_time_order(per_step, reverse):
    """Stack per-step arrays collected while walking back into time order (T, ...)."""
    ordered = per_step if reverse else per_step[::-1]
    return np.stack(ordered, axis=0)


# ---------------------------------------------------------------------------------- RNN


def _check_nonlinearity(nonlinearity):
    if nonlinearity not in _NONLINEARITIES:
        raise ValueError(
            f"rnn_sequence: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
        )


def _rnn_sequence(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, *, nonlinearity="tanh", reverse=False):
    """Elman RNN over a sequence: h_t = act(x_t w_ih^T + b_ih + h_{t-1} w_hh^T + b_hh).

    Returns every hidden state, (T, B, H).
    """
    _check_nonlinearity(nonlinearity)
    T, B, _, H = _check("rnn_sequence", 1, x, (("h0", h0),), w_ih, w_hh, b_ih, b_hh)
    pre = _project(x, w_ih, b_ih, b_hh)
    h = _state(h0, B, H, x)
    whT = _transposed(w_hh)
    for t in _steps(T, reverse):
        ht = pre[t]
        ht += matmul(h, whT)
        if nonlinearity == "tanh":
            np.tanh(ht, out=ht)
        else:
            np.maximum(ht, 0, out=ht)
        h = ht
    return pre  # every step's pre-activation was overwritten by its hidden state


def _rnn_grad(g, out, x, h0, w_ih, w_hh, b_ih=None, b_hh=None, *, needs_input_grad, **params):
    reverse = params.get("reverse", False)
    T = shape_of(x)[0]
    if T == 0:  # an empty sequence: nothing flows anywhere
        return (None,) * len(needs_input_grad)
    if params.get("nonlinearity", "tanh") == "tanh":
        slope = 1.0 - out * out
    else:
        slope = (const(out) > 0).astype(const(out).dtype)
    needs = (*needs_input_grad, False, False)[:6]
    da_steps: list[Any] = []
    dh = None
    for t in _walk_back(T, reverse):
        dh_t = g[t] if dh is None else g[t] + dh
        da = dh_t * slope[t]
        da_steps.append(da)
        dh = matmul(da, w_hh)
    da_all = _in_time_order(da_steps, reverse)
    h_prev = _previous(out, h0, reverse, x)
    dx, dw_ih, db_ih = _input_grads(da_all, x, w_ih, b_ih, needs, 2)
    dw_hh, db_hh = _hidden_grads(da_all, h_prev, b_hh, needs, 2)
    grads = (dx, dh if needs[1] else None, dw_ih, dw_hh, db_ih, db_hh)
    return grads[: len(needs_input_grad)]


rnn_sequence = OpDef(
    "rnn_sequence",
    _rnn_sequence,
    _rnn_grad,
    examples=(
        Example((4, 2, 3), (2, 5), (5, 3), (5, 5), (5,), (5,)),
        Example((3, 2, 3), None, (4, 3), (4, 4), None, (4,), reverse=True),
        Example((3, 2, 2), (2, 3), (3, 2), (3, 3), (3,), (3,), nonlinearity="relu"),
    ),
)


# --------------------------------------------------------------------------------- LSTM


def _lstm_sequence(x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, *, reverse=False):
    """LSTM over a sequence (torch's gates i, f, g, o).

    Returns (6, T, B, H): every step's hidden state ``[0]``, cell state ``[1]`` and activated
    gates i, f, g, o ``[2:6]`` (kept for the backward, which then recomputes nothing).
    """
    T, B, _, H = _check("lstm_sequence", 4, x, (("h0", h0), ("c0", c0)), w_ih, w_hh, b_ih, b_hh)
    xp = array_module(x)
    pre = _project(x, w_ih, b_ih, b_hh)
    scale, shift = _gate_constants("ssts", H, pre.dtype, pre)
    out = xp.empty((6, T, B, H), dtype=pre.dtype)
    h, c = _state(h0, B, H, x), _state(c0, B, H, x)
    whT = _transposed(w_hh)
    # The gates are computed in one contiguous buffer (NumPy is several times slower on
    # strided views of this size) and then stored with one copy.
    gates = xp.empty((B, 4 * H), dtype=pre.dtype)
    i, f, g, o = (gates[:, k * H : (k + 1) * H] for k in range(4))
    by_gate = gates.reshape(B, 4, H).transpose(1, 0, 2)
    ig = xp.empty((B, H), dtype=pre.dtype)
    for t in _steps(T, reverse):
        matmul(h, whT, out=gates)
        gates += pre[t]
        _activate_(gates, scale, shift)
        out[2:, t] = by_gate
        h_t, c_t = out[0, t], out[1, t]
        np.multiply(f, c, out=c_t)
        np.multiply(i, g, out=ig)
        c_t += ig
        np.tanh(c_t, out=h_t)
        h_t *= o
        h, c = h_t, c_t
    return out


def _lstm_grad(
    g, out, x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, *, needs_input_grad, reverse=False
):
    T = shape_of(x)[0]
    if T == 0:  # an empty sequence: nothing flows anywhere
        return (None,) * len(needs_input_grad)
    needs = (*needs_input_grad, False, False)[:7]
    hs, cs, i, f, gg, o = (out[k] for k in range(6))
    h_prev = _previous(hs, h0, reverse, x)
    c_prev = _previous(cs, c0, reverse, x)
    # Each gate's derivative from its value: s (1 - s) for i, f, o, 1 - g^2 for g.
    slopes = (i * (1.0 - i), f * (1.0 - f), 1.0 - gg * gg, o * (1.0 - o))
    # Everything that does not depend on the recurrence, for all steps at once:
    # dc_t = dc_{t+1} f_{t+1} + g_c + dh_t * o tanh'(c_t), and the gates' pre-activations get
    # ((dc, dc, dc, dh) * (g, c_prev, i, tanh(c)) + the gates' own cotangent) * their slope.
    tc = np.tanh(cs)
    through_h = o * (1.0 - tc * tc)
    factor = np.concatenate([a * s for a, s in zip((gg, c_prev, i, tc), slopes)], axis=-1)
    # The gates' cotangent is zero unless something used them (a higher-order gradient does).
    g_gates = g[2:]
    direct = None
    if not _all_zero(g_gates):
        direct = np.concatenate([g_gates[k] * slopes[k] for k in range(4)], axis=-1)
    dpre_steps: list[Any] = []
    dh = dc = None
    for t in _walk_back(T, reverse):
        dh_t = g[0, t] if dh is None else g[0, t] + dh
        dc_t = g[1, t] + dh_t * through_h[t]
        if dc is not None:
            dc_t = dc_t + dc
        dpre = np.concatenate([dc_t, dc_t, dc_t, dh_t], axis=-1) * factor[t]
        if direct is not None:
            dpre = dpre + direct[t]
        dpre_steps.append(dpre)
        dh = matmul(dpre, w_hh)
        dc = dc_t * f[t]
    dpre_all = _in_time_order(dpre_steps, reverse)
    dx, dw_ih, db_ih = _input_grads(dpre_all, x, w_ih, b_ih, needs, 3)
    dw_hh, db_hh = _hidden_grads(dpre_all, h_prev, b_hh, needs, 3)
    grads = (
        dx,
        dh if needs[1] else None,
        dc if needs[2] else None,
        dw_ih,
        dw_hh,
        db_ih,
        db_hh,
    )
    return grads[: len(needs_input_grad)]


def _all_zero(a):
    """True for an array of zeros; never for a Tensor (a graph to differentiate through)."""
    return not isinstance(a, Tensor) and not a.any()


lstm_sequence = OpDef(
    "lstm_sequence",
    _lstm_sequence,
    _lstm_grad,
    examples=(
        Example((3, 2, 3), (2, 2), (2, 2), (8, 3), (8, 2), (8,), (8,)),
        Example((4, 1, 2), None, None, (12, 2), (12, 3), (12,), None, reverse=True),
        Example((2, 2, 2), (2, 2), None, (8, 2), (8, 2)),
    ),
)


# ---------------------------------------------------------------------------------- GRU


def _sigmoid_(a):
    """In-place logistic sigmoid, tanh(x / 2) / 2 + 1/2 (no overflow for any x)."""
    a *= 0.5
    np.tanh(a, out=a)
    a *= 0.5
    a += 0.5
    return a


def _gru_sequence(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, *, reverse=False):
    """GRU over a sequence (torch's gates r, z, n; n = tanh(x W_in + b_in + r (h W_hn + b_hn))).

    Returns (5, T, B, H): every step's hidden state ``[0]``, and r, z, n and h W_hn + b_hn
    ``[1:5]`` (kept for the backward, which then recomputes nothing).
    """
    T, B, _, H = _check("gru_sequence", 3, x, (("h0", h0),), w_ih, w_hh, b_ih, b_hh)
    xp = array_module(x)
    gi = _project(x, w_ih, b_ih, None, fold_hidden_bias=False)
    if b_hh is not None:  # the r and z parts of b_hh can be folded in, not the n part
        gi[..., : 2 * H] += b_hh[: 2 * H]
    out = xp.empty((5, T, B, H), dtype=gi.dtype)
    h = _state(h0, B, H, x)
    whT = _transposed(w_hh)
    gh = xp.empty((B, 3 * H), dtype=gi.dtype)  # h W_hr, h W_hz, h W_hn
    for t in _steps(T, reverse):
        matmul(h, whT, out=gh)
        h_t, r, z, n, hn = (out[k, t] for k in range(5))
        _sigmoid_(np.add(gh[:, :H], gi[t, :, :H], out=r))
        _sigmoid_(np.add(gh[:, H : 2 * H], gi[t, :, H : 2 * H], out=z))
        if b_hh is not None:
            np.add(gh[:, 2 * H :], b_hh[2 * H :], out=hn)
        else:
            hn[...] = gh[:, 2 * H :]
        np.multiply(r, hn, out=n)
        n += gi[t, :, 2 * H :]
        np.tanh(n, out=n)
        np.subtract(h, n, out=h_t)  # h' = n + z (h - n)
        h_t *= z
        h_t += n
        h = h_t
    return out


def _gru_grad(g, out, x, h0, w_ih, w_hh, b_ih=None, b_hh=None, *, needs_input_grad, reverse=False):
    T = shape_of(x)[0]
    if T == 0:  # an empty sequence: nothing flows anywhere
        return (None,) * len(needs_input_grad)
    needs = (*needs_input_grad, False, False)[:6]
    hs, r, z, n, hn = (out[k] for k in range(5))
    h_prev = _previous(hs, h0, reverse, x)
    # Independent of the recurrence, for all steps at once: from dh, d n_pre = dh (1 - z) n',
    # d z_pre = dh (h_prev - n) z', d r_pre = d n_pre hn r', d hn = d n_pre r; dh keeps dh z.
    n_slope, r_slope, z_slope = 1.0 - n * n, r * (1.0 - r), z * (1.0 - z)
    by_n = (1.0 - z) * n_slope
    by_z = (h_prev - n) * z_slope
    by_r = hn * r_slope
    # The cotangents of r, z, n and hn themselves are zero unless a higher-order gradient
    # used them; they enter at the matching point of the step.
    direct = None
    if not _all_zero(g[1:]):
        direct = (g[3] * n_slope, g[1] * r_slope, g[2] * z_slope, g[4])  # n, r, z, hn
    dgh_steps: list[Any] = []
    dn_steps: list[Any] = []
    dh = None
    for t in _walk_back(T, reverse):
        dh_t = g[0, t] if dh is None else g[0, t] + dh
        dn = dh_t * by_n[t]
        dz = dh_t * by_z[t]
        if direct is not None:
            dn = dn + direct[0][t]
            dz = dz + direct[2][t]
        dr = dn * by_r[t]
        dhn = dn * r[t]
        if direct is not None:
            dr = dr + direct[1][t]
            dhn = dhn + direct[3][t]
        dgh = np.concatenate([dr, dz, dhn], axis=-1)
        dgh_steps.append(dgh)
        dn_steps.append(dn)
        dh = dh_t * z[t] + matmul(dgh, w_hh)
    dgh_all = _in_time_order(dgh_steps, reverse)
    H = shape_of(w_hh)[1]
    dgi_all = np.concatenate([dgh_all[..., : 2 * H], _in_time_order(dn_steps, reverse)], axis=-1)
    dx, dw_ih, db_ih = _input_grads(dgi_all, x, w_ih, b_ih, needs, 2)
    dw_hh, db_hh = _hidden_grads(dgh_all, h_prev, b_hh, needs, 2)
    grads = (dx, dh if needs[1] else None, dw_ih, dw_hh, db_ih, db_hh)
    return grads[: len(needs_input_grad)]


gru_sequence = OpDef(
    "gru_sequence",
    _gru_sequence,
    _gru_grad,
    examples=(
        Example((3, 2, 3), (2, 2), (6, 3), (6, 2), (6,), (6,)),
        Example((4, 1, 2), None, (9, 2), (9, 3), None, (9,), reverse=True),
        Example((2, 2, 2), (2, 2), (6, 2), (6, 2)),
    ),
)

INTERNAL_OPS: tuple[OpDef, ...] = ()
