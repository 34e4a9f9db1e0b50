"""The inference path of an imported model: folded once, compiled once per input signature,
replayed afterwards.

`OnnxModule.forward` takes this path when no gradient is wanted (grad mode off, or neither
the inputs nor the parameters require grad) and `module.fast` is on; otherwise it runs the
plain plan (`_graph.run_steps`) on the original nodes, so training is untouched.

What the inference path does, in order:

1. Folding (`fold`), redone whenever a constant was replaced or written in place (the
   parameters' identities and storage versions are its key):
   - constant folding: a node whose inputs are all constants (initializers, Constant nodes,
     earlier folded values) runs once and its outputs become constants; random, control-flow
     and sequence ops, nodes whose outputs leave the graph and results larger than
     `_FOLD_LIMIT` elements stay;
   - batch norm into conv: an inference-mode BatchNormalization whose input is a Conv output
     used by nothing else, with constant weights and statistics, becomes a Conv with weight
     w * s and bias (b - mean) * s + beta, s = scale / sqrt(var + eps) (computed in float64,
     rounded once to the weight's dtype);
   - conv + relu: a Relu that is the only reader of a Conv output runs in place on it.
   The module's parameters keep their values and names: folded weights are new tensors held
   by the plan.
2. Per input signature (each input's shape, dtype and device): the first call runs the folded
   plan eagerly while watching host reads. A node with an input computed from the data that
   reads values on the host (NonZero, a Reshape whose target shape comes from the data, ...)
   makes the graph data-dependent: that signature keeps running the folded plan eagerly, as
   do graphs with control-flow or sequence ops, graphs that compute string values (host numpy
   arrays) and calls with non-tensor inputs. Otherwise the values of Shape and Size nodes are
   now known and folded in as well, the second call records the plan in graph mode
   (`st.compile`), and later calls replay the recording. A recording that graph mode refuses
   (GraphError) or a replay whose guard fails also falls back to the eager plan for that
   signature (for a refused replay: for that call, and the signature records again next call,
   up to `_MAX_RERECORDS` times). At most `_MAX_SIGNATURES` signatures keep a recording; the
   oldest is dropped beyond that.
"""

from __future__ import annotations

import numpy as np

from .. import _execution, autograd
from .. import dtype as _dt
from ..ops.conv_onednn import conv_chain, keep_weights
from ..tensor import Tensor
from ._graph import Node, OnnxImportError, _free_names, _subgraph_protos, is_strings, run_steps

# ops that must run on every call: random draws, stateful or control-flow ops, sequences
_NO_FOLD_PREFIX = ("Random",)
_NO_FOLD = {"Bernoulli", "Multinomial", "Dropout", "If", "Loop", "Scan", "SequenceMap",
            "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
            "SequenceAt", "SequenceLength", "SplitToSequence", "ConcatFromSequence",
            "Optional", "OptionalGetElement", "OptionalHasElement"}
# graphs with these run eagerly: their Python control flow depends on values
_NO_COMPILE = {"If", "Loop", "Scan", "SequenceMap", "SequenceEmpty", "SequenceConstruct",
               "SequenceInsert", "SequenceErase", "SequenceAt", "SequenceLength",
               "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
               "OptionalHasElement"}
_FOLD_LIMIT = 1 << 22  # elements: a folded result larger than this is recomputed instead
_MAX_SIGNATURES = 8
_MAX_RERECORDS = 3  # replays refused by a guard before a signature stays eager
_FOLD_DTYPES = (_dt.float32, _dt.float64)


def _clone_node(node: Node, inputs=None, outputs=None) -> Node:
    c = object.__new__(Node)
    for slot in Node.__slots__:
        object.__setattr__(c, slot, getattr(node, slot))
    if inputs is not None:
        c.inputs = list(inputs)
    if outputs is not None:
        c.outputs = list(outputs)
    return c


def _foldable(node: Node) -> bool:
    if node.domain != "" or node.op_type in _NO_FOLD or node.op_type.startswith(_NO_FOLD_PREFIX):
        return False
    return not _subgraph_protos(node)


def _bn_inference(node: Node) -> bool:
    attrs = node.attrs
    if node.opset >= 14:
        training = attrs.get("training_mode", 0)
    else:
        training = node.n_out > 1 and not attrs.get("is_test", 0)
    return not training and sum(1 for o in node.outputs if o) == 1


def _uses(steps: list, keep: set) -> dict:
    """How many times each value is read: by a node, by a subgraph, or as a graph output
    (counted as two, so that it is never fused away)."""
    count: dict = {}
    for node, _, ins, _, _, _ in steps:
        for n in ins:
            if n:
                count[n] = count.get(n, 0) + 1
        for g in _subgraph_protos(node):
            for n in _free_names(g):
                count[n] = count.get(n, 0) + 2
    for n in keep:
        count[n] = count.get(n, 0) + 2
    return count


def constant_fold(steps: list, consts: dict, keep: set, device) -> list:
    """Run the nodes whose inputs are all in consts now; their outputs join consts (in
    place). Returns the remaining steps."""
    out_steps = []
    for step in steps:
        node, fn, ins, attrs, outs, seq = step
        if seq or not _foldable(node) or any(o in keep for o in outs if o) or \
                any(n and (n not in consts or is_strings(consts[n])) for n in ins):
            out_steps.append(step)
            continue
        node.device = device
        node.env = consts
        try:
            with autograd.no_grad():
                res = fn(node, [consts[n] if n else None for n in ins], attrs)
        except Exception:  # the node fails on these values: let it fail where it would
            out_steps.append(step)
            continue
        if not isinstance(res, (tuple, list)):
            res = (res,)
        if not all(r is None or (isinstance(r, Tensor) and r.numel() <= _FOLD_LIMIT)
                   for r in res):
            out_steps.append(step)
            continue
        for name, v in zip(outs, res):
            if name:
                consts[name] = v
    return out_steps


def _fold_bn(conv, bn, consts: dict):
    """(weight, bias) of the conv with the batch norm folded in, or None when it cannot be
    folded exactly (non-constant or non-float operands, unexpected shapes)."""
    cins, bins = conv[2], bn[2]
    if len(bins) < 5 or any(not n or n not in consts for n in bins[1:5]):
        return None
    if len(cins) < 2 or cins[1] not in consts or (len(cins) > 2 and cins[2] and
                                                  cins[2] not in consts):
        return None
    w = consts[cins[1]]
    b = consts[cins[2]] if len(cins) > 2 and cins[2] else None
    scale, beta, mean, var = (consts[n] for n in bins[1:5])
    o = w.shape[0] if w.ndim else 0
    for t in (w, b, scale, beta, mean, var):
        if t is not None and (not isinstance(t, Tensor) or t.dtype not in _FOLD_DTYPES):
            return None
    if w.ndim < 3 or any(t.shape != (o,) for t in (scale, beta, mean, var)) or \
            (b is not None and b.shape != (o,)):
        return None
    eps = float(bn[3].get("epsilon", 1e-5))
    f64 = [None if t is None else np.asarray(t.detach().cpu().numpy(), np.float64)
           for t in (w, b, scale, beta, mean, var)]
    wn, bn_, sn, betan, meann, varn = f64
    s = sn / np.sqrt(varn + eps)
    w2 = wn * s.reshape((o,) + (1,) * (w.ndim - 1))
    b2 = ((bn_ if bn_ is not None else 0.0) - meann) * s + betan
    from .. import creation

    npdt = np.float32 if w.dtype is _dt.float32 else np.float64
    return (creation.tensor(w2.astype(npdt), device=w.device),
            creation.tensor(b2.astype(npdt), device=w.device))


# the op type and domain of a chain step in a folded plan (fast_stats and errors show them)
CHAIN_OP, CHAIN_DOMAIN = "ConvChain", "ai.singa_tensor"


def _chain_part(step) -> str | None:
    """What step is to a convolution chain: "conv", "relu", "pool", or None (not a part)."""
    node = step[0]
    if node.domain or sum(1 for o in step[4] if o) != 1:
        return None
    if node.op_type == "Conv" and len(step[2]) >= 2 and all(step[2][:2]):
        return "conv"
    if node.op_type == "Relu" and len(step[2]) == 1:
        return "relu"
    if node.op_type == "MaxPool" and len(step[2]) == 1 and len(step[4]) == 1 and \
            not step[3].get("storage_order", 0):
        return "pool"
    return None


def _chain_stages(parts: list, x, params: list):
    """The stages of ops.conv_onednn.conv_chain for x through parts (their steps), or None
    where a part falls outside what a chain runs (not 2-d, pads a pooling window cannot
    have)."""
    from .ops_nn import _geometry

    stages, shape, k = [], tuple(x.shape), 0
    if len(shape) != 4:
        return None
    for kind, step in parts:
        node, attrs = step[0], step[3]
        if kind == "relu":
            if not stages or stages[-1][0] != "conv" or stages[-1][7]:
                return None
            stages[-1] = stages[-1][:7] + (True,)
            continue
        if kind == "conv":
            w, b = params[k], params[k + 1]
            k += 2
            if w.ndim != 4 or (b is not None and b.shape != (w.shape[0],)):
                return None
            kernel = tuple(w.shape[2:])
            if tuple(attrs.get("kernel_shape") or kernel) != kernel:
                return None
            group = attrs.get("group", 1)
            if shape[1] != w.shape[1] * group or w.shape[0] % group:
                return None
            strides, dil, pb, pe, out = _geometry(node, attrs, shape[2:], kernel)
            stages.append(("conv", w, b, tuple(strides), (pb[0], pe[0], pb[1], pe[1]),
                           tuple(dil), group, False))
            shape = (shape[0], w.shape[0], *out)
        else:
            kernel = tuple(attrs.get("kernel_shape") or ())
            if len(kernel) != 2:
                return None
            ceil = bool(attrs.get("ceil_mode", 0))
            strides, dil, pb, pe, out = _geometry(node, attrs, shape[2:], kernel, ceil)
            # every window must read the input: pads below a dilated kernel's reach
            if any(p > (kk - 1) * d or q > (kk - 1) * d
                   for p, q, kk, d in zip(pb, pe, kernel, dil)):
                return None
            stages.append(("pool", kernel, tuple(strides), (pb[0], pe[0], pb[1], pe[1]),
                           tuple(dil), tuple(out)))
            shape = (shape[0], shape[1], *out)
    return stages


def _chain_runner(parts: list):
    """The handler of a chain step: the chain as one plan, or its parts one after another."""
    def run(node, inputs, attrs, _parts=parts):
        x, params = inputs[0], list(inputs[1:])
        stages = _chain_stages(_parts, x, params) if isinstance(x, Tensor) else None
        y = conv_chain(x, stages) if stages is not None else None
        if y is not None:
            return y
        v, k = x, 0
        for kind, (pnode, fn, ins, pattrs, _, _) in _parts:
            extra = params[k:k + len(ins) - 1] if kind == "conv" else []
            k += len(extra)
            pnode.device, pnode.env = node.device, node.env
            out = fn(pnode, [v] + extra, pattrs)
            v = out[0] if isinstance(out, (tuple, list)) else out
        return v

    return run


def _chains(out: list, keep: set) -> list:
    """Runs of adjacent steps conv (-> relu) (-> max pool) ... whose links are read only by
    the next step become one step each (`_chain_runner`); a run needs a convolution and a
    second part."""
    uses = _uses(out, keep)
    result, i = [], 0
    while i < len(out):
        j = i
        parts = []
        if _chain_part(out[i]) == "conv":
            while j < len(out):
                kind = _chain_part(out[j])
                if kind is None or (parts and out[j][2][0] != parts[-1][1][4][0]):
                    break
                if kind == "relu" and parts[-1][0] != "conv":  # a ReLU fuses into a conv only
                    break
                if parts and uses.get(parts[-1][1][4][0], 0) != 1:
                    break
                parts.append((kind, out[j]))
                j += 1
        if len(parts) < 2:
            result.append(out[i])
            i += 1
            continue
        first, last = parts[0][1], parts[-1][1]
        ins = [first[2][0]]
        for kind, step in parts:
            if kind == "conv":
                ins += [step[2][1], step[2][2] if len(step[2]) > 2 else ""]
        cnode = _clone_node(first[0], ins, [last[4][0]])
        # a node of its own kind: no rule may take it for the convolution it starts (its
        # attributes are the chain's parts', not its own), a later fold included
        cnode.op_type, cnode.domain = CHAIN_OP, CHAIN_DOMAIN
        # parts' inputs beyond the chain value: weights and (possibly absent) biases
        parts = [(kind, step if kind != "conv" else
                  (step[0], step[1], (step[2][0], step[2][1],
                                      step[2][2] if len(step[2]) > 2 else ""), step[3],
                   step[4], step[5])) for kind, step in parts]
        result.append((cnode, _chain_runner(parts), tuple(ins), {}, (last[4][0],), False))
        i = j
    return result


def _relu_in_place(fn):
    def conv_relu(node, inputs, attrs, _fn=fn):
        return _fn(node, inputs, attrs).relu_()

    return conv_relu


def fold(steps: list, consts: dict, keep: set, device) -> tuple[list, dict]:
    """The folded plan of steps: (steps, constants). See the module docstring."""
    consts = dict(consts)
    steps = constant_fold(steps, consts, keep, device)
    uses = _uses(steps, keep)
    producer = {}
    for i, step in enumerate(steps):
        for o in step[4]:
            if o:
                producer[o] = i
    out = list(steps)
    drop = set()
    k = 0
    for i, step in enumerate(steps):
        node = step[0]
        if node.op_type != "BatchNormalization" or not _bn_inference(node) or not step[2]:
            continue
        j = producer.get(step[2][0])
        if j is None or j in drop or steps[j][0].op_type != "Conv" or \
                uses.get(step[2][0], 0) != 1 or steps[j][0].domain:
            continue
        conv = out[j]
        folded = _fold_bn(conv, step, consts)
        if folded is None:
            continue
        k += 1
        wname, bname = f"__fold_w{k}", f"__fold_b{k}"
        consts[wname], consts[bname] = folded
        # the plan's own tensor, never written: convolutions may keep it in their layout
        keep_weights(consts[wname])
        x = conv[2][0]
        y = step[4][0]
        cnode = _clone_node(conv[0], [x, wname, bname], [y])
        out[j] = (cnode, conv[1], (x, wname, bname), conv[3], (y,), False)
        drop.add(i)
        producer[y] = j
    out = [s for i, s in enumerate(out) if i not in drop]
    # conv -> relu -> max pool -> conv ...: one step running the chain as one plan
    out = _chains(out, keep)
    # conv + relu: the relu runs in place on the conv's fresh output
    uses = _uses(out, keep)
    producer = {o: i for i, s in enumerate(out) for o in s[4] if o}
    drop = set()
    for i, step in enumerate(out):
        node = step[0]
        if node.op_type != "Relu" or node.domain or node.attrs or len(step[2]) != 1:
            continue
        j = producer.get(step[2][0])
        if j is None or j in drop or out[j][0].op_type != "Conv" or out[j][0].domain or \
                uses.get(step[2][0], 0) != 1 or sum(1 for o in out[j][4] if o) != 1:
            continue
        conv = out[j]
        y = step[4][0]
        cnode = _clone_node(conv[0], outputs=[y])
        out[j] = (cnode, _relu_in_place(conv[1]), conv[2], conv[3], (y,), False)
        producer[y] = j
        drop.add(i)
    out = [s for i, s in enumerate(out) if i not in drop]
    return out, consts


class _Probe(_execution.ExecutionContext):
    """Eager execution that notes which node read tensor values to the host (outside the
    yes/no decisions that graph mode guards on their outcome)."""

    name = "onnx probe"

    def __init__(self) -> None:
        self.reads: list = []
        self._deciding = 0

    def decision(self, read, decide):
        self._deciding += 1
        try:
            return read()
        finally:
            self._deciding -= 1

    def host_read(self, t, value) -> None:
        if not self._deciding:
            self.reads.append(t._storage)


class _Signature:
    """What one input signature runs: 'probe' (not yet seen), 'compile' (record next call),
    'replay' or 'eager' (the folded plan, eagerly)."""

    __slots__ = ("state", "steps", "consts", "step_fn", "why", "failures")

    def __init__(self) -> None:
        self.state = "probe"
        self.failures = 0
        self.steps = self.consts = self.step_fn = None
        self.why = ""


class FastPath:
    """Folding, compiling and replaying an OnnxModule's inference (see the module docstring).

    Example:
        >>> import numpy as np
        >>> from onnx import helper, TensorProto
        >>> import singa_tensor as st
        >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
        ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        >>> m = st.onnx.load(helper.make_model(g))
        >>> with st.no_grad():
        ...     ys = [m(st.tensor([-1.0, float(i)])).tolist() for i in range(4)]
        >>> ys[-1], m.fast_stats()["replays"]
        ([0.0, 3.0], 2)
    """

    def __init__(self, graph) -> None:
        self.graph = graph
        self.key = None
        self.steps = self.consts = None
        self.signatures: dict = {}
        self.replays = 0
        self.records = 0
        self.compilable = not any(s[0].op_type in _NO_COMPILE or _subgraph_protos(s[0])
                                  for s in graph.steps)

    # ---- folding ----------------------------------------------------------------------------
    def _refold(self, device) -> None:
        g = self.graph
        keep = set(g.output_names)
        self.steps, self.consts = fold(g.steps, g.constants, keep, device)
        self.signatures = {}
        self.folded_nodes = len(g.steps) - len(self.steps)

    def _key(self) -> tuple:
        return tuple((id(t), t._storage.version) if isinstance(t, Tensor) else id(t)
                     for t in self.graph.constants.values())

    # ---- running ----------------------------------------------------------------------------
    def run(self, values: list, device) -> list:
        key = self._key()
        if key != self.key or self.steps is None:
            self._refold(device)
            self.key = key
        sig = _signature_of(values) if self.compilable else None
        if sig is None:
            return self._eager(self.steps, self.consts, values, device)
        entry = self.signatures.get(sig)
        if entry is None:
            if len(self.signatures) >= _MAX_SIGNATURES:
                del self.signatures[next(iter(self.signatures))]
            entry = self.signatures[sig] = _Signature()
        state = entry.state
        if state == "replay":
            return self._replay(entry, values, device)
        if state == "eager":
            return self._eager(entry.steps, entry.consts, values, device)
        if state == "compile":
            return self._record(entry, values, device)
        return self._probe(entry, values, device)

    def _eager(self, steps, consts, values, device) -> list:
        g = self.graph
        env = run_steps(steps, consts, g.input_names, values, None, device)
        try:
            return [env[n] for n in g.output_names]
        except KeyError as e:
            raise OnnxImportError(f"onnx model: output {e.args[0]!r} is never produced") from None

    def _probe(self, entry: _Signature, values, device) -> list:
        g = self.graph
        static = {n for n in self.consts}
        static_storages = {id(t._storage) for t in self.consts.values() if isinstance(t, Tensor)}
        shapes: dict = {}
        probe = _Probe()
        dependent = []
        strings: list = []

        def hook(step, args, out):
            node, _, ins, _, outs, _ = step
            reads, probe.reads[:] = list(probe.reads), []
            if any(is_strings(v) for v in (*args, *out)):
                strings.append(node.name)  # computed on the host: graph mode cannot record it
                return
            if node.op_type in ("Shape", "Size") or all(not n or n in static for n in ins):
                for name, v in zip(outs, out):
                    if name:
                        static.add(name)
                        if isinstance(v, Tensor):
                            static_storages.add(id(v._storage))
                if node.op_type in ("Shape", "Size"):
                    for name, v in zip(outs, out):
                        if name and isinstance(v, Tensor):
                            shapes[name] = v
                return
            if any(id(s) not in static_storages for s in reads):
                dependent.append(node.name)

        with _execution.running(probe):
            env = run_steps(self.steps, self.consts, g.input_names, values, None, device,
                            hook=hook)
        try:
            outs = [env[n] for n in g.output_names]
        except KeyError as e:
            raise OnnxImportError(f"onnx model: output {e.args[0]!r} is never produced") from None
        if strings:
            entry.state, entry.why = "eager", f"string values in {strings[0]!r}"
            entry.steps, entry.consts = self.steps, self.consts
            return outs
        if dependent:
            entry.state, entry.why = "eager", f"data-dependent host reads in {dependent[0]!r}"
            entry.steps, entry.consts = self.steps, self.consts
            return outs
        # every shape is now fixed by the signature: fold the Shape/Size values in too
        consts = dict(self.consts)
        consts.update(shapes)
        steps = [s for s in self.steps if s[0].op_type not in ("Shape", "Size")
                 or not all(o in shapes for o in s[4] if o)]
        entry.steps, entry.consts = fold(steps, consts, set(g.output_names), device)
        entry.state = "compile"
        return outs

    def _record(self, entry: _Signature, values, device) -> list:
        from ..graph import CompiledStep, GraphError

        g = self.graph
        steps, consts, names, outputs = entry.steps, entry.consts, g.input_names, g.output_names

        def step(*xs):
            with autograd.no_grad():
                env = run_steps(steps, consts, names, xs, None, device)
                return tuple(env[n] for n in outputs)

        compiled = CompiledStep(step, warmup=0, on_change="rerecord")
        try:
            outs = compiled(*values)
        except GraphError as e:
            entry.state, entry.why = "eager", f"graph mode refused: {e}"
            return self._eager(entry.steps, entry.consts, values, device)
        self.records += 1
        entry.step_fn = compiled
        entry.state = "replay"
        return list(outs)

    def _replay(self, entry: _Signature, values, device) -> list:
        from ..graph import GraphError

        try:
            outs = entry.step_fn(*values)
        except GraphError as e:
            # a guard failed (new values decide a host check differently): run this call
            # eagerly, which raises the node's own error if the values are bad, and record
            # again next time, a few times at most
            entry.step_fn = None
            entry.failures += 1
            entry.state = "compile" if entry.failures <= _MAX_RERECORDS else "eager"
            entry.why = f"replay refused: {e}"
            return self._eager(entry.steps, entry.consts, values, device)
        except BaseException:
            # the recording may be half rebuilt: drop it and record again on the next call
            entry.step_fn = None
            entry.state = "compile"
            raise
        self.replays += 1
        return list(outs)

    def stats(self) -> dict:
        """Counts and per-signature states, for tests and benchmarks."""
        return {"replays": self.replays, "records": self.records,
                "folded_nodes": getattr(self, "folded_nodes", 0),
                "signatures": {k: (e.state, e.why) for k, e in self.signatures.items()}}


def _signature_of(values) -> tuple | None:
    sig = []
    for v in values:
        if not isinstance(v, Tensor):
            return None
        sig.append((v.shape, v.dtype, v.device))
    return tuple(sig)


__all__ = ["FastPath", "fold", "constant_fold"]
