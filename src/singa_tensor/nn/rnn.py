"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's parameter names.

A layer projects the inputs of every time step with one matrix product per direction; the time
loop is then one kernel call per layer and direction, forward and backward
(ops.rnn.recurrent_sequence), where every sequence runs every step and the dtype and device have
that kernel. Otherwise (packed sequences of different lengths, proj_size) a step is one product
with the hidden-to-hidden weights and one fused cell (ops/rnn.py) in a Python loop: a step
updates only the first batch_sizes[t] rows of the state (sequences are sorted longest first),
so every sequence's final state is its last valid step.
"""

from __future__ import annotations

import math

from .. import creation
from .. import ops as _ops
from ..ops import rnn as _cells
from ..ops import rnn_traced as _traced
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module, Parameter
from .utils_rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _positive(op: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{op}: {name} must be a positive int, got {value!r}")
    return value


def _nonlinearity(op: str, nonlinearity: str) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{op}: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or "
                         "'relu'")
    return nonlinearity


def _reset_uniform(module: Module, hidden_size: int) -> None:
    # PyTorch's RNN init: every weight and bias from U(-1/sqrt(hidden), 1/sqrt(hidden))
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


def _check_input(op: str, x, size: int, what: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    if x.shape[-1] != size:
        raise ValueError(f"{op}: {what}.size(-1) must be equal to input_size. Expected {size}, "
                         f"got {x.shape[-1]} (shape {x.shape})")
    return x


def _check_state(op: str, h, want: tuple, what: str) -> Tensor:
    if not isinstance(h, Tensor):
        raise TypeError(f"{op}: {what} must be a Tensor, got {type(h).__name__}")
    if h.shape != want:
        raise ValueError(f"{op}: expected {what} of shape {want}, got {h.shape}")
    return h


# ---- the layers --------------------------------------------------------------------------------


class RNNBase(Module):
    """The multi-layer recurrent layer behind RNN, LSTM and GRU; mode is "LSTM", "GRU",
    "RNN_TANH" or "RNN_RELU". Parameters per layer k (suffix "_reverse" for the backward
    direction): weight_ih_l{k} (gates * hidden, input), weight_hh_l{k} (gates * hidden, hidden
    or proj_size), bias_ih_l{k}, bias_hh_l{k} and, with proj_size, weight_hr_l{k}.

    Example:
        >>> from singa_tensor import nn
        >>> [n for n, _ in nn.RNNBase("GRU", 3, 4).named_parameters()]
        ['weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0']
    """

    # False keeps this layer on the per-step loop (_direction_steps), which the whole-loop
    # kernel is tested against
    _sequence_kernel = True

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        name = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(mode, mode)
        if mode not in _GATES:
            raise ValueError(f"RNNBase: unknown mode {mode!r}; expected one of {list(_GATES)}")
        self._op = name
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
                not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing "
                             f"the probability of an element being zeroed, got {dropout!r}")
        if isinstance(proj_size, bool) or not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to "
                             f"disable projections, got {proj_size!r}")
        _positive(name, "input_size", input_size)
        _positive(name, "hidden_size", hidden_size)
        _positive(name, "num_layers", num_layers)
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, not RNN "
                             "or GRU")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size ({proj_size}) has to be smaller than "
                             f"hidden_size ({hidden_size})")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bool(bias), bool(batch_first)
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        dirs = 2 if bidirectional else 1
        for k in range(num_layers):
            layer_in = input_size if k == 0 else real_hidden * dirs
            for d in range(dirs):
                sfx = f"_l{k}" + ("_reverse" if d else "")

                def new(*shape):
                    return Parameter(creation.empty(*shape, dtype=dtype, device=device))

                setattr(self, "weight_ih" + sfx, new(gate_size, layer_in))
                setattr(self, "weight_hh" + sfx, new(gate_size, real_hidden))
                if bias:
                    setattr(self, "bias_ih" + sfx, new(gate_size))
                    setattr(self, "bias_hh" + sfx, new(gate_size))
                if proj_size:
                    setattr(self, "weight_hr" + sfx, new(proj_size, hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_uniform(self, self.hidden_size)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    # -- forward ---------------------------------------------------------------------------------

    def _weights(self, k: int, d: int) -> tuple:
        sfx = f"_l{k}" + ("_reverse" if d else "")
        b_ih = getattr(self, "bias_ih" + sfx) if self.bias else None
        b_hh = getattr(self, "bias_hh" + sfx) if self.bias else None
        w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
        return getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx), b_ih, b_hh, w_hr

    def _states(self, hx, batch: int, unbatched: bool, sorted_indices) -> tuple:
        """(h0, c0) as (layers * directions, batch, size) tensors, or None for zeros."""
        op = self._op
        n = self.num_layers * (2 if self.bidirectional else 1)
        sizes = [self.proj_size or self.hidden_size]
        names = ["hx"]
        if self.mode == "LSTM":
            if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
                raise TypeError(f"{op}: hx must be a tuple (h_0, c_0), got "
                                f"{type(hx).__name__}")
            sizes.append(self.hidden_size)
            names = ["h_0", "c_0"]
        elif hx is not None and not isinstance(hx, Tensor):
            raise TypeError(f"{op}: hx must be a Tensor, got {type(hx).__name__}")
        if hx is None:
            return (None,) * len(sizes)
        states = list(hx) if self.mode == "LSTM" else [hx]
        out = []
        for s, size, what in zip(states, sizes, names):
            if not isinstance(s, Tensor):
                raise TypeError(f"{op}: {what} must be a Tensor, got {type(s).__name__}")
            if unbatched:
                if s.ndim != 2:
                    raise ValueError(f"{op}: for unbatched 2-D input, {what} should also be "
                                     f"2-D but got a {s.ndim}-D tensor (shape {s.shape})")
                s = s.unsqueeze(1)
            elif s.ndim != 3:
                raise ValueError(f"{op}: for batched 3-D input, {what} should also be 3-D but "
                                 f"got a {s.ndim}-D tensor (shape {s.shape})")
            want = (n, batch, size)
            if s.shape != want:
                shown = want if not unbatched else (n, size)
                got = s.shape if not unbatched else (s.shape[0], s.shape[2])
                raise ValueError(f"{op}: expected {what} of shape {shown}, got {got}")
            if sorted_indices is not None:
                s = s.index_select(1, sorted_indices)
            out.append(s)
        return tuple(out)

    def forward(self, input, hx=None):
        op = self._op
        packed = isinstance(input, PackedSequence)
        unbatched = False
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            bsz = [int(b) for b in batch_sizes.tolist()]
            x = _check_input(op, data, self.input_size, "input.data")
            if x.ndim != 2:
                raise ValueError(f"{op}: packed data must be 2-D (steps, features), got shape "
                                 f"{x.shape}")
            batch = bsz[0]
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{op}: input must be a Tensor or a PackedSequence, got "
                                f"{type(input).__name__}")
            if input.ndim not in (2, 3):
                raise ValueError(f"{op}: expected input to be 2-D or 3-D, got {input.ndim}-D "
                                 f"(shape {input.shape})")
            _check_input(op, input, self.input_size)
            unbatched = input.ndim == 2
            seq = input.unsqueeze(1) if unbatched else (
                input.transpose(0, 1) if self.batch_first else input)
            steps, batch = seq.shape[0], seq.shape[1]
            if steps == 0 or batch == 0:
                raise ValueError(f"{op}: input of shape {input.shape} has no time steps or no "
                                 "batch entries")
            x = seq.reshape(steps * batch, self.input_size)
            bsz = [batch] * steps
            sorted_indices = unsorted_indices = None
        w0 = self.weight_ih_l0
        if x.dtype is not w0.dtype:
            raise TypeError(f"{op}: input has dtype {x.dtype.name} but the parameters have "
                            f"dtype {w0.dtype.name}")
        states = self._states(hx, batch, unbatched, sorted_indices)
        if packed or unbatched:
            out, finals = self._run(x, bsz, states)
        elif self.proj_size:
            res = self._run_padded(x, bsz, states)
            out, finals = res[0], list(res[1:])
        else:  # one traced op, so ONNX export writes LSTM/GRU/RNN nodes, not the steps
            dirs = 2 if self.bidirectional else 1
            weights = [self._weights(k, d)[:4] for k in range(self.num_layers)
                       for d in range(dirs)]
            res = _traced.recurrent(
                self.mode, input, weights, states[0], states[1] if len(states) > 1 else None,
                self.bidirectional, self.batch_first, lambda: self._run_padded(x, bsz, states))
            out, finals = res[0], list(res[1:])
        if unsorted_indices is not None:
            finals = [f.index_select(1, unsorted_indices) for f in finals]
        if unbatched:
            finals = [f.squeeze(1) for f in finals]
        hidden = tuple(finals) if self.mode == "LSTM" else finals[0]
        if packed:
            return PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices), hidden
        if unbatched:
            out = out.reshape(len(bsz), batch, out.shape[-1]).squeeze(1)
        return out, hidden

    def _run_padded(self, x: Tensor, bsz: list, states: tuple) -> tuple:
        """(output in the input's layout, h_n[, c_n]) for a padded batch."""
        out, finals = self._run(x, bsz, states)
        out = out.reshape(len(bsz), bsz[0], out.shape[-1])
        if self.batch_first:
            out = out.transpose(0, 1)
        return (out, *finals)

    def _run(self, x: Tensor, bsz: list, states: tuple) -> tuple:
        """(output rows (steps * batch or packed, directions * size), [h_n, c_n]) for packed
        step layout x with batch sizes bsz."""
        dirs = 2 if self.bidirectional else 1
        per_state = [None if s is None else s.unbind(0) for s in states]
        finals = [[] for _ in states]
        layer_in = x
        for k in range(self.num_layers):
            outs = []
            for d in range(dirs):
                i = k * dirs + d
                init_states = [None if s is None else s[i] for s in per_state]
                seq, last = self._direction(layer_in, bsz, k, d, init_states)
                outs.append(seq)
                for f, s in zip(finals, last):
                    f.append(s)
            layer_in = outs[0] if dirs == 1 else _ops.cat(outs, 1)
            if self.dropout and self.training and k < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        return layer_in, [_ops.stack(f, 0) for f in finals]

    def _direction(self, x: Tensor, bsz: list, k: int, d: int, init_states: list) -> tuple:
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(k, d)
        mode = self.mode
        # the input side of every step in one product; LSTM and plain RNN add both biases
        # here, GRU keeps b_hh for the cell (its n gate scales h's part by r)
        if b_ih is not None:
            b = b_ih if mode == "GRU" else b_ih + b_hh
            gx = F.linear(x, w_ih, b)
        else:
            gx = F.linear(x, w_ih)
        if gx.dtype is not x.dtype:  # the cells and loops take one dtype: x's
            gx = gx.to(x.dtype)
        cell_bias = b_hh if mode == "GRU" else None
        if self._sequence_kernel and w_hr is None and bsz.count(bsz[0]) == len(bsz) and \
                _cells.sequence_kernel_applies(x):
            # every sequence runs every step: the whole loop is one kernel call each way
            batch, hidden = bsz[0], self.hidden_size
            states = [creation.zeros(batch, hidden, dtype=x.dtype, device=x.device)
                      if s is None else s for s in init_states]
            res = _cells.recurrent_sequence(mode, gx, w_hh, cell_bias, states[0],
                                            states[1] if mode == "LSTM" else None, d == 1)
            return res[0], list(res[1:])
        return self._direction_steps(gx, bsz, d, init_states, w_hh, cell_bias, w_hr)

    def _direction_steps(self, gx: Tensor, bsz: list, d: int, init_states: list, w_hh: Tensor,
                         cell_bias, w_hr) -> tuple:
        """The per-step loop of one direction: for packed batches whose sequences end at
        different steps, projections (proj_size) and dtypes or devices without the whole-loop
        kernel."""
        mode = self.mode
        steps = len(bsz)
        gx_steps = _cells.split_rows(gx, bsz) if steps > 1 else (gx,)
        batch = bsz[0]
        sizes = [self.proj_size or self.hidden_size, self.hidden_size][:len(init_states)]
        states = [creation.zeros(batch, n, dtype=gx.dtype, device=gx.device) if s is None
                  else s for s, n in zip(init_states, sizes)]
        reverse = d == 1
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        pending: list = [[] for _ in states]
        if reverse:
            # rows join as the step's batch grows: hand them their initial state then
            growth = [bsz[steps - 1]] + [bsz[t] - bsz[t + 1] for t in range(steps - 2, -1, -1)]
            growth = [g for g in growth if g]
            if len(growth) > 1:
                pieces = [list(_cells.split_rows(s, growth)) for s in states]
                states, pending = [p[0] for p in pieces], [p[1:] for p in pieces]
        finished = [[] for _ in states]
        w_hh_t = w_hh.t()
        w_hr_t = w_hr.t() if w_hr is not None else None
        outputs = [None] * steps
        tape_hh: list = []  # shared by the steps' products, see ops.rnn.RecurrentMatmul
        tape_hr: list = []
        for t in order:
            n = bsz[t]
            rows = states[0].shape[0]
            if n < rows:  # forward direction: sequences that ended keep their final state
                for j, s in enumerate(states):
                    head, tail = _cells.split_rows(s, (n, rows - n))
                    states[j] = head
                    finished[j].append(tail)
            elif n > rows:
                for j in range(len(states)):
                    states[j] = _ops.cat([states[j], pending[j].pop(0)], 0)
            first = t == order[0]
            gh = _cells.recurrent_matmul(states[0], w_hh_t, tape_hh, first)
            if mode == "LSTM":
                h, c = _cells.lstm_cell(gx_steps[t], gh, None, states[1])
                if w_hr_t is not None:
                    h = _cells.recurrent_matmul(h, w_hr_t, tape_hr, first)
                states = [h, c]
            elif mode == "GRU":
                states = [_cells.gru_cell(gx_steps[t], gh, cell_bias, states[0])]
            else:
                a = gx_steps[t] + gh
                states = [a.tanh() if mode == "RNN_TANH" else a.relu()]
            outputs[t] = states[0]
        out = _ops.cat(outputs, 0) if steps > 1 else outputs[0]
        last = [_ops.cat([s] + f[::-1], 0) if f else s for s, f in zip(states, finished)]
        return out, last


class RNN(RNNBase):
    """Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu,
    with PyTorch's arguments (num_layers, nonlinearity, bias, batch_first, dropout,
    bidirectional) and parameter names. Input (L, N, input_size) (or (N, L, .) with
    batch_first, (L, input_size) unbatched, or a PackedSequence); returns (output, h_n).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> rnn = nn.RNN(10, 20, 2)
        >>> out, h = rnn(st.randn(5, 3, 10), st.randn(2, 3, 20))
        >>> out.shape, h.shape
        ((5, 3, 20), (2, 3, 20))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        mode = "RNN_" + _nonlinearity("RNN", nonlinearity).upper()
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory (gate order i, f, g, o), with PyTorch's arguments (incl.
    proj_size: h is projected by weight_hr_l{k} to proj_size features) and parameter names.
    Returns (output, (h_n, c_n)).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> lstm = nn.LSTM(10, 20, 2, batch_first=True)
        >>> out, (h, c) = lstm(st.randn(3, 5, 10))
        >>> out.shape, h.shape, c.shape
        ((3, 5, 20), (2, 3, 20), (2, 3, 20))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit (gate order r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))),
    with PyTorch's arguments and parameter names. Returns (output, h_n).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> gru = nn.GRU(10, 20, bidirectional=True)
        >>> out, h = gru(st.randn(5, 3, 10))
        >>> out.shape, h.shape
        ((5, 3, 40), (2, 3, 20))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


# ---- the cells ---------------------------------------------------------------------------------


class RNNCellBase(Module):
    """Parameters shared by the cells: weight_ih (gates * hidden, input), weight_hh
    (gates * hidden, hidden), bias_ih, bias_hh, initialised from U(-1/sqrt(hidden),
    1/sqrt(hidden)).

    Example:
        >>> from singa_tensor import nn
        >>> nn.RNNCellBase(3, 4, True, 2).weight_ih.shape
        (8, 3)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        op = type(self).__name__
        self.input_size = _positive(op, "input_size", input_size)
        self.hidden_size = _positive(op, "hidden_size", hidden_size)
        self.bias = bool(bias)
        g = num_chunks * hidden_size
        self.weight_ih = Parameter(creation.empty(g, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(creation.empty(g, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(creation.empty(g, dtype=dtype, device=device))
            self.bias_hh = Parameter(creation.empty(g, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_uniform(self, self.hidden_size)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        return s if self.bias else s + ", bias=False"

    def _prepare(self, input, states, names: tuple) -> tuple:
        """(input as (batch, input_size), states as (batch, hidden) or None, unbatched)."""
        op = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{op}: expected input to be 1-D or 2-D, got {input.ndim}-D "
                             f"(shape {input.shape})")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{op}: input has inconsistent input_size: got {input.shape[-1]}, "
                             f"expected {self.input_size}")
        if input.dtype is not self.weight_ih.dtype:
            raise TypeError(f"{op}: input has dtype {input.dtype.name} but the parameters have "
                            f"dtype {self.weight_ih.dtype.name}")
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        want = (x.shape[0], self.hidden_size)
        out = []
        for s, name in zip(states, names):
            if s is not None:
                _check_state(op, s, want[1:] if unbatched else want, name)
                s = s.unsqueeze(0) if unbatched else s
            out.append(s)
        return x, out, unbatched

    def _step(self, mode: str, x: Tensor, states: list, step):
        """step(*states) with missing states as zeros, traced as one cell op (an ONNX export
        leaves the missing states out of its node, so they follow the batch)."""
        def run():
            zeros = [creation.zeros(x.shape[0], self.hidden_size, dtype=x.dtype,
                                    device=x.device) if s is None else s for s in states]
            return step(*zeros)

        weights = (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return _traced.recurrent_cell(mode, x, weights, states[0],
                                      states[1] if len(states) > 1 else None, run)

    def _gates_x(self, x: Tensor) -> Tensor:
        if self.bias_ih is not None:
            return _in_dtype(_ops.addmm(self.bias_ih, x, self.weight_ih.t()), x)
        return _in_dtype(_ops.matmul(x, self.weight_ih.t()), x)


def _in_dtype(t: Tensor, like: Tensor) -> Tensor:
    """t in like's dtype: the fused cells take one dtype, and a product of 16-bit tensors may
    come back in float32."""
    return t if t.dtype is like.dtype else t.to(like.dtype)


class RNNCell(RNNCellBase):
    """One Elman RNN step: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> cell = nn.RNNCell(10, 20)
        >>> cell(st.randn(3, 10), st.randn(3, 20)).shape
        (3, 20)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        nonlinearity = _nonlinearity("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, states, unbatched = self._prepare(input, (hx,), ("hx",))

        def step(h):
            a = self._gates_x(x) + _ops.matmul(h, self.weight_hh.t())
            if self.bias_hh is not None:
                a = a + self.bias_hh
            return a.tanh() if self.nonlinearity == "tanh" else a.relu()

        out = self._step("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", x, states,
                         step)
        return out.squeeze(0) if unbatched else out


class LSTMCell(RNNCellBase):
    """One LSTM step (gate order i, f, g, o) through the fused cell kernel; returns (h', c').

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> cell = nn.LSTMCell(10, 20)
        >>> h, c = cell(st.randn(3, 10))
        >>> h.shape, c.shape
        ((3, 20), (3, 20))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple[Tensor, Tensor]:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
        x, states, unbatched = self._prepare(input, hx or (None, None), ("h_0", "c_0"))

        def step(h, c):
            gh = _in_dtype(_ops.matmul(h, self.weight_hh.t()), h)
            return _cells.lstm_cell(self._gates_x(x), gh, self.bias_hh, c)

        h, c = self._step("LSTM", x, states, step)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step (gate order r, z, n) through the fused cell kernel; returns h'.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> cell = nn.GRUCell(10, 20)
        >>> cell(st.randn(3, 10)).shape
        (3, 20)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, states, unbatched = self._prepare(input, (hx,), ("hx",))

        def step(h):
            gh = _in_dtype(_ops.matmul(h, self.weight_hh.t()), h)
            return _cells.gru_cell(self._gates_x(x), gh, self.bias_hh, h)

        out = self._step("GRU", x, states, step)
        return out.squeeze(0) if unbatched else out
