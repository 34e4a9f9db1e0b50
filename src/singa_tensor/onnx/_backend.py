"""The `onnx.backend.base.Backend` interface, so that onnx's conformance suite runs against us."""

from __future__ import annotations

import onnx
from onnx.backend.base import Backend as _Base
from onnx.backend.base import BackendRep as _BaseRep

from .. import cuda


class BackendRep(_BaseRep):
    """A prepared model: `run(inputs)` takes numpy arrays and returns a list of numpy arrays."""

    def __init__(self, module):
        self.module = module

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.module.input_names]
        elif not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        return self.module.run_numpy(list(inputs))


def _device(device: str) -> str:
    d = str(device).upper()
    if d.startswith("CUDA"):
        return "cuda" + d[4:].lower()
    if d == "CPU":
        return "cpu"
    raise ValueError(f"onnx backend: unknown device {device!r} (use 'CPU' or 'CUDA[:N]')")


class Backend(_Base):
    """singa_tensor as an ONNX backend (CPU, and CUDA when available).

    Example:
        >>> import numpy as np
        >>> from onnx import helper, TensorProto
        >>> from singa_tensor.onnx import Backend
        >>> g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
        ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        >>> Backend.run_model(helper.make_model(g), [np.ones(1, np.float32)])[0]
        array([-1.], dtype=float32)
    """

    @classmethod
    def supports_device(cls, device: str) -> bool:
        d = str(device).upper()
        if d == "CPU":
            return True
        return d.startswith("CUDA") and cuda.is_available()

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs):
        from . import load

        if isinstance(model, onnx.ModelProto):
            super().prepare(model, device, **kwargs)
        return BackendRep(load(model, device=_device(device)))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        import numpy as np
        from onnx import helper

        names = [n or f"__in{i}" for i, n in enumerate(node.input)]
        ins = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v))
            for n, v in zip(names, inputs)]
        outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output]
        g = helper.make_graph([node], "node", ins, outs)
        return cls.prepare(helper.make_model(g), device).run(list(inputs))

