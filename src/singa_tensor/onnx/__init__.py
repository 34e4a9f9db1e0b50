"""ONNX export and import.

`export(model, args, f)` traces one forward pass and writes an ONNX model; `load(f)` reads one
back as a trainable `nn.Module`; `prepare(model).run(inputs)` is the `onnx.backend` interface
(`Backend` runs the ONNX backend conformance tests). The `onnx` package is needed
(`pip install "singa_tensor[onnx]"`); it is imported on first use, and each entry point says so
when it is missing.

Example:
    >>> import numpy as np
    >>> from onnx import helper, TensorProto
    >>> import singa_tensor as st
    >>> node = helper.make_node("Relu", ["x"], ["y"])
    >>> g = helper.make_graph([node], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    >>> st.onnx.prepare(helper.make_model(g)).run([np.array([-1.0, 2.0], np.float32)])[0]
    array([0., 2.], dtype=float32)
"""

from __future__ import annotations

from .._optional import require
from ._export import export
from ._handlers import OnnxImportError

_loaded = False


def _onnx(what: str = "singa_tensor.onnx"):
    return require("onnx", what)


def _ensure_handlers() -> None:
    global _loaded
    if _loaded:
        return
    import importlib

    for name in ("ops_math", "ops_shape", "ops_nn", "ops_sampling", "ops_rnn", "ops_control",
                 "ops_extra", "ops_quant", "ops_flex", "ops_string", "ops_ml", "ops_random",
                 "ops_image"):
        try:
            importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    from ._handlers import _from_registry

    _from_registry()
    _loaded = True


def _read_model(model, base_dir=None):
    """(ModelProto, its folder for external data): a path's folder, else base_dir."""
    import os

    onnx = _onnx()
    if base_dir is not None:
        base_dir = os.fspath(base_dir)
        if not os.path.isdir(base_dir):
            raise OnnxImportError(f"onnx load: base_dir {base_dir!r} is not a folder")
    if isinstance(model, onnx.ModelProto):
        return model, base_dir
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        where = "bytes"
    elif hasattr(model, "read"):
        data = model.read()
        where = getattr(model, "name", "file object")
        if base_dir is None and isinstance(where, str) and os.path.isfile(where):
            base_dir = os.path.dirname(os.path.abspath(where))
    else:
        where = str(model)
        if base_dir is None:
            base_dir = os.path.dirname(os.path.abspath(os.fspath(model)))
        try:
            with open(model, "rb") as fh:
                data = fh.read()
        except OSError as e:
            raise OnnxImportError(f"onnx load: cannot read {where}: {e.strerror}") from None
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:
        raise OnnxImportError(f"onnx load: {where} is not an ONNX model ({e})") from None
    if not proto.HasField("graph") and data:
        raise OnnxImportError(f"onnx load: {where} is not an ONNX model (it has no graph)")
    if not proto.HasField("graph"):
        raise OnnxImportError(f"onnx load: {where} is empty")
    return proto, base_dir


def _checked_model(model, base_dir=None):
    """The model read, its external data filled in from its folder, and its structure checked
    (onnx/_validate.py): refused at load rather than on first call."""
    from . import _validate

    proto, base = _read_model(model, base_dir)
    proto = _validate.load_external(proto, base)
    opsets = _validate.check_opsets(proto)
    opsets.setdefault("", 21)
    _validate.check_graph(proto.graph, opsets)
    return proto


def load(model, outputs=None, device=None, base_dir=None, trainable=None):
    """Import an ONNX model (path, file object, bytes or ModelProto) as a trainable nn.Module.

    Tensors kept in external data files are read from the model's folder (the folder of the
    path, or `base_dir`, which loading from bytes, a file object or a ModelProto needs); a
    location outside that folder (absolute, `..`, a symbolic link out) is refused. The graph
    is checked at load: known opsets, each op present at its opset, attribute types, every
    value assigned once and produced before it is read.

    Initializers used as weights become Parameters, so the module fine-tunes like any other;
    the others (attention scales, mask templates, shapes, batch-norm running statistics)
    become buffers that an optimizer leaves alone. The rule reads how each initializer is used
    (docs/onnx.md, "Which initializers train"); `trainable` overrides it: True (every float
    initializer), False (none), a collection of initializer names, or a function
    `fn(name, array) -> bool`. `outputs` cuts the graph at the named values (for transfer
    learning, e.g. a feature layer), and `device` moves it there.

    Called where no gradient is wanted (under `st.no_grad()`, or with nothing requiring grad),
    the module runs an inference path: batch norms folded into their convs, constant
    subgraphs folded, and the graph recorded in graph mode once per input signature and
    replayed after that (graphs with data-dependent shapes keep running node by node); see
    singa_tensor/onnx/_fast.py. `module.fast = False` turns it off; `module.fast_stats()` says
    what it did. Training runs the original nodes on the original parameters.

    Example:
        >>> import numpy as np
        >>> from onnx import helper, numpy_helper, TensorProto
        >>> import singa_tensor as st
        >>> w = numpy_helper.from_array(np.full((2, 2), 0.5, np.float32), "w")
        >>> nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
        ...          helper.make_node("Relu", ["h"], ["y"])]
        >>> g = helper.make_graph(nodes, "g",
        ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])], [w])
        >>> m = st.onnx.load(helper.make_model(g), outputs=["h"])
        >>> m(st.tensor([[1.0, -3.0]])).tolist()
        [[-1.0, -1.0]]
        >>> [n for n, _ in st.onnx.load(helper.make_model(g), trainable=[]).named_parameters()]
        []
    """
    _onnx("st.onnx.load")
    _ensure_handlers()
    from ._graph import OnnxModule

    mod = OnnxModule(_checked_model(model, base_dir),
                     outputs=list(outputs) if outputs is not None else None,
                     trainable=trainable)
    if device is not None:
        mod.to(device)
    return mod


def prepare(model, device: str = "CPU", **kwargs):
    """`onnx.backend` entry point: a BackendRep whose `run(inputs)` returns numpy outputs."""
    _onnx("st.onnx.prepare")
    from ._backend import Backend

    return Backend.prepare(model, device, **kwargs)


def __getattr__(name):
    if name in ("Backend", "BackendRep"):
        _onnx(f"st.onnx.{name}")
        from . import _backend

        return getattr(_backend, name)
    if name == "OnnxModule":
        _onnx("st.onnx.OnnxModule")
        from ._graph import OnnxModule

        return OnnxModule
    raise AttributeError(name)


__all__ = ["Backend", "BackendRep", "OnnxImportError", "OnnxModule", "export", "load", "prepare"]
