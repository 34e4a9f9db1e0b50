"""An ONNX graph as a trainable Module: weights become parameters, nodes run as our ops.

Each node is executed by the handler registered for its op type (`_handlers.HANDLERS`), which
computes the ONNX semantics with Tensor ops, so gradients flow through an imported model and it
runs on whatever device its parameters live on.
"""

from __future__ import annotations

import re

import numpy as np

from .. import _execution, autograd, creation
from .. import dtype as _dt
from ..nn.module import Module, Parameter
from ..tensor import Tensor
from . import _lowp, _params
from ._handlers import HANDLERS, STRING_HANDLERS, OnnxImportError
from ._lowp import LowPrecisionArray

# ONNX TensorProto element types -> numpy; ours computes small integer types in int64 and casts
# back at the graph's outputs, so a uint8 model still returns uint8
_NP = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
    9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}
_BF16 = 16
_ST = {1: _dt.float32, 6: _dt.int32, 7: _dt.int64, 9: _dt.bool_, 10: _dt.float16,
       11: _dt.float64, _BF16: _dt.bfloat16}
for _code in (2, 3, 4, 5, 12, 13):
    _ST[_code] = _dt.int64


def st_dtype(code: int, where: str):
    """Our dtype for an ONNX element type; a clear error for types we cannot hold."""
    d = _ST.get(code)
    if d is None:
        import onnx

        name = onnx.TensorProto.DataType.Name(code) if code in onnx.TensorProto.DataType.values() \
            else str(code)
        raise OnnxImportError(f"{where}: element type {name} is not supported")
    return d


def np_dtype(code: int):
    return _NP.get(code)


def array_to_tensor(a, device, where: str = "onnx import") -> Tensor | LowPrecisionArray:
    """A numpy array (any ONNX-representable dtype) as a tensor on device; float8, float4,
    int4 and int2 arrays (ml_dtypes) stay on the host as a LowPrecisionArray (onnx/_lowp.py)."""
    a = np.asarray(a)
    if _lowp.code_of(a.dtype) is not None:
        return _lowp.wrap(a, where)
    if a.dtype.name == "bfloat16":  # ml_dtypes' bfloat16, as onnx hands it out
        from ..ops.layout import cast

        return cast(creation.tensor(a.astype(np.float32), device=device), _dt.bfloat16)
    if a.dtype.kind in "USO":
        raise OnnxImportError(f"{where}: string tensors are not supported")
    if a.dtype.kind == "c":
        raise OnnxImportError(f"{where}: complex tensors are not supported")
    if a.dtype.kind in "ui" and a.dtype not in (np.int32, np.int64):
        a = a.astype(np.int64)  # uint64 wraps, as a C cast would
    elif a.dtype.kind == "V" or a.dtype.names is not None or \
            getattr(a.dtype.type, "__module__", "") == "ml_dtypes":  # float8, int4, ...
        raise OnnxImportError(f"{where}: element type {a.dtype} is not supported")
    return creation.tensor(np.ascontiguousarray(a).reshape(a.shape), device=device)


def is_strings(v) -> bool:
    """Whether v is a string value: strings stay host numpy arrays (dtype object, holding str)
    between nodes, as no kernel computes on them."""
    return type(v) is np.ndarray and v.dtype == object


def host_value(a, device, where: str = "onnx import"):
    """A numpy array as a graph value: an object array of str for strings (ONNX STRING, numpy
    str, bytes or object arrays), a tensor on device (`array_to_tensor`) for anything else."""
    a = np.asarray(a)
    if a.dtype.kind not in "USO":
        return array_to_tensor(a, device, where)
    flat = a.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for i, s in enumerate(flat):
        if isinstance(s, bytes):
            s = s.decode("utf-8")
        elif not isinstance(s, str):
            raise OnnxImportError(f"{where}: an object array must hold strings, got "
                                  f"{type(s).__name__}")
        out[i] = s
    return out.reshape(a.shape)


def _attr_value(attr):
    import onnx
    from onnx import helper, numpy_helper

    A = onnx.AttributeProto
    if attr.type == A.TENSOR:
        return numpy_helper.to_array(attr.t)
    if attr.type == A.SPARSE_TENSOR:
        raise OnnxImportError(f"attribute {attr.name}: sparse tensors are not supported")
    v = helper.get_attribute_value(attr)
    if attr.type == A.STRING:
        return v.decode()
    if attr.type == A.STRINGS:
        return [s.decode() for s in v]
    if attr.type == A.TENSORS:
        return [numpy_helper.to_array(t) for t in v]
    if attr.type in (A.INTS, A.FLOATS):
        return list(v)
    return v


class Node:
    """One ONNX node prepared for execution: handler, decoded attributes, input/output names.

    Handlers receive it as their first argument; it knows the node's opset, the number of
    outputs wanted, and makes constants on the right device (`node.const`).
    """

    __slots__ = ("op_type", "name", "domain", "inputs", "outputs", "attrs", "fn", "opset",
                 "device", "graph", "env", "memo")

    def __init__(self, proto, opsets: dict, graph: Graph):
        self.op_type = proto.op_type
        self.domain = proto.domain if proto.domain not in ("", "ai.onnx") else ""
        self.name = proto.name or f"{proto.op_type}({', '.join(proto.output)})"
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.opset = opsets.get(self.domain, opsets.get("", 21))
        self.graph = graph
        self.device = None
        self.env = None  # the executing scope, for subgraphs that read outer names
        self.memo = None  # a handler's cache across runs (a Constant's tensor, say)
        key = self.op_type if self.domain == "" else f"{self.domain}::{self.op_type}"
        self.fn = HANDLERS.get(key)
        if self.fn is None:
            raise OnnxImportError(
                f"node {self.name!r}: op {self.op_type!r}"
                f"{' (domain ' + repr(proto.domain) + ')' if self.domain else ''} is not supported"
            )
        try:
            self.attrs = {a.name: _attr_value(a) for a in proto.attribute}
        except OnnxImportError as e:
            raise OnnxImportError(f"node {self.name!r} ({self.op_type}): {e}") from None

    @property
    def n_out(self) -> int:
        return len(self.outputs)

    def input_type(self, i: int) -> int:
        """The ONNX element type the model declares for input i (0 when it does not say)."""
        if i >= len(self.inputs) or not self.inputs[i]:
            return 0
        return self.graph.types.get(self.inputs[i], 0)

    def wants(self, i: int) -> bool:
        """Whether output i is used (present and named)."""
        return i < len(self.outputs) and self.outputs[i] != ""

    def const(self, value, dtype=None) -> Tensor:
        """value (scalar, list or array) as a tensor on this node's device."""
        if isinstance(value, np.ndarray) and dtype is None:
            return host_value(value, self.device, self.name)
        return creation.tensor(value, dtype=dtype, device=self.device)

    def fail(self, problem: str) -> OnnxImportError:
        return OnnxImportError(f"node {self.name!r} ({self.op_type}): {problem}")

    def run_subgraph(self, graph_proto, values: list, outer: dict) -> list:
        """Run a subgraph attribute (If/Loop/Scan bodies) with its formal inputs bound to values,
        seeing the enclosing scope's names."""
        sub = self.graph.subgraph(graph_proto)
        return sub.run(values, outer, self.device)


def ints(t) -> list:
    """A tensor (or list) of integers as a Python list (shape arguments of Reshape, Slice, ...)."""
    if t is None:
        return None
    if isinstance(t, Tensor):
        return [int(v) for v in np.asarray(t.cpu().numpy()).reshape(-1)]
    return [int(v) for v in np.asarray(t).reshape(-1)]


class Graph:
    """The nodes of one ONNX graph with their handlers, ready to run."""

    def __init__(self, proto, opsets: dict, constants: dict, outputs=None, top=None):
        self.proto = proto
        self.opsets = opsets
        self.constants = constants  # name -> Tensor (initializers, shared with the module)
        self.top = top or self
        self._subgraphs: dict = {} if top is None else top._subgraphs
        init_names = {t.name for t in proto.initializer}
        self.input_names = [i.name for i in proto.input if i.name not in init_names]
        self.output_names = list(outputs) if outputs else [o.name for o in proto.output]
        out_types = {o.name: o.type.tensor_type.elem_type for o in proto.output}
        for vi in proto.value_info:
            out_types.setdefault(vi.name, vi.type.tensor_type.elem_type)
        self.output_types = [out_types.get(n, 0) for n in self.output_names]
        # the declared ONNX element type of every value whose type the file states: narrow
        # integer types are held in int64, so ops whose result depends on the exact type
        # (QuantizeLinear's saturation range) read it here
        types = dict(top.types) if top is not None else {}
        for vi in list(proto.input) + list(proto.value_info) + list(proto.output):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types[vi.name] = vi.type.tensor_type.elem_type
        for t in proto.initializer:
            types[t.name] = t.data_type
        for n in proto.node:
            if n.op_type == "Constant":
                for a in n.attribute:
                    if a.name == "value" and a.HasField("t"):
                        types[n.output[0]] = a.t.data_type
        self.types = types
        nodes = [Node(n, opsets, self) for n in proto.node]
        self.nodes = _needed(nodes, self.output_names) if outputs else nodes
        self.steps = prepare_steps(self.nodes)
        # whether float8, int4, ... values can occur: then every handler is guarded
        self.host_values = top.host_values if top is not None else \
            _lowp.mentions_low_precision(proto)
        if self.host_values:
            self.steps = _lowp.guard_steps(self.steps)

    def subgraph(self, proto) -> Graph:
        key = id(proto)
        g = self._subgraphs.get(key)
        if g is None:
            consts = {}
            for t in proto.initializer:
                from onnx import numpy_helper

                consts[t.name] = host_value(numpy_helper.to_array(t), None, t.name)
            g = self._subgraphs[key] = Graph(proto, self.opsets, consts, top=self.top)
            g._keep = proto  # id() stays valid while the proto lives
        return g

    def run(self, values: list, outer: dict | None = None, device=None) -> list:
        if len(values) != len(self.input_names) and outer is None:
            raise OnnxImportError(
                f"onnx model: expected {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(values)}")
        if device is None:
            device = _first_device(values, self.constants)
        env = run_steps(self.steps, self.constants, self.input_names, values, outer, device)
        try:
            return [env[n] for n in self.output_names]
        except KeyError as e:
            raise OnnxImportError(f"onnx model: output {e.args[0]!r} is never produced") from None


def prepare_steps(nodes: list) -> list:
    """The execution plan of nodes: one (node, handler, input names, attributes, output names,
    whether the single output is a sequence) tuple per node, resolved once at load so that a
    run does no lookups beyond reading and writing its values."""
    return [(node, node.fn, tuple(node.inputs), node.attrs, tuple(node.outputs),
             node.op_type in _SEQUENCE_OUT) for node in nodes]


def run_steps(steps: list, constants: dict, input_names, values, outer, device,
              hook=None) -> dict:
    """Run a plan (`prepare_steps`) with the graph inputs bound to values; returns every value
    by name. hook(step, args, out), when given, sees each node after it ran."""
    env = dict(outer) if outer else {}
    env.update(constants)
    env[""] = None
    for name, v in zip(input_names, values):
        env[name] = v
    for step in steps:
        node, fn, ins, attrs, outs, seq = step
        node.device = device
        node.env = env
        try:
            args = [env[n] for n in ins]
        except KeyError as e:
            raise OnnxImportError(
                f"node {node.name!r} ({node.op_type}): input {e.args[0]!r} is not produced "
                "by any earlier node, initializer or graph input") from None
        if np.ndarray in map(type, args) and any(map(is_strings, args)):
            fn = string_handler_of(node)  # a string value: the op's string form runs
        out = fn(node, args, attrs)
        if seq or not isinstance(out, (tuple, list)):
            out = (out,)
        for name, v in zip(outs, out):
            if name:
                env[name] = v
        if hook is not None:
            hook(step, args, out)
    return env


def string_handler_of(node):
    """The handler that runs node on string inputs (`_handlers.string_handler`), or an error
    naming the node: an op without a string form takes no string tensors."""
    fn = STRING_HANDLERS.get(node.op_type if node.domain == "" else
                             f"{node.domain}::{node.op_type}")
    if fn is None:
        raise node.fail("string tensors are not supported by this op")
    return fn


# ops whose single output is itself a Python list (an ONNX sequence)
_SEQUENCE_OUT = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
                 "SplitToSequence"}


def _first_device(values, constants):
    for v in values:
        if isinstance(v, Tensor):
            return v.device
    for v in constants.values():
        if isinstance(v, Tensor):
            return v.device
    return creation.get_default_device()


def _needed(nodes: list, outputs: list) -> list:
    """The nodes that outputs depend on (cutting a graph at inner outputs)."""
    want = set(outputs)
    keep = []
    for node in reversed(nodes):
        if want.intersection(node.outputs):
            keep.append(node)
            want.update(node.inputs)
            for g in _subgraph_protos(node):
                want.update(_free_names(g))
    return keep[::-1]


def _subgraph_protos(node):
    import onnx

    return [v for v in node.attrs.values() if isinstance(v, onnx.GraphProto)]


def _free_names(g) -> set:
    names = set()
    for n in g.node:
        names.update(n.input)
    return names


def _param_name(name: str, taken: set) -> str:
    base = re.sub(r"\W", "_", name) or "param"
    if base[0].isdigit():
        base = "p_" + base
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


class OnnxModule(Module):
    """An imported ONNX model: call it like any Module; its initializers used as weights are
    Parameters, the other initializers buffers (onnx/_params.py; `trainable` overrides).

    Example:
        >>> import numpy as np, onnx
        >>> from onnx import helper, numpy_helper, TensorProto
        >>> import singa_tensor as st
        >>> w = numpy_helper.from_array(np.ones((3, 2), np.float32), "w")
        >>> g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
        ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])], [w])
        >>> m = st.onnx.load(helper.make_model(g))
        >>> m(st.ones(1, 3)).tolist()
        [[3.0, 3.0]]
        >>> [name for name, _ in m.named_parameters()]
        ['w']
    """

    def __init__(self, model, outputs=None, trainable=None):
        super().__init__()
        from onnx import numpy_helper

        graph = model.graph
        opsets = {(o.domain if o.domain != "ai.onnx" else ""): o.version
                  for o in model.opset_import}
        opsets.setdefault("", 21)
        taken: set = set()
        constants = {}
        names = {}
        arrays = {}
        for t in graph.initializer:
            try:
                arrays[t.name] = numpy_helper.to_array(t)
            except Exception as e:  # a truncated or inconsistent tensor proto
                raise OnnxImportError(f"initializer {t.name!r}: cannot be read ({e})") from None
        learned = _params.choose(graph, arrays, trainable)  # weights by use, or the override
        for t in graph.initializer:
            value = host_value(arrays[t.name], None, f"initializer {t.name!r}")
            # host data (strings, float8/int4 values): not a parameter nor a buffer
            if isinstance(value, LowPrecisionArray) or is_strings(value):
                constants[t.name] = value
                continue
            attr = _param_name(t.name, taken)
            if value.dtype.is_floating_point and t.name in learned:
                value = Parameter(value)
                self.register_parameter(attr, value)
            else:
                self.register_buffer(attr, value)
            names[t.name] = attr
            constants[t.name] = value
        object.__setattr__(self, "_onnx_names", names)
        if outputs is not None:
            known = {o for n in graph.node for o in n.output} | {i.name for i in graph.input}
            bad = [o for o in outputs if o not in known]
            if bad:
                raise OnnxImportError(f"onnx load: no value named {bad[0]!r} to cut the graph at")
        object.__setattr__(self, "_graph", Graph(graph, opsets, constants, outputs))
        object.__setattr__(self, "_model", model)
        # inference (no gradient wanted, no trace or recording running) runs folded, compiled
        # and replayed (onnx/_fast.py); False keeps it on the plain node-by-node plan
        object.__setattr__(self, "fast", True)

    @property
    def input_names(self) -> list:
        return list(self._graph.input_names)

    @property
    def output_names(self) -> list:
        return list(self._graph.output_names)

    def extra_repr(self) -> str:
        """The graph's name, inputs and outputs, how many nodes of which op types, the opsets
        and the parameter count, e.g. `graph='main', inputs=['x'], outputs=['y'], nodes=2
        (Gemm 1, Relu 1), opset 17, parameters=8`."""
        graph = self._model.graph
        counts: dict = {}
        for n in graph.node:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        opsets = ", ".join(f"{d} {v}" if d else str(v)
                           for d, v in sorted(self._graph.opsets.items()))
        n_params = sum(p.numel() for p in self.parameters())
        return (f"graph={graph.name!r}, inputs={self.input_names}, outputs={self.output_names}, "
                f"nodes={len(graph.node)} ({kinds}), opset {opsets}, parameters={n_params}")

    def _refresh_constants(self) -> None:
        # parameters may have been replaced by module.to(...) or load_state_dict
        consts = self._graph.constants
        params, buffers = self._parameters, self._buffers
        for onnx_name, attr in self._onnx_names.items():
            t = params.get(attr)
            if t is None:
                t = buffers[attr]
            consts[onnx_name] = t

    def __getstate__(self):
        # the inference path's recordings point at this module's memory: a copy starts
        # without them and folds and records again on first use
        state = self.__dict__.copy()
        state.pop("_fast_path", None)
        return state

    def _wants_grad(self, inputs) -> bool:
        if not autograd.is_grad_enabled():
            return False
        return any(isinstance(x, Tensor) and x.requires_grad for x in inputs) or \
            any(p.requires_grad for p in self._parameters.values() if p is not None)

    def fast_stats(self) -> dict:
        """What the inference path did: replays, recordings, nodes removed by folding, and the
        state of each input signature ('compile', 'replay' or 'eager' with the reason).

        Example:
            >>> import numpy as np
            >>> from onnx import helper, TensorProto
            >>> import singa_tensor as st
            >>> g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
            ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
            >>> m = st.onnx.load(helper.make_model(g))
            >>> with st.no_grad():
            ...     _ = m(st.ones(1))
            >>> [state for state, _ in m.fast_stats()["signatures"].values()]
            ['compile']
        """
        fp = self.__dict__.get("_fast_path")
        if fp is None:
            return {"replays": 0, "records": 0, "folded_nodes": 0, "signatures": {}}
        return fp.stats()

    def forward(self, *inputs):
        self._refresh_constants()
        device = None
        for v in self._graph.constants.values():
            if isinstance(v, Tensor):
                device = v.device
                break
        vals = []
        for name, x in zip(self._graph.input_names, inputs):
            if isinstance(x, list):  # an ONNX sequence
                x = [v if isinstance(v, Tensor) else host_value(v, device, name) for v in x]
            elif x is not None and not isinstance(x, Tensor):
                x = host_value(x, device, f"onnx input {name!r}")
            vals.append(x)
        if len(inputs) != len(self._graph.input_names):
            raise OnnxImportError(
                f"onnx model: expected {len(self._graph.input_names)} inputs "
                f"({', '.join(self._graph.input_names)}), got {len(inputs)}")
        types = self._graph.types
        for name, x in zip(self._graph.input_names, vals):
            if isinstance(x, Tensor) or is_strings(x):
                _check_input_kind(name, types.get(name, 0), x)
            elif isinstance(x, LowPrecisionArray) and not self._graph.host_values:
                raise OnnxImportError(f"onnx model: input {name!r} is {x.type_name}, a type "
                                      "the model declares nowhere")
        if self.fast and _execution.current() is None and not self._wants_grad(vals):
            fp = self.__dict__.get("_fast_path")
            if fp is None:
                from ._fast import FastPath

                fp = FastPath(self._graph)
                object.__setattr__(self, "_fast_path", fp)
            if device is None:
                device = _first_device(vals, {})
            outs = fp.run(vals, device)
        else:
            outs = self._graph.run(vals, device=device if device is not None else None)
        outs = [o.array if isinstance(o, LowPrecisionArray) else o for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run_numpy(self, inputs) -> list:
        """Run on numpy inputs and return numpy outputs with the graph's declared dtypes."""
        from .. import autograd

        with autograd.no_grad():
            outs = self.forward(*inputs)
        if len(self._graph.output_names) == 1:
            outs = (outs,)
        result = []
        for v, code in zip(outs, self._graph.output_types):
            if isinstance(v, list):
                result.append([_to_numpy(x, code) for x in v])
            else:
                result.append(_to_numpy(v, code))
        return result


_FLOAT_CODES = {1, 10, 11, 16}
_INT_CODES = {2, 3, 4, 5, 6, 7, 12, 13}
_KIND = {**{c: "floating point" for c in _FLOAT_CODES}, **{c: "integer" for c in _INT_CODES},
         9: "bool", 8: "string"}


def _check_input_kind(name: str, code: int, x: Tensor) -> None:
    """Refuse an input whose kind (float, integer, bool, string) is not the declared one; a
    width change within a kind (float64 for float32) is converted as before."""
    want = _KIND.get(code)
    if want is None:
        return
    if is_strings(x):
        got, what = "string", "string"
    else:
        got = "bool" if x.dtype is _dt.bool_ else \
            "floating point" if x.dtype.is_floating_point else "integer"
        what = x.dtype
    if got != want:
        import onnx

        raise OnnxImportError(
            f"onnx model: input {name!r} is declared {onnx.TensorProto.DataType.Name(code)} "
            f"({want}), got a {what} tensor")


def _to_numpy(v, code):
    if v is None:
        return None
    if isinstance(v, Tensor) and (v.dtype is _dt.bfloat16 or code == _BF16):
        from onnx import helper

        return v.float().cpu().numpy().astype(helper.tensor_dtype_to_np_dtype(_BF16))
    a = v.cpu().numpy() if isinstance(v, Tensor) else np.asarray(v)
    want = _NP.get(code)
    if want is not None and a.dtype != want:
        a = a.astype(want)
    return a
