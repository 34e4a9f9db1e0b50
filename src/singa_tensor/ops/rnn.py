"""Fused recurrent cells, the whole time loop of a layer, and the row split the per-step loop
steps through.

The layers project the inputs of all time steps with one matrix product; recurrent_sequence
then runs every step of a layer and direction in one kernel call each way (the loop is
singa_tensor/rnn_seq.h). Where it does not apply, a step is one product with the
hidden-to-hidden weights and one fused cell kernel (header: "Recurrent cells").
Each cell's backward runs its backward kernel; under create_graph it is written with Tensor ops
instead, so the cells differentiate twice.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor.ops.rnn import lstm_cell
    >>> h, c = lstm_cell(st.zeros(1, 8), st.zeros(1, 8), None, st.ones(1, 2))
    >>> [round(v, 4) for v in c.tolist()[0]]
    [0.5, 0.5]
"""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import (
    OpSpec,
    apply,
    check_same_device,
    contiguous,
    kernel,
    ptr,
    register,
)
from .layout import cast

__all__: list[str] = []


# ---- checks ------------------------------------------------------------------------------------


_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _through_float32(fn, *tensors):
    """fn on float16/bfloat16 tensors computed by the float32 kernels: the operands cast to
    float32 (None stays None), the results rounded once back to the operands' dtype. The
    cells and the time loops do their own matrix products, so they run in float32 this way;
    their gradients come back in the operands' dtype."""
    dt = next(t.dtype for t in tensors if t is not None)
    out = fn(*(None if t is None else cast(t, _dt.float32) for t in tensors))
    if isinstance(out, tuple):
        return tuple(cast(o, dt) for o in out)
    return cast(out, dt)


def _check_cell(op: str, gates: int, gates_x, gates_h, bias, state, state_name: str) -> tuple:
    """(batch, hidden) of a fused cell's operands, after checking types, shapes and dtypes."""
    for name, t in (("gates_x", gates_x), ("gates_h", gates_h), (state_name, state)):
        if t.__class__ is not Tensor:
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if bias is not None and bias.__class__ is not Tensor:
        raise TypeError(f"{op}: bias must be a Tensor or None, got {type(bias).__name__}")
    if state.ndim != 2:
        raise ValueError(f"{op}: {state_name} must be 2-D (batch, hidden), got shape "
                         f"{state.shape}")
    batch, hidden = state.shape
    want = (batch, gates * hidden)
    for name, t in (("gates_x", gates_x), ("gates_h", gates_h)):
        if t.shape != want:
            raise ValueError(f"{op}: {name} must have shape {want} for {state_name} of shape "
                             f"{state.shape}, got {t.shape}")
    if bias is not None and bias.shape != (gates * hidden,):
        raise ValueError(f"{op}: bias must have shape ({gates * hidden},), got {bias.shape}")
    dtype = state.dtype
    if dtype.name not in _DTYPES:
        raise TypeError(f"{op}: expected float16, bfloat16, float32 or float64 tensors, got "
                        f"{dtype.name}")
    for name, t in (("gates_x", gates_x), ("gates_h", gates_h), ("bias", bias)):
        if t is not None and t.dtype is not dtype:
            raise TypeError(f"{op}: {name} has dtype {t.dtype.name} but {state_name} has "
                            f"{dtype.name}")
    check_same_device(op, gates_x, gates_h, bias, state)
    return batch, hidden


def _wants_grad(*tensors) -> bool:
    return _ag._mode.enabled and any(t is not None and t.requires_grad for t in tensors)


def _null_or_ptr(ref: Tensor, t):
    return ref._be.ffi.NULL if t is None else ptr(t)


def _sigmoid_np(x):
    return 1.0 / (1.0 + np.exp(-x))


# ---- LSTM cell ---------------------------------------------------------------------------------


@register
class LSTMCellFused(OpSpec):
    """(h, c) of one LSTM step from the pre-activation parts: a = gates_x + gates_h + bias
    (gate order i, f, g, o), c = sigmoid(a_f) c_prev + sigmoid(a_i) tanh(a_g),
    h = sigmoid(a_o) tanh(c)."""

    name = "_lstm_cell"
    onnx = None

    @staticmethod
    def forward(ctx, gates_x, gates_h, bias, c_prev):
        batch, hidden = c_prev._shape
        gx, gh, cp = contiguous(gates_x), contiguous(gates_h), contiguous(c_prev)
        b = None if bias is None else contiguous(bias)
        h = Tensor._empty((batch, hidden), cp.dtype, cp._device, cp._be)
        c = Tensor._empty((batch, hidden), cp.dtype, cp._device, cp._be)
        saved = None
        if _wants_grad(gates_x, gates_h, bias, c_prev):
            saved = Tensor._empty((batch, 4 * hidden), cp.dtype, cp._device, cp._be)
        if batch and hidden:
            kernel(cp, "lstm_cell")(ptr(gx), ptr(gh), _null_or_ptr(cp, b), ptr(cp), ptr(h),
                                    ptr(c), _null_or_ptr(cp, saved), batch, hidden)
        ctx.save_for_backward(gates_x, gates_h, bias, c_prev)
        ctx.gates, ctx.c = saved, c._alias()
        return h, c

    @staticmethod
    def backward(ctx, dh, dc):
        gates_x, gates_h, bias, c_prev = ctx.saved_tensors
        need_bias = ctx.needs_input_grad[2]
        if _ag._mode.enabled:  # create_graph: a composition, differentiable again
            dgates, dcp = _lstm_grad_composed(gates_x, gates_h, bias, c_prev, dh, dc)
        else:
            batch, hidden = c_prev._shape
            cp = contiguous(c_prev)
            dgates = Tensor._empty((batch, 4 * hidden), cp.dtype, cp._device, cp._be)
            dcp = Tensor._empty((batch, hidden), cp.dtype, cp._device, cp._be)
            if batch and hidden:
                kernel(cp, "lstm_cell_backward")(
                    ptr(ctx.gates), ptr(cp), ptr(ctx.c), ptr(contiguous(dh)), ptr(contiguous(dc)),
                    ptr(dgates), ptr(dcp), batch, hidden)
        dbias = dgates.sum(0) if need_bias else None
        return dgates, dgates, dbias, dcp

    @staticmethod
    def reference(gates_x, gates_h, bias, c_prev):
        a = gates_x + gates_h + (0.0 if bias is None else bias)
        i, f, g, o = np.split(a, 4, axis=1)
        c = _sigmoid_np(f) * c_prev + _sigmoid_np(i) * np.tanh(g)
        return _sigmoid_np(o) * np.tanh(c), c

    @staticmethod
    def samples():
        r = np.random.default_rng(41)
        n = r.standard_normal
        return [((n((3, 8)), n((3, 8)), n(8), n((3, 2))), {}),
                ((n((2, 12)), n((2, 12)), None, n((2, 3))), {})]


def _lstm_grad_composed(gates_x, gates_h, bias, c_prev, dh, dc) -> tuple:
    """(d a, d c_prev) of the LSTM cell, a its gate pre-activations, written with Tensor ops."""
    a = gates_x + gates_h
    if bias is not None:
        a = a + bias
    ai, af, ag, ao = a.chunk(4, 1)
    i, f, g, o = ai.sigmoid(), af.sigmoid(), ag.tanh(), ao.sigmoid()
    tc = (f * c_prev + i * g).tanh()
    dct = dc + dh * o * (1.0 - tc * tc)
    dgates = _cat([dct * g * i * (1.0 - i), dct * c_prev * f * (1.0 - f),
                   dct * i * (1.0 - g * g), dh * tc * o * (1.0 - o)], 1)
    return dgates, dct * f


def lstm_cell(gates_x: Tensor, gates_h: Tensor, bias: Tensor | None,
              c_prev: Tensor) -> tuple[Tensor, Tensor]:
    """One fused LSTM step from the gate pre-activations: gates_x, gates_h of shape
    (batch, 4 * hidden) (gate order i, f, g, o), bias (4 * hidden,) or None, c_prev
    (batch, hidden). Returns (h, c). float16/bfloat16 compute in float32 (see
    _through_float32) and return their own dtype.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.rnn import lstm_cell
        >>> h, c = lstm_cell(st.zeros(2, 4), st.zeros(2, 4), None, st.zeros(2, 1))
        >>> h.shape, c.tolist()
        ((2, 1), [[0.0], [0.0]])
    """
    _check_cell("lstm_cell", 4, gates_x, gates_h, bias, c_prev, "c_prev")
    if c_prev.dtype.name in _DTYPES[:2]:
        return _through_float32(lstm_cell, gates_x, gates_h, bias, c_prev)
    return apply(LSTMCellFused, gates_x, gates_h, bias, c_prev)


LSTMCellFused.fn = staticmethod(lstm_cell)


# ---- GRU cell ----------------------------------------------------------------------------------


@register
class GRUCellFused(OpSpec):
    """h of one GRU step (gate order r, z, n): r = sigmoid(x_r + h_r + b_r),
    z = sigmoid(x_z + h_z + b_z), n = tanh(x_n + r (h_n + b_n)), h = (1 - z) n + z h_prev,
    with x = gates_x (input side, its bias included), h = gates_h, b = bias_h."""

    name = "_gru_cell"
    onnx = None

    @staticmethod
    def forward(ctx, gates_x, gates_h, bias_h, h_prev):
        batch, hidden = h_prev._shape
        gx, gh, hp = contiguous(gates_x), contiguous(gates_h), contiguous(h_prev)
        b = None if bias_h is None else contiguous(bias_h)
        h = Tensor._empty((batch, hidden), hp.dtype, hp._device, hp._be)
        saved = None
        if _wants_grad(gates_x, gates_h, bias_h, h_prev):
            saved = Tensor._empty((batch, 4 * hidden), hp.dtype, hp._device, hp._be)
        if batch and hidden:
            kernel(hp, "gru_cell")(ptr(gx), ptr(gh), _null_or_ptr(hp, b), ptr(hp), ptr(h),
                                   _null_or_ptr(hp, saved), batch, hidden)
        ctx.save_for_backward(gates_x, gates_h, bias_h, h_prev)
        ctx.gates = saved
        return h

    @staticmethod
    def backward(ctx, dh):
        gates_x, gates_h, bias_h, h_prev = ctx.saved_tensors
        need_bias = ctx.needs_input_grad[2]
        if _ag._mode.enabled:
            dgx, dgh, dhp = _gru_grad_composed(gates_x, gates_h, bias_h, h_prev, dh)
        else:
            batch, hidden = h_prev._shape
            hp = contiguous(h_prev)
            dgx = Tensor._empty((batch, 3 * hidden), hp.dtype, hp._device, hp._be)
            dgh = Tensor._empty((batch, 3 * hidden), hp.dtype, hp._device, hp._be)
            dhp = Tensor._empty((batch, hidden), hp.dtype, hp._device, hp._be)
            if batch and hidden:
                kernel(hp, "gru_cell_backward")(ptr(ctx.gates), ptr(hp), ptr(contiguous(dh)),
                                                ptr(dgx), ptr(dgh), ptr(dhp), batch, hidden)
        dbias = dgh.sum(0) if need_bias else None
        return dgx, dgh, dbias, dhp

    @staticmethod
    def reference(gates_x, gates_h, bias_h, h_prev):
        gh = gates_h + (0.0 if bias_h is None else bias_h)
        xr, xz, xn = np.split(gates_x, 3, axis=1)
        hr, hz, hn = np.split(gh, 3, axis=1)
        r, z = _sigmoid_np(xr + hr), _sigmoid_np(xz + hz)
        n = np.tanh(xn + r * hn)
        return (1.0 - z) * n + z * h_prev

    @staticmethod
    def samples():
        r = np.random.default_rng(42)
        n = r.standard_normal
        return [((n((3, 6)), n((3, 6)), n(6), n((3, 2))), {}),
                ((n((2, 9)), n((2, 9)), None, n((2, 3))), {})]


def _gru_grad_composed(gates_x, gates_h, bias_h, h_prev, dh) -> tuple:
    """(d gates_x, d gates_h, d h_prev) of the GRU cell, written with Tensor ops."""
    gh = gates_h if bias_h is None else gates_h + bias_h
    xr, xz, xn = gates_x.chunk(3, 1)
    hr, hz, hn = gh.chunk(3, 1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    dn = dh * (1.0 - z) * (1.0 - n * n)
    dr = dn * hn * r * (1.0 - r)
    dz = dh * (h_prev - n) * z * (1.0 - z)
    return _cat([dr, dz, dn], 1), _cat([dr, dz, dn * r], 1), dh * z


def gru_cell(gates_x: Tensor, gates_h: Tensor, bias_h: Tensor | None, h_prev: Tensor) -> Tensor:
    """One fused GRU step: gates_x (batch, 3 * hidden) the input side with its bias, gates_h
    (batch, 3 * hidden) the hidden side without bias, bias_h (3 * hidden,) or None, h_prev
    (batch, hidden); gate order r, z, n. Returns h. float16/bfloat16 compute in float32
    (see _through_float32) and return their own dtype.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.rnn import gru_cell
        >>> gru_cell(st.zeros(1, 3), st.zeros(1, 3), None, st.ones(1, 1)).tolist()
        [[0.5]]
    """
    _check_cell("gru_cell", 3, gates_x, gates_h, bias_h, h_prev, "h_prev")
    if h_prev.dtype.name in _DTYPES[:2]:
        return _through_float32(gru_cell, gates_x, gates_h, bias_h, h_prev)
    return apply(GRUCellFused, gates_x, gates_h, bias_h, h_prev)


GRUCellFused.fn = staticmethod(gru_cell)


# ---- splitting rows ----------------------------------------------------------------------------


@register
class SplitRows(OpSpec):
    """Views of consecutive row blocks of x (dim 0) with the given sizes, as one graph node:
    its backward is one cat of the pieces' gradients, where a slice per piece would scatter
    each gradient into zeros of x's full shape (quadratic over a sequence's steps)."""

    name = "_split_rows"
    onnx = None

    @staticmethod
    def forward(ctx, x, sizes):
        out, pos = [], x._offset
        rest, stride = x._shape[1:], x._strides[0] if x.ndim else 0
        for n in sizes:
            out.append(x._view((n,) + rest, (x._strides[0],) + x._strides[1:], pos))
            pos += n * stride
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        return (_cat(list(grads), 0), None)

    @staticmethod
    def reference(x, sizes):
        return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=0))

    @staticmethod
    def samples():
        x = np.random.default_rng(43).standard_normal((6, 2))
        return [((x, (3, 1, 2)), {}), ((x, (6,)), {})]


def split_rows(x: Tensor, sizes) -> tuple:
    """x split along dim 0 into views of the given sizes (which must add up to x.shape[0]).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.rnn import split_rows
        >>> [t.tolist() for t in split_rows(st.arange(5.0), (2, 3))]
        [[0.0, 1.0], [2.0, 3.0, 4.0]]
    """
    if x.__class__ is not Tensor:
        raise TypeError(f"split_rows: x must be a Tensor, got {type(x).__name__}")
    sizes = tuple(int(s) for s in sizes)
    if x.ndim == 0 or any(s < 0 for s in sizes) or sum(sizes) != x.shape[0]:
        raise ValueError(f"split_rows: sizes {sizes} do not split dimension 0 of shape "
                         f"{x.shape}")
    return apply(SplitRows, x, sizes)


SplitRows.fn = staticmethod(split_rows)


def _cat(tensors: list, dim: int) -> Tensor:
    from .shape import cat

    return cat(tensors, dim)


# ---- the recurrent product ---------------------------------------------------------------------


@register
class RecurrentMatmul(OpSpec):
    """h @ w_t for one time step, where the steps of a sequence share w_t and one `tape` list.
    First-order backward: each step returns d h and leaves (h, g) on the tape; the sequence's
    first step, whose backward runs last, returns the weight gradient of every step as one
    product (rows = all steps' rows) instead of one thin product and one accumulation per step.
    Under create_graph each step returns its own h^T g (a composition, differentiable again)."""

    name = "_recurrent_matmul"
    onnx = None

    @staticmethod
    def forward(ctx, h, w_t, tape, first):
        from .linalg import Matmul

        out = Matmul.forward(ctx, h, w_t)  # saves (h, w_t) on ctx
        ctx.tape, ctx.first = tape, first
        return out

    @staticmethod
    def backward(ctx, g):
        from .linalg import matmul

        h, w_t = ctx.saved_tensors
        need_h, need_w = ctx.needs_input_grad[:2]
        dh = matmul(g, w_t.t()) if need_h else None
        if not need_w:
            return dh, None, None, None
        if _ag._mode.enabled:
            return dh, matmul(h.t(), g), None, None
        tape = ctx.tape
        tape.append((h, g))
        if not ctx.first:
            return dh, None, None, None
        hs = _cat([p[0] for p in tape], 0) if len(tape) > 1 else tape[0][0]
        gs = _cat([p[1] for p in tape], 0) if len(tape) > 1 else tape[0][1]
        tape.clear()
        return dh, matmul(hs.t(), gs), None, None

    @staticmethod
    def reference(h, w_t, tape, first):
        return h @ w_t

    @staticmethod
    def samples():
        r = np.random.default_rng(44)
        return [((r.standard_normal((3, 2)), r.standard_normal((2, 5)), [], True), {})]


def recurrent_matmul(h: Tensor, w_t: Tensor, tape: list, first: bool) -> Tensor:
    """h (rows, k) @ w_t (k, n) for one step of a recurrent layer; every step of one sequence
    passes the same w_t and the same (initially empty) tape list, and first=True for the step
    that runs first.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.rnn import recurrent_matmul
        >>> w = st.ones(2, 3, requires_grad=True)
        >>> tape = []
        >>> h1 = recurrent_matmul(st.ones(1, 2), w, tape, True)
        >>> recurrent_matmul(h1[:, :2], w, tape, False).sum().backward()
        >>> w.grad.tolist()
        [[5.0, 5.0, 2.0], [5.0, 5.0, 2.0]]
    """
    for name, t in (("h", h), ("w_t", w_t)):
        if t.__class__ is not Tensor or t.ndim != 2:
            raise ValueError(f"recurrent_matmul: {name} must be a 2-D Tensor, got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    if h.shape[1] != w_t.shape[0] or h.dtype is not w_t.dtype:
        raise ValueError(f"recurrent_matmul: h of shape {h.shape} ({h.dtype.name}) does not "
                         f"match w_t of shape {w_t.shape} ({w_t.dtype.name})")
    check_same_device("recurrent_matmul", h, w_t)
    return apply(RecurrentMatmul, h, w_t, tape, bool(first))


RecurrentMatmul.fn = staticmethod(recurrent_matmul)


# ---- a whole direction's time loop ---------------------------------------------------------

_SEQ_MODES = {"LSTM": 0, "GRU": 1, "RNN_TANH": 2, "RNN_RELU": 3}
_SEQ_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


@register
class RecurrentSequence(OpSpec):
    """Every step of one recurrent layer and direction as one node and one kernel call each
    way (st_rnn_seq_forward/backward, loop in rnn_seq.h): gates_x (steps * batch, G * hidden)
    is the input side of all steps, time-major; outputs (out (steps * batch, hidden), h_n[,
    c_n]). Under create_graph the backward is the per-step composition (differentiable
    again), recomputing the steps' states from the saved inputs."""

    name = "_recurrent_sequence"
    onnx = None

    @staticmethod
    def forward(ctx, gates_x, w_hh, bias_h, h0, c0, mode, reverse):
        batch, hidden = h0._shape
        steps = gates_x._shape[0] // batch
        h0c, gx, w = contiguous(h0), contiguous(gates_x), contiguous(w_hh)
        c0c = None if c0 is None else contiguous(c0)
        b = None if bias_h is None else contiguous(bias_h)

        def new(*shape):
            return Tensor._empty(shape, h0c.dtype, h0c._device, h0c._be)

        lstm = mode == "LSTM"
        out, h_n = new(steps * batch, hidden), new(batch, hidden)
        c_n = new(batch, hidden) if lstm else None
        saved = cells = None
        if _wants_grad(gates_x, w_hh, bias_h, h0, c0):
            if mode in ("LSTM", "GRU"):
                saved = new(steps * batch, 4 * hidden)
            if lstm:
                cells = new(steps * batch, hidden)
        work = new(batch * 6 * hidden)
        kernel(h0c, "rnn_seq_forward")(
            _SEQ_MODES[mode], int(reverse), ptr(gx), ptr(w), _null_or_ptr(h0c, b), ptr(h0c),
            _null_or_ptr(h0c, c0c), ptr(out), ptr(h_n), _null_or_ptr(h0c, c_n),
            _null_or_ptr(h0c, saved), _null_or_ptr(h0c, cells), ptr(work), steps, batch, hidden)
        ctx.save_for_backward(gates_x, w_hh, bias_h, h0, c0)
        ctx.mode, ctx.reverse, ctx.saved_gates, ctx.cells = mode, bool(reverse), saved, cells
        ctx.out = out._alias()
        return (out, h_n, c_n) if lstm else (out, h_n)

    @staticmethod
    def backward(ctx, d_out, d_hn, d_cn=None):
        gates_x, w_hh, bias_h, h0, c0 = ctx.saved_tensors
        mode = ctx.mode
        if _ag._mode.enabled:  # create_graph: a composition, differentiable again
            return _sequence_grad_composed(mode, ctx.reverse, gates_x, w_hh, bias_h, h0, c0,
                                           d_out, d_hn, d_cn)
        batch, hidden = h0._shape
        steps = gates_x._shape[0] // batch
        g = _SEQ_GATES[mode] * hidden
        h0c = contiguous(h0)

        def new(*shape):
            return Tensor._empty(shape, h0c.dtype, h0c._device, h0c._be)

        lstm, gru = mode == "LSTM", mode == "GRU"
        d_gx, d_w = new(steps * batch, g), new(g, hidden)
        d_gh = new(steps * batch, g) if gru else None
        d_h0 = new(batch, hidden)
        d_c0 = new(batch, hidden) if lstm else None
        c0c = contiguous(c0) if lstm else None
        dcn = contiguous(d_cn) if lstm else None
        work = new(batch * 4 * hidden)
        kernel(h0c, "rnn_seq_backward")(
            _SEQ_MODES[mode], int(ctx.reverse), ptr(contiguous(w_hh)), ptr(h0c),
            _null_or_ptr(h0c, c0c), ptr(ctx.out), _null_or_ptr(h0c, ctx.saved_gates),
            _null_or_ptr(h0c, ctx.cells), ptr(contiguous(d_out)), ptr(contiguous(d_hn)),
            _null_or_ptr(h0c, dcn), ptr(d_gx), _null_or_ptr(h0c, d_gh), ptr(d_w), ptr(d_h0),
            _null_or_ptr(h0c, d_c0), ptr(work), steps, batch, hidden)
        d_b = d_gh.sum(0) if gru and ctx.needs_input_grad[2] else None
        return d_gx, d_w, d_b, d_h0, d_c0, None, None

    @staticmethod
    def reference(mode, gates_x, w_hh, bias_h, h0, c0=None, reverse=False):
        batch = h0.shape[0]
        steps = gates_x.shape[0] // batch
        gx = gates_x.reshape(steps, batch, -1)
        h, c = h0, c0
        out = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            gh = h @ w_hh.T
            if mode == "LSTM":
                h, c = LSTMCellFused.reference(gx[t], gh, None, c)
            elif mode == "GRU":
                h = GRUCellFused.reference(gx[t], gh, bias_h, h)
            else:
                a = gx[t] + gh
                h = np.tanh(a) if mode == "RNN_TANH" else np.maximum(a, 0.0)
            out[t] = h
        seq = np.concatenate(out, 0)
        return (seq, h, c) if mode == "LSTM" else (seq, h)

    @staticmethod
    def samples():
        r = np.random.default_rng(45)
        n = r.standard_normal
        return [(("LSTM", n((6, 8)), n((8, 2)), None, n((2, 2)), n((2, 2)), False), {}),
                (("GRU", n((6, 9)), n((9, 3)), n(9), n((3, 3)), None, True), {}),
                (("RNN_TANH", n((4, 3)), n((3, 3)), None, n((2, 3))), {}),
                (("RNN_RELU", n((4, 3)), n((3, 3)), None, n((2, 3)), None, True), {})]


def _sequence_grad_composed(mode, reverse, gates_x, w_hh, bias_h, h0, c0, d_out, d_hn,
                            d_cn) -> tuple:
    """The gradients of RecurrentSequence's inputs, written with Tensor ops: the forward's
    steps recomputed from the inputs, then the reverse loop of the per-step gradients."""
    from .linalg import matmul

    batch = h0.shape[0]
    steps = gates_x.shape[0] // batch
    gxs = split_rows(gates_x, (batch,) * steps) if steps > 1 else (gates_x,)
    douts = split_rows(d_out, (batch,) * steps) if steps > 1 else (d_out,)
    order = list(range(steps - 1, -1, -1) if reverse else range(steps))
    w_t = w_hh.t()
    h, c = h0, c0
    prev: dict = {}  # time index -> (h_prev, c_prev, gates_h, h)
    for t in order:
        gh = matmul(h, w_t)
        if mode == "LSTM":
            h_new, c_new = lstm_cell(gxs[t], gh, None, c)
        elif mode == "GRU":
            h_new, c_new = gru_cell(gxs[t], gh, bias_h, h), None
        else:
            a = gxs[t] + gh
            h_new, c_new = (a.tanh() if mode == "RNN_TANH" else a.relu()), None
        prev[t] = (h, c, gh, h_new)
        h, c = h_new, c_new
    dh, dc = d_hn, d_cn
    d_gx: list = [None] * steps
    d_w = d_b = None
    for t in reversed(order):
        hp, cp, gh, h = prev[t]
        dht = dh + douts[t]
        if mode == "LSTM":
            dg, dc = _lstm_grad_composed(gxs[t], gh, None, cp, dht, dc)
            dgh, dh = dg, matmul(dg, w_hh)
        elif mode == "GRU":
            dg, dgh, dhp = _gru_grad_composed(gxs[t], gh, bias_h, hp, dht)
            dh = dhp + matmul(dgh, w_hh)
            d_b = dgh.sum(0) if d_b is None else d_b + dgh.sum(0)
        else:
            slope = 1.0 - h * h if mode == "RNN_TANH" else h.sign()
            dg = dgh = dht * slope
            dh = matmul(dg, w_hh)
        d_gx[t] = dg
        dw = matmul(dgh.t(), hp)
        d_w = dw if d_w is None else d_w + dw
    d_b = d_b if bias_h is not None else None
    return (_cat(d_gx, 0) if steps > 1 else d_gx[0]), d_w, d_b, dh, dc, None, None


def recurrent_sequence(mode: str, gates_x: Tensor, w_hh: Tensor, bias_h: Tensor | None,
                       h0: Tensor, c0: Tensor | None = None, reverse: bool = False) -> tuple:
    """Every time step of one recurrent layer and direction in one kernel call (and one in the
    backward). mode is "LSTM", "GRU", "RNN_TANH" or "RNN_RELU" (G = 4, 3, 1, 1 gates);
    gates_x (steps * batch, G * hidden) the input side of all steps, time-major (LSTM and RNN:
    both biases included; GRU: b_ih), w_hh (G * hidden, hidden), bias_h (3 * hidden,) GRU's
    b_hh or None (None for the other modes), h0 and, for LSTM, c0 of shape (batch, hidden);
    reverse runs from the last step to the first. Returns (out (steps * batch, hidden), h_n)
    and, for LSTM, c_n as well. float16/bfloat16 run the float32 kernels through a cast (see
    _through_float32) and return their own dtype.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.rnn import recurrent_sequence
        >>> out, h, c = recurrent_sequence("LSTM", st.zeros(6, 4), st.zeros(4, 1), None,
        ...                                st.zeros(2, 1), st.ones(2, 1))
        >>> out.shape, [round(v, 4) for v in c.flatten().tolist()]
        ((6, 1), [0.125, 0.125])
    """
    op = "recurrent_sequence"
    if mode not in _SEQ_MODES:
        raise ValueError(f"{op}: unknown mode {mode!r}; expected one of {list(_SEQ_MODES)}")
    lstm, gru = mode == "LSTM", mode == "GRU"
    for name, t in (("gates_x", gates_x), ("w_hh", w_hh), ("h0", h0)):
        if t.__class__ is not Tensor:
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    for name, t, want in (("bias_h", bias_h, gru), ("c0", c0, lstm)):
        if t is not None and (not want or t.__class__ is not Tensor):
            raise TypeError(f"{op}: {name} must be " + ("a Tensor or None" if want else "None")
                            + f" for mode {mode}, got {type(t).__name__}")
    if lstm and c0 is None:
        raise TypeError(f"{op}: mode LSTM needs c0")
    if h0.ndim != 2 or 0 in h0.shape:
        raise ValueError(f"{op}: h0 must be a non-empty 2-D (batch, hidden) tensor, got shape "
                         f"{h0.shape}")
    batch, hidden = h0.shape
    g = _SEQ_GATES[mode] * hidden
    if gates_x.ndim != 2 or gates_x.shape[1] != g or gates_x.shape[0] % batch or \
            gates_x.shape[0] == 0:
        raise ValueError(f"{op}: gates_x must have shape (steps * {batch}, {g}) for h0 of shape "
                         f"{h0.shape}, got {gates_x.shape}")
    checks = [("w_hh", w_hh, (g, hidden)), ("bias_h", bias_h, (g,)), ("c0", c0, h0.shape)]
    for name, t, want in checks:
        if t is not None and t.shape != want:
            raise ValueError(f"{op}: {name} must have shape {want}, got {t.shape}")
    dtype = h0.dtype
    if dtype.name not in _DTYPES:
        raise TypeError(f"{op}: expected float16, bfloat16, float32 or float64 tensors, got "
                        f"{dtype.name}")
    for name, t in (("gates_x", gates_x), ("w_hh", w_hh), ("bias_h", bias_h), ("c0", c0)):
        if t is not None and t.dtype is not dtype:
            raise TypeError(f"{op}: {name} has dtype {t.dtype.name} but h0 has {dtype.name}")
    check_same_device(op, gates_x, w_hh, bias_h, h0, c0)
    if dtype.name in _DTYPES[:2]:
        return _through_float32(
            lambda gx, w, b, h, c: recurrent_sequence(mode, gx, w, b, h, c, reverse),
            gates_x, w_hh, bias_h, h0, c0)
    return apply(RecurrentSequence, gates_x, w_hh, bias_h, h0, c0, mode, bool(reverse))


RecurrentSequence.fn = staticmethod(recurrent_sequence)


def sequence_kernel_applies(x: Tensor) -> bool:
    """Whether x's device has the whole-loop kernels for x's dtype (float32/float64 on the
    CPU and CUDA backends; float16/bfloat16 run the float32 ones through a cast).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.rnn import sequence_kernel_applies
        >>> sequence_kernel_applies(st.zeros(1)), sequence_kernel_applies(st.zeros(1).half())
        (True, True)
    """
    if x.dtype.name not in _DTYPES:
        return False
    sfx = _dt.float32.suffix if x.dtype.name in _DTYPES[:2] else x.dtype.suffix
    return x._be.kernel(f"st_rnn_seq_forward_{sfx}") is not None
