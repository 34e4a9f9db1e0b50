"""ONNX import handlers: one function per ONNX op type, computing its semantics with our ops.

A handler is `fn(node, inputs, attrs) -> Tensor | tuple`: `node` is the prepared
`_graph.Node` (opset, output count, `node.const`, `node.fail`), `inputs` the input values in
order (None for an omitted optional input) and `attrs` the decoded attributes. A node with a
string input (strings are host numpy arrays, not tensors) runs its op's entry in
`STRING_HANDLERS` instead, and fails when the op has none.

ONNX op types that an op spec names in its `onnx` field and that take no attributes (the plain
unary and binary math ops) need no handler: `handler_for` derives one from the op registry, so
the mapping from ONNX names to our ops is kept in one place, the specs.
"""

from __future__ import annotations

from typing import Callable


class OnnxImportError(ValueError):
    """An ONNX model or node that cannot be imported: names the node and the problem."""


HANDLERS: dict[str, Callable] = {}
# the handlers that run when an input is a string value (a host numpy array of str): the
# string ops themselves, and the string forms of ops that also take tensors (ops_string.py)
STRING_HANDLERS: dict[str, Callable] = {}


def handler(*op_types: str):
    """Register fn as the handler of the given ONNX op types ("Domain::Op" outside ai.onnx)."""

    def deco(fn):
        for t in op_types:
            HANDLERS[t] = fn
        return fn

    return deco


def string_handler(*op_types: str):
    """Register fn as what runs the given op types when an input is a string value."""

    def deco(fn):
        for t in op_types:
            STRING_HANDLERS[t] = fn
        return fn

    return deco


def _from_registry() -> None:
    from ..ops import REGISTRY

    for spec in REGISTRY.values():
        if not spec.onnx or spec.onnx in HANDLERS or spec.kind not in ("unary", "binary"):
            continue
        fn = spec.fn

        def run(node, inputs, attrs, _fn=fn, _n=2 if spec.kind == "binary" else 1):
            if attrs:
                raise node.fail(f"attributes {sorted(attrs)} are not supported")
            if len(inputs) != _n or any(x is None for x in inputs):
                raise node.fail(f"expected {_n} inputs, got {len(inputs)}")
            return _fn(*inputs)

        HANDLERS[spec.onnx] = run
