"""Recurrent kernels: ``lstm`` (peephole, clip, bidirectional), ``gru`` (iOS18
``reset_after``/``input_bias``) and ``rnn``.

Layouts follow the MIL definitions: LSTM gates stacked ``[input, forget, output, cell]``
(PyTorch stacks i, f, cell, o), GRU gates ``[reset, output(new), update]``, one summed
bias per layer. ``direction="reverse"`` consumes the sequence back to front and emits
outputs in processing order; a bidirectional LSTM aligns its backward half with the
input time steps (PyTorch's convention) and concatenates ``[forward, backward]``
features. The input projection of every step is one matmul; only the recurrence loops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import flag, scalar, text


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# Recurrent activations take no parameters, so each uses its defaults: scaled_tanh with
# alpha = beta = 1 is tanh (coremltools' recurrent op tests rely on exactly that).
_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "scaled_tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
    "linear": lambda x: x,
    "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1),
    "sigmoid_hard": lambda x: np.clip(0.2 * x + 0.5, 0, 1),
}


def _activation(name: Any, default: str) -> Callable[[np.ndarray], np.ndarray]:
    key = text(name, default).lower()
    if key not in _ACTIVATIONS:
        raise NebisectError(
            f"recurrent activation {key!r} is not simulated (supported: {sorted(_ACTIVATIONS)})"
        )
    return _ACTIVATIONS[key]


def _project(x: np.ndarray, weight: Any, bias: Any) -> np.ndarray:
    """``x @ W.T (+ b)`` for every time step at once: [s, b, G*H]."""
    out = np.matmul(x, np.asarray(weight).T)
    return out if bias is None else out + np.asarray(bias)


def _emit(steps: list[np.ndarray], output_sequence: Any) -> np.ndarray:
    return np.stack(steps) if flag(output_sequence) else steps[-1][None]


def _lstm_pass(
    xw: np.ndarray, weight_hh: Any, peephole: Any, h: np.ndarray, c: np.ndarray,
    acts: tuple[Callable[[np.ndarray], np.ndarray], ...], clip: float | None,
) -> tuple[list[np.ndarray], np.ndarray]:
    """One direction over pre-projected inputs; returns per-step h and the final c."""
    recurrent, cell_act, act = acts
    rh = np.asarray(weight_hh).T
    hidden = rh.shape[0]
    p_i, p_f, p_o = (np.split(np.asarray(peephole), 3) if peephole is not None else (0, 0, 0))
    outputs = []
    for step in xw:
        gates = step + h @ rh
        i = recurrent(gates[:, :hidden] + c * p_i)
        f = recurrent(gates[:, hidden : 2 * hidden] + c * p_f)
        z = cell_act(gates[:, 3 * hidden :])
        c = f * c + i * z
        if clip is not None:
            c = np.clip(c, -clip, clip)
        o = recurrent(gates[:, 2 * hidden : 3 * hidden] + c * p_o)
        h = o * act(c)
        outputs.append(h)
    return outputs, c


@kernel("lstm")
def lstm(
    ctx: KernelContext,
    x: np.ndarray,
    initial_h: np.ndarray,
    initial_c: np.ndarray,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    peephole: Any = None,
    weight_ih_back: Any = None,
    weight_hh_back: Any = None,
    bias_back: Any = None,
    peephole_back: Any = None,
    direction: Any = "forward",
    output_sequence: Any = False,
    recurrent_activation: Any = "sigmoid",
    cell_activation: Any = "tanh",
    activation: Any = "tanh",
    clip: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    acts = (
        _activation(recurrent_activation, "sigmoid"),
        _activation(cell_activation, "tanh"),
        _activation(activation, "tanh"),
    )
    bound = None if clip is None else scalar(clip, 0.0)
    mode = text(direction, "forward")
    x = np.asarray(x)
    hidden = np.asarray(weight_hh).shape[1]
    h0, c0 = np.asarray(initial_h), np.asarray(initial_c)
    seq = x[::-1] if mode == "reverse" else x
    fwd, c_fwd = _lstm_pass(
        _project(seq, weight_ih, bias), weight_hh, peephole,
        h0[:, :hidden], c0[:, :hidden], acts, bound,
    )
    if mode != "bidirectional":
        return _emit(fwd, output_sequence), fwd[-1], c_fwd
    back, c_back = _lstm_pass(
        _project(x[::-1], weight_ih_back, bias_back), weight_hh_back, peephole_back,
        h0[:, hidden:], c0[:, hidden:], acts, bound,
    )
    if flag(output_sequence):
        out = np.concatenate([np.stack(fwd), np.stack(back[::-1])], axis=-1)
    else:
        out = np.concatenate([fwd[-1], back[-1]], axis=-1)[None]
    return out, np.concatenate([fwd[-1], back[-1]], -1), np.concatenate([c_fwd, c_back], -1)


@kernel("gru")
def gru(
    ctx: KernelContext,
    x: np.ndarray,
    initial_h: np.ndarray,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    direction: Any = "forward",
    output_sequence: Any = False,
    recurrent_activation: Any = "sigmoid",
    activation: Any = "tanh",
    reset_after: Any = False,
    input_bias: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Gates ``[r, o, z]``; ``o = act(W_o x + R_o (r*h) + b)``, or with ``reset_after``
    ``act(W_o x + b_i + r * (R_o h + b_h))`` (PyTorch's GRU)."""
    recurrent = _activation(recurrent_activation, "sigmoid")
    act = _activation(activation, "tanh")
    x = np.asarray(x)
    seq = x[::-1] if text(direction, "forward") == "reverse" else x
    rh = np.asarray(weight_hh).T
    hidden = rh.shape[0]
    xw = _project(seq, weight_ih, input_bias)
    b_h = np.zeros(3 * hidden, dtype=xw.dtype) if bias is None else np.asarray(bias)
    h = np.asarray(initial_h)
    after = flag(reset_after)
    outputs = []
    for step in xw:
        r = recurrent(step[:, :hidden] + h @ rh[:, :hidden] + b_h[:hidden])
        z = recurrent(step[:, 2 * hidden :] + h @ rh[:, 2 * hidden :] + b_h[2 * hidden :])
        if after:
            candidate = step[:, hidden : 2 * hidden] + r * (
                h @ rh[:, hidden : 2 * hidden] + b_h[hidden : 2 * hidden]
            )
        else:
            candidate = step[:, hidden : 2 * hidden] + (r * h) @ rh[:, hidden : 2 * hidden]
            candidate = candidate + b_h[hidden : 2 * hidden]
        h = (1 - z) * act(candidate) + z * h
        outputs.append(h)
    return _emit(outputs, output_sequence), outputs[-1]


@kernel("rnn")
def rnn(
    ctx: KernelContext,
    x: np.ndarray,
    initial_h: np.ndarray,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    direction: Any = "forward",
    output_sequence: Any = False,
    activation: Any = "tanh",
) -> tuple[np.ndarray, np.ndarray]:
    act = _activation(activation, "tanh")
    x = np.asarray(x)
    seq = x[::-1] if text(direction, "forward") == "reverse" else x
    rh = np.asarray(weight_hh).T
    h = np.asarray(initial_h)
    outputs = []
    for step in _project(seq, weight_ih, bias):
        h = act(step + h @ rh)
        outputs.append(h)
    return _emit(outputs, output_sequence), outputs[-1]
