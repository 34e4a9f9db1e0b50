"""ONNX import handlers for recurrent layers (LSTM, GRU, RNN) and attention.

The recurrent layers are composed from Tensor ops (one matrix product projects every time step's
input, then one product and the gate arithmetic per step), so every ONNX variant (activations,
clip, peepholes, sequence_lens, linear_before_reset, layout) is plain code and gradients reach
W, R, B and the initial states. Variable sequence lengths are handled with masks: past its
length a batch entry keeps its state and emits zeros, as ONNX specifies.

The plain LSTM (default activations, no clip, no peepholes, input_forget=0) and GRU (the same,
with linear_before_reset=1, PyTorch's form) over full-length sequences take nn.LSTM/nn.GRU's
route instead: the weight rows are put in the fused cells' gate order once per call (with
index_select, so gradients reach the ONNX tensors), then a step is one product and one fused cell.

Example:
    >>> import numpy as np
    >>> from onnx import helper, TensorProto
    >>> import singa_tensor as st
    >>> node = helper.make_node("RNN", ["x", "w", "r"], ["y", "y_h"], hidden_size=2)
    >>> f = TensorProto.FLOAT
    >>> g = helper.make_graph([node], "g",
    ...     [helper.make_tensor_value_info(n, f, s) for n, s in
    ...      (("x", [1, 1, 1]), ("w", [1, 2, 1]), ("r", [1, 2, 2]))],
    ...     [helper.make_tensor_value_info(n, f, s) for n, s in
    ...      (("y", [1, 1, 1, 2]), ("y_h", [1, 1, 2]))])
    >>> ones = [np.ones(s, np.float32) for s in ((1, 1, 1), (1, 2, 1), (1, 2, 2))]
    >>> st.onnx.prepare(helper.make_model(g)).run(ones)[1].astype(float).round(4).tolist()
    [[[0.7616, 0.7616]]]
"""

from __future__ import annotations

import numpy as np

import singa_tensor as st

from ..ops import rnn as _cells
from ..tensor import Tensor
from ._graph import ints
from ._handlers import handler

# name -> (fn(x, alpha, beta), default alpha, default beta); None where the activation takes none
_ACTIVATIONS = {
    "sigmoid": (lambda x, a, b: st.sigmoid(x), None, None),
    "tanh": (lambda x, a, b: st.tanh(x), None, None),
    "relu": (lambda x, a, b: st.relu(x), None, None),
    "leakyrelu": (lambda x, a, b: st.where(x >= 0, x, x * a), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: st.where(x > a, x, x * 0.0), 1.0, None),
    "elu": (lambda x, a, b: st.where(x > 0, x, (st.exp(x) - 1.0) * a), 1.0, None),
    "softsign": (lambda x, a, b: x / (st.abs(x) + 1.0), None, None),
    "softplus": (lambda x, a, b: st.softplus(x), None, None),
    "affine": (lambda x, a, b: x * a + b, 1.0, 0.0),
    "scaledtanh": (lambda x, a, b: st.tanh(x * b) * a, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: st.clamp(x * a + b, 0.0, 1.0), 0.2, 0.5),
}

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def _activations(node, attrs, n_dir: int) -> list:
    """Per direction, the list of activation callables (alpha/beta bound)."""
    per_dir = len(_DEFAULT_ACTS[node.op_type])
    names = attrs.get("activations") or _DEFAULT_ACTS[node.op_type] * n_dir
    if len(names) == per_dir and n_dir == 2:
        names = names * 2
    if len(names) != per_dir * n_dir:
        raise node.fail(f"expected {per_dir * n_dir} activations, got {names}")
    alphas = list(attrs.get("activation_alpha", []))
    betas = list(attrs.get("activation_beta", []))
    fns = []
    for i, name in enumerate(names):
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            raise node.fail(f"activation {name!r} is not supported")
        fn, da, db = entry
        # alpha/beta lists are indexed like the activations list itself (onnxruntime's reading)
        a = alphas[i] if i < len(alphas) and da is not None else da
        b = betas[i] if i < len(betas) and db is not None else db
        fns.append(lambda x, _f=fn, _a=a, _b=b: _f(x, _a, _b))
    return [fns[d * per_dir:(d + 1) * per_dir] for d in range(n_dir)]


def _parts(x: Tensor, n: int) -> list:
    size = x.shape[-1] // n
    return [st.narrow(x, x.ndim - 1, k * size, size) for k in range(n)]


def _check(node, inputs, n_gates: int) -> tuple:
    if len(inputs) < 3 or any(v is None for v in inputs[:3]):
        raise node.fail("expects inputs X, W and R")
    x, w, r = inputs[:3]
    if x.ndim != 3 or w.ndim != 3 or r.ndim != 3:
        raise node.fail(f"X, W and R must be 3-D, got shapes {x.shape}, {w.shape}, {r.shape}")
    n_dir, gh, hidden = r.shape
    if gh != n_gates * hidden:
        raise node.fail(f"R has shape {r.shape}, expected (dirs, {n_gates}*hidden, hidden)")
    return x, w, r, n_dir, hidden


def _recurrent(node, inputs, attrs, step):
    """Shared driver: validates, projects inputs, runs `step` over time for each direction.

    step(gx, h, c, d, acts, weights) -> (h, c) for one time step of direction d; gx is the
    projected input (batch, gates*hidden) with the input bias added.
    """
    op = node.op_type
    n_gates = _GATES[op]
    x, w, r, n_dir, hidden = _check(node, inputs, n_gates)
    extra = list(inputs[3:]) + [None] * (8 - len(inputs))
    b, lens, h0 = extra[0], extra[1], extra[2]
    c0 = extra[3] if op == "LSTM" else None
    peep = extra[4] if op == "LSTM" else None
    direction = attrs.get("direction", "forward")
    want_dir = 2 if direction == "bidirectional" else 1
    if direction not in ("forward", "reverse", "bidirectional") or n_dir != want_dir:
        raise node.fail(f"direction {direction!r} does not match {n_dir} weight directions")
    if attrs.get("hidden_size", hidden) != hidden:
        raise node.fail(f"hidden_size={attrs['hidden_size']} but R has shape {r.shape}")
    layout = attrs.get("layout", 0)
    if layout:
        x = x.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    steps, batch, n_in = x.shape
    if w.shape != (n_dir, n_gates * hidden, n_in):
        raise node.fail(f"W has shape {w.shape}, expected {(n_dir, n_gates * hidden, n_in)}")
    for name, v, shape in (("B", b, (n_dir, 2 * n_gates * hidden)),
                           ("initial_h", h0, (n_dir, batch, hidden)),
                           ("initial_c", c0, (n_dir, batch, hidden)),
                           ("P", peep, (n_dir, 3 * hidden))):
        if v is not None and tuple(v.shape) != shape:
            raise node.fail(f"{name} has shape {v.shape}, expected {shape}")
    mask = None
    if lens is not None:
        lv = ints(lens)
        if len(lv) != batch or any(not 0 <= n <= steps for n in lv):
            raise node.fail(f"sequence_lens {lv} does not fit batch {batch} and {steps} steps")
        if any(n != steps for n in lv):
            mask = lens.reshape(1, batch, 1).to(st.int64) > node.const(
                list(range(steps)), dtype=st.int64).reshape(steps, 1, 1)
    clip = attrs.get("clip")
    acts = _activations(node, attrs, n_dir)
    zeros = st.zeros(batch, hidden, dtype=x.dtype, device=x.device)
    ys, hs, cs = [], [], []
    fast = _fast_ok(node, attrs, (x, w, r, b, h0, c0), peep, mask)
    perm = None
    if fast:
        rows = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in _CELL_ORDER[op]])
        perm = node.const(rows.astype(np.int64)) if hidden else None
        x2d = x.reshape(steps * batch, n_in)
    for d in range(n_dir):
        reverse = direction == "reverse" or d == 1
        if fast:
            y_d, h, c = _fast_direction(op, x2d, steps, batch, w[d], r[d],
                                        None if b is None else b[d], perm, hidden,
                                        zeros if h0 is None else h0[d],
                                        zeros if c0 is None else c0[d], reverse)
            ys.append(y_d)
            hs.append(h)
            cs.append(c)
            continue
        wb = rb = None
        if b is not None:
            wb, rb = _parts(b[d], 2)
        gx = st.matmul(x, w[d].transpose(0, 1))
        if wb is not None:
            gx = gx + wb
        weights = {"R": r[d], "Rb": rb, "P": None if peep is None else _parts(peep[d], 3),
                   "clip": clip, "hidden": hidden, "input_forget": attrs.get("input_forget", 0)}
        h = zeros if h0 is None else h0[d]
        c = zeros if c0 is None else c0[d]
        out = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            h_new, c_new = step(gx[t], h, c, acts[d], weights)
            if mask is not None:
                h_new = st.where(mask[t], h_new, h)
                c_new = None if c_new is None else st.where(mask[t], c_new, c)
                out[t] = st.where(mask[t], h_new, zeros)
            else:
                out[t] = h_new
            h, c = h_new, c_new
        ys.append(st.stack(out, 0) if steps else st.zeros(0, batch, hidden, dtype=x.dtype,
                                                           device=x.device))
        hs.append(h)
        cs.append(c)
    # (seq, dirs, batch, hidden); one direction is a view, not a copy
    y = st.stack(ys, 1) if n_dir > 1 else ys[0].unsqueeze(1)
    y_h = st.stack(hs, 0) if n_dir > 1 else hs[0].unsqueeze(0)
    y_c = None
    if op == "LSTM":
        y_c = st.stack(cs, 0) if n_dir > 1 else cs[0].unsqueeze(0)
    if layout:
        y = y.permute(2, 0, 1, 3)
        y_h = y_h.transpose(0, 1)
        y_c = None if y_c is None else y_c.transpose(0, 1)
    outs = (y, y_h, y_c)[:node.n_out]
    return outs if len(outs) > 1 else outs[0]


# the ONNX gate blocks in the fused cells' order: LSTM i,o,f,c -> i,f,g,o; GRU z,r,h -> r,z,n
_CELL_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2)}


def _fast_ok(node, attrs, tensors, peep, mask) -> bool:
    """Whether the node is the plain form the fused cells compute exactly."""
    op = node.op_type
    if op not in _CELL_ORDER or mask is not None or attrs.get("clip") is not None:
        return False
    x = tensors[0]
    if x.dtype not in (st.float32, st.float64) or x.shape[0] == 0:
        return False
    if any(t is not None and (t.dtype is not x.dtype or t.device != x.device) for t in tensors):
        return False
    if op == "LSTM" and (peep is not None or attrs.get("input_forget", 0)):
        return False
    if op == "GRU" and not attrs.get("linear_before_reset", 0):
        return False
    names = attrs.get("activations")
    if names:  # their count is already checked; alpha/beta do not affect sigmoid and tanh
        default = [a.lower() for a in _DEFAULT_ACTS[op]]
        if [a.lower() for a in names] != default * (len(names) // len(default)):
            return False
    return True


def _fast_direction(op, x2d, steps, batch, w, r, b, perm, hidden, h, c, reverse):
    """(y (steps, batch, hidden), h, c) of one direction through the fused cells."""
    if perm is not None:
        w, r = st.index_select(w, 0, perm), st.index_select(r, 0, perm)
    cell_bias = None
    if b is not None:
        wb, rb = _parts(b, 2)
        if perm is not None:
            wb, rb = st.index_select(wb, 0, perm), st.index_select(rb, 0, perm)
        if op == "GRU":  # r scales h's part of n together with its bias: that stays in the cell
            cell_bias = rb
            gx = st.addmm(wb, x2d, w.t())
        else:
            gx = st.addmm(wb + rb, x2d, w.t())
    else:
        gx = st.matmul(x2d, w.t())
    gx_steps = _cells.split_rows(gx, [batch] * steps) if steps > 1 else (gx,)
    r_t = r.t()
    tape: list = []  # shared by the steps' products, see ops.rnn.RecurrentMatmul
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    out = [None] * steps
    for t in order:
        gh = _cells.recurrent_matmul(h, r_t, tape, t == order[0])
        if op == "LSTM":
            h, c = _cells.lstm_cell(gx_steps[t], gh, None, c)
        else:
            h = _cells.gru_cell(gx_steps[t], gh, cell_bias, h)
        out[t] = h
    y = st.cat(out, 0) if steps > 1 else out[0]
    return y.reshape(steps, batch, hidden), h, (c if op == "LSTM" else None)


def _clip(v: Tensor, clip) -> Tensor:
    return v if clip is None else st.clamp(v, -clip, clip)


def _lstm_step(gx, h, c, acts, wt):
    f_act, g_act, h_act = acts
    gates = gx + st.matmul(h, wt["R"].transpose(0, 1))
    if wt["Rb"] is not None:
        gates = gates + wt["Rb"]
    i, o, f, cand = _parts(gates, 4)
    if wt["P"] is not None:
        p_i, p_o, p_f = wt["P"]
        i = i + p_i * c
        f = f + p_f * c
    clip = wt["clip"]
    i = f_act(_clip(i, clip))
    f = 1.0 - i if wt["input_forget"] else f_act(_clip(f, clip))
    c_new = f * c + i * g_act(_clip(cand, clip))
    if wt["P"] is not None:
        o = o + wt["P"][1] * c_new
    h_new = f_act(_clip(o, clip)) * h_act(c_new)
    return h_new, c_new


def _gru_step(gx, h, c, acts, wt, linear_before_reset=0):
    f_act, g_act = acts
    hidden = wt["hidden"]
    r_w = wt["R"]
    x_z, x_r, x_h = _parts(gx, 3)
    rb = _parts(wt["Rb"], 3) if wt["Rb"] is not None else (None, None, None)
    hz = st.matmul(h, r_w[:2 * hidden].transpose(0, 1))
    h_z, h_r = _parts(hz, 2)
    if rb[0] is not None:
        h_z, h_r = h_z + rb[0], h_r + rb[1]
    clip = wt["clip"]
    z = f_act(_clip(x_z + h_z, clip))
    rr = f_act(_clip(x_r + h_r, clip))
    r_h = r_w[2 * hidden:].transpose(0, 1)
    if linear_before_reset:
        hh = st.matmul(h, r_h)
        if rb[2] is not None:
            hh = hh + rb[2]
        hh = rr * hh
    else:
        hh = st.matmul(rr * h, r_h)
        if rb[2] is not None:
            hh = hh + rb[2]
    cand = g_act(_clip(x_h + hh, clip))
    return (1.0 - z) * cand + z * h, None


def _rnn_step(gx, h, c, acts, wt):
    pre = gx + st.matmul(h, wt["R"].transpose(0, 1))
    if wt["Rb"] is not None:
        pre = pre + wt["Rb"]
    return acts[0](_clip(pre, wt["clip"])), None


@handler("LSTM")
def lstm(node, inputs, attrs):
    return _recurrent(node, inputs, attrs, _lstm_step)


@handler("GRU")
def gru(node, inputs, attrs):
    lbr = attrs.get("linear_before_reset", 0)
    return _recurrent(node, inputs, attrs,
                      lambda gx, h, c, acts, wt: _gru_step(gx, h, c, acts, wt, lbr))


@handler("RNN")
def rnn(node, inputs, attrs):
    return _recurrent(node, inputs, attrs, _rnn_step)


# ---- Attention (opset 23+) ---------------------------------------------------------------------


def _heads(node, t: Tensor, heads, what: str) -> Tensor:
    """(batch, seq, heads*size) -> (batch, heads, seq, size)."""
    if heads is None or heads <= 0 or t.shape[2] % heads:
        raise node.fail(f"3-D {what} of shape {t.shape} needs q_num_heads/kv_num_heads "
                        f"dividing its last dimension, got {heads}")
    b, s, hidden = t.shape
    return t.reshape(b, s, heads, hidden // heads).permute(0, 2, 1, 3)


def _structural_bias(n_q: int, n_kv: int, causal: bool, left: int, right: int, offset, lens,
                     dtype):
    """The constant -inf/0 bias of causal, sliding-window and key-padding masks (numpy), or
    None; offset is the causal frontier (scalar, or per batch for an external cache)."""
    if not causal and left < 0 and right < 0 and lens is None:
        return None
    i = np.arange(n_q).reshape(n_q, 1)
    j = np.arange(n_kv).reshape(1, n_kv)
    off = np.asarray(offset).reshape(-1, 1, 1) if np.ndim(offset) else int(offset)
    allowed = np.ones((n_q, n_kv), bool)
    diff = (i + off) - j
    if causal:
        allowed = allowed & (diff >= 0)
    if left >= 0:
        allowed = allowed & (diff <= left)
    if right >= 0:
        allowed = allowed & (-diff <= right)
    if lens is not None:
        allowed = allowed & (np.arange(n_kv) < np.asarray(lens).reshape(-1, 1, 1))
    if allowed.ndim == 3:
        allowed = allowed[:, None]  # (batch, 1, q, kv)
    return np.where(allowed, 0.0, -np.inf).astype(dtype)


@handler("Attention")
def attention(node, inputs, attrs):
    ins = list(inputs) + [None] * (7 - len(inputs))
    q, k, v, mask, past_k, past_v, nonpad = ins[:7]
    if q is None or k is None or v is None:
        raise node.fail("expects inputs Q, K and V")
    if not q.ndim == k.ndim == v.ndim or q.ndim not in (3, 4):
        raise node.fail(f"Q, K, V must all be 3-D or all 4-D, got {q.shape}, {k.shape}, "
                        f"{v.shape}")
    if (past_k is None) != (past_v is None):
        raise node.fail("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise node.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    three_d = q.ndim == 3
    if three_d:
        q = _heads(node, q, attrs.get("q_num_heads"), "Q")
        k = _heads(node, k, attrs.get("kv_num_heads"), "K")
        v = _heads(node, v, attrs.get("kv_num_heads"), "V")
    if past_k is not None:
        k = st.cat([past_k, k], 2)
        v = st.cat([past_v, v], 2)
    present_k, present_v = k, v
    batch, q_heads, n_q, head = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    if k.shape[0] != batch or v.shape[:3] != (batch, kv_heads, n_kv) or k.shape[3] != head:
        raise node.fail(f"K {k.shape} and V {v.shape} do not match Q {q.shape}")
    if q_heads != kv_heads:
        if q_heads % kv_heads:
            raise node.fail(f"{q_heads} query heads are not a multiple of {kv_heads} kv heads")
        reps = q_heads // kv_heads
        k = k.unsqueeze(2).expand(batch, kv_heads, reps, n_kv, head).reshape(
            batch, q_heads, n_kv, head)
        v = v.unsqueeze(2).expand(batch, kv_heads, reps, n_kv, v.shape[3]).reshape(
            batch, q_heads, n_kv, v.shape[3])
    scale = attrs.get("scale")
    root = float(np.sqrt(scale if scale is not None else 1.0 / np.sqrt(head)))
    qk = st.matmul(q * root, k.transpose(2, 3) * root)
    softcap = attrs.get("softcap", 0.0)
    if softcap and softcap > 0:
        qk = st.tanh(qk / softcap) * softcap
    # the additive bias: user mask (bool -> 0/-inf, padded to the kv length) plus structural masks
    bias = None
    if mask is not None:
        if mask.dtype == st.bool:
            mask = st.where(mask, node.const(0.0, dtype=q.dtype),
                            node.const(float("-inf"), dtype=q.dtype))
        if mask.shape[-1] < n_kv:
            pad = st.full(tuple(mask.shape[:-1]) + (n_kv - mask.shape[-1],), float("-inf"),
                          dtype=mask.dtype, device=mask.device)
            mask = st.cat([mask, pad], mask.ndim - 1)
        bias = mask.to(q.dtype)
    past_len = 0 if past_k is None else past_k.shape[2]
    lens = None if nonpad is None else np.asarray(ints(nonpad))
    offset = lens - n_q if lens is not None else past_len
    struct = _structural_bias(n_q, n_kv, bool(attrs.get("is_causal", 0)),
                              attrs.get("left_window_size", -1),
                              attrs.get("right_window_size", -1), offset, lens, np.float64)
    if struct is not None:
        s = node.const(struct).to(q.dtype)
        bias = s if bias is None else bias + s
    scores = qk if bias is None else qk + bias
    mode = attrs.get("qk_matmul_output_mode", 0)
    qk_out = scores if mode == 2 else qk
    precision = attrs.get("softmax_precision")
    work = scores
    if precision is not None:
        from ._graph import st_dtype

        work = work.to(st_dtype(precision, node.name))
    if bias is not None:
        # a row whose every key is masked attends to nothing (zeros), not NaN
        dead = st.amax(bias, -1, keepdim=True) == float("-inf")
        work = st.where(dead, node.const(0.0, dtype=work.dtype), work)
        probs = st.where(dead, node.const(0.0, dtype=work.dtype), st.softmax(work, -1))
    else:
        probs = st.softmax(work, -1)
    probs = probs.to(q.dtype)
    if mode == 3:
        qk_out = probs
    y = st.matmul(probs, v)
    if three_d:
        y = y.permute(0, 2, 1, 3).reshape(batch, n_q, -1)
    return (y, present_k, present_v, qk_out)[:max(node.n_out, 1)]


@handler("RotaryEmbedding")
def rotary_embedding(node, inputs, attrs):
    ins = list(inputs) + [None] * (4 - len(inputs))
    x, cos, sin, pos = ins[:4]
    if x is None or cos is None or sin is None:
        raise node.fail("expects inputs X, cos_cache and sin_cache")
    if x.ndim not in (3, 4):
        raise node.fail(f"X must be 3-D or 4-D, got shape {x.shape}")
    shape = x.shape
    if x.ndim == 4:
        x = x.permute(0, 2, 1, 3)  # (batch, seq, heads, head)
    else:
        heads = attrs.get("num_heads", 0)
        if not heads or shape[2] % heads:
            raise node.fail(f"3-D X of shape {shape} needs num_heads dividing {shape[2]}, "
                            f"got {heads}")
        x = x.reshape(shape[0], shape[1], heads, shape[2] // heads)
    batch, seq, _, head = x.shape
    dim = attrs.get("rotary_embedding_dim", 0) or head
    if dim > head or dim % 2:
        raise node.fail(f"rotary_embedding_dim {dim} must be even and at most head size {head}")
    half = dim // 2
    if pos is not None:
        idx = pos.reshape(-1).to(st.int64)
        n_pos = cos.shape[0]
        if any(not 0 <= i < n_pos for i in ints(idx)):
            raise node.fail(f"position_ids out of range for a cache of {n_pos} positions")
        cos = st.index_select(cos, 0, idx).reshape(batch, seq, cos.shape[-1])
        sin = st.index_select(sin, 0, idx).reshape(batch, seq, sin.shape[-1])
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise node.fail(f"cos/sin caches end in {cos.shape[-1]}/{sin.shape[-1]}, expected "
                        f"rotary_embedding_dim/2 = {half}")
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    rot = st.narrow(x, 3, 0, dim)
    if attrs.get("interleaved", 0):
        pairs = rot.reshape(batch, seq, x.shape[2], half, 2)
        x1, x2 = st.select(pairs, 4, 0), st.select(pairs, 4, 1)
    else:
        x1, x2 = st.narrow(rot, 3, 0, half), st.narrow(rot, 3, half, half)
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if attrs.get("interleaved", 0):
        rot = st.stack([real, imag], -1).reshape(rot.shape)
    else:
        rot = st.cat([real, imag], 3)
    out = st.cat([rot, st.narrow(x, 3, dim, head - dim)], 3) if dim < head else rot
    return out.reshape(shape) if len(shape) == 3 else out.permute(0, 2, 1, 3)
