"""sort, argsort and topk against numpy: every dtype, ties, NaN and inf, empty and 0-d inputs,
non-contiguous views, k at its bounds, lines longer than a shared-memory block, gradients and
the errors raised before any kernel runs."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

from .helpers import DEVICE, as_tensor, to_numpy


def _line_order(line: np.ndarray, descending: bool) -> np.ndarray:
    """A plain Python sort of one line: NaN largest, ties by index (a stable order)."""
    vals = [float(v) for v in line]

    def key(j):
        v = vals[j]
        nan = v != v
        if descending:
            return (0 if nan else 1, 0.0 if nan else -v, j)
        return (1 if nan else 0, 0.0 if nan else v, j)

    return np.array(sorted(range(len(vals)), key=key), dtype=np.int64)


def np_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    if x.shape[axis] == 0:
        return np.zeros(x.shape, np.int64)
    return np.apply_along_axis(_line_order, axis, x, descending)


def expect(x: np.ndarray, dim: int, descending: bool, k: int | None = None):
    if x.ndim == 0:
        return x, np.array(0)
    axis = dim % x.ndim
    order = np_order(x, axis, descending)
    if k is not None:
        order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order


def check(got, want_values, want_indices):
    v, i = got
    assert i.dtype is st.int64
    gv, gi = to_numpy(v), to_numpy(i)
    assert gv.shape == want_values.shape and gi.shape == want_indices.shape
    np.testing.assert_array_equal(gi, want_indices)
    np.testing.assert_array_equal(gv, want_values)  # NaN positions must match too


DTYPES = ["bool", "int32", "int64", "float32", "float64"]


def _values(rng, dtype, shape, ties=True):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if ties:
        a = rng.integers(-3, 4, shape)
    else:
        a = rng.permutation(int(np.prod(shape))).reshape(shape) - 5
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_shapes_dims_and_k_match_numpy(dtype):
    rng = np.random.default_rng(0)
    for trial in range(12):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 7, nd))
        x = _values(rng, dtype, shape, ties=trial % 2 == 0)
        dim = int(rng.integers(-nd, nd))
        desc = bool(trial % 3)
        t = as_tensor(x)
        check(st.sort(t, dim, desc), *expect(x, dim, desc))
        np.testing.assert_array_equal(to_numpy(st.argsort(t, dim, desc)),
                                      expect(x, dim, desc)[1])
        k = int(rng.integers(0, shape[dim] + 1))
        check(st.topk(t, k, dim, largest=desc), *expect(x, dim, desc, k))


def test_ties_keep_index_order_both_ways():
    x = np.array([2.0, 1.0, 2.0, 1.0, 2.0])
    check(st.sort(as_tensor(x)), np.array([1.0, 1.0, 2.0, 2.0, 2.0]), np.array([1, 3, 0, 2, 4]))
    check(st.sort(as_tensor(x), descending=True), np.array([2.0, 2.0, 2.0, 1.0, 1.0]),
          np.array([0, 2, 4, 1, 3]))
    check(st.topk(as_tensor(x), 2), np.array([2.0, 2.0]), np.array([0, 2]))
    check(st.topk(as_tensor(x), 1, largest=False), np.array([1.0]), np.array([1]))
    # -0.0 and 0.0 are equal keys
    z = np.array([0.0, -0.0, 0.0])
    assert to_numpy(st.argsort(as_tensor(z))).tolist() == [0, 1, 2]
    assert to_numpy(st.argsort(as_tensor(z), descending=True)).tolist() == [0, 1, 2]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_is_largest_and_inf_orders(dtype):
    nan, inf = np.nan, np.inf
    x = np.array([1.0, nan, -inf, inf, nan, 0.0, -1.0], dtype=dtype)
    v, i = st.sort(as_tensor(x))
    assert to_numpy(i).tolist() == [2, 6, 5, 0, 3, 1, 4]
    v, i = st.sort(as_tensor(x), descending=True)
    assert to_numpy(i).tolist() == [1, 4, 3, 0, 5, 6, 2]
    assert np.isnan(to_numpy(v)[:2]).all()
    v, i = st.topk(as_tensor(x), 3)
    assert to_numpy(i).tolist() == [1, 4, 3]
    v, i = st.topk(as_tensor(x), 3, largest=False)
    assert to_numpy(i).tolist() == [2, 6, 5]
    assert to_numpy(v).tolist() == [-inf, -1.0, 0.0]
    # numpy agrees on random data with NaN and inf sprinkled in (rows, along dim 0 and 1)
    rng = np.random.default_rng(1)
    m = rng.integers(-2, 3, (5, 9)).astype(dtype)
    m[rng.random(m.shape) < 0.2] = nan
    m[rng.random(m.shape) < 0.1] = -inf
    for dim in (0, 1):
        for desc in (False, True):
            check(st.sort(as_tensor(m), dim, desc), *expect(m, dim, desc))
            check(st.topk(as_tensor(m), 3, dim, largest=desc), *expect(m, dim, desc, 3))


@pytest.mark.parametrize("dtype", [st.float16, st.bfloat16])
def test_half_types_order_as_float(dtype):
    x = np.array([[0.5, -2.0, np.nan, 3.0, 0.5], [1.0, 1.0, -np.inf, 2.5, -0.25]], np.float32)
    t = st.tensor(x, device=DEVICE).to(dtype)
    v, i = st.sort(t, descending=True)
    assert v.dtype is dtype and i.dtype is st.int64
    want_v, want_i = expect(x, -1, True)
    np.testing.assert_array_equal(to_numpy(i), want_i)
    np.testing.assert_array_equal(to_numpy(v.float()), want_v)
    v, i = t.topk(2, largest=False)
    np.testing.assert_array_equal(to_numpy(i), expect(x, -1, False, 2)[1])
    np.testing.assert_array_equal(to_numpy(t.argsort(dim=0)), expect(x, 0, False)[1])


def test_zero_dim_and_empty():
    s = as_tensor(np.array(2.5))
    for dim in (0, -1):
        v, i = st.sort(s, dim)
        assert v.shape == () and i.shape == () and v.item() == 2.5 and i.item() == 0
    assert st.argsort(s).shape == () and st.argsort(s).item() == 0
    v, i = st.topk(s, 1)
    assert v.item() == 2.5 and i.item() == 0
    with pytest.raises(IndexError, match="sort: dimension out of range"):
        st.sort(s, 1)
    e = as_tensor(np.zeros((3, 0)))
    v, i = st.sort(e, 1)
    assert v.shape == (3, 0) and i.shape == (3, 0)
    v, i = st.sort(e, 0)
    assert v.shape == (3, 0)
    v, i = st.topk(e, 0)
    assert v.shape == (3, 0) and i.shape == (3, 0)
    v, i = st.topk(as_tensor(np.zeros((0, 4))), 2)
    assert v.shape == (0, 2) and i.shape == (0, 2)


def test_k_bounds_and_method_forms():
    x = np.array([[4.0, 1.0, 3.0], [0.0, 5.0, 2.0]])
    t = as_tensor(x)
    check(t.topk(0), np.zeros((2, 0)), np.zeros((2, 0), np.int64))
    check(t.topk(1), np.array([[4.0], [5.0]]), np.array([[0], [1]]))
    check(t.topk(3, sorted=False), *expect(x, -1, True))
    check(t.topk(2, dim=0, largest=False), *expect(x, 0, False, 2))
    check(t.sort(dim=0, descending=True), *expect(x, 0, True))
    r = t.sort(stable=True)
    assert to_numpy(r.values).tolist() == [[1.0, 3.0, 4.0], [0.0, 2.0, 5.0]]
    assert to_numpy(t.argsort()).tolist() == [[1, 2, 0], [0, 2, 1]]


def test_non_contiguous_input():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 5))
    t = as_tensor(np.ascontiguousarray(x.transpose(2, 1, 0))).permute(2, 1, 0)
    assert not t.is_contiguous()
    for dim in (0, 1, 2):
        check(st.sort(t, dim), *expect(x, dim, False))
        check(st.topk(t, 2, dim), *expect(x, dim, True, 2))
    flipped = st.flip(as_tensor(x), [1])
    check(st.sort(flipped, 1, True), *expect(x[:, ::-1], 1, True))


@pytest.mark.parametrize("n", [5000, 70000])
def test_long_lines(n):
    # beyond one block's shared memory on CUDA (4096 pairs) and through the CPU's radix
    # passes and selection; heavy ties check that both keep the stable order
    rng = np.random.default_rng(n)
    x = rng.integers(0, 50, n).astype(np.float32)
    x[rng.random(n) < 0.01] = np.nan
    t = as_tensor(x)
    for desc in (False, True):
        check(st.sort(t, descending=desc), *expect(x, 0, desc))
        check(st.topk(t, 100, largest=desc), *expect(x, 0, desc, 100))
    check(st.topk(t, n), *expect(x, 0, True))
    m = rng.standard_normal((3, n // 10))  # several long lines, along a non-last dim too
    check(st.sort(as_tensor(m), 1, True), *expect(m, 1, True))
    check(st.topk(as_tensor(np.ascontiguousarray(m.T)), 7, 0), *expect(m.T, 0, True, 7))


def test_gradients():
    rng = np.random.default_rng(4)
    x = st.tensor(rng.permutation(12).reshape(3, 4) * 0.5 - 2.0, dtype=st.float64,
                  device=DEVICE, requires_grad=True)
    assert st.autograd.gradcheck(lambda a: st.sort(a, 0, True).values, (x,))
    assert st.autograd.gradcheck(lambda a: st.topk(a, 2).values, (x,))
    assert st.autograd.gradgradcheck(lambda a: st.topk(a, 3, 0, largest=False).values ** 2,
                                     (x,))
    assert st.autograd.gradgradcheck(lambda a: st.sort(a).values * a, (x,))
    v, i = st.topk(x, 2)
    assert v.requires_grad and not i.requires_grad
    assert not st.argsort(x).requires_grad
    (v * st.tensor([[1.0, 10.0]], dtype=st.float64, device=DEVICE)).sum().backward()
    want = np.zeros((3, 4))
    idx = to_numpy(i)
    for r in range(3):
        want[r, idx[r, 0]], want[r, idx[r, 1]] = 1.0, 10.0
    np.testing.assert_array_equal(to_numpy(x.grad), want)
    s = st.tensor(1.5, dtype=st.float64, device=DEVICE, requires_grad=True)
    st.sort(s).values.backward()
    assert s.grad.item() == 1.0


def test_errors_before_any_kernel():
    t = as_tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match="sort: input must be a Tensor, got list"):
        st.sort([1.0, 2.0])
    with pytest.raises(TypeError, match="argsort: input must be a Tensor, got ndarray"):
        st.argsort(np.ones(3))
    with pytest.raises(IndexError, match=r"sort: dimension out of range .*got 2"):
        st.sort(t, 2)
    with pytest.raises(IndexError, match=r"topk: dimension out of range .*got -3"):
        st.topk(t, 1, -3)
    with pytest.raises(TypeError, match=r"sort: dim must be a single int, got tuple \(0, 1\)"):
        st.sort(t, (0, 1))
    with pytest.raises(TypeError, match="argsort: dim must be an int, got float"):
        st.argsort(t, 1.0)
    with pytest.raises(ValueError, match=r"topk: k = 4 is out of range for dimension 1 of "
                                         r"size 3"):
        st.topk(t, 4)
    with pytest.raises(ValueError, match=r"topk: k = -1 is out of range for dimension 0 of "
                                         r"size 2"):
        st.topk(t, -1, 0)
    with pytest.raises(TypeError, match="topk: k must be an int, got float 2.0"):
        st.topk(t, 2.0)
    with pytest.raises(TypeError, match="topk: k must be an int, got bool"):
        st.topk(t, True)
    with pytest.raises(TypeError, match="sort: descending must be a bool, got str 'yes'"):
        st.sort(t, descending="yes")
    with pytest.raises(TypeError, match="topk: largest must be a bool, got int 1"):
        st.topk(t, 1, largest=1)
    with pytest.raises(TypeError, match="argsort: stable must be a bool, got NoneType"):
        st.argsort(t, stable=None)
    with pytest.raises(ValueError, match=r"topk: k = 2 is out of range for dimension 0 of "
                                         r"size 1"):
        st.topk(as_tensor(np.array(1.0)), 2)


def test_onnx_export_is_one_topk():
    onnx = pytest.importorskip("onnx")
    del onnx

    class M(st.nn.Module):
        def forward(self, x):
            v, i = st.topk(x, 2, dim=0, largest=False)
            return v, i, st.sort(x, descending=True).values, st.argsort(x)

    x = st.tensor(np.arange(12.0).reshape(3, 4)[::-1].copy())
    proto = st.onnx.export(M(), (x,), None, opset_version=17)
    nodes = [n for n in proto.graph.node if n.op_type == "TopK"]
    assert len(nodes) == 3
    attrs = [{a.name: a.i for a in n.attribute} for n in nodes]
    assert attrs[0] == {"axis": 0, "largest": 0, "sorted": 1}
    assert attrs[1] == {"axis": 1, "largest": 1, "sorted": 1}
    assert attrs[2] == {"axis": 1, "largest": 0, "sorted": 1}
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: to_numpy(x)})
    want = M()(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, to_numpy(w))


def test_onnx_export_of_a_full_sort_follows_a_dynamic_dim():
    # k of the exported TopK is the dim's size read at run time, not the traced size
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")

    class M(st.nn.Module):
        def forward(self, x):
            return st.sort(x, dim=1).values, st.argsort(x, dim=1, descending=True)

    traced = st.tensor(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))
    proto = st.onnx.export(M(), (traced,), None, opset_version=17, input_names=["x"],
                           dynamic_axes={"x": {1: "n"}})
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((2, 7)).astype(np.float32)
    values, order = sess.run(None, {"x": x})
    np.testing.assert_array_equal(values, np.sort(x, axis=1))
    np.testing.assert_array_equal(order, np.argsort(-x, axis=1, kind="stable"))
