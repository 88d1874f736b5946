"""Recurrent layers: RNN, LSTM, GRU and their single-step cells, as torch.nn has them.

Parameter names, shapes and gate order are torch's, so a state dict moves both ways:
``weight_ih_l{k}`` (G*H, in), ``weight_hh_l{k}`` (G*H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}``
(G*H,), with the suffix ``_reverse`` for the backward direction of a bidirectional layer, and
gates stacked i, f, g, o (LSTM, G = 4) or r, z, n (GRU, G = 3). The cells use ``weight_ih``,
``weight_hh``, ``bias_ih``, ``bias_hh``. Every parameter starts U(-1/sqrt(H), 1/sqrt(H)).

Each (layer, direction) is ONE op over the whole sequence (see
:mod:`sadl_layers.ops.recurrent`); a bidirectional layer concatenates its two directions'
outputs on the feature axis, and ``dropout`` (training only) drops between layers, never after
the last one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sadl import Tensor

from sadl_layers.modules._base import (
    Layer,
    as_tensor,
    check_count,
    init_uniform,
    param_dtype,
    resolve_generator,
)
from sadl_layers.modules.dense import Dropout
from sadl_layers.ops import recurrent as _ops

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _check_dropout(name: str, p: Any) -> float:
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout must be a probability in [0, 1], got {p!r}")
    return float(p)


def _check_nonlinearity(name: str, nonlinearity: Any) -> None:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{name}: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")


class _Recurrent(Layer):
    """What RNN, LSTM and GRU share: parameters, shapes, layers, directions, dropout; the
    constructor is LSTM's and GRU's (RNN's adds ``nonlinearity``).
    """

    kind: str = "RNN"
    nonlinearity = "tanh"  #: RNN's may be "relu"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size = check_count(name, "input_size", input_size)
        self.hidden_size = check_count(name, "hidden_size", hidden_size)
        self.num_layers = check_count(name, "num_layers", num_layers)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = _check_dropout(name, dropout)
        self.bidirectional = bool(bidirectional)
        gen = resolve_generator(rng)
        dtype = param_dtype(dtype)
        # Between layers only; it draws from ``rng`` when one is given (as the init does).
        self.inter_layer_dropout = Dropout(self.dropout, rng=None if rng is None else gen)
        H, G = self.hidden_size, _GATES[self.kind]
        bound = 1.0 / math.sqrt(H)
        for layer in range(self.num_layers):
            size_in = self.input_size if layer == 0 else H * self.num_directions
            for suffix in self._suffixes():
                key = f"l{layer}{suffix}"
                setattr(self, f"weight_ih_{key}", init_uniform(gen, bound, (G * H, size_in), dtype))
                setattr(self, f"weight_hh_{key}", init_uniform(gen, bound, (G * H, H), dtype))
                if self.bias:
                    setattr(self, f"bias_ih_{key}", init_uniform(gen, bound, (G * H,), dtype))
                    setattr(self, f"bias_hh_{key}", init_uniform(gen, bound, (G * H,), dtype))

    @property
    def num_directions(self) -> int:
        """2 when bidirectional, else 1."""
        return 2 if self.bidirectional else 1

    def _suffixes(self) -> tuple[str, ...]:
        return ("", "_reverse") if self.bidirectional else ("",)

    def _weights(self, layer: int, suffix: str) -> tuple[Any, Any, Any, Any]:
        key = f"l{layer}{suffix}"
        bias_ih = getattr(self, f"bias_ih_{key}") if self.bias else None
        bias_hh = getattr(self, f"bias_hh_{key}") if self.bias else None
        return (
            getattr(self, f"weight_ih_{key}"),
            getattr(self, f"weight_hh_{key}"),
            bias_ih,
            bias_hh,
        )

    # ------------------------------------------------------------------ input and states
    def _time_major(self, x: Tensor) -> tuple[Tensor, bool]:
        """The input as (T, B, I), and whether it was unbatched (T, I)."""
        size = self.input_size
        layout = f"(batch, time, {size})" if self.batch_first else f"(time, batch, {size})"
        if x.ndim not in (2, 3) or x.shape[-1] != size:
            raise self.fail(
                f"input has shape {x.shape}, expected {layout} or (time, {size}) unbatched"
            )
        if x.ndim == 2:
            return x.reshape(x.shape[0], 1, x.shape[1]), True
        if self.batch_first:
            return x.transpose(1, 0, 2), False
        return x, False

    def _initial(self, hx: Any, name: str, batch: int, unbatched: bool) -> list[Any]:
        """One (B, H) state per (layer, direction), or Nones."""
        count = self.num_layers * self.num_directions
        if hx is None:
            return [None] * count
        h = as_tensor(hx)
        expected = (count, self.hidden_size) if unbatched else (count, batch, self.hidden_size)
        if h.shape != expected:
            raise self.fail(
                f"{name} has shape {h.shape}, expected {expected} (num_layers * num_directions, "
                f"{'' if unbatched else 'batch, '}hidden_size)"
            )
        if unbatched:
            h = h.reshape(count, 1, self.hidden_size)
        return [h[k] for k in range(count)]

    def _output(self, y: Tensor, unbatched: bool) -> Tensor:
        if unbatched:
            return y.reshape(y.shape[0], y.shape[2])
        return y.transpose(1, 0, 2) if self.batch_first else y

    def _final(self, states: list[Tensor], unbatched: bool) -> Tensor:
        out: Any = np.stack(states, axis=0)  # (L * D, B, H), a Tensor
        final: Tensor = out.reshape(out.shape[0], out.shape[2]) if unbatched else out
        return final

    # ------------------------------------------------------------------ the layers
    def _run(self, x: Tensor, initial: list[list[Any]]) -> tuple[Tensor, list[list[Tensor]]]:
        """Every layer and direction over ``x`` (T, B, I); the final states per kind of state."""
        T = x.shape[0]
        if T == 0:
            raise self.fail("input has no time steps (its time axis has length 0)")
        finals: list[list[Tensor]] = [[] for _ in initial]
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(self._suffixes()):
                k = layer * self.num_directions + d
                reverse = d == 1
                states = [init[k] for init in initial]
                y, last = self._direction(x, states, self._weights(layer, suffix), reverse)
                outputs.append(y)
                for kind, state in zip(finals, last):
                    kind.append(state)
            both: Any = outputs[0] if len(outputs) == 1 else np.concatenate(outputs, axis=-1)
            x = both
            if layer < self.num_layers - 1:
                x = self.inter_layer_dropout(x)
        return x, finals

    def _direction(
        self, x: Tensor, states: list[Any], weights: tuple[Any, ...], reverse: bool
    ) -> tuple[Tensor, list[Tensor]]:
        raise NotImplementedError

    def extra_repr(self) -> str:
        """Sizes and options that differ from the defaults."""
        parts = [f"{self.input_size}, {self.hidden_size}"]
        if self.num_layers != 1:
            parts.append(f"num_layers={self.num_layers}")
        if self.kind == "RNN" and self.nonlinearity != "tanh":
            parts.append(f"nonlinearity={self.nonlinearity!r}")
        for name, default in (("bias", True), ("batch_first", False), ("bidirectional", False)):
            if getattr(self, name) != default:
                parts.append(f"{name}={getattr(self, name)}")
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        return ", ".join(parts)


class _OneState(_Recurrent):
    """A recurrent layer with one state per layer and direction (RNN, GRU; LSTM has two)."""

    def forward(self, x: Any, hx: Any = None) -> tuple[Tensor, Tensor]:
        """``(output, h_n)`` for ``x`` (T, B, input_size) and initial states ``hx`` (L*D, B, H)."""
        seq, unbatched = self._time_major(as_tensor(x))
        initial = [self._initial(hx, "hx", seq.shape[1], unbatched)]
        y, finals = self._run(seq, initial)
        return self._output(y, unbatched), self._final(finals[0], unbatched)


def _last(y: Tensor, reverse: bool) -> Tensor:
    """The state after the last processed step: the first time step when running backwards."""
    return y[0] if reverse else y[y.shape[0] - 1]


class RNN(_OneState):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)``; ``rnn(x, h0=None)`` returns
    ``(output, h_n)``: output (T, B, D * H) (batch first: (B, T, D * H)), h_n (L * D, B, H).
    """

    kind = "RNN"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        _check_nonlinearity(type(self).__name__, nonlinearity)
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            rng=rng,
            dtype=dtype,
        )
        self.nonlinearity = nonlinearity

    def _direction(
        self, x: Tensor, states: list[Any], weights: tuple[Any, ...], reverse: bool
    ) -> tuple[Tensor, list[Tensor]]:
        y: Tensor = self.call_op(
            _ops.rnn_sequence,
            x,
            states[0],
            *weights,
            nonlinearity=self.nonlinearity,
            reverse=reverse,
        )
        return y, [_last(y, reverse)]


class GRU(_OneState):
    """Gated recurrent unit, torch's gates r, z, n and equations.

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)``; ``gru(x, h0=None)`` returns ``(output, h_n)`` as :class:`RNN`.
    """

    kind = "GRU"

    def _direction(
        self, x: Tensor, states: list[Any], weights: tuple[Any, ...], reverse: bool
    ) -> tuple[Tensor, list[Tensor]]:
        out: Tensor = self.call_op(_ops.gru_sequence, x, states[0], *weights, reverse=reverse)
        return out[0], [_last(out[0], reverse)]


class LSTM(_Recurrent):
    """Long short-term memory, torch's gates i, f, g, o and equations.

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)``; ``lstm(x, (h0, c0)=None)`` returns ``(output, (h_n, c_n))``:
    output (T, B, D * H) (batch first: (B, T, D * H)), h_n and c_n (L * D, B, H).
    """

    kind = "LSTM"

    def _direction(
        self, x: Tensor, states: list[Any], weights: tuple[Any, ...], reverse: bool
    ) -> tuple[Tensor, list[Tensor]]:
        out: Tensor = self.call_op(
            _ops.lstm_sequence, x, states[0], states[1], *weights, reverse=reverse
        )
        h, c = out[0], out[1]
        return h, [_last(h, reverse), _last(c, reverse)]

    def forward(self, x: Any, hx: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """``(output, (h_n, c_n))`` for ``x`` (T, B, input_size) and ``hx = (h0, c0)``."""
        seq, unbatched = self._time_major(as_tensor(x))
        if hx is not None and not (isinstance(hx, tuple | list) and len(hx) == 2):
            raise self.fail(
                "hx must be a pair (h0, c0) of (num_layers * num_directions, batch, "
                "hidden_size) states"
            )
        h0, c0 = (None, None) if hx is None else hx
        B = seq.shape[1]
        initial = [self._initial(h0, "h0", B, unbatched), self._initial(c0, "c0", B, unbatched)]
        y, finals = self._run(seq, initial)
        return self._output(y, unbatched), (
            self._final(finals[0], unbatched),
            self._final(finals[1], unbatched),
        )


# ------------------------------------------------------------------------------- cells


class _Cell(Layer):
    """One step of a recurrent layer: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``;
    the constructor is LSTMCell's and GRUCell's (RNNCell's adds ``nonlinearity``).
    """

    kind: str = "RNN"
    nonlinearity = "tanh"  #: RNNCell's may be "relu"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size = check_count(name, "input_size", input_size)
        self.hidden_size = check_count(name, "hidden_size", hidden_size)
        self.bias = bool(bias)
        gen = resolve_generator(rng)
        dtype = param_dtype(dtype)
        H, G = self.hidden_size, _GATES[self.kind]
        bound = 1.0 / math.sqrt(H)
        self.weight_ih = init_uniform(gen, bound, (G * H, self.input_size), dtype)
        self.weight_hh = init_uniform(gen, bound, (G * H, H), dtype)
        self.bias_ih = init_uniform(gen, bound, (G * H,), dtype) if self.bias else None
        self.bias_hh = init_uniform(gen, bound, (G * H,), dtype) if self.bias else None

    def _step_input(self, x: Tensor) -> tuple[Tensor, bool]:
        """``x`` as a one-step sequence (1, B, I), and whether it was unbatched (I,)."""
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise self.fail(
                f"input has shape {x.shape}, expected (batch, {self.input_size}) or "
                f"({self.input_size},)"
            )
        return x.reshape(1, -1, self.input_size), x.ndim == 1

    def _state(self, h: Any, name: str, batch: int, unbatched: bool) -> Any:
        if h is None:
            return None
        h = as_tensor(h)
        expected = (self.hidden_size,) if unbatched else (batch, self.hidden_size)
        if h.shape != expected:
            raise self.fail(f"{name} has shape {h.shape}, expected {expected}")
        return h.reshape(batch, self.hidden_size)

    def _weights(self) -> tuple[Any, ...]:
        return self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh

    def _result(self, h: Tensor, unbatched: bool) -> Tensor:
        return h.reshape(self.hidden_size) if unbatched else h

    def extra_repr(self) -> str:
        """Sizes and options."""
        extra = "" if self.bias else ", bias=False"
        if self.kind == "RNN" and self.nonlinearity != "tanh":
            extra += f", nonlinearity={self.nonlinearity!r}"
        return f"{self.input_size}, {self.hidden_size}{extra}"


class RNNCell(_Cell):
    """One Elman RNN step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    kind = "RNN"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        _check_nonlinearity(type(self).__name__, nonlinearity)
        super().__init__(input_size, hidden_size, bias, rng=rng, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, x: Any, hx: Any = None) -> Tensor:
        """The next hidden state for input ``x`` (B, I) and state ``hx`` (B, H) (None: zeros)."""
        seq, unbatched = self._step_input(as_tensor(x))
        h0 = self._state(hx, "hx", seq.shape[1], unbatched)
        y: Tensor = self.call_op(
            _ops.rnn_sequence, seq, h0, *self._weights(), nonlinearity=self.nonlinearity
        )
        return self._result(y[0], unbatched)


class GRUCell(_Cell):
    """One GRU step (torch's gates r, z, n)."""

    kind = "GRU"

    def forward(self, x: Any, hx: Any = None) -> Tensor:
        """The next hidden state for input ``x`` (B, I) and state ``hx`` (B, H) (None: zeros)."""
        seq, unbatched = self._step_input(as_tensor(x))
        h0 = self._state(hx, "hx", seq.shape[1], unbatched)
        out: Tensor = self.call_op(_ops.gru_sequence, seq, h0, *self._weights())
        return self._result(out[0, 0], unbatched)


class LSTMCell(_Cell):
    """One LSTM step (torch's gates i, f, g, o): ``(h', c') = cell(x, (h, c))``."""

    kind = "LSTM"

    def forward(self, x: Any, hx: Any = None) -> tuple[Tensor, Tensor]:
        """The next ``(h, c)`` for input ``x`` (B, I) and ``hx = (h, c)`` (None: zeros)."""
        seq, unbatched = self._step_input(as_tensor(x))
        if hx is not None and not (isinstance(hx, tuple | list) and len(hx) == 2):
            raise self.fail("hx must be a pair (h, c) of (batch, hidden_size) states")
        h, c = (None, None) if hx is None else hx
        B = seq.shape[1]
        out: Tensor = self.call_op(
            _ops.lstm_sequence,
            seq,
            self._state(h, "h", B, unbatched),
            self._state(c, "c", B, unbatched),
            *self._weights(),
        )
        return self._result(out[0, 0], unbatched), self._result(out[1, 0], unbatched)
