"""ONNX export: trace one forward pass through the op registry and write it as an ONNX graph.

While `export` runs the model, `ops._registry.apply` reports every op it runs to a `Tracer`, and
composite ops (layer_norm, conv2d, ...) open a nested scope holding the ops they run. The
emitter then walks that tree: an op whose spec can export at the requested opset writes its
ONNX node(s) (`OpSpec.onnx_export`, next to each op's forward); a composite that cannot is
written as its children; any other op is an error naming it. There is no table of op names
here: the mapping lives on the specs.
"""

from __future__ import annotations

import numpy as np

from .. import _execution
from .. import autograd as _ag
from .. import dtype as _dt
from .._execution import ExecutionContext
from .._optional import require
from ..tensor import Tensor

MIN_OPSET, MAX_OPSET = 11, 21

_ELEM = {"float32": 1, "int64": 7, "int32": 6, "bool": 9, "float16": 10, "float64": 11,
         "bfloat16": 16}


def onnx_type(dtype) -> int:
    """The ONNX TensorProto element type of one of our dtypes."""
    code = _ELEM.get(dtype.name)
    if code is None:  # pragma: no cover - every dtype we hold has one
        raise TypeError(f"onnx export: dtype {dtype.name} has no ONNX type")
    return code


def _flat(out) -> tuple:
    """The tensors of an op's or model's result (a tensor, or nested tuples/lists of them)."""
    if out.__class__ is Tensor:
        return (out,)
    if isinstance(out, (tuple, list)):
        res: list = []
        for o in out:
            res.extend(_flat(o))
        return tuple(res)
    return ()


class _Call:
    """One op of the trace; children is a list for composites, None for primitive ops."""

    __slots__ = ("spec", "args", "attrs", "outs", "children")

    def __init__(self, spec, args, attrs, outs, children):
        self.spec, self.args, self.attrs, self.outs, self.children = (
            spec, args, attrs, outs, children)


class Tracer(ExecutionContext):
    """Collects the ops of one forward pass as a tree (composites hold their inner ops): the
    execution context of an export."""

    name = "onnx export"
    tracing = True

    def __init__(self, known: list):
        self.root: list = []
        self._stack = [self.root]
        self.produced: dict = {}  # id -> tensor: every op output, kept alive so ids stay unique
        self._versions: dict = {id(t): t._storage.version for t in known}

    def _check_unmodified(self, name: str, tensors) -> None:
        for a in tensors:
            if a.__class__ is Tensor:
                v = self._versions.get(id(a))
                if v is not None and a._storage.version != v:
                    raise RuntimeError(
                        f"onnx export: op '{name}' reads a tensor of shape {a.shape} that an "
                        "in-place op modified during the forward pass; in-place ops cannot be "
                        "exported, use the out-of-place form (e.g. x = x + 1, not x.add_(1))")

    def _produce(self, outs) -> None:
        for t in outs:
            self.produced[id(t)] = t
            self._versions[id(t)] = t._storage.version

    def run_op(self, spec, node, args: tuple, attrs: dict):
        out = spec.forward(node, *args, **attrs)
        self.record(spec, args, attrs, out)
        return out

    def custom_function(self, cls, args: tuple, kwargs: dict, run):
        raise RuntimeError(f"onnx export: custom autograd.Function '{cls.__name__}' has no "
                           "ONNX form; write it with library ops to export it")

    def record(self, spec, args, attrs, out) -> None:
        self._check_unmodified(spec.name, args)
        outs = _flat(out)
        self._stack[-1].append(_Call(spec, args, attrs, outs, None))
        self._produce(outs)

    def scope(self, spec, arguments: dict, run):
        self._check_unmodified(spec.name, arguments.values())
        call = _Call(spec, arguments, {}, (), [])
        self._stack[-1].append(call)
        self._stack.append(call.children)
        try:
            out = run()
        finally:
            self._stack.pop()
        call.outs = _flat(out)
        self._produce(call.outs)
        return out


class Builder:
    """Collects nodes, initializers and names while the specs' exporters write the graph.

    `value(t)` names a tensor (graph input, earlier output, an initializer for a parameter or
    buffer, or a constant for any other tensor), `const(array)` adds a constant, `node(...)`
    adds a node, `bind(t, name)` names t's value, `opset` is the target opset.
    """

    def __init__(self, opset: int, params: dict, tracer: Tracer):
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self._names: dict = {}  # id(tensor) -> value name
        self._params = params  # id(tensor) -> (qualified name, tensor)
        self._tracer = tracer
        self._keep: list = []  # tensors named here: their ids must stay theirs
        self._poison: dict = {}  # value name -> why it cannot be computed
        self._used: set = set()
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def bind(self, t: Tensor, name: str) -> None:
        self._names[id(t)] = name
        self._keep.append(t)

    def poison(self, t: Tensor, why: str) -> None:
        name = self.fresh("unexportable")
        self._poison[name] = why
        self.bind(t, name)

    def value(self, t: Tensor) -> str:
        if t.__class__ is not Tensor:
            raise TypeError(f"onnx export: expected a Tensor, got {type(t).__name__}")
        name = self._names.get(id(t))
        if name is None:
            p = self._params.get(id(t))
            if p is not None:
                name = p[0]
                self.initializers.append(_tensor_proto(t, name))
            elif id(t) in self._tracer.produced:
                raise RuntimeError(
                    f"onnx export: a tensor of shape {t.shape} computed inside an op that was "
                    "exported as one ONNX node is used outside that op")
            else:  # a tensor made outside the traced ops (st.tensor(...) in forward): constant
                name = self._constant(_numpy(t), "const")
            self.bind(t, name)
        if name in self._poison:
            raise RuntimeError(self._poison[name])
        self._used.add(name)
        return name

    def const(self, array) -> str:
        return self._constant(np.asarray(array), "const")

    def ints(self, values) -> str:
        """An int64 1-d constant (shapes, axes, pads)."""
        return self._constant(np.asarray(list(values), dtype=np.int64).reshape(-1), "ints")

    def scalar(self, value, like: Tensor) -> str:
        """A 0-d constant of like's dtype."""
        return self._constant(np.asarray(value, dtype=_np_of(like.dtype)), "scalar")

    def _constant(self, array, hint: str) -> str:
        from onnx import helper, numpy_helper

        name = self.fresh(hint)
        self.nodes.append(helper.make_node("Constant", [], [name],
                                           value=numpy_helper.from_array(array, name)))
        return name

    def node(self, op_type: str, inputs, outputs=1, **attrs) -> list:
        """Add a node; outputs is a count or the tensors it computes (bound to its outputs).
        Returns the output names; None attributes are left out, "" inputs are omitted ones."""
        from onnx import helper

        if isinstance(outputs, int):
            names = [self.fresh(op_type) for _ in range(outputs)]
        else:
            names = []
            for t in outputs:
                if isinstance(t, str):
                    names.append(t)
                    continue
                if t is None:
                    names.append("")
                    continue
                names.append(self.fresh(op_type))
                self.bind(t, names[-1])
        kept = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **kept))
        return names


def _np_of(dtype):
    return np.dtype(dtype.name) if dtype.name != "bool" else np.bool_


def _numpy(t: Tensor) -> np.ndarray:
    if t.dtype is _dt.bfloat16:
        raise TypeError("onnx export: bfloat16 constants are not supported; cast to float32")
    # np.array, not np.ascontiguousarray: that one turns a 0-d array into a 1-d one
    return np.array(t.detach().cpu().numpy(), order="C")


def _tensor_proto(t: Tensor, name: str):
    from onnx import numpy_helper

    return numpy_helper.from_array(_numpy(t), name)


def _emit(b: Builder, calls: list) -> None:
    for c in calls:
        r = c.spec.onnx_export(b, c.args, c.attrs, c.outs)
        if r is not NotImplemented:
            continue
        if c.children is not None:
            _emit(b, c.children)
            continue
        why = f"onnx export: op '{c.spec.name}' has no ONNX form (opset {b.opset})"
        for t in c.outs:  # an error only if something reads it
            b.poison(t, why)


def _prune(nodes: list, initializers: list, outputs: list) -> tuple:
    need = set(outputs)
    kept = []
    for n in reversed(nodes):
        if any(o in need for o in n.output if o):
            kept.append(n)
            need.update(i for i in n.input if i)
    kept.reverse()
    return kept, [t for t in initializers if t.name in need]


def _value_info(name: str, t: Tensor, axes: dict | None, dynamic: bool):
    from onnx import helper

    shape: list = list(t.shape)
    if axes:
        for d, label in axes.items():
            shape[d] = label
    elif dynamic:  # an output whose dims may follow a dynamic input: leave them unknown
        shape = [None] * len(shape)
    return helper.make_tensor_value_info(name, onnx_type(t.dtype), shape)


def _axes(op: str, spec, name: str, ndim: int) -> dict:
    if isinstance(spec, dict):
        items = spec.items()
    elif isinstance(spec, (list, tuple)):
        items = [(d, f"{name}_dim{d}") for d in spec]
    else:
        raise TypeError(f"{op}: dynamic_axes[{name!r}] must be a dict or a list of dims")
    out = {}
    for d, label in items:
        if not isinstance(d, int) or not -ndim <= d < ndim:
            raise ValueError(f"{op}: dynamic_axes[{name!r}] names dim {d!r}, but {name} has "
                             f"{ndim} dims")
        out[d % ndim] = str(label)
    return out


def export(model, args, f=None, opset_version: int = 17, input_names=None, output_names=None,
           dynamic_axes=None):
    """Trace one forward pass of model on args and write it as an ONNX model.

    Parameters and buffers become initializers named by their qualified module names; the
    model runs in eval mode under no_grad (its modes are restored afterwards). dynamic_axes
    ({"x": {0: "batch"}} or {"x": [0]}) marks input/output dims as symbolic. f is a path or a
    binary file object (or None); the checked ModelProto is returned.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = st.onnx.export(nn.Linear(3, 2), st.ones(1, 3), None, input_names=["x"])
        >>> [n.op_type for n in m.graph.node], sorted(i.name for i in m.graph.initializer)
        (['Gemm', 'Identity'], ['bias', 'weight'])
    """
    onnx = require("onnx", "st.onnx.export")
    from onnx import helper

    op = "onnx export"
    if isinstance(opset_version, bool) or not isinstance(opset_version, int) or not (
            MIN_OPSET <= opset_version <= MAX_OPSET):
        raise ValueError(f"{op}: opset_version must be an int from {MIN_OPSET} to {MAX_OPSET}, "
                         f"got {opset_version!r}")
    call_args = args if isinstance(args, tuple) else (args,)
    inputs = [a for a in call_args if a.__class__ is Tensor]
    if input_names is None:
        input_names = [f"input_{i}" for i in range(len(inputs))]
    input_names = list(input_names)
    if len(input_names) != len(inputs):
        raise ValueError(f"{op}: {len(input_names)} input_names given for {len(inputs)} tensor "
                         "inputs")
    if len(set(input_names)) != len(input_names):
        raise ValueError(f"{op}: input_names {input_names} are not unique")
    dynamic_axes = dict(dynamic_axes or {})

    params: dict = {}
    for pname, p in list(model.named_parameters()) + list(model.named_buffers()):
        params.setdefault(id(p), (pname, p))
    modes = [(m, m.training) for m in model.modules()]
    tracer = Tracer(inputs + [p for _, p in params.values()])
    model.eval()
    try:
        with _execution.running(tracer), _ag.no_grad():
            result = model(*call_args)
    finally:
        for m, mode in modes:
            m.training = mode
    outs = _flat(result)
    if not outs:
        raise ValueError(f"{op}: the model returned no tensors")
    tracer._check_unmodified("output", outs)  # an in-place write no later op read
    names_out = list(output_names or [])
    if len(names_out) > len(outs):
        raise ValueError(f"{op}: {len(names_out)} output_names given for {len(outs)} outputs")
    names_out += [f"output_{i}" for i in range(len(names_out), len(outs))]
    clash = set(names_out) & set(input_names)
    if clash or len(set(names_out)) != len(names_out):
        raise ValueError(f"{op}: output names {names_out} must be unique and differ from the "
                         "input names")
    for n in dynamic_axes:
        if n not in input_names and n not in names_out:
            raise ValueError(f"{op}: dynamic_axes names {n!r}, which is not an input or output "
                             f"name ({', '.join(input_names + names_out)})")

    b = Builder(opset_version, params, tracer)
    for t, n in zip(inputs, input_names):
        if id(t) in params:
            raise ValueError(f"{op}: input {n!r} is a parameter of the model")
        b.bind(t, n)
    _emit(b, tracer.root)
    for t, n in zip(outs, names_out):
        b.node("Identity", [b.value(t)], [n])
    nodes, inits = _prune(b.nodes, b.initializers, names_out)

    dyn = bool(dynamic_axes)
    g_in = [_value_info(n, t, _axes(op, dynamic_axes[n], n, t.ndim) if n in dynamic_axes
                        else None, False) for t, n in zip(inputs, input_names)]
    g_out = [_value_info(n, t, _axes(op, dynamic_axes[n], n, t.ndim) if n in dynamic_axes
                         else None, dyn) for t, n in zip(outs, names_out)]
    graph = helper.make_graph(nodes, type(model).__name__, g_in, g_out, inits)
    opsets = [helper.make_opsetid("", opset_version)]
    proto = helper.make_model(graph, opset_imports=opsets, producer_name="singa_tensor",
                              ir_version=helper.find_min_ir_version_for(opsets))
    onnx.checker.check_model(proto, full_check=True)
    if f is not None:
        data = proto.SerializeToString()
        if hasattr(f, "write"):
            f.write(data)
        else:
            with open(f, "wb") as fh:
                fh.write(data)
    return proto
