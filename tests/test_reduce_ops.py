"""Reductions, softmax, scans and norms: forward against numpy, gradients against finite
differences (first and second order), NaN/tie/empty edge cases and error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.autograd import gradcheck, gradgradcheck
from singa_tensor.ops import REGISTRY

from .helpers import to_numpy

OPS = ["sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "all", "any",
       "var", "std", "logsumexp", "softmax", "log_softmax", "cumsum", "cumprod", "norm"]

ONNX = {"sum": "ReduceSum", "mean": "ReduceMean", "prod": "ReduceProd", "amax": "ReduceMax",
        "amin": "ReduceMin", "argmax": "ArgMax", "argmin": "ArgMin",
        "logsumexp": "ReduceLogSumExp", "softmax": "Softmax", "log_softmax": "LogSoftmax",
        "cumsum": "CumSum", "norm": "ReduceL2"}


def _cases(differentiable_only=False):
    out = []
    for name in OPS:
        spec = REGISTRY[name]
        if differentiable_only and not spec.differentiable:
            continue
        for i, (args, kw) in enumerate(spec.samples()):
            out.append(pytest.param(name, args, kw, i, id=f"{name}-{i}"))
    return out


def _as_dtype(a, np_dtype):
    if not isinstance(a, np.ndarray) or a.dtype == np.bool_:
        return a
    if np.issubdtype(np_dtype, np.integer):
        return np.asarray(np.round(a * 3)).astype(np_dtype)
    return a.astype(np_dtype)


def _check(out, ref, rtol, atol):
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        r = np.asarray(r)
        got = to_numpy(o)
        assert got.shape == r.shape
        if r.dtype.kind in "biu":
            assert got.dtype == r.dtype
            np.testing.assert_array_equal(got, r)
        else:
            np.testing.assert_allclose(got, r, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name,args,kw,i", _cases())
def test_forward_matches_numpy(name, args, kw, i):
    spec = REGISTRY[name]
    takes_numbers = any(isinstance(a, np.ndarray) and a.dtype != np.bool_ for a in args)
    for np_dtype in (np.float64, np.float32, np.int64, np.int32):
        if takes_numbers and np.dtype(np_dtype).name not in spec.dtypes:
            continue
        arrays = [_as_dtype(a, np_dtype) for a in args]
        tensors = [st.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
        out = spec.fn(*tensors, **kw)
        ref = spec.reference(*arrays, **kw)
        tol = 1e-5 if np_dtype == np.float32 else 1e-10
        _check(out, ref, tol, tol)
        first = out[0] if isinstance(out, tuple) else out
        if np.asarray(ref[0] if isinstance(ref, tuple) else ref).dtype == np.float64:
            assert first.dtype is st.float64


def _float_outputs(fn):
    """gradgradcheck seeds every output; keep only the differentiable ones (max/min with a
    dim also return int64 indices)."""
    def wrapped(*xs):
        out = fn(*xs)
        outs = out if isinstance(out, tuple) else (out,)
        kept = tuple(o for o in outs if o.dtype.is_floating_point)
        return kept if len(kept) > 1 else kept[0]
    return wrapped


@pytest.mark.parametrize("name,args,kw,i", _cases(differentiable_only=True))
def test_gradcheck_and_gradgradcheck(name, args, kw, i):
    spec = REGISTRY[name]
    inputs = [st.tensor(a, dtype=st.float64, requires_grad=True) if isinstance(a, np.ndarray)
              else a for a in args]
    fn = _float_outputs(lambda *xs: spec.fn(*xs, **kw))
    assert gradcheck(fn, inputs)
    # second order on the samples of up to 12 elements (every op has several), to stay fast
    if sum(t.numel() for t in inputs if isinstance(t, st.Tensor)) <= 12:
        assert gradgradcheck(fn, inputs)


def test_specs_registered_with_onnx_names():
    for name in OPS:
        spec = REGISTRY[name]
        exported = getattr(st, name)
        # st's function is the op itself, or the op with PyTorch's out= (st._out)
        assert spec.fn is getattr(exported, "_without_out", exported)
        assert spec.onnx == ONNX.get(name)
        assert spec.samples(), name
    assert not REGISTRY["argmax"].differentiable and not REGISTRY["all"].differentiable


# ---- max / min family --------------------------------------------------------------------------


def test_max_forms():
    x = st.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    assert st.max(x).item() == 7.0 and st.min(x).item() == 0.0
    r = st.max(x, dim=1)
    assert r.values.tolist() == [5.0, 7.0] and r.indices.tolist() == [1, 0]
    assert r.indices.dtype is st.int64
    v, i = st.min(x, 0, keepdim=True)
    assert v.tolist() == [[1.0, 0.0, 2.0]] and i.tolist() == [[0, 1, 0]]
    assert st.max(x, st.tensor([6.0, 6.0, 6.0])).tolist() == [[6.0, 6.0, 6.0], [7.0, 6.0, 7.0]]
    assert st.min(x, st.tensor(1.5)).tolist() == [[1.0, 1.5, 1.5], [1.5, 0.0, 1.5]]
    assert type(r).__name__ == "ValuesIndices" and r._fields == ("values", "indices")


def test_tensor_methods_bound():
    x = st.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    assert x.max(dim=0).values.tolist() == [7.0, 5.0, 3.0]
    assert x.max(dim=0).indices.tolist() == [1, 0, 1]
    np.testing.assert_allclose(to_numpy(x.softmax(-1)), REGISTRY["softmax"].reference(
        to_numpy(x), -1), rtol=1e-6)
    assert x.argmax().item() == 3 and x.argmin(dim=1).tolist() == [0, 1]
    assert x.cumsum(1).tolist() == [[1.0, 6.0, 8.0], [7.0, 7.0, 10.0]]
    assert x.amax(1).tolist() == [5.0, 7.0] and x.prod().item() == 0.0
    assert x.all().item() is False and x.any(dim=0).tolist() == [True, True, True]
    assert abs(x.norm().item() - math.sqrt(88.0)) < 1e-5
    assert abs(x.std().item() - np.std(to_numpy(x), ddof=1)) < 1e-5
    assert x.logsumexp(1).shape == (2,) and x.log_softmax(0).shape == (2, 3)
    assert x.var(1, keepdim=True).shape == (2, 1) and x.cumprod(0).shape == (2, 3)


def test_nan_wins():
    nan = float("nan")
    x = st.tensor([[1.0, nan, 3.0, nan], [4.0, 2.0, -1.0, 0.0]])
    assert math.isnan(st.amax(x).item()) and math.isnan(st.min(x).item())
    assert np.isnan(to_numpy(st.amax(x, dim=1))).tolist() == [True, False]
    assert st.amin(x, dim=1).tolist()[1] == -1.0
    r = st.max(x, dim=1)
    assert math.isnan(r.values.tolist()[0]) and r.indices.tolist() == [1, 0]
    assert st.argmax(x, dim=1).tolist() == [1, 0] and st.argmin(x, dim=1).tolist() == [1, 2]
    assert st.argmax(x).item() == 1
    # along a non-last dim (the strided kernel path)
    assert st.argmax(x.t(), dim=0).tolist() == [1, 0]
    assert np.isnan(to_numpy(st.amax(x.t(), dim=0))).tolist() == [True, False]


def test_infinities_and_long_rows():
    inf = float("inf")
    assert st.amax(st.tensor([-inf, -inf])).item() == -inf
    assert st.amin(st.tensor([inf, inf])).item() == inf
    assert st.max(st.tensor([[-inf], [-inf]]), dim=0).values.item() == -inf
    big = st.full((70000,), -inf, dtype=st.float64)  # long enough to split across threads
    assert st.amax(big).item() == -inf
    a = np.random.default_rng(0).standard_normal(70000)
    assert st.amax(st.tensor(a)).item() == a.max() and st.argmin(st.tensor(a)).item() == a.argmin()
    assert st.prod(st.tensor(a[:10])).item() == pytest.approx(np.prod(a[:10]))


def test_amax_gradient_split_between_ties():
    x = st.tensor([[1.0, 3.0, 3.0, 2.0], [3.0, 3.0, 3.0, 0.0]], requires_grad=True)
    st.amax(x, dim=1).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]])
    x.grad = None
    st.max(x).backward()  # whole-tensor max: five tied elements share the gradient
    np.testing.assert_allclose(to_numpy(x.grad), [[0, 0.2, 0.2, 0], [0.2, 0.2, 0.2, 0]])
    x.grad = None
    st.max(x, dim=1).values.sum().backward()  # with a dim: the reported index takes it all
    np.testing.assert_allclose(to_numpy(x.grad), [[0, 1, 0, 0], [1, 0, 0, 0]])
    y = st.tensor([2.0, 1.0, 1.0], requires_grad=True)
    st.amin(y).backward()
    np.testing.assert_allclose(to_numpy(y.grad), [0, 0.5, 0.5])


def test_argmax_keepdim_and_flatten():
    x = st.tensor(np.arange(24.0).reshape(2, 3, 4)[:, ::-1, :].copy())
    assert st.argmax(x).item() == np.argmax(to_numpy(x))
    assert st.argmax(x, keepdim=True).shape == (1, 1, 1)
    assert st.argmin(x, dim=1, keepdim=True).tolist() == np.argmin(
        to_numpy(x), axis=1, keepdims=True).tolist()
    assert st.argmax(st.tensor(5.0)).item() == 0
    assert st.argmax(st.tensor([True, False, True])).item() == 0
    assert not st.argmax(st.tensor([1.0, 2.0], requires_grad=True)).requires_grad


# ---- integer inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [st.int32, st.int64])
def test_integer_reductions(dt):
    a = np.array([[3, -1, 4], [1, 5, -9]])
    x = st.tensor(a, dtype=dt)
    assert st.sum(x, 1).tolist() == [6, -3] and st.sum(x).dtype is st.int64
    assert st.prod(x, 1).tolist() == [-12, -45] and st.prod(x).dtype is st.int64
    assert st.amax(x, 0).tolist() == [3, 5, 4] and st.amax(x).dtype is dt
    assert st.amin(x).item() == -9 and st.max(x, 1).indices.tolist() == [2, 1]
    assert st.min(x, 1).values.tolist() == [-1, -9] and st.min(x, 1).values.dtype is dt
    assert st.argmax(x).item() == 4 and st.argmin(x, 0).tolist() == [1, 0, 1]
    assert st.cumsum(x, 1).tolist() == np.cumsum(a, 1).tolist()
    assert st.cumsum(x, 0).dtype is st.int64 and st.cumprod(x, 1).tolist() == np.cumprod(
        a, 1).tolist()
    b = st.tensor([[True, False], [True, True]])
    assert st.sum(b).item() == 3 and st.sum(b).dtype is st.int64
    assert st.cumsum(b, 1).tolist() == [[1, 1], [1, 2]]
    assert st.all(x).item() is True and st.any(st.zeros(3, dtype=dt)).item() is False


@pytest.mark.parametrize("op", ["mean", "var", "std", "logsumexp", "norm"])
def test_float_only_reductions_reject_ints(op):
    with pytest.raises(TypeError, match=op):
        getattr(st, op)(st.tensor([1, 2, 3]))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_rejects_ints_unless_dtype(op):
    with pytest.raises(TypeError, match=f"{op}: expected a floating point input, got int64"):
        getattr(st, op)(st.tensor([1, 2, 3]), 0)
    out = getattr(st, op)(st.tensor([1, 2, 3]), 0, dtype=st.float64)
    assert out.dtype is st.float64


# ---- empty inputs ------------------------------------------------------------------------------


def test_empty_reductions_with_identity():
    e = st.zeros(2, 0)
    assert st.sum(e).item() == 0.0 and st.sum(e, 1).tolist() == [0.0, 0.0]
    assert st.prod(e).item() == 1.0 and st.prod(e, 1).tolist() == [1.0, 1.0]
    assert st.prod(st.zeros(0, dtype=st.int64)).item() == 1
    assert st.all(e).item() is True and st.any(e).item() is False
    assert st.all(e, 1).tolist() == [True, True] and st.any(e, 1).tolist() == [False, False]
    assert st.logsumexp(e, 1).tolist() == [-math.inf, -math.inf]
    assert np.isnan(to_numpy(st.var(e, 1))).all()
    assert st.amax(e, 0).shape == (0,) and st.max(e, 0).indices.shape == (0,)
    assert st.cumsum(e, 1).shape == (2, 0) and st.softmax(e, 1).shape == (2, 0)


@pytest.mark.parametrize("op", ["amax", "amin", "argmax", "argmin"])
def test_empty_reductions_without_identity_raise(op):
    e = st.zeros(2, 0)
    with pytest.raises(IndexError, match=f"{op}: expected reduction dim 1 to have non-zero size"):
        getattr(st, op)(e, 1)
    with pytest.raises(RuntimeError, match=f"{op}: cannot reduce an empty tensor of shape"):
        getattr(st, op)(e)


def test_max_empty_raises():
    with pytest.raises(RuntimeError, match=r"max: cannot reduce an empty tensor of shape \(0,\)"):
        st.max(st.zeros(0))
    with pytest.raises(IndexError, match="min: expected reduction dim 0 to have non-zero size"):
        st.min(st.zeros(0, 3), dim=0)
    with pytest.raises(RuntimeError, match="norm: cannot reduce an empty tensor"):
        st.norm(st.zeros(0), p=math.inf)


# ---- dim errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "var", "std", "logsumexp", "norm",
                                "all", "any", "argmax", "max", "softmax", "cumsum", "cumprod"])
def test_dim_out_of_range(op):
    with pytest.raises(IndexError, match=rf"{op}: dimension out of range .* but got 2\)"):
        getattr(st, op)(st.ones(2, 3), dim=2)


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "var", "std", "logsumexp", "norm",
                                "all", "any"])
def test_repeated_dim(op):
    with pytest.raises(ValueError, match=rf"{op}: dim \(1, -1\) appears multiple times"):
        getattr(st, op)(st.ones(2, 3), dim=(1, -1))


@pytest.mark.parametrize("op", ["max", "min", "argmax", "softmax", "cumsum"])
def test_single_dim_ops_reject_tuples(op):
    with pytest.raises(TypeError, match=f"{op}: dim must be a single int"):
        getattr(st, op)(st.ones(2, 3), dim=(0, 1))


def test_bad_arguments():
    x = st.ones(3, 4)
    with pytest.raises(TypeError, match="var: pass either correction or unbiased, not both"):
        st.var(x, 0, unbiased=True, correction=0)
    with pytest.raises(TypeError, match="std: correction must be a number"):
        st.std(x, correction="1")
    with pytest.raises(ValueError, match="norm: unsupported norm type 'nuc'"):
        st.norm(x, p="nuc")
    with pytest.raises(TypeError, match="norm: p must be a number or 'fro', got list"):
        st.norm(x, p=[2])
    with pytest.raises(TypeError, match="amax: input must be a Tensor, got list"):
        st.amax([1.0, 2.0])


# ---- specific values and gradients -------------------------------------------------------------


def test_var_std_arguments():
    a = np.random.default_rng(1).standard_normal((4, 5))
    x = st.tensor(a)
    np.testing.assert_allclose(st.var(x).item(), np.var(a, ddof=1))
    np.testing.assert_allclose(to_numpy(st.var(x, 1, False)), np.var(a, 1))
    np.testing.assert_allclose(st.var(x, False).item(), np.var(a))  # legacy var(x, unbiased)
    np.testing.assert_allclose(st.std(x, (0, 1), correction=2).item(), np.std(a, ddof=2))
    np.testing.assert_allclose(to_numpy(st.std(x, 0, unbiased=True, keepdim=True)),
                               np.std(a, 0, ddof=1, keepdims=True))
    assert math.isnan(st.var(st.tensor([1.0])).item())  # no degrees of freedom


def test_prod_gradient_with_zeros():
    x = st.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [2.0, 4.0, 0.5]], requires_grad=True)
    st.prod(x, 1).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [[0, 6, 0], [0, 0, 0], [2, 1, 8]])
    y = st.tensor([1.5, 0.0, -2.0], dtype=st.float64, requires_grad=True)
    assert gradcheck(lambda t: st.prod(t), (y,))


def test_softmax_values_and_stability():
    a = np.array([[1000.0, 1000.0, -1000.0], [1.0, 2.0, 3.0]])
    sm = to_numpy(st.softmax(st.tensor(a), 1))
    np.testing.assert_allclose(sm, REGISTRY["softmax"].reference(a, 1), rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(sm.sum(1), [1, 1], rtol=1e-6)
    lsm = st.log_softmax(st.tensor([0.0, -math.inf, 0.0]), 0).tolist()
    assert lsm[1] == -math.inf and abs(lsm[0] - math.log(0.5)) < 1e-6
    # gradient formulas: softmax y * (g - sum(g * y)), log_softmax g - exp(y) * sum(g)
    x = st.tensor(a[1:], dtype=st.float64, requires_grad=True)
    g = np.array([[0.3, -1.0, 2.0]])
    st.softmax(x, -1).backward(st.tensor(g))
    y = REGISTRY["softmax"].reference(a[1:], -1)
    np.testing.assert_allclose(to_numpy(x.grad), y * (g - (g * y).sum(-1, keepdims=True)))


def test_logsumexp_infinite_lines():
    x = st.tensor([[-math.inf, -math.inf], [0.0, -math.inf]], dtype=st.float64,
                  requires_grad=True)
    y = st.logsumexp(x, 1)
    assert y.tolist() == [-math.inf, 0.0]
    y.sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_norm_orders_and_zero_gradient():
    a = np.array([[3.0, -4.0, 0.0], [1.0, 2.0, -2.0]])
    x = st.tensor(a)
    for p in (2, "fro", 1, 3, 0, 0.5, math.inf, -math.inf):
        np.testing.assert_allclose(to_numpy(st.norm(x, p, 1)),
                                   REGISTRY["norm"].reference(a, p, 1), rtol=1e-6)
    assert st.norm(x, 0).item() == 5.0
    z = st.zeros(3, dtype=st.float64, requires_grad=True)
    st.norm(z).backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]


def test_cumsum_cumprod_gradients():
    x = st.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    st.cumsum(x, 1).sum().backward()
    assert x.grad.tolist() == [[3.0, 2.0, 1.0]]
    x.grad = None
    st.cumprod(x, 1).sum().backward()  # d/dx_i of x0 + x0x1 + x0x1x2
    np.testing.assert_allclose(to_numpy(x.grad), [[1 + 2 + 6, 1 + 3, 2]])


@pytest.mark.parametrize("dt", [st.float16, st.bfloat16])
def test_half_precision_computes_in_float32(dt):
    a = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    x = st.tensor(a).to(dt)
    ref = to_numpy(x.float())
    tol = 2e-2 if dt is st.bfloat16 else 2e-3
    for fn, expect in [(lambda t: st.amax(t, 1), ref.max(1)),
                       (lambda t: st.prod(t, 0), ref.prod(0)),
                       (lambda t: st.softmax(t, 1), REGISTRY["softmax"].reference(ref, 1)),
                       (lambda t: st.var(t, 1), ref.var(1, ddof=1)),
                       (lambda t: st.logsumexp(t, 0), REGISTRY["logsumexp"].reference(ref, 0)),
                       (lambda t: st.cumsum(t, 1), ref.cumsum(1)),
                       (lambda t: st.norm(t), np.linalg.norm(ref)),
                       (lambda t: st.max(t, 1).values, ref.max(1))]:
        out = fn(x)
        assert out.dtype is dt
        np.testing.assert_allclose(to_numpy(out.float()), expect, rtol=tol, atol=tol)
    assert st.argmax(x, 1).tolist() == ref.argmax(1).tolist()


def test_noncontiguous_and_nonadjacent_dims():
    a = np.random.default_rng(3).standard_normal((3, 4, 5))
    x = st.tensor(a).permute(2, 0, 1)  # a strided view
    b = a.transpose(2, 0, 1)
    np.testing.assert_allclose(to_numpy(st.amax(x, (0, 2))), b.max((0, 2)))
    np.testing.assert_allclose(to_numpy(st.var(x, (0, 2), keepdim=True)),
                               b.var((0, 2), ddof=1, keepdims=True))
    np.testing.assert_allclose(to_numpy(st.softmax(x, 1)), REGISTRY["softmax"].reference(b, 1))
    np.testing.assert_allclose(to_numpy(st.cumprod(x, 2)), np.cumprod(b, 2))
    assert st.argmin(x, 0).tolist() == b.argmin(0).tolist()
