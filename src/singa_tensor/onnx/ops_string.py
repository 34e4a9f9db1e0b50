"""ONNX import handlers for string tensors: the string ops, and the string forms of the ops
that move data without computing on it.

No kernel computes on text, so a string value is a host numpy array of dtype object holding
`str` (`_graph.host_value` makes one at the graph's boundary: inputs, initializers,
Constant). A node with a string input runs its op's entry in `STRING_HANDLERS`; an op without
one fails, naming the node. Strings carry no gradient.

The data-movement ops (Reshape, Transpose, Concat, Gather, Slice, Where, ...) reuse their
tensor handlers unchanged: each string input is replaced by an int64 tensor numbering its
elements, the tensor handler moves those numbers (with all of its checks), and the numbers
that come out pick the strings. Shape and Size read the numbered tensor's shape.

RegexFullMatch uses Python's `re` with the ASCII flag, which gives `\\w`, `\\d`, `\\s` and
`\\b` RE2's ASCII meaning. Python accepts more than RE2 (backreferences, lookaround), and RE2
syntax that Python lacks (`\\pN`, `[[:alpha:]]`, `\\C`) fails as an invalid pattern.
"""

from __future__ import annotations

import re

import numpy as np

from ._graph import is_strings
from ._handlers import HANDLERS, handler, string_handler
from .ops_math import _dtype, _like, _need

# op -> the input positions whose data the op moves (None: every input); every other input
# (shapes, indices, conditions) must be a tensor
_MOVES = {
    "Identity": (0,), "Reshape": (0,), "Flatten": (0,), "Squeeze": (0,), "Unsqueeze": (0,),
    "Transpose": (0,), "Concat": None, "Split": (0,), "Slice": (0,), "Expand": (0,),
    "Tile": (0,), "Gather": (0,), "GatherElements": (0,), "GatherND": (0,), "Compress": (0,),
    "ReverseSequence": (0,), "DepthToSpace": (0,), "SpaceToDepth": (0,), "Where": (1, 2),
}
# ops whose outputs describe their input instead of holding its elements
_SHAPE_OF = {"Shape": (0,), "Size": (0,)}


def strings(node, v, what: str = "input") -> np.ndarray:
    """v, which must be a string value."""
    if not is_strings(v):
        got = "nothing" if v is None else getattr(getattr(v, "dtype", None), "name",
                                                  type(v).__name__)
        raise node.fail(f"{what} must be a string tensor, got {got}")
    return v


def _numbered(node, inputs, positions):
    """(inputs with each string input at positions replaced by an int64 tensor numbering its
    elements, the flat pool of those elements)."""
    args, pool, offset = list(inputs), [], 0
    data = range(len(inputs)) if positions is None else positions
    for i, v in enumerate(inputs):
        if v is None:
            continue
        if i not in data:
            if is_strings(v):
                raise node.fail(f"input {i} cannot be a string tensor")
            continue
        if not is_strings(v):
            raise node.fail(f"input {i} is a {v.dtype.name} tensor, but other data inputs are "
                            "strings")
        args[i] = node.const(np.arange(offset, offset + v.size, dtype=np.int64)
                             .reshape(v.shape))
        if args[i].shape != v.shape:
            args[i] = args[i].reshape(*v.shape)
        pool.append(v.reshape(-1))
        offset += v.size
    flat = np.concatenate(pool) if pool else np.empty(0, dtype=object)
    return args, flat


def _pick(flat: np.ndarray, t) -> np.ndarray:
    idx = np.asarray(t.detach().cpu().numpy())
    return flat[idx.reshape(-1)].reshape(idx.shape)


def _moved(op: str, positions):
    def run(node, inputs, attrs):
        args, flat = _numbered(node, inputs, positions)
        out = HANDLERS[op](node, args, attrs)
        if isinstance(out, (tuple, list)):
            return type(out)(_pick(flat, t) for t in out)
        return _pick(flat, out)

    return run


def _shape_of(op: str, positions):
    def run(node, inputs, attrs):
        args, _ = _numbered(node, inputs, positions)
        return HANDLERS[op](node, args, attrs)

    return run


for _op, _pos in _MOVES.items():
    string_handler(_op)(_moved(_op, _pos))
for _op, _pos in _SHAPE_OF.items():
    string_handler(_op)(_shape_of(_op, _pos))


def _broadcast(node, a: np.ndarray, b: np.ndarray) -> tuple:
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise node.fail(f"shapes {a.shape} and {b.shape} do not broadcast") from None


def _object(values, shape) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    out.reshape(-1)[:] = values if isinstance(values, list) else list(values)
    return out


@string_handler("Equal")
def equal(node, inputs, attrs):
    _need(node, inputs, 2)
    a, b = (strings(node, v, "both inputs") for v in inputs)
    shape = _broadcast(node, a, b)
    eq = [x == y for x, y in zip(np.broadcast_to(a, shape).reshape(-1).tolist(),
                                 np.broadcast_to(b, shape).reshape(-1).tolist())]
    return node.const(np.asarray(eq, dtype=np.bool_).reshape(shape))


@handler("StringConcat")
@string_handler("StringConcat")
def string_concat(node, inputs, attrs):
    _need(node, inputs, 2)
    a, b = (strings(node, v, "both inputs") for v in inputs)
    shape = _broadcast(node, a, b)
    joined = [x + y for x, y in zip(np.broadcast_to(a, shape).reshape(-1).tolist(),
                                    np.broadcast_to(b, shape).reshape(-1).tolist())]
    return _object(joined, shape)


@handler("RegexFullMatch")
@string_handler("RegexFullMatch")
def regex_full_match(node, inputs, attrs):
    _need(node, inputs, 1)
    x = strings(node, inputs[0])
    pattern = attrs.get("pattern")
    if pattern is None:
        raise node.fail("attribute 'pattern' is required")
    memo = node.memo
    if memo is None or memo[0] != pattern:
        try:
            memo = node.memo = (pattern, re.compile(pattern, re.ASCII))
        except re.error as e:
            raise node.fail(f"invalid pattern {pattern!r}: {e}") from None
    match = memo[1].fullmatch
    hits = [match(s) is not None for s in x.reshape(-1).tolist()]
    return node.const(np.asarray(hits, dtype=np.bool_).reshape(x.shape))


@handler("StringSplit")
@string_handler("StringSplit")
def string_split(node, inputs, attrs):
    _need(node, inputs, 1)
    x = strings(node, inputs[0])
    sep = attrs.get("delimiter") or None  # unset or "": runs of whitespace separate
    maxsplit = attrs.get("maxsplit")
    if maxsplit is not None and maxsplit < 0:
        raise node.fail(f"maxsplit must be non-negative, got {maxsplit}")
    parts = [s.split(sep, -1 if maxsplit is None else maxsplit) for s in x.reshape(-1).tolist()]
    width = max((len(p) for p in parts), default=0)
    out = np.full((len(parts), width), "", dtype=object)
    for i, p in enumerate(parts):
        out[i, :len(p)] = p
    lengths = np.asarray([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    return out.reshape(x.shape + (width,)), node.const(lengths)


_CASE = {"NONE": lambda s: s, "LOWER": str.lower, "UPPER": str.upper}


@handler("StringNormalizer")
@string_handler("StringNormalizer")
def string_normalizer(node, inputs, attrs):
    _need(node, inputs, 1)
    x = strings(node, inputs[0])
    if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
        raise node.fail(f"input must have shape [C] or [1, C], got {list(x.shape)}")
    action = attrs.get("case_change_action", "NONE")
    if action not in _CASE:
        raise node.fail(f"case_change_action must be NONE, LOWER or UPPER, got {action!r}")
    change = _CASE[action]
    stop = attrs.get("stopwords", [])
    if attrs.get("is_case_sensitive", 0):
        kept = [s for s in x.reshape(-1).tolist() if s not in set(stop)]
    else:
        low = {w.lower() for w in stop}
        kept = [s for s in x.reshape(-1).tolist() if s.lower() not in low]
    # everything dropped: one empty string, as the spec says ([1] or [1, 1])
    out = [change(s) for s in kept] or [""]
    return _object(out, (len(out),) if x.ndim == 1 else (1, len(out)))


@string_handler("Cast")
def cast_strings(node, inputs, attrs):
    """Strings to numbers, each read as Python reads a number ("3.14", "1e-5", "inf"); to
    STRING again, unchanged."""
    _need(node, inputs, 1)
    x = inputs[0]
    to = attrs.get("to")
    if to is None:
        raise node.fail("attribute 'to' is required")
    if to == 8:
        return x
    want = _dtype(node, to)
    try:
        if want.is_floating_point:
            vals = np.asarray([float(s) for s in x.reshape(-1).tolist()], dtype=np.float64)
        else:
            vals = np.asarray([_int(s) for s in x.reshape(-1).tolist()], dtype=np.int64)
    except (ValueError, OverflowError) as e:
        raise node.fail(f"cannot read a number: {e}") from None
    return _like(node.const(vals.reshape(x.shape)), want)


def _int(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        return int(float(s))
