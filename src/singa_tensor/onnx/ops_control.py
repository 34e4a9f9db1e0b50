"""ONNX import handlers for control flow (If, Loop, Scan), sequences and optionals.

Subgraph bodies run through `node.run_subgraph`, which sees the enclosing scope (`node.env`),
so a body may read any outer value by name. Each iteration is ordinary op calls, so gradients
flow through a loop exactly as through the unrolled graph.

ONNX sequences are Python lists of Tensors and an empty optional is None. A handler whose
single output may be a list returns it wrapped in a 1-tuple, so the executor does not take the
list for several outputs (ops listed in `_graph._SEQUENCE_OUT` return the bare list).

Example:
    >>> import numpy as np
    >>> from onnx import helper, TensorProto
    >>> import singa_tensor as st
    >>> nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], keepdims=0),
    ...          helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)]
    >>> g = helper.make_graph(nodes, "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    >>> st.onnx.prepare(helper.make_model(g)).run([np.eye(2, 3, dtype=np.float32)])[0].tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
"""

from __future__ import annotations

import singa_tensor as st

from ..tensor import Tensor
from ._graph import ints
from ._handlers import handler


def _scalar_int(node, t, what: str) -> int:
    if not isinstance(t, Tensor):
        raise node.fail(f"{what} must be a tensor, got {type(t).__name__}")
    v = ints(t)
    if len(v) != 1:
        raise node.fail(f"{what} must hold one integer, got shape {t.shape}")
    return v[0]


def _truth(node, t, what: str) -> bool:
    if not isinstance(t, Tensor) or t.numel() != 1:
        raise node.fail(f"{what} must be a one-element tensor, got "
                        f"{t.shape if isinstance(t, Tensor) else type(t).__name__}")
    return bool(t.cpu().numpy().reshape(-1)[0])


def _run_body(node, body, values: list, n_out: int | None = None) -> list:
    outs = node.run_subgraph(body, values, node.env)
    if n_out is not None and len(outs) != n_out:
        raise node.fail(f"body has {len(outs)} outputs, expected {n_out}")
    return outs


def _stack(node, items: list, dim: int = 0) -> Tensor:
    if any(not isinstance(v, Tensor) for v in items):
        raise node.fail("scan outputs must be tensors")
    shapes = {tuple(v.shape) for v in items}
    if len(shapes) > 1:
        raise node.fail(f"scan outputs change shape across iterations: {sorted(shapes)}")
    return st.stack(items, dim)


# ---- control flow ------------------------------------------------------------------------------


@handler("If")
def if_(node, inputs, attrs):
    if len(inputs) != 1 or inputs[0] is None:
        raise node.fail("expects one condition input")
    branch = "then_branch" if _truth(node, inputs[0], "condition") else "else_branch"
    if branch not in attrs:
        raise node.fail(f"missing attribute {branch!r}")
    outs = _run_body(node, attrs[branch], [])
    if len(outs) < node.n_out:
        raise node.fail(f"{branch} has {len(outs)} outputs, the node declares {node.n_out}")
    return tuple(outs[:node.n_out])


@handler("Loop")
def loop(node, inputs, attrs):
    if len(inputs) < 2 or "body" not in attrs:
        raise node.fail("expects inputs (M, cond, v_initial...) and a body attribute")
    m, cond, state = inputs[0], inputs[1], list(inputs[2:])
    trips = None if m is None else _scalar_int(node, m, "trip count M")
    keep = True if cond is None else _truth(node, cond, "cond")
    n_state = len(state)
    n_scan = node.n_out - n_state
    if n_scan < 0:
        raise node.fail(f"{n_state} loop-carried values but only {node.n_out} outputs")
    scans: list = [[] for _ in range(n_scan)]
    it = 0
    while keep and (trips is None or it < trips):
        values = [node.const(it, dtype=st.int64), node.const(keep, dtype=st.bool), *state]
        outs = _run_body(node, attrs["body"], values, 1 + n_state + n_scan)
        keep = _truth(node, outs[0], "body condition output")
        state = list(outs[1:1 + n_state])
        for k in range(n_scan):
            scans[k].append(outs[1 + n_state + k])
        it += 1
    # with no iteration the scan outputs have an unknown element shape: give an empty float tensor
    stacked = [_stack(node, s) if s else st.zeros(0, device=node.device) for s in scans]
    return tuple(state + stacked)


def _norm_axis(node, axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise node.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def _scan_steps(node, body, state: list, xs: list, in_axes: list, in_dirs: list,
                n_out: int, length: int | None = None) -> tuple:
    """Run body over the scan axis of xs; returns (final states, per-output lists of values)."""
    steps = xs[0].shape[in_axes[0]]
    for x, ax in zip(xs, in_axes):
        if x.shape[ax] != steps:
            raise node.fail(f"scan inputs differ in length along the scan axis: {steps} and "
                            f"{x.shape[ax]}")
    if length is not None:
        steps = min(steps, length)
    n_state = len(state)
    outs_per_step: list = [[] for _ in range(n_out - n_state)]
    for t in range(steps):
        elems = [st.select(x, ax, (x.shape[ax] - 1 - t) if d else t)
                 for x, ax, d in zip(xs, in_axes, in_dirs)]
        outs = _run_body(node, body, state + elems, n_out)
        state = list(outs[:n_state])
        for k, v in enumerate(outs[n_state:]):
            outs_per_step[k].append(v)
    return state, outs_per_step


@handler("Scan")
def scan(node, inputs, attrs):
    body = attrs.get("body")
    if body is None:
        raise node.fail("missing attribute 'body'")
    n_out = node.n_out
    if node.opset < 9:
        return _scan8(node, inputs, attrs, body, n_out)
    n_scan = attrs.get("num_scan_inputs")
    if n_scan is None or not 0 < n_scan <= len(inputs):
        raise node.fail(f"num_scan_inputs={n_scan} does not fit {len(inputs)} inputs")
    state, xs = list(inputs[:len(inputs) - n_scan]), list(inputs[len(inputs) - n_scan:])
    in_axes = attrs.get("scan_input_axes", [0] * n_scan)
    in_dirs = attrs.get("scan_input_directions", [0] * n_scan)
    if len(in_axes) != n_scan or len(in_dirs) != n_scan:
        raise node.fail(f"scan_input_axes/directions need {n_scan} entries")
    in_axes = [_norm_axis(node, a, x.ndim, "scan_input_axes entry") for a, x in zip(in_axes, xs)]
    n_scan_out = n_out - len(state)
    out_axes = attrs.get("scan_output_axes", [0] * n_scan_out)
    out_dirs = attrs.get("scan_output_directions", [0] * n_scan_out)
    if len(out_axes) != n_scan_out or len(out_dirs) != n_scan_out:
        raise node.fail(f"scan_output_axes/directions need {n_scan_out} entries")
    state, per_step = _scan_steps(node, body, state, xs, in_axes, in_dirs, n_out)
    results = []
    for vals, ax, d in zip(per_step, out_axes, out_dirs):
        if not vals:
            raise node.fail("a scan with zero steps cannot produce scan outputs")
        if d:
            vals = vals[::-1]
        results.append(_stack(node, vals, _norm_axis(node, ax, vals[0].ndim + 1,
                                                     "scan_output_axes entry")))
    return tuple(state + results)


def _scan8(node, inputs, attrs, body, n_out):
    # opset 8: a leading batch axis on every state and scan input, and optional sequence_lens
    lens, rest = inputs[0], list(inputs[1:])
    n_scan = attrs.get("num_scan_inputs")
    if n_scan is None or not 0 < n_scan <= len(rest):
        raise node.fail(f"num_scan_inputs={n_scan} does not fit {len(rest)} inputs")
    state, xs = rest[:len(rest) - n_scan], rest[len(rest) - n_scan:]
    dirs = attrs.get("directions", [0] * n_scan)
    if len(dirs) != n_scan:
        raise node.fail(f"directions needs {n_scan} entries, got {dirs}")
    batch, steps = xs[0].shape[0], xs[0].shape[1]
    lens = [None] * batch if lens is None else ints(lens)
    if len(lens) != batch:
        raise node.fail(f"sequence_lens has {len(lens)} entries for batch {batch}")
    finals: list = [[] for _ in state]
    scans: list = [[] for _ in range(n_out - len(state))]
    for b in range(batch):
        s_b = [st.select(s, 0, b) for s in state]
        x_b = [st.select(x, 0, b) for x in xs]
        s_b, per_step = _scan_steps(node, body, s_b, x_b, [0] * n_scan, dirs, n_out, lens[b])
        for k, v in enumerate(s_b):
            finals[k].append(v)
        for k, vals in enumerate(per_step):
            if not vals:
                raise node.fail(f"batch entry {b} has no steps, so its scan outputs have no "
                                "shape")
            # steps past this entry's length are zeros, as onnxruntime writes them
            vals = vals + [st.zeros_like(vals[0])] * (steps - len(vals))
            scans[k].append(_stack(node, vals))
    return tuple([_stack(node, f) for f in finals] + [_stack(node, s) for s in scans])


# ---- sequences ---------------------------------------------------------------------------------


def _seq(node, s) -> list:
    if not isinstance(s, list):
        raise node.fail(f"expected a sequence, got {type(s).__name__}")
    return s


def _position(node, pos, n: int, allow_end: bool) -> int:
    p = _scalar_int(node, pos, "position")
    hi = n if allow_end else n - 1
    if not -n <= p <= hi:
        raise node.fail(f"position {p} is out of range for a sequence of length {n}")
    return p + n if p < 0 else p


@handler("SequenceEmpty")
def sequence_empty(node, inputs, attrs):
    return []


@handler("SequenceConstruct")
def sequence_construct(node, inputs, attrs):
    if any(not isinstance(x, Tensor) for x in inputs):
        raise node.fail("all inputs must be tensors")
    return list(inputs)


@handler("SequenceInsert")
def sequence_insert(node, inputs, attrs):
    seq = list(_seq(node, inputs[0]))
    value = inputs[1]
    pos = len(seq) if len(inputs) < 3 or inputs[2] is None else \
        _position(node, inputs[2], len(seq), True)
    seq.insert(pos, value)
    return seq


@handler("SequenceAt")
def sequence_at(node, inputs, attrs):
    seq = _seq(node, inputs[0])
    return seq[_position(node, inputs[1], len(seq), False)]


@handler("SequenceErase")
def sequence_erase(node, inputs, attrs):
    seq = list(_seq(node, inputs[0]))
    if not seq:
        raise node.fail("cannot erase from an empty sequence")
    pos = len(seq) - 1 if len(inputs) < 2 or inputs[1] is None else \
        _position(node, inputs[1], len(seq), False)
    del seq[pos]
    return seq


@handler("SequenceLength")
def sequence_length(node, inputs, attrs):
    return node.const(len(_seq(node, inputs[0])), dtype=st.int64)


@handler("SplitToSequence")
def split_to_sequence(node, inputs, attrs):
    x = inputs[0]
    axis = _norm_axis(node, attrs.get("axis", 0), x.ndim, "axis")
    n = x.shape[axis]
    split = inputs[1] if len(inputs) > 1 else None
    if split is None:
        parts = list(st.split(x, 1, axis))
        return parts if attrs.get("keepdims", 1) else [p.squeeze(axis) for p in parts]
    sizes = ints(split)
    if split.ndim == 0:
        if sizes[0] <= 0:
            raise node.fail(f"split size must be positive, got {sizes[0]}")
        return list(st.split(x, sizes[0], axis))
    if any(s < 0 for s in sizes) or sum(sizes) != n:
        raise node.fail(f"split sizes {sizes} do not add up to {n} along axis {axis}")
    return list(st.split(x, sizes, axis))


@handler("ConcatFromSequence")
def concat_from_sequence(node, inputs, attrs):
    seq = _seq(node, inputs[0])
    if not seq:
        raise node.fail("cannot concatenate an empty sequence")
    if "axis" not in attrs:
        raise node.fail("missing attribute 'axis'")
    new_axis = attrs.get("new_axis", 0)
    rank = seq[0].ndim + (1 if new_axis else 0)
    axis = _norm_axis(node, attrs["axis"], rank, "axis")
    return st.stack(seq, axis) if new_axis else st.cat(seq, axis)


@handler("SequenceMap")
def sequence_map(node, inputs, attrs):
    seq = _seq(node, inputs[0])
    n = len(seq)
    for x in inputs[1:]:
        if isinstance(x, list) and len(x) != n:
            raise node.fail(f"input sequences differ in length: {n} and {len(x)}")
    results: list = [[] for _ in range(node.n_out)]
    for i in range(n):
        values = [x[i] if isinstance(x, list) else x for x in inputs]
        for k, v in enumerate(_run_body(node, attrs["body"], values, node.n_out)):
            results[k].append(v)
    return tuple(results)


# ---- optionals ---------------------------------------------------------------------------------


@handler("Optional")
def optional(node, inputs, attrs):
    return (inputs[0] if inputs else None,)


@handler("OptionalHasElement")
def optional_has_element(node, inputs, attrs):
    present = bool(inputs) and inputs[0] is not None
    return node.const(present, dtype=st.bool)


@handler("OptionalGetElement")
def optional_get_element(node, inputs, attrs):
    if not inputs or inputs[0] is None:
        raise node.fail("the optional input is empty")
    return (inputs[0],)


# ---- training preview ----------------------------------------------------------------------------


@handler("ai.onnx.preview.training::Gradient")
def gradient(node, inputs, attrs):
    """dy/dx for each x in `xs`: the part of the graph from xs (and zs) to y is run again with
    the xs as fresh leaves and differentiated by our autograd (seed: ones)."""
    from onnx import helper

    from .. import autograd
    from ._graph import Graph

    xs, zs, y = attrs.get("xs", []), attrs.get("zs", []), attrs.get("y")
    if not xs or y is None or len(inputs) != len(xs) + len(zs):
        raise node.fail(f"needs xs, y and one input per name in xs and zs (got {len(inputs)})")
    g = node.graph.proto
    nodes = [n for n in g.node if n.op_type != "Gradient"]
    sub = helper.make_graph(nodes, "gradient", [helper.make_value_info(n, helper.TypeProto())
                                                for n in xs + zs],
                            [helper.make_value_info(y, helper.TypeProto())])
    graph = Graph(sub, node.graph.opsets, node.graph.constants, outputs=[y])
    leaves = [x.detach().requires_grad_(True) for x in inputs[:len(xs)]]
    with autograd.enable_grad():
        out = graph.run(leaves + list(inputs[len(xs):]), node.env, node.device)[0]
        grads = autograd.grad([out], leaves, grad_outputs=[st.ones_like(out)],
                              allow_unused=True)
    return tuple(st.zeros_like(x) if d is None else d.detach() for x, d in zip(leaves, grads))
