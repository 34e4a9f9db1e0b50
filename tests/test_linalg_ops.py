"""Matrix products and einsum against numpy: values, layouts, dtypes, gradients, errors."""

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.autograd import gradcheck, gradgradcheck
from singa_tensor.ops import REGISTRY
from singa_tensor.ops import linalg as L

from . import helpers
from .helpers import to_numpy

LINALG_OPS = ["matmul", "mm", "bmm", "mv", "dot", "outer", "addmm", "einsum_diagonal", "einsum"]
NP_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _cases():
    for name in LINALG_OPS:
        for i, (args, kwargs) in enumerate(REGISTRY[name].samples()):
            yield pytest.param(name, args, kwargs, id=f"{name}-{i}")


def _to(args, dtype, requires_grad=False):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            arr = a.astype(NP_DTYPES[dtype]) if dtype.startswith("float") else \
                np.round(a * 3).astype(NP_DTYPES[dtype])
            out.append(st.tensor(arr, requires_grad=requires_grad))
        else:
            out.append(a)
    return out


@pytest.mark.parametrize("name,args,kwargs", list(_cases()))
def test_forward_matches_reference_for_every_dtype(name, args, kwargs):
    spec = REGISTRY[name]
    assert spec.onnx in (None, "MatMul", "Gemm", "Einsum")
    for dtype in spec.dtypes:
        targs = _to(args, dtype)
        refs = [to_numpy(t) if isinstance(t, st.Tensor) else t for t in targs]
        got = spec.fn(*targs, **kwargs)
        want = np.asarray(spec.reference(*refs, **kwargs))
        assert got.shape == want.shape, (dtype, got.shape, want.shape)
        assert got.dtype.name == dtype
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(to_numpy(got), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name,args,kwargs", list(_cases()))
def test_gradients_first_and_second_order(name, args, kwargs):
    spec = REGISTRY[name]
    targs = _to(args, "float64", requires_grad=True)
    tensors = [t for t in targs if isinstance(t, st.Tensor)]

    def fn(*ts):
        it = iter(ts)
        return spec.fn(*[next(it) if isinstance(a, st.Tensor) else a for a in targs], **kwargs)

    assert gradcheck(fn, tensors)
    assert gradgradcheck(fn, tensors)


# ---- matmul shapes, layouts and dtypes -----------------------------------------------------


@pytest.mark.parametrize("sa,sb", [
    ((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)), ((2, 4, 5), (5,)), ((5,), (3, 5, 2)),
    ((2, 1, 4, 5), (3, 5, 2)), ((1, 4, 5), (3, 5, 2)), ((3, 4, 5), (1, 5, 2)),
    ((6, 4, 5), (5, 2)), ((4, 5), (6, 5, 2)), ((0, 4, 5), (5, 2)), ((4, 0), (0, 3)),
    ((0, 3), (3, 2)), ((1, 1), (1, 1)),
])
def test_matmul_broadcasting_and_1d_rules(sa, sb):
    a, b = rnd(*sa, seed=1), rnd(*sb, seed=2)
    got = st.matmul(st.tensor(a), st.tensor(b))
    want = np.matmul(a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12, atol=1e-12)


def test_matmul_reads_transposed_and_broadcast_views_without_copying(monkeypatch):
    copies = []
    real = L.copy_into
    monkeypatch.setattr(L, "copy_into", lambda s, d: (copies.append(s.shape), real(s, d)))
    a, b = rnd(6, 4, seed=3), rnd(5, 6, seed=4)
    ta, tb = st.tensor(a), st.tensor(b)
    # a.T is (4, 6) with strides (1, 4); b.T is (6, 5) with strides (1, 6)
    np.testing.assert_allclose(to_numpy(st.matmul(ta.t(), tb.t())), a.T @ b.T, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(st.matmul(tb, ta)), b @ a, rtol=1e-12)
    # batched transposed view and a weight broadcast over the batch (stride 0)
    x = rnd(3, 6, 4, seed=5)
    tx = st.tensor(x).transpose(1, 2)
    np.testing.assert_allclose(to_numpy(st.matmul(tx, st.tensor(a))),
                               np.swapaxes(x, 1, 2) @ a, rtol=1e-12)
    w = st.tensor(a).expand(3, 6, 4)
    np.testing.assert_allclose(to_numpy(st.matmul(st.tensor(b), w)),
                               np.broadcast_to(b @ a, (3, 5, 4)), rtol=1e-12)
    assert copies == []


def test_matmul_copies_layouts_blas_cannot_read():
    x = rnd(4, 3, 5, seed=6)
    # batch dims (3, 4) after the permute do not collapse to one stride
    tx = st.tensor(x).permute(1, 0, 2)
    y = rnd(3, 5, 2, seed=7)
    np.testing.assert_allclose(to_numpy(st.matmul(tx, st.tensor(y))),
                               np.transpose(x, (1, 0, 2)) @ y, rtol=1e-12)
    # a matrix whose dims both have stride > 1 (an expanded column)
    c = st.tensor(rnd(4, 1, seed=8)).expand(4, 3)
    np.testing.assert_allclose(to_numpy(st.matmul(c, st.tensor(y[:, 0]))),
                               np.broadcast_to(to_numpy(c), (4, 3)) @ y[:, 0], rtol=1e-12)
    # (2, 1) against (1, 3) batch dims: the partly broadcast operands are materialized
    p, q = rnd(2, 1, 3, 4, seed=9), rnd(1, 3, 4, 2, seed=10)
    np.testing.assert_allclose(to_numpy(st.matmul(st.tensor(p), st.tensor(q))), p @ q,
                               rtol=1e-12)


def test_matmul_float32_large_matches_numpy():
    a = rnd(70, 130, seed=11).astype(np.float32)
    b = rnd(130, 40, seed=12).astype(np.float32)
    got = st.matmul(st.tensor(a), st.tensor(b))
    assert got.dtype is st.float32
    np.testing.assert_allclose(to_numpy(got), a @ b, rtol=1e-4, atol=1e-4)


def test_integer_matmul_is_exact_and_mixed_dtypes_promote():
    a = np.arange(12, dtype=np.int64).reshape(3, 4) * 1000003
    b = np.arange(8, dtype=np.int64).reshape(4, 2) - 3
    got = st.matmul(st.tensor(a), st.tensor(b))
    assert got.dtype is st.int64
    np.testing.assert_array_equal(to_numpy(got), a @ b)
    # the integer loop reads transposed operands through the same flags as BLAS
    ta, tb = st.tensor(a), st.tensor(b)
    np.testing.assert_array_equal(to_numpy(st.matmul(ta.t(), ta)), a.T @ a)
    np.testing.assert_array_equal(to_numpy(st.matmul(tb.t(), ta.t())), b.T @ a.T)
    i32 = st.tensor(np.array([[1, 2], [3, 4]], dtype=np.int32))
    assert st.matmul(i32, i32).dtype is st.int32
    assert st.matmul(i32, i32).tolist() == [[7, 10], [15, 22]]
    assert st.matmul(i32, st.tensor([[1], [1]])).dtype is st.int64
    mixed = st.matmul(i32, st.tensor([[0.5], [1.0]]))
    assert mixed.dtype is st.float32 and mixed.tolist() == [[2.5], [5.5]]
    half = st.matmul(st.ones(2, 3, dtype=st.float16), st.ones(3, 2, dtype=st.float16))
    assert half.dtype is st.float16 and half.float().tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_matmul_backward_reduces_broadcast_batch_dims():
    a = st.tensor(rnd(2, 3, 4, 5, seed=13), requires_grad=True)
    w = st.tensor(rnd(5, 2, seed=14), requires_grad=True)
    v = st.tensor(rnd(2, 1, 2, 6, seed=15), requires_grad=True)
    out = st.matmul(st.matmul(a, w), v)
    assert out.shape == (2, 3, 4, 6)
    out.sum().backward()
    g = np.ones((2, 3, 4, 6))
    an, wn, vn = to_numpy(a), to_numpy(w), to_numpy(v)
    gh = g @ np.swapaxes(vn, -1, -2)  # grad at a @ w
    np.testing.assert_allclose(to_numpy(v.grad),
                               (np.swapaxes(an @ wn, -1, -2) @ g).sum(1, keepdims=True),
                               rtol=1e-10)
    np.testing.assert_allclose(to_numpy(w.grad), (np.swapaxes(an, -1, -2) @ gh).sum((0, 1)),
                               rtol=1e-10)
    np.testing.assert_allclose(to_numpy(a.grad), gh @ wn.T, rtol=1e-10)


def test_tensor_methods_are_bound():
    a = st.tensor(rnd(3, 4, seed=16))
    b = st.tensor(rnd(4, 2, seed=17))
    np.testing.assert_allclose(to_numpy(a.matmul(b)), to_numpy(a.mm(b)))
    v = st.tensor([1.0, 2.0])
    assert v.dot(v).item() == 5.0
    assert v.outer(v).tolist() == [[1.0, 2.0], [2.0, 4.0]]
    assert st.bmm(a.reshape(1, 3, 4), b.reshape(1, 4, 2)).shape == (1, 3, 2)


# ---- einsum --------------------------------------------------------------------------------


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("ba,ca", [(3, 4), (2, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bi,bi->b", [(5, 3), (5, 3)]),
    ("ij,kl->ijkl", [(2, 3), (1, 2)]),
    ("...i,...i", [(2, 3, 4), (3, 4)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
    ("i,ii,j->j", [(3,), (3, 3), (2,)]),
    (" i j , j k -> i k ", [(3, 4), (4, 2)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    (",i->i", [(), (3,)]),
    ("bij,bjk->bik", [(0, 2, 3), (0, 3, 4)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
])
def test_einsum_matches_numpy(eq, shapes):
    arrays = [rnd(*s, seed=i + 20) for i, s in enumerate(shapes)]
    got = st.einsum(eq, *[st.tensor(a) for a in arrays])
    want = np.einsum(eq, *arrays)
    assert got.shape == want.shape
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12, atol=1e-12)


def test_einsum_list_form_gradients_and_integers():
    a = st.tensor(rnd(2, 3, seed=30), requires_grad=True)
    b = st.tensor(rnd(3, 3, seed=31), requires_grad=True)
    assert gradgradcheck(lambda x, y: st.einsum("ij,jj->ij", [x, y]), (a, b))
    ia = st.tensor(np.arange(6).reshape(2, 3))
    assert st.einsum("ij,ij->i", ia, ia).tolist() == [5, 50]
    assert st.einsum("ij,ij->i", ia, ia).dtype is st.int64


# ---- errors ------------------------------------------------------------------------------------


def test_matmul_errors_name_shapes_and_sizes():
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) cannot be "
                                         r"multiplied \(contracted dimensions have sizes 3 "
                                         r"and 4\)"):
        st.matmul(st.ones(2, 3), st.ones(4, 5))
    with pytest.raises(ValueError, match=r"matmul: .*0-D and 2-D"):
        st.matmul(st.tensor(1.0), st.ones(2, 2))
    with pytest.raises(TypeError, match="matmul: not supported for dtype bool"):
        st.matmul(st.ones(2, 2, dtype=st.bool), st.ones(2, 2))
    with pytest.raises(ValueError, match=r"matmul: batch dimensions \(2,\) and \(3,\)"):
        st.matmul(st.ones(2, 2, 2), st.ones(3, 2, 2))
    with pytest.raises(TypeError, match="matmul: the second argument must be a Tensor"):
        st.matmul(st.ones(2, 2), [[1.0]])
    with pytest.raises(ValueError, match=r"mm: expected 2-D matrices, got shapes \(2, 2, 2\)"):
        st.mm(st.ones(2, 2, 2), st.ones(2, 2))
    with pytest.raises(ValueError, match=r"bmm: batch sizes differ"):
        st.bmm(st.ones(2, 2, 2), st.ones(3, 2, 2))
    with pytest.raises(ValueError, match=r"mv: shapes \(2, 3\) and \(2,\) cannot be"):
        st.mv(st.ones(2, 3), st.ones(2))
    with pytest.raises(ValueError, match=r"dot: 1-D tensors of different lengths"):
        st.dot(st.ones(2), st.ones(3))
    with pytest.raises(ValueError, match=r"outer: expected 1-D tensors"):
        st.outer(st.ones(2, 1), st.ones(3))
    with pytest.raises(ValueError, match=r"addmm: shapes \(3, 3\) and \(2, 2\) cannot be "
                                         r"broadcast"):
        st.addmm(st.ones(3, 3), st.ones(2, 2), st.ones(2, 2))


@pytest.mark.parametrize("eq,shapes,match", [
    ("ij,jk->ik", [(2, 3), (4, 5)], r"subscript 'j' has size 3 in one operand but 4"),
    ("ij,jk->ik", [(2, 3)], r"subscripts for 2 operand\(s\) but 1 tensor"),
    ("ij->ik", [(2, 3)], r"output subscript 'k' does not appear"),
    ("ij->ii", [(2, 3)], r"output subscript 'i' appears more than once"),
    ("i1->i", [(2, 3)], r"invalid subscript '1'"),
    ("ijk->i", [(2, 3)], r"subscripts 'ijk' of operand 0 do not match its shape \(2, 3\)"),
    ("ii->i", [(2, 3)], r"subscript 'i' is repeated in operand 0 over dims of different"),
    ("...i->i", [(2, 3)], r"use '\.\.\.' so the output must too"),
    ("i->i->i", [(2,)], r"at most one '->'"),
    ("i......->i", [(2,)], r"more than one '\.\.\.'"),
])
def test_einsum_bad_equations(eq, shapes, match):
    with pytest.raises(ValueError, match="einsum: .*" + match):
        st.einsum(eq, *[st.ones(*s) for s in shapes])


def test_einsum_bad_operands():
    with pytest.raises(TypeError, match="einsum: not supported for dtype bool"):
        st.einsum("i->i", st.ones(2, dtype=st.bool))
    with pytest.raises(TypeError, match="einsum: operand 1 must be a Tensor"):
        st.einsum("i,i->", st.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="einsum: at least one operand"):
        st.einsum("i->i")


def test_batched_products_of_every_size_class_match_numpy():
    # small (one thread each), mid-sized (one product per thread, BLAS held to one thread)
    # and large (BLAS threads) batched products all take different paths through st_gemm
    r = np.random.default_rng(3)
    for batch, m, k, n in ((8, 16, 16, 16), (4, 64, 128, 64), (2, 256, 128, 256)):
        a = r.standard_normal((batch, m, k)).astype(np.float32)
        b = r.standard_normal((batch, k, n)).astype(np.float32)
        got = to_numpy(st.tensor(a) @ st.tensor(b))
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_diagonal_is_a_view_and_trace_sums_it():
    x = st.arange(12.0).reshape(3, 4)
    d = x.diagonal(1)
    assert d.tolist() == [1.0, 6.0, 11.0]
    d.mul_(0)  # a view: writes reach x
    assert x[0, 1].item() == 0.0 and x[2, 3].item() == 0.0
    assert st.trace(st.arange(9.0).reshape(3, 3)).item() == 12.0
    assert x.diagonal(5).shape == (0,) and x.diagonal(-5).shape == (0,)


def test_diagonal_and_trace_errors():
    with pytest.raises(ValueError, match=r"diagonal: needs a tensor of at least 2 dims, got "
                                         r"shape \(3,\)"):
        st.diagonal(st.ones(3))
    with pytest.raises(IndexError, match="diagonal: dim 2 is out of range for 2 dims"):
        st.diagonal(st.ones(2, 2), dim2=2)
    with pytest.raises(ValueError, match=r"diagonal: dim1 and dim2 are the same dim \(0\)"):
        st.diagonal(st.ones(2, 2), dim1=0, dim2=-2)
    with pytest.raises(TypeError, match="diagonal: offset must be an int, got 1.5"):
        st.diagonal(st.ones(2, 2), 1.5)
    with pytest.raises(ValueError, match=r"trace: expected a 2-D tensor, got shape \(2, 2, 2\)"):
        st.trace(st.ones(2, 2, 2))
    with pytest.raises(TypeError, match="trace: input must be a Tensor, got list"):
        st.trace([[1.0]])


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("m, n, k", [(203, 70, 129), (45, 333, 97)])
def test_products_split_over_threads_match_float64(threads, ta, tb, m, n, k):
    """A product of over 2^20 multiply-adds is split over the threads by rows of C (m >= n) or
    by columns (cpp/src/blas.h: gemm_mt) in blocks of 16 that these sizes leave partial; every
    transpose combination reads the operands where they lie. float32 against float64 numpy, to
    a relative 4e-6 of k times the largest product (the split changes no element's sum)."""
    r = np.random.default_rng(m + n)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    before = st.get_num_threads()
    try:
        st.set_num_threads(threads)
        x, y = st.tensor(a), st.tensor(b)
        got = to_numpy(st.matmul(x.T if ta else x, y.T if tb else y))
    finally:
        st.set_num_threads(before)
    bound = 4e-6 * k * float(np.abs(a).max() * np.abs(b).max())
    assert got.shape == (m, n)
    assert float(np.abs(got - want).max()) <= bound


@pytest.mark.parametrize("enabled", [True, False], ids=["onednn", "openblas"])
@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("m, n, k", [(64, 300, 250), (300, 17, 1000)])
def test_large_float32_products_go_to_onednn_and_match_float64(enabled, ta, tb, m, n, k):
    """A float32 product of at least 2^22 multiply-adds, 16 rows and 16 columns runs on oneDNN
    on the CPU where it is installed and on (backend/cpu.py), else on OpenBLAS (or the device's
    own GEMM); either way every layout
    reads the operands where they lie, and addmm's accumulate into C (a bias put there first)
    gives input + product. float32 against float64 numpy, to a relative 4e-6 of k times the
    largest product, as for the split products above."""
    from singa_tensor.backend import onednn

    r = np.random.default_rng(m * k + n)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    bound = 4e-6 * k * float(np.abs(a).max() * np.abs(b).max())
    x, y = st.tensor(a), st.tensor(b)
    x, y = (x.T if ta else x), (y.T if tb else y)
    with st.backends.mkldnn.flags(enabled=enabled):
        before = onednn.matmul_calls["run"]
        got = to_numpy(st.matmul(x, y))
        got_addmm = to_numpy(st.addmm(st.tensor(bias), x, y))
        ran = onednn.matmul_calls["run"] - before
    assert float(np.abs(got - want).max()) <= bound
    assert float(np.abs(got_addmm - (want + bias)).max()) <= bound + 4e-6 * np.abs(bias).max()
    on_onednn = enabled and onednn.is_available() and helpers.DEVICE == "cpu"
    assert ran == (2 if on_onednn else 0)


def test_a_full_matmul_plan_cache_drops_its_oldest_plan(monkeypatch):
    """oneDNN's plans are cached per call shape; a full cache drops the plan made longest ago
    and keeps the rest, and every product stays right."""
    from singa_tensor.backend import onednn

    if not onednn.is_available() or helpers.DEVICE != "cpu":
        pytest.skip("oneDNN is not installed, or the products run on another device")
    monkeypatch.setattr(onednn, "_MAX_PLANS", 3)
    onednn.clear_plans()
    w = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
    sizes = [64, 65, 66, 67]
    for m in sizes:
        x = np.random.default_rng(m).standard_normal((m, 300)).astype(np.float32)
        got = to_numpy(st.matmul(st.tensor(x), st.tensor(w)))
        want = x.astype(np.float64) @ w.astype(np.float64)
        assert float(np.abs(got - want).max()) <= 4e-6 * 300 * float(np.abs(x).max() *
                                                                     np.abs(w).max())
    kept = sorted(key[3] for key in onednn._matmuls)  # key[3]: the rows m
    assert kept == sizes[1:]
    onednn.clear_plans()


def test_small_or_few_row_float32_products_stay_on_openblas():
    """Below 2^22 multiply-adds, or with fewer than 16 rows or columns, a float32 product is not
    worth oneDNN's cost per call (or is a matrix-vector product): OpenBLAS computes it."""
    from singa_tensor.backend import onednn

    before = onednn.matmul_calls["run"]
    for (m, n, k) in [(64, 64, 64), (8, 2048, 1000), (2048, 8, 1000), (1000, 1000, 4)]:
        x, y = st.ones(m, k), st.ones(k, n)
        assert np.array_equal(to_numpy(st.matmul(x, y)), np.full((m, n), k, np.float32))
    assert onednn.matmul_calls["run"] == before


@pytest.mark.parametrize("m", [1, 5, 15, 64])
def test_equal_columns_of_a_split_product_come_out_equal(m):
    """A product with fewer than 16 rows is never split over threads: a split by columns would
    compute the two parts through matrix-vector code whose rounding depends on where a column
    lies, and equal columns of C (an ONNX model whose weights are one constant, logits near
    1e19, then softmax) must stay bit for bit equal, as in one call. With 64 rows the product
    is split by rows, or runs on oneDNN where it is installed: equal columns there too."""
    r = np.random.default_rng(m)
    x = st.tensor(r.uniform(1e8, 2e8, (m, 2048)).astype(np.float32))
    w = st.tensor(np.full((2048, 1000), 0.37, np.float32))
    before = st.get_num_threads()
    try:
        st.set_num_threads(2)
        got = to_numpy(st.matmul(x, w))
    finally:
        st.set_num_threads(before)
    for row in got:
        assert np.unique(row).size == 1
