"""Which initializers of an imported ONNX graph are weights (Parameters) and which are constants.

An ONNX file does not say which of its initializers a training framework learned: PyTorch's
exporters write parameters, buffers and folded constants (an attention scale, a causal-mask
template, GELU's coefficients, a positional table) the same way. The rule here reads how each
float initializer is used:

- it is followed through ops that only move or retype data (Identity, Cast, Transpose,
  Reshape, Squeeze, Unsqueeze, Flatten, Expand, Slice, Split, Concat, Tile), so a transposed
  Linear weight or a sliced table is judged by where it finally goes;
- a use in a weight slot makes it a weight: the weight and bias of Conv, ConvTranspose,
  DeformConv, Gemm, MatMul, Einsum, the scale and bias of the normalizations, PRelu's slope,
  the W, R and B of LSTM/GRU/RNN, and the data of a Gather when it has two or more dims (an
  embedding table);
- an operand of Add, Sub, Mul, Div or a branch of Where makes it a weight when it is not
  small and not a template: small is one element (a scale, an epsilon, a fill value),
  a template holds an infinity or a magnitude of 1e4 or more (a mask of -inf, or of the
  float minimum) or, with two or more dims, only the values 0 and 1 with both present
  (a 0/1 mask to multiply by);
- every other use is a constant use: shapes, starts, axes, indices, pads, Pow exponents,
  Clip bounds, Resize scales, BatchNormalization's running statistics, recurrent initial
  states, comparisons (Equal, Less, ...), and all inputs of ops not named above.

An initializer with no weight use stays a buffer, so an optimizer leaves it alone; integer
and bool initializers are never Parameters. `st.onnx.load(..., trainable=...)` overrides the
rule (see `choose`).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

# ops that carry their data input (index 0, or every input for Concat) to their outputs
_MOVES = {"Identity": (0,), "Cast": (0,), "CastLike": (0,), "Transpose": (0,),
          "Reshape": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Flatten": (0,), "Expand": (0,),
          "Slice": (0,), "Split": (0,), "Tile": (0,), "Concat": None}

# op -> the input slots that hold learned values (None: every input)
_WEIGHT_SLOTS = {
    "Conv": (1, 2), "ConvTranspose": (1, 2), "DeformConv": (1, 3), "Gemm": (0, 1, 2),
    "MatMul": (0, 1), "Einsum": None, "LayerNormalization": (1, 2),
    "BatchNormalization": (1, 2), "InstanceNormalization": (1, 2),
    "GroupNormalization": (1, 2), "RMSNormalization": (1,), "SkipLayerNormalization": (2, 3, 4),
    "SimplifiedLayerNormalization": (1,), "PRelu": (1,), "LSTM": (1, 2, 3), "GRU": (1, 2, 3),
    "RNN": (1, 2, 3),
}

# elementwise ops whose operand is a weight unless it is small or a template
_ARITHMETIC = {"Add": None, "Sub": None, "Mul": None, "Div": None, "Where": (1, 2)}


def _nodes(graph):
    """Every node of graph, its subgraphs' nodes included (bodies read outer initializers)."""
    import onnx

    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _nodes(g)


def _in(slots, i: int) -> bool:
    return slots is None or i in slots


def is_template(a: np.ndarray) -> bool:
    """Whether a float array looks like a mask or fill template rather than learned values."""
    if a.size == 0:
        return False
    v = a.astype(np.float64, copy=False)
    if not np.isfinite(v).all() or np.abs(v).max() >= 1e4:
        return True
    if a.ndim >= 2:
        zero, one = v == 0, v == 1
        return bool((zero | one).all() and zero.any() and one.any())
    return False


def weight_uses(graph, arrays: dict) -> set:
    """The names of float initializers (arrays: name -> numpy array) used as weights."""
    readers: dict = {}
    for n in _nodes(graph):
        for i, name in enumerate(n.input):
            if name:
                readers.setdefault(name, []).append((n, i))
    weights = set()
    for name, a in arrays.items():
        if a.dtype.kind != "f":
            continue
        small, template = a.size <= 1, is_template(a)
        seen, todo = {name}, [name]
        while todo and name not in weights:
            for n, i in readers.get(todo.pop(), ()):
                op = n.op_type
                if op in _MOVES and _in(_MOVES[op], i):
                    for o in n.output:
                        if o and o not in seen:
                            seen.add(o)
                            todo.append(o)
                elif op in _WEIGHT_SLOTS and _in(_WEIGHT_SLOTS[op], i):
                    weights.add(name)
                elif op == "Gather" and i == 0 and a.ndim >= 2:
                    weights.add(name)
                elif op in _ARITHMETIC and _in(_ARITHMETIC[op], i) and not small \
                        and not template:
                    weights.add(name)
    return weights


def _float_names(arrays: dict) -> set:
    return {k for k, a in arrays.items() if a.dtype.kind == "f"}


def choose(graph, arrays: dict, trainable=None) -> set:
    """The initializer names that become Parameters.

    trainable None applies the usage rule (`weight_uses`); True makes every float initializer
    a Parameter and False none; a collection of names makes exactly those Parameters (each
    must name a float initializer); a callable fn(name, array) -> bool decides per float
    initializer.

    Example:
        >>> import numpy as np
        >>> from onnx import helper
        >>> g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]),
        ...                        helper.make_node("Mul", ["h", "s"], ["y"])], "g", [], [])
        >>> arrays = {"w": np.ones((2, 2), np.float32), "s": np.float32(0.5)}
        >>> sorted(choose(g, arrays)), sorted(choose(g, arrays, True))
        (['w'], ['s', 'w'])
    """
    op = "onnx load"
    floats = _float_names(arrays)
    if trainable is None:
        return weight_uses(graph, arrays)
    if trainable is True or trainable is False:
        return set(floats) if trainable else set()
    if callable(trainable):
        chosen = set()
        for name in sorted(floats):
            verdict = trainable(name, arrays[name])
            if not isinstance(verdict, (bool, np.bool_)):
                raise TypeError(f"{op}: trainable({name!r}, array) must return a bool, got "
                                f"{type(verdict).__name__}")
            if verdict:
                chosen.add(name)
        return chosen
    if isinstance(trainable, (str, bytes)) or not isinstance(trainable, Collection):
        raise TypeError(f"{op}: trainable must be None, a bool, a collection of initializer "
                        f"names or a function (name, array) -> bool, got "
                        f"{type(trainable).__name__}")
    names = list(trainable)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"{op}: trainable names must be strings, got {bad[0]!r}")
    unknown = sorted(set(names) - set(arrays))
    if unknown:
        raise ValueError(f"{op}: trainable names {unknown} are not initializers of the graph")
    not_float = sorted(set(names) - floats)
    if not_float:
        raise ValueError(f"{op}: trainable names {not_float} are not floating point "
                         "initializers")
    return set(names)
