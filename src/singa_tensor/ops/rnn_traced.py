"""The recurrent layers and cells as ONNX sees them: nn.RNN/LSTM/GRU and nn.RNNCell/LSTMCell/
GRUCell run their steps inside one traced op each, so that an export writes ONNX RNN/LSTM/GRU
nodes instead of the unrolled steps (ops/rnn.py holds the kernels those steps run).

A cell is a one-step ONNX node: an initial state the caller leaves out is left out of the node
too, and ONNX's zeros then take the batch of the input, so the graph runs at any batch.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor import nn
    >>> m = st.onnx.export(nn.GRUCell(3, 2), st.randn(4, 3), None)
    >>> [n.op_type for n in m.graph.node if n.op_type in ("GRU", "Squeeze")]
    ['GRU', 'Squeeze']
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._registry import OpSpec, register, traced

__all__: list[str] = []


@register
class Recurrent(OpSpec):
    """nn.RNN/LSTM/GRU on a padded (not packed) batch, traced as one op so that ONNX export
    writes one LSTM/GRU/RNN node per layer instead of the unrolled steps."""

    name = "_recurrent"  # internal: reached through nn.RNN/LSTM/GRU
    onnx = "LSTM"  # or GRU, RNN: by mode
    composite = True


@traced("_recurrent")
def recurrent(mode: str, input: Tensor, weights: list, h0, c0, bidirectional: bool,
              batch_first: bool, run):
    """Run run() (the layer's unrolled steps) as one traced op; returns (output, h_n[, c_n]).

    weights holds (w_ih, w_hh, b_ih, b_hh) per layer and direction, h0/c0 the initial states
    of shape (layers * directions, batch, hidden) or None for zeros."""
    return run()


Recurrent.fn = staticmethod(recurrent)


@register
class RecurrentCell(OpSpec):
    """nn.RNNCell/LSTMCell/GRUCell: one step traced as one op, so that ONNX export writes a
    one-step RNN/LSTM/GRU node (whose left-out initial state is zeros at any batch)."""

    name = "_recurrent_cell"  # internal: reached through the nn cells
    onnx = "LSTM"  # or GRU, RNN: by mode
    composite = True


@traced("_recurrent_cell")
def recurrent_cell(mode: str, input: Tensor, weights: tuple, h0, c0, run):
    """Run run() (the cell's step) as one traced op; returns h' (LSTM: (h', c')).

    input is (batch, input_size), weights (w_ih, w_hh, b_ih, b_hh) (biases may be None),
    h0/c0 of shape (batch, hidden) or None for zeros."""
    return run()


RecurrentCell.fn = staticmethod(recurrent_cell)

# ONNX gate order (rows of W, R and the biases) from ours (PyTorch's): LSTM ifgo -> iofc,
# GRU rzn -> zrh
_ONNX_GATES = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN_TANH": (0,), "RNN_RELU": (0,)}


def _onnx_unsqueeze0(b, name):
    if b.opset >= 13:
        return b.node("Unsqueeze", [name, b.ints([0])])[0]
    return b.node("Unsqueeze", [name], axes=[0])[0]


def _onnx_gates(b, t: Tensor, mode: str) -> str:
    """t's rows in ONNX gate order."""
    order = _ONNX_GATES[mode]
    if len(order) == 1:
        return b.value(t)
    h = t.shape[0] // len(order)
    rows = np.concatenate([np.arange(g * h, (g + 1) * h) for g in order]).astype(np.int64)
    return b.node("Gather", [b.value(t), b.const(rows)], axis=0)[0]


def _onnx_layer(b, mode: str, seq: str, weights: list, states: list, hidden: int) -> list:
    """One ONNX LSTM/GRU/RNN node over seq (steps, batch, input): weights holds (w_ih, w_hh,
    b_ih, b_hh) per direction, states the initial state names ("" for zeros). Returns the
    node's outputs (Y, Y_h[, Y_c])."""
    dirs = len(weights)
    op = {"LSTM": "LSTM", "GRU": "GRU"}.get(mode, "RNN")
    extra = {}
    if mode == "GRU":
        extra["linear_before_reset"] = 1
    if mode in ("RNN_TANH", "RNN_RELU"):
        extra["activations"] = ["Tanh" if mode == "RNN_TANH" else "Relu"] * dirs
    ws, rs, bs = [], [], []
    for w_ih, w_hh, b_ih, b_hh in weights:
        ws.append(_onnx_unsqueeze0(b, _onnx_gates(b, w_ih, mode)))
        rs.append(_onnx_unsqueeze0(b, _onnx_gates(b, w_hh, mode)))
        if b_ih is not None:
            (bb,) = b.node("Concat", [_onnx_gates(b, b_ih, mode), _onnx_gates(b, b_hh, mode)],
                           axis=0)
            bs.append(_onnx_unsqueeze0(b, bb))

    def cat(names):
        return names[0] if len(names) == 1 else b.node("Concat", names, axis=0)[0]

    ins = [seq, cat(ws), cat(rs), cat(bs) if bs else "", "", *states]
    while ins and ins[-1] == "":
        ins.pop()
    n_states = 2 if mode == "LSTM" else 1
    return b.node(op, ins, 1 + n_states, hidden_size=hidden,
                  direction="bidirectional" if dirs == 2 else "forward", **extra)


def _recurrent_onnx(cls, b, args, attrs, outs):
    mode, x, weights = args["mode"], args["input"], args["weights"]
    h0, c0 = args["h0"], args["c0"]
    hidden = weights[0][1].shape[1]
    n_states = 2 if mode == "LSTM" else 1
    dirs = 2 if args["bidirectional"] else 1
    layers = len(weights) // dirs
    seq = b.value(x)
    if args["batch_first"]:
        (seq,) = b.node("Transpose", [seq], perm=[1, 0, 2])
    finals: list = [[] for _ in range(n_states)]
    for k in range(layers):
        states = ["" if s is None else b.node(
            "Slice", [b.value(s), b.ints([k * dirs]), b.ints([(k + 1) * dirs]),
                      b.ints([0])])[0] for s in (h0, c0)[:n_states]]
        res = _onnx_layer(b, mode, seq, weights[k * dirs:(k + 1) * dirs], states, hidden)
        for f, r in zip(finals, res[1:]):
            f.append(r)
        (y,) = b.node("Transpose", [res[0]], perm=[0, 2, 1, 3])  # (T, B, dirs, H)
        (seq,) = b.node("Reshape", [y, b.ints([0, 0, -1])])
    if args["batch_first"]:
        (seq,) = b.node("Transpose", [seq], perm=[1, 0, 2])
    b.node("Identity", [seq], outputs=outs[:1])
    for f, t in zip(finals, outs[1:]):
        b.node("Concat", f, outputs=[t], axis=0) if len(f) > 1 else b.node(
            "Identity", f, outputs=[t])


def _recurrent_cell_onnx(cls, b, args, attrs, outs):
    """One step: the input as a sequence of one (Unsqueeze), the given states as one layer's
    (Unsqueeze), and the final states Y_h (and Y_c) squeezed back to (batch, hidden)."""
    from .shape import onnx_axes_node

    mode, x, weights = args["mode"], args["input"], args["weights"]
    hidden = weights[1].shape[1]
    n_states = 2 if mode == "LSTM" else 1
    seq = _onnx_unsqueeze0(b, b.value(x))
    states = ["" if s is None else _onnx_unsqueeze0(b, b.value(s))
              for s in (args["h0"], args["c0"])[:n_states]]
    res = _onnx_layer(b, mode, seq, [weights], states, hidden)
    for r, t in zip(res[1:], outs):
        onnx_axes_node(b, "Squeeze", r, [0], [t])


Recurrent.onnx_export = classmethod(_recurrent_onnx)
RecurrentCell.onnx_export = classmethod(_recurrent_cell_onnx)
