"""String tensors in imported graphs (onnx/ops_string.py): host values across the boundary,
the string ops, the data-movement ops passing strings through, and the error paths."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

S, F, I64, B = TensorProto.STRING, TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def run(nodes, inputs, outputs, values, inits=(), opset=21):
    """Outputs of a graph on numpy inputs; inputs/outputs are (name, elem type) pairs."""
    g = helper.make_graph(nodes, "g", [vi(n, t) for n, t in inputs],
                          [vi(n, t) for n, t in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return st.onnx.load(m).run_numpy(list(values))


def strs(*v):
    return np.array(v, dtype=object)


def test_boundary_accepts_str_bytes_and_object_arrays():
    node = helper.make_node("Identity", ["x"], ["y"])
    for x in (np.array(["ab", "c"]), np.array([b"ab", b"c"]), strs("ab", "c")):
        (y,) = run([node], [("x", S)], [("y", S)], [x])
        assert y.dtype == object and y.tolist() == ["ab", "c"]


def test_string_constants_and_initializers():
    nodes = [helper.make_node("Constant", [], ["a"], value_strings=["x", "y"]),
             helper.make_node("Constant", [], ["b"], value_string="!"),
             helper.make_node("StringConcat", ["a", "b"], ["ab"]),
             helper.make_node("StringConcat", ["ab", "w"], ["y"])]
    w = helper.make_tensor("w", S, [1], [b"?"])
    (y,) = run(nodes, [], [("y", S)], [], inits=[w])
    assert y.tolist() == ["x!?", "y!?"]


def test_movement_ops_pass_strings_through():
    x = strs(["a", "b", "c"], ["d", "e", "f"])
    shape = helper.make_tensor("shape", I64, [1], [-1])
    idx = helper.make_tensor("idx", I64, [2], [2, -3])
    axes = helper.make_tensor("axes", I64, [1], [0])
    starts = helper.make_tensor("starts", I64, [1], [1])
    ends = helper.make_tensor("ends", I64, [1], [3])
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["flat"]),
             helper.make_node("Transpose", ["x"], ["xt"]),
             helper.make_node("Concat", ["x", "x"], ["cat"], axis=1),
             helper.make_node("Gather", ["flat", "idx"], ["g"]),
             helper.make_node("Unsqueeze", ["g", "axes"], ["u"]),
             helper.make_node("Squeeze", ["u", "axes"], ["sq"]),
             helper.make_node("Slice", ["x", "starts", "ends", "shape"], ["sl"]),
             helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Size", ["cat"], ["n"]),
             helper.make_node("Flatten", ["x"], ["fl"], axis=0),
             helper.make_node("Split", ["x"], ["s0", "s1"], axis=0, num_outputs=2)]
    outs = run(nodes, [("x", S)],
               [("flat", S), ("xt", S), ("cat", S), ("g", S), ("sq", S), ("sl", S),
                ("shp", I64), ("n", I64), ("fl", S), ("s0", S), ("s1", S)],
               [x], inits=[shape, idx, axes, starts, ends])
    flat, xt, cat, g, sq, sl, shp, n, fl, s0, s1 = outs
    assert flat.tolist() == list("abcdef")
    assert xt.tolist() == [["a", "d"], ["b", "e"], ["c", "f"]]
    assert cat.tolist() == [list("abcabc"), list("defdef")]
    assert g.tolist() == ["c", "d"] and sq.tolist() == ["c", "d"]
    assert sl.tolist() == [["b", "c"], ["e", "f"]]
    assert shp.tolist() == [2, 3] and n.tolist() == 12
    assert fl.shape == (1, 6) and s0.tolist() == [list("abc")] and s1.tolist() == [list("def")]


def _ini(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


@pytest.mark.parametrize("op,extra,attrs", [
    ("GatherElements", [("i", np.zeros((1, 2, 2, 3), np.int64))], {"axis": 1}),
    ("GatherND", [("i", np.array([[0, 1], [0, 3]], np.int64))], {}),
    ("Compress", [("c", np.array([True, False, True, True]))], {"axis": 1}),
    ("DepthToSpace", [], {"blocksize": 2, "mode": "CRD"}),
    ("SpaceToDepth", [], {"blocksize": 1}),
    ("Expand", [("s", np.array([2, 1, 1, 1], np.int64))], {}),
    ("Tile", [("s", np.array([1, 1, 2, 1], np.int64))], {}),
    ("Transpose", [], {"perm": [3, 1, 2, 0]}),
])
def test_more_movement_ops_match_the_reference_evaluator(op, extra, attrs):
    from onnx.reference import ReferenceEvaluator

    x = np.array([f"s{i}" for i in range(24)], dtype=object).reshape(1, 4, 2, 3)
    node = helper.make_node(op, ["x"] + [n for n, _ in extra], ["y"], **attrs)
    g = helper.make_graph([node], "g", [vi("x", S)], [vi("y", S)],
                          [_ini(n, a) for n, a in extra])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = st.onnx.load(m).run_numpy([x])
    assert got.dtype == object and got.shape == want.shape and got.tolist() == want.tolist()


def test_where_and_equal_on_strings():
    nodes = [helper.make_node("Equal", ["a", "b"], ["eq"]),
             helper.make_node("Where", ["eq", "a", "b"], ["w"])]
    eq, w = run(nodes, [("a", S), ("b", S)], [("eq", B), ("w", S)],
                [strs("x", "y", "z"), strs("x", "q", "z")])
    assert eq.tolist() == [True, False, True] and w.tolist() == ["x", "q", "z"]
    (eq,) = run(nodes[:1], [("a", S), ("b", S)], [("eq", B)], [strs(["a"], ["b"]), strs("a", "b")])
    assert eq.tolist() == [[True, False], [False, True]]


def test_regex_full_match_is_ascii_like_re2():
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"\w+\d")
    (y,) = run([node], [("x", S)], [("y", B)], [strs("ab1", "ab", "\u00e91", "a1 ")])
    # \w is [0-9A-Za-z_] as in RE2: an accented letter is not a word character
    assert y.tolist() == [True, False, False, False]


def test_string_split_and_normalizer_forms():
    node = helper.make_node("StringSplit", ["x"], ["s", "n"], delimiter="ab")
    s, n = run([node], [("x", S)], [("s", S), ("n", I64)], [strs("1ab2ab", "3")])
    assert s.tolist() == [["1", "2", ""], ["3", "", ""]] and n.tolist() == [3, 1]
    node = helper.make_node("StringNormalizer", ["x"], ["y"], stopwords=["The"],
                            case_change_action="LOWER")
    (y,) = run([node], [("x", S)], [("y", S)], [strs(["the", "Big", "THE", "Cat"])])
    assert y.tolist() == [["big", "cat"]]
    (y,) = run([node], [("x", S)], [("y", S)], [strs(["the"])])
    assert y.tolist() == [[""]]


def test_cast_from_strings():
    node = helper.make_node("Cast", ["x"], ["y"], to=F)
    (y,) = run([node], [("x", S)], [("y", F)], [strs("1.5", "-2e3", "inf")])
    assert y.dtype == np.float32 and y.tolist() == [1.5, -2000.0, np.inf]
    node = helper.make_node("Cast", ["x"], ["y"], to=I64)
    (y,) = run([node], [("x", S)], [("y", I64)], [strs("7", "1e2")])
    assert y.tolist() == [7, 100]


def test_strings_never_reach_the_compiled_inference_path():
    # a graph whose inputs are tensors but that computes strings runs eagerly, every call
    keys = helper.make_tensor("k", S, [2], [b"a", b"b"])
    nodes = [helper.make_node("Gather", ["k", "i"], ["s"]),
             helper.make_node("Equal", ["s", "k"], ["y"])]
    g = helper.make_graph(nodes, "g", [vi("i", I64, [2])], [vi("y", B, [2])], [keys])
    m = st.onnx.load(helper.make_model(g))
    for i, want in (([0, 1], [True, True]), ([1, 1], [False, True]), ([1, 0], [False, False])):
        with st.no_grad():
            assert m(st.tensor(i)).tolist() == want
    states = [s for s, _ in m.fast_stats()["signatures"].values()]
    assert states == ["eager"]


def _fails(match, nodes, inputs, outputs, values, inits=()):
    with pytest.raises(OnnxImportError, match=match):
        run(nodes, inputs, outputs, values, inits)


def test_error_paths():
    x = strs("a", "b")
    one = [("x", S)]
    _fails(r"node 'n' \(Abs\): string tensors are not supported by this op",
           [helper.make_node("Abs", ["x"], ["y"], name="n")], one, [("y", S)], [x])
    _fails(r"\(Equal\): both inputs must be a string tensor, got float32",
           [helper.make_node("Equal", ["x", "z"], ["y"])], [("x", S), ("z", F)], [("y", B)],
           [x, np.ones(2, np.float32)])
    _fails(r"\(Equal\): shapes \(2,\) and \(3,\) do not broadcast",
           [helper.make_node("Equal", ["x", "z"], ["y"])], [("x", S), ("z", S)], [("y", B)],
           [x, strs("a", "b", "c")])
    _fails(r"\(Concat\): input 1 is a float32 tensor, but other data inputs are strings",
           [helper.make_node("Concat", ["x", "z"], ["y"], axis=0)], [("x", S), ("z", F)],
           [("y", S)], [x, np.ones(2, np.float32)])
    _fails(r"\(Gather\): input 1 cannot be a string tensor",
           [helper.make_node("Gather", ["x", "x"], ["y"])], one, [("y", S)], [x])
    _fails(r"\(Reshape\): cannot reshape \(2,\) to \[3\]",
           [helper.make_node("Reshape", ["x", "s"], ["y"])], one, [("y", S)], [x],
           [helper.make_tensor("s", I64, [1], [3])])
    _fails(r"\(RegexFullMatch\): attribute 'pattern' is required",
           [helper.make_node("RegexFullMatch", ["x"], ["y"])], one, [("y", B)], [x])
    _fails(r"\(RegexFullMatch\): invalid pattern '\(a'",
           [helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(a")], one, [("y", B)],
           [x])
    _fails(r"\(RegexFullMatch\): input must be a string tensor, got float32",
           [helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="a")], [("x", F)],
           [("y", B)], [np.ones(2, np.float32)])
    _fails(r"\(StringSplit\): maxsplit must be non-negative, got -1",
           [helper.make_node("StringSplit", ["x"], ["s", "n"], maxsplit=-1)], one,
           [("s", S), ("n", I64)], [x])
    _fails(r"\(StringNormalizer\): input must have shape \[C\] or \[1, C\], got \[2, 1\]",
           [helper.make_node("StringNormalizer", ["x"], ["y"])], one, [("y", S)],
           [strs(["a"], ["b"])])
    _fails(r"\(StringNormalizer\): case_change_action must be NONE, LOWER or UPPER, got 'UP'",
           [helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="UP")], one,
           [("y", S)], [x])
    _fails(r"\(Cast\): cannot read a number",
           [helper.make_node("Cast", ["x"], ["y"], to=F)], one, [("y", F)], [x])
    _fails(r"onnx model: input 'x' is declared FLOAT \(floating point\), got a string tensor",
           [helper.make_node("Identity", ["x"], ["y"])], [("x", F)], [("y", F)], [x])
    _fails(r"onnx model: input 'x' is declared STRING \(string\), got a .*float32 tensor",
           [helper.make_node("Identity", ["x"], ["y"])], one, [("y", S)],
           [np.ones(2, np.float32)])
    with pytest.raises(OnnxImportError, match=r"onnx input 'x': an object array must hold "
                                              r"strings, got int"):
        run([helper.make_node("Identity", ["x"], ["y"])], one, [("y", S)],
            [np.array([1, 2], dtype=object)])


def test_strings_have_no_gradient_and_do_not_block_it():
    # a LabelEncoder feeding a float path: the float input still gets its gradient
    nodes = [helper.make_node("LabelEncoder", ["s"], ["w"], domain="ai.onnx.ml",
                              keys_strings=["a", "b"], values_floats=[2.0, 3.0]),
             helper.make_node("Mul", ["w", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [vi("s", S), vi("x", F)], [vi("y", F)])
    m = st.onnx.load(helper.make_model(g, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 4)]))
    x = st.ones(3, requires_grad=True)
    m(strs("b", "a", "z"), x).sum().backward()
    assert x.grad.tolist() == [3.0, 2.0, -0.0]
