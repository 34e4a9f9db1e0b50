"""The inference path of imported ONNX models (onnx/_fast.py): folding, compiling per input
signature, replaying, and falling back to the eager plan; against the plain node-by-node plan
(`module.fast = False`), which is what training runs.

Tolerances: folding a batch norm into a conv reorders float32 rounding, so those comparisons
allow 1e-5 of the output's scale; paths that compute the same ops in the same order (replay vs
eager, shape folding) allow 1e-6 relative.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402
from singa_tensor.onnx._fast import fold  # noqa: E402

F32 = TensorProto.FLOAT


def _init(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def _model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=F32):
    return helper.make_tensor_value_info(name, t, shape)


def cnn_model(seed=0):
    """Conv+BN+Relu, MaxPool, Conv(no bias)+BN+Relu, GlobalAveragePool, Flatten, Gemm."""
    r = np.random.default_rng(seed)
    inits = [_init("w1", r.standard_normal((4, 3, 3, 3)) * 0.3),
             _init("b1", r.standard_normal(4) * 0.1),
             _init("w2", r.standard_normal((6, 4, 3, 3)) * 0.3),
             _init("fc", r.standard_normal((5, 6)) * 0.5), _init("fcb", r.standard_normal(5))]
    for i, c in ((1, 4), (2, 6)):
        inits += [_init(f"s{i}", r.uniform(0.5, 1.5, c)), _init(f"be{i}", r.uniform(-.3, .3, c)),
                  _init(f"m{i}", r.uniform(-.5, .5, c)), _init(f"v{i}", r.uniform(.5, 2., c))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s1", "be1", "m1", "v1"], ["n1"],
                         epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "s2", "be2", "m2", "v2"], ["n2"]),
        helper.make_node("Relu", ["n2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1),
    ]
    return _model(nodes, [_vi("x", ["N", 3, 8, 8])], [_vi("y", ["N", 5])], inits)


def transformer_model(seed=0, d=8):
    """Self-attention + LayerNorm, with the head split done by a Shape/Gather/Concat chain."""
    r = np.random.default_rng(seed)
    inits = [_init("wq", r.standard_normal((d, d)) * 0.4),
             _init("wk", r.standard_normal((d, d)) * 0.4),
             _init("wv", r.standard_normal((d, d)) * 0.4),
             _init("lns", r.uniform(0.5, 1.5, d)), _init("lnb", r.uniform(-.2, .2, d)),
             _init("scale", np.float32(1 / np.sqrt(d / 2))),
             numpy_helper.from_array(np.array([0], np.int64), "i0"),
             numpy_helper.from_array(np.array([1], np.int64), "i1"),
             numpy_helper.from_array(np.array([2, -1], np.int64), "heads")]
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "i0"], ["bdim"]),
             helper.make_node("Gather", ["shp", "i1"], ["tdim"]),
             helper.make_node("Concat", ["bdim", "tdim", "heads"], ["hshape"], axis=0)]
    for n in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{n}"], [f"{n}0"]),
                  helper.make_node("Reshape", [f"{n}0", "hshape"], [f"{n}1"]),
                  helper.make_node("Transpose", [f"{n}1"], [f"{n}"], perm=[0, 2, 1, 3])]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["att0"]),
              helper.make_node("Mul", ["att0", "scale"], ["att1"]),
              helper.make_node("Softmax", ["att1"], ["att"], axis=-1),
              helper.make_node("MatMul", ["att", "v"], ["o0"]),
              helper.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
              helper.make_node("Shape", ["x"], ["xs"]),
              helper.make_node("Reshape", ["o1", "xs"], ["o2"]),
              helper.make_node("Add", ["o2", "x"], ["res"]),
              helper.make_node("LayerNormalization", ["res", "lns", "lnb"], ["y"], axis=-1)]
    return _model(nodes, [_vi("x", ["B", "T", d])], [_vi("y", ["B", "T", d])], inits)


def nonzero_model():
    """y = the positive entries of x, in order: its length depends on the data."""
    nodes = [helper.make_node("Constant", [], ["zero"],
                              value=numpy_helper.from_array(np.array(0, np.float32))),
             helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["idx"]),
             helper.make_node("Transpose", ["idx"], ["idxt"]),
             helper.make_node("GatherND", ["x", "idxt"], ["y"])]
    return _model(nodes, [_vi("x", [6])], [_vi("y", [None])], [])


def _plain(m, x):
    m.fast = False
    try:
        with st.no_grad():
            return m(x).cpu().numpy()
    finally:
        m.fast = True


def _fast(m, x, calls=3):
    with st.no_grad():
        return [m(x).cpu().numpy() for _ in range(calls)]


def _close(a, b, rel):
    scale = max(1.0, float(np.abs(b).max()))
    assert a.shape == b.shape
    assert float(np.abs(a - b).max()) <= rel * scale, float(np.abs(a - b).max())


def _states(m):
    return [s for s, _ in m.fast_stats()["signatures"].values()]


def test_cnn_with_batch_norm_folds_compiles_and_matches_plain():
    m = st.onnx.load(cnn_model())
    x = st.tensor(np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32))
    want = _plain(m, x)
    for got in _fast(m, x, 4):
        _close(got, want, 1e-5)
    stats = m.fast_stats()
    # two batch norms into their convs, then conv, relu, max pool, conv, relu into one chain
    assert stats["folded_nodes"] == 6
    assert _states(m) == ["replay"] and stats["replays"] == 2 and stats["records"] == 1


def test_transformer_like_graph_compiles_with_shapes_folded():
    m = st.onnx.load(transformer_model())
    x = st.tensor(np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32))
    want = _plain(m, x)
    for got in _fast(m, x, 4):
        _close(got, want, 1e-6)
    assert _states(m) == ["replay"]
    # the Shape nodes' values are folded in per signature: the recording reads no shape
    entry = next(iter(m._fast_path.signatures.values()))
    assert not any(s[0].op_type in ("Shape", "Gather", "Concat") for s in entry.steps)


def test_changed_input_shape_records_again():
    m = st.onnx.load(transformer_model())
    r = np.random.default_rng(3)
    xs = [st.tensor(r.standard_normal(s).astype(np.float32))
          for s in ((2, 5, 8), (1, 3, 8), (2, 5, 8), (1, 3, 8), (2, 5, 8), (1, 3, 8))]
    for x in xs:
        with st.no_grad():
            got = m(x).numpy()
        _close(got, _plain(m, x), 1e-6)
    assert sorted(_states(m)) == ["replay", "replay"]
    shapes = sorted(k[0][0] for k in m.fast_stats()["signatures"])
    assert shapes == [(1, 3, 8), (2, 5, 8)]


def test_data_dependent_shape_falls_back_to_eager():
    m = st.onnx.load(nonzero_model())
    r = np.random.default_rng(4)
    for _ in range(5):
        a = r.standard_normal(6).astype(np.float32)
        with st.no_grad():
            got = m(st.tensor(a)).numpy()
        np.testing.assert_array_equal(got, a[a > 0])
    (state, why), = m.fast_stats()["signatures"].values()
    assert state == "eager" and "data-dependent" in why and "NonZero" in why
    assert m.fast_stats()["replays"] == 0


def test_constant_subgraph_is_folded():
    r = np.random.default_rng(5)
    w = r.standard_normal((3, 4)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["w"], ["wt"]),  # initializer only: folded
             helper.make_node("Constant", [], ["two"],
                              value=numpy_helper.from_array(np.array(2.0, np.float32))),
             helper.make_node("Mul", ["wt", "two"], ["w2"]),
             helper.make_node("MatMul", ["x", "w2"], ["y"])]
    m = st.onnx.load(_model(nodes, [_vi("x", [2, 4])], [_vi("y", [2, 3])], [_init("w", w)]))
    x = r.standard_normal((2, 4)).astype(np.float32)
    for got in _fast(m, st.tensor(x)):
        _close(got, x @ (w.T * 2), 1e-5)
    assert m.fast_stats()["folded_nodes"] == 3


def test_fold_equals_unfolded_and_leaves_parameters_alone():
    m = st.onnx.load(cnn_model(seed=7))
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    g = m._graph
    steps, consts = fold(g.steps, g.constants, set(g.output_names), None)
    # the chain step is named by its first convolution and reads both folded weights
    assert [s[0].op_type for s in steps] == ["ConvChain", "GlobalAveragePool", "Flatten",
                                            "Gemm"]
    assert steps[0][2] == ("x", "__fold_w1", "__fold_b1", "__fold_w2", "__fold_b2")
    x = st.tensor(np.random.default_rng(8).standard_normal((3, 3, 8, 8)).astype(np.float32))
    from singa_tensor.onnx._graph import run_steps

    with st.no_grad():
        got = run_steps(steps, consts, g.input_names, [x], None, x.device)["y"].numpy()
    _close(got, _plain(m, x), 1e-5)
    after = m.state_dict()
    assert list(after) == list(before)
    for k, v in after.items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_training_path_unchanged_and_inference_sees_updates():
    proto = cnn_model(seed=9)
    x = st.tensor(np.random.default_rng(10).standard_normal((2, 3, 8, 8)).astype(np.float32))

    def grads(m):
        m.zero_grad()
        m(x).sum().backward()
        return {k: p.grad.numpy().copy() for k, p in m.named_parameters()}

    fresh = st.onnx.load(proto)
    ref = grads(fresh)
    m = st.onnx.load(proto)
    _fast(m, x)  # fold, record and replay first
    got = grads(m)
    assert sorted(got) == sorted(ref)
    for k in ref:
        _close(got[k], ref[k], 1e-6)
    # a training step changes the parameters: the next inference refolds and records again
    opt = st.optim.SGD(m.parameters(), lr=0.1)
    y0 = _fast(m, x, 1)[0]
    opt.step()
    want = _plain(m, x)
    assert float(np.abs(want - y0).max()) > 1e-3
    for got in _fast(m, x):
        _close(got, want, 1e-5)


def test_grad_wanted_takes_the_plain_path():
    m = st.onnx.load(cnn_model())
    x = st.tensor(np.ones((1, 3, 8, 8), np.float32), requires_grad=True)
    y = m(x)
    assert y.requires_grad
    y.sum().backward()
    assert x.grad is not None and m.fast_stats()["signatures"] == {}


def test_replaced_parameter_is_seen():
    m = st.onnx.load(cnn_model(seed=11))
    x = st.tensor(np.random.default_rng(12).standard_normal((2, 3, 8, 8)).astype(np.float32))
    _fast(m, x)
    other = st.onnx.load(cnn_model(seed=13))
    m.load_state_dict(other.state_dict())
    want = _plain(other, x)
    for got in _fast(m, x):
        _close(got, want, 1e-5)


def test_fast_path_errors_name_the_problem():
    m = st.onnx.load(cnn_model())
    with st.no_grad():
        with pytest.raises(OnnxImportError, match="expected 1 inputs"):
            m(st.ones(1, 3, 8, 8), st.ones(1))
        with pytest.raises((OnnxImportError, ValueError), match="Conv|channels"):
            m(st.ones(1, 2, 8, 8))


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "strides": [1, 1], "dilations": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [0, 0, 2, 2]},  # uneven pads: the window path
    {"kernel_shape": [2, 2], "strides": [2, 2]},  # windows inside: strided views
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},  # last window sticks out
])
def test_max_pool_matches_window_reference(attrs):
    a = np.random.default_rng(14).standard_normal((2, 3, 7, 7)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    m = st.onnx.load(_model([node], [_vi("x", [2, 3, 7, 7])], [_vi("y", None)], []))
    with st.no_grad():
        got = m(st.tensor(a)).numpy()
    # reference: pad with -inf and take every window's max in numpy
    k, s = attrs["kernel_shape"], attrs.get("strides", [1, 1])
    d, p = attrs.get("dilations", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
    ceil = attrs.get("ceil_mode", 0)
    out = []
    for ax in (0, 1):
        span = 7 + p[ax] + p[ax + 2] - (k[ax] - 1) * d[ax] - 1
        o = (span + (s[ax] - 1 if ceil else 0)) // s[ax] + 1
        if ceil and (o - 1) * s[ax] >= 7 + p[ax]:
            o -= 1
        out.append(o)
    big = np.full((2, 3, 7 + p[0] + p[2] + 4, 7 + p[1] + p[3] + 4), -np.inf, np.float32)
    big[:, :, p[0]:p[0] + 7, p[1]:p[1] + 7] = a
    want = np.empty((2, 3, *out), np.float32)
    for i in range(out[0]):
        for j in range(out[1]):
            win = big[:, :, i * s[0]:i * s[0] + (k[0] - 1) * d[0] + 1:d[0],
                      j * s[1]:j * s[1] + (k[1] - 1) * d[1] + 1:d[1]]
            want[:, :, i, j] = win.max(axis=(2, 3))
    np.testing.assert_array_equal(got, want)  # a max picks an input value: exact


_CASE_OPS = ("test_conv_", "test_batchnorm", "test_matmul", "test_gemm", "test_softmax_",
             "test_layer_normalization_2d", "test_reshape_", "test_maxpool_2d", "test_gather_",
             "test_concat_", "test_transpose_", "test_slice", "test_expand_", "test_where_",
             "test_reduce_mean_", "test_nonzero", "test_shape", "test_relu", "test_add",
             "test_constantofshape", "test_range_")


def _node_cases():
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    picked = [c for c in cases if c.name.startswith(_CASE_OPS) and "expanded" not in c.name]
    return picked[::2]  # every other one: the variants of one op differ little


def test_onnx_node_cases_fast_equals_plain():
    """onnx's own node cases for the common ops: three inference calls (probe, record, replay
    or eager) give the plain plan's outputs."""
    checked = 0
    for case in _node_cases():
        try:
            m = st.onnx.load(case.model)
            ins = list(case.data_sets[0][0])
            m.fast = False
            want = m.run_numpy(ins)
        except Exception:  # a case the importer does not support: expected_failures.py
            continue
        m.fast = True
        for _ in range(3):
            got = m.run_numpy(ins)
        for a, b in zip(got, want):
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape and a.dtype == b.dtype, case.name
            if a.dtype.kind == "f":
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True,
                                           err_msg=case.name)
            else:
                np.testing.assert_array_equal(a, b, err_msg=case.name)
        checked += 1
    assert checked >= 50


def test_fast_path_on_a_cuda_device(cuda):
    m = st.onnx.load(cnn_model(seed=15), device=cuda)
    x = st.tensor(np.random.default_rng(16).standard_normal((2, 3, 8, 8)).astype(np.float32),
                  device=cuda)
    want = _plain(m, x)
    for got in _fast(m, x):
        _close(got, want, 1e-5)
    assert _states(m) == ["replay"]


def test_copies_start_without_recordings():
    import copy

    m = st.onnx.load(cnn_model(seed=17))
    x = st.tensor(np.random.default_rng(18).standard_normal((2, 3, 8, 8)).astype(np.float32))
    want = _fast(m, x)[-1]
    other = copy.deepcopy(m)
    assert other.fast_stats()["signatures"] == {}
    for got in _fast(other, x):
        _close(got, want, 1e-6)


def embedding_model():
    """Token ids -> Gather from an embedding table -> MatMul: the ids are data."""
    r = np.random.default_rng(19)
    inits = [_init("table", r.standard_normal((10, 4))), _init("w", r.standard_normal((4, 3)))]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]),
             helper.make_node("MatMul", ["e", "w"], ["y"])]
    return _model(nodes, [_vi("ids", [2, 5], TensorProto.INT64)], [_vi("y", [2, 5, 3])], inits)


def test_embedding_gather_of_data_ids_compiles_and_checks_bounds():
    m = st.onnx.load(embedding_model())
    r = np.random.default_rng(20)
    for _ in range(4):
        ids = st.tensor(r.integers(-10, 10, (2, 5)))
        with st.no_grad():
            got = m(ids).numpy()
        _close(got, _plain(m, ids), 1e-6)
    assert _states(m) == ["replay"]
    with st.no_grad():
        with pytest.raises(OnnxImportError, match="index 10 is out of bounds"):
            m(st.tensor(np.full((2, 5), 10, np.int64)))
        ids = st.tensor(r.integers(0, 10, (2, 5)))
        for _ in range(3):  # after the failed call: still right, and replayed again
            _close(m(ids).numpy(), _plain(m, ids), 1e-6)
    assert _states(m) == ["replay"]


@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 1, 1, 1]])
def test_max_pool_nan_wins(pads):
    a = np.arange(2 * 1 * 6 * 6, dtype=np.float32).reshape(2, 1, 6, 6)
    a[0, 0, 1, 1] = a[1, 0, 4, 5] = np.nan
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                            pads=pads)
    m = st.onnx.load(_model([node], [_vi("x", [2, 1, 6, 6])], [_vi("y", None)], []))
    with st.no_grad():
        got = m(st.tensor(a)).numpy()
    off = pads[0]
    assert np.isnan(got[0, 0, (1 + off) // 2, (1 + off) // 2])
    assert np.isnan(got[1, 0, (4 + off) // 2, (5 + off) // 2])
    assert np.isnan(got).sum() == 2


def _chain_model(conv1: dict, pool: dict, conv2: dict, group2=1, relu_after_pool=False,
                 seed=3):
    """Conv -> Relu -> MaxPool -> Conv -> Relu with the given attributes (a chain)."""
    r = np.random.default_rng(seed)
    inits = [_init("w1", r.standard_normal((8, 4, 3, 3)) * 0.3), _init("b1", r.standard_normal(8)),
             _init("w2", r.standard_normal((16, 8 // group2, 3, 2)) * 0.3)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], **conv1),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], **pool)]
    src = "p1"
    if relu_after_pool:
        nodes.append(helper.make_node("Relu", ["p1"], ["q1"]))
        src = "q1"
    nodes += [helper.make_node("Conv", [src, "w2"], ["c2"], group=group2, **conv2),
              helper.make_node("Relu", ["c2"], ["y"])]
    return _model(nodes, [_vi("x", ["N", 4, 11, 12])], [_vi("y", None)], inits)


CHAINS = [
    ({"pads": [1, 1, 1, 1]}, {"kernel_shape": [2, 2], "strides": [2, 2]}, {}, 1),
    ({"pads": [0, 1, 2, 0], "strides": [2, 1]}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                                 "pads": [1, 1, 1, 1], "ceil_mode": 1},
     {"dilations": [2, 1], "pads": [1, 0, 1, 1]}, 2),
    ({"auto_pad": "SAME_UPPER", "dilations": [1, 2]}, {"kernel_shape": [2, 3], "strides": [1, 2],
                                                      "dilations": [2, 1]},
     {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, 4),
]


@pytest.mark.parametrize("case", range(len(CHAINS)))
def test_conv_relu_pool_chain_runs_as_one_plan_and_matches_plain(case):
    from singa_tensor.backend import onednn, onednn_chain

    conv1, pool, conv2, group2 = CHAINS[case]
    m = st.onnx.load(_chain_model(conv1, pool, conv2, group2))
    batch = 3 + case  # a shape of its own: the plan below is this case's
    x = st.tensor(np.random.default_rng(5).standard_normal((batch, 4, 11, 12))
                  .astype(np.float32))
    want = _plain(m, x)
    runs = onednn_chain.calls["run"]
    for got in _fast(m, x, 4):
        _close(got, want, 1e-5)
    assert m.fast_stats()["folded_nodes"] == 4  # five steps into one
    planned = [p for p in onednn_chain._chains.values()
               if p is not None and p.src_shape == (batch, 4, 11, 12)]
    # where oneDNN has native code for every stage (CPU-dependent), the probe, the recording
    # and the replays all run the chain's plan
    assert onednn_chain.calls["run"] - runs == (4 if planned else 0)
    if not onednn.is_available():
        assert not planned
    # NaN in the input takes the stage-by-stage path, which propagates it like the plain plan
    bad = x.numpy().copy()
    bad[1, 2, 5, 6] = np.nan
    with st.no_grad():
        got = m(st.tensor(bad)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(_plain(m, st.tensor(bad))))
    assert np.isnan(got).any()


def test_chain_stops_where_a_link_is_read_twice_or_a_relu_follows_a_pool():
    m = st.onnx.load(_chain_model(*CHAINS[0][:3], relu_after_pool=True))
    g = m._graph
    steps, _ = fold(g.steps, g.constants, set(g.output_names), None)
    # a conv+relu+pool chain, the relu after the pool, a conv+relu chain
    assert [s[0].op_type for s in steps] == ["ConvChain", "Relu", "ConvChain"]
    x = st.tensor(np.random.default_rng(6).standard_normal((2, 4, 11, 12)).astype(np.float32))
    for got in _fast(m, x):
        _close(got, _plain(m, x), 1e-5)
    r = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["d"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["d", "r"], ["y"])]  # r is read twice: no chain through it
    m2 = st.onnx.load(_model(nodes, [_vi("x", [1, 4, 5, 5])], [_vi("y", None)],
                             [_init("w", r.standard_normal((4, 4, 3, 3)) * 0.3)]))
    g = m2._graph
    steps, _ = fold(g.steps, g.constants, set(g.output_names), None)
    # conv+relu as a chain whose output r is read twice; the second conv stays on its own
    assert [s[0].op_type for s in steps] == ["ConvChain", "Conv", "Add"]
    x = st.tensor(r.standard_normal((1, 4, 5, 5)).astype(np.float32))
    for got in _fast(m2, x):
        _close(got, _plain(m2, x), 1e-5)
