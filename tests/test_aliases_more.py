"""PyTorch's other names and in-place forms (ops/aliases.py), the small numerical composites
(ops/numeric.py) and the top-level helpers (torch_misc.py): aliases equal their originals,
in-place forms write in place and keep autograd right, results match numpy, bad input raises."""

from __future__ import annotations

import array
import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.ops import aliases, numeric

RNG = np.random.default_rng(0)


def _a(*shape):
    return RNG.standard_normal(shape)


def _close(t, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(t.tolist(), dtype=np.float64), want, rtol=rtol,
                               atol=atol)


# ---- aliases ---------------------------------------------------------------------------------
@pytest.mark.parametrize("alias, original", [
    ("absolute", "abs"), ("multiply", "mul"), ("subtract", "sub"), ("divide", "div"),
    ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
    ("not_equal", "ne"), ("negative", "neg"), ("concat", "cat"), ("concatenate", "cat"),
    ("ger", "outer")])
def test_alias_is_the_original(alias, original):
    assert getattr(st, alias) is getattr(st, original)


@pytest.mark.parametrize("name, args", [
    ("absolute", ()), ("greater", (0.1,)), ("greater_equal", (0.1,)), ("less", (0.1,)),
    ("less_equal", (0.1,)), ("not_equal", (0.1,)), ("negative", ()), ("multiply", (2.0,)),
    ("subtract", (2.0,)), ("divide", (2.0,))])
def test_alias_methods_match_the_functions(name, args):
    a = _a(3, 2)
    x = st.tensor(a)
    assert getattr(x, name)(*args).tolist() == getattr(st, name)(x, *args).tolist()


def test_shape_and_sort_aliases():
    a = _a(3, 4)
    x = st.tensor(a)
    assert st.ravel(x).tolist() == a.reshape(-1).tolist()
    assert x.t().ravel().shape == (12,)
    _close(st.msort(x), np.sort(a, axis=0))
    _close(x.msort(), np.sort(a, axis=0))
    _close(st.clamp_min(x, 0.0), np.maximum(a, 0.0))
    _close(x.clamp_max(0.0), np.minimum(a, 0.0))
    parts = st.split_with_sizes(x, [1, 3], 1)
    _close(parts[1], a[:, 1:])
    assert [p.shape for p in x.split_with_sizes([2, 1])] == [(2, 4), (1, 4)]
    assert st.positive(x) is x
    _close(x.where(x > 0, 0.0), np.where(a > 0, a, 0.0))
    _close(st.rsub(x, 1.0, alpha=2), 1.0 - 2 * a)
    assert st.unflatten(x, 1, (2, -1)).shape == (3, 2, 2)
    assert x.unflatten(0, (3, 1)).shape == (3, 1, 4)
    _close(st.dist(x, st.zeros(3, 4), 1), np.abs(a).sum(), rtol=1e-5)
    assert st.isreal(x).dtype is st.bool and bool(st.isreal(x).all())


def test_products():
    a, b = _a(2, 3), _a(4, 3)
    _close(st.inner(st.tensor(a), st.tensor(b)), np.inner(a, b))
    _close(st.tensor(a[0]).inner(st.tensor(b[0])), np.inner(a[0], b[0]))
    _close(st.inner(st.tensor(2.0), st.tensor(a)), 2 * a)
    _close(st.vdot(st.tensor(a[0]), st.tensor(b[0])), np.vdot(a[0], b[0]))
    _close(st.ger(st.tensor(a[0]), st.tensor(b[0])), np.outer(a[0], b[0]))


def test_alias_errors():
    with pytest.raises(TypeError, match="positive: .*bool"):
        st.positive(st.tensor([True]))
    with pytest.raises(TypeError, match="ravel: expected a Tensor"):
        st.ravel([1.0])
    with pytest.raises(ValueError, match="inner: the last dimensions"):
        st.inner(st.zeros(2, 3), st.zeros(3, 2))
    with pytest.raises(ValueError, match="vdot: expected 1-D"):
        st.vdot(st.zeros(2, 2), st.zeros(2, 2))
    with pytest.raises(ValueError, match="split_with_sizes: sizes .* add up to 3"):
        st.split_with_sizes(st.zeros(4), [1, 2])
    with pytest.raises(ValueError, match="split_with_sizes: sizes must be"):
        st.split_with_sizes(st.zeros(4), [5, -1])
    with pytest.raises(ValueError, match="unflatten: provided sizes"):
        st.unflatten(st.zeros(2, 6), 1, (4, 2))
    with pytest.raises(ValueError, match="unflatten: only one dimension"):
        st.unflatten(st.zeros(2, 6), 1, (-1, -1))


# ---- in-place forms --------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(aliases._TOP_INPLACE))
def test_top_level_inplace_writes_in_place(name):
    fn, example = aliases._TOP_INPLACE[name]
    a = np.abs(_a(4)) * 0.5 + 0.1
    extra = {"clamp_": ((), {"min": 0.3}), "clip_": ((), {"max": 0.3}),
             "clamp_min_": ((0.3,), {}), "clamp_max_": ((0.3,), {}),
             "threshold_": ((0.3, 0.0), {})}.get(name, ((), {}))
    want = fn(st.tensor(a), *extra[0], **extra[1])
    x = st.tensor(a)
    v = x._storage.version
    if name == "rrelu_":  # random in training; evaluation mode is deterministic
        extra = ((), {"training": False})
        want = fn(st.tensor(a), training=False)
    assert getattr(st, name)(x, *extra[0], **extra[1]) is x
    assert x._storage.version > v
    assert x.tolist() == want.tolist()


def test_inplace_keeps_autograd_right():
    a = _a(3)
    leaf = st.tensor(a, requires_grad=True)
    y = leaf * 1.0
    st.exp_(y)
    y.sum().backward()
    _close(leaf.grad, np.exp(a).astype(np.float32), rtol=1e-5)
    with pytest.raises(RuntimeError, match="exp_: a leaf tensor that requires grad"):
        st.exp_(leaf)
    # a value saved by an earlier op that is then overwritten in place: backward refuses
    z = leaf * 1.0
    w = z * z
    st.sin_(z)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        w.sum().backward()


@pytest.mark.parametrize("name, fn", [("cumsum_", np.cumsum), ("cumprod_", np.cumprod)])
def test_cumulative_inplace(name, fn):
    a = _a(2, 3)
    leaf = st.tensor(a, requires_grad=True)
    y = leaf * 1.0
    assert getattr(y, name)(1) is y
    _close(y, fn(a, axis=1), rtol=1e-5)
    y.sum().backward()
    g = st.tensor(a, requires_grad=True)
    getattr(st, name[:-1])(g, 1).sum().backward()
    _close(leaf.grad, np.asarray(g.grad.tolist()))


@pytest.mark.parametrize("name, ref", [
    ("multiply_", np.multiply), ("subtract_", np.subtract), ("divide_", np.divide)])
def test_arithmetic_method_inplace(name, ref):
    a, b = _a(3), _a(3)
    x = st.tensor(a)
    assert getattr(x, name)(st.tensor(b)) is x
    _close(x, ref(a, b), rtol=1e-5)


@pytest.mark.parametrize("name, ref", [
    ("eq_", np.equal), ("ne_", np.not_equal), ("lt_", np.less), ("le_", np.less_equal),
    ("gt_", np.greater), ("ge_", np.greater_equal), ("greater_", np.greater),
    ("greater_equal_", np.greater_equal), ("less_", np.less), ("less_equal_", np.less_equal),
    ("not_equal_", np.not_equal), ("logical_and_", np.logical_and),
    ("logical_or_", np.logical_or), ("logical_xor_", np.logical_xor)])
def test_comparison_inplace(name, ref):
    a = np.array([0.0, 1.0, 2.0, -1.0])
    b = np.array([0.0, 2.0, 1.0, 0.0])
    x = st.tensor(a)
    assert getattr(x, name)(st.tensor(b)) is x
    assert x.dtype is st.float64
    assert x.tolist() == ref(a, b).astype(np.float64).tolist()
    # the result has no gradient: the tensor leaves the graph
    y = st.tensor(a, requires_grad=True) * 1.0
    getattr(y, name)(st.tensor(b))
    assert not y.requires_grad and y.grad_fn is None


def test_logical_not_inplace_and_leaf_error():
    x = st.tensor([0.0, 3.0])
    assert x.logical_not_() is x and x.tolist() == [1.0, 0.0]
    with pytest.raises(RuntimeError, match="eq_: a leaf tensor that requires grad"):
        st.zeros(2, requires_grad=True).eq_(0.0)


@pytest.mark.parametrize("name, args, ref", [
    ("t_", (), lambda a: a.T), ("transpose_", (0, 1), lambda a: a.T),
    ("swapaxes_", (1, 0), lambda a: a.T), ("swapdims_", (0, 1), lambda a: a.T),
    ("unsqueeze_", (1,), lambda a: a[:, None]), ("squeeze_", (), lambda a: a)])
def test_view_changes_in_place(name, args, ref):
    a = _a(2, 3)
    x = st.tensor(a)
    storage = x._storage
    assert getattr(x, name)(*args) is x
    assert x._storage is storage
    _close(x, ref(a))
    # on a non-leaf, the gradient flows back through the new layout
    leaf = st.tensor(a, requires_grad=True)
    y = leaf * 1.0
    getattr(y, name)(*args)
    w = RNG.standard_normal(y.shape)
    (y * st.tensor(w)).sum().backward()
    _close(leaf.grad, w.reshape(ref(a).shape).T.reshape(a.shape) if name not in
           ("unsqueeze_", "squeeze_") else w.reshape(a.shape))


def test_view_change_errors():
    with pytest.raises(RuntimeError, match="t_: a leaf tensor that requires grad"):
        st.zeros(2, 3, requires_grad=True).t_()
    with pytest.raises(IndexError, match="transpose"):
        st.zeros(2, 3).transpose_(0, 5)


def test_resize():
    x = st.arange(6.0)
    assert x.resize_(2, 3) is x and x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert x.resize_(4).tolist() == [0.0, 1.0, 2.0, 3.0]
    g = st.arange(3.0)
    g.resize_((2, 4))
    assert g.shape == (2, 4) and g.reshape(-1)[:3].tolist() == [0.0, 1.0, 2.0]
    assert st.zeros(6).resize_as_(st.zeros(3, 2)).shape == (3, 2)
    with pytest.raises(RuntimeError, match="resize_: cannot resize a tensor that requires"):
        st.zeros(2, requires_grad=True).resize_(4)
    with pytest.raises(RuntimeError, match="resize_: a view .* can't grow"):
        st.zeros(4)[:2].resize_(8)
    with pytest.raises(RuntimeError, match="resize_: growing a non-contiguous"):
        st.zeros(2, 3).t_().resize_(12)
    with pytest.raises(ValueError, match="resize_: sizes must be non-negative"):
        st.zeros(2).resize_(-1)


# ---- numerical composites --------------------------------------------------------------------
def test_diff():
    a = _a(3, 5)
    _close(st.diff(st.tensor(a)), np.diff(a))
    _close(st.tensor(a).diff(n=2, dim=0), np.diff(a, n=2, axis=0))
    pre, app = _a(3, 1), _a(3, 2)
    _close(st.diff(st.tensor(a), prepend=st.tensor(pre), append=st.tensor(app)),
           np.diff(a, prepend=pre, append=app))
    b = np.array([True, False, False, True])
    assert st.diff(st.tensor(b)).tolist() == np.diff(b).tolist()
    with pytest.raises(ValueError, match="diff: order must be"):
        st.diff(st.zeros(3), n=-1)
    with pytest.raises(ValueError, match="diff: expects input to be at least one"):
        st.diff(st.tensor(1.0))
    with pytest.raises(ValueError, match="diff: prepend/append must have 2"):
        st.diff(st.zeros(2, 3), prepend=st.zeros(3))


def test_trapezoid():
    y, x = _a(3, 6), np.sort(_a(6))
    _close(st.trapezoid(st.tensor(y)), np.trapezoid(y, axis=-1), rtol=1e-5)
    _close(st.trapezoid(st.tensor(y), st.tensor(x)), np.trapezoid(y, x=x), rtol=1e-5)
    _close(st.trapz(st.tensor(y), dx=0.5, dim=0), np.trapezoid(y, dx=0.5, axis=0), rtol=1e-5)
    xs = _a(3, 6)
    _close(st.trapezoid(st.tensor(y), st.tensor(xs)), np.trapezoid(y, x=xs), rtol=1e-4)
    c = np.cumsum((y[:, 1:] + y[:, :-1]) / 2 * np.diff(x), axis=-1)
    _close(st.cumulative_trapezoid(st.tensor(y), st.tensor(x)), c, rtol=1e-5)
    with pytest.raises(TypeError, match="trapezoid: pass either x or dx"):
        st.trapezoid(st.zeros(3), st.zeros(3), dx=1.0)
    with pytest.raises(ValueError, match="trapezoid: x has 2 points but y has 3"):
        st.trapezoid(st.zeros(3), st.zeros(2))


def test_cov_and_corrcoef():
    a = _a(3, 7)
    _close(st.cov(st.tensor(a)), np.cov(a), rtol=1e-4, atol=1e-5)
    _close(st.cov(st.tensor(a), correction=0), np.cov(a, ddof=0), rtol=1e-4, atol=1e-5)
    fw, aw = np.array([1, 2, 1, 3, 1, 1, 2]), np.abs(_a(7)) + 0.5
    _close(st.cov(st.tensor(a), fweights=st.tensor(fw), aweights=st.tensor(aw)),
           np.cov(a, fweights=fw, aweights=aw), rtol=1e-4, atol=1e-5)
    _close(st.tensor(a).corrcoef(), np.corrcoef(a), rtol=1e-4, atol=1e-5)
    _close(st.cov(st.tensor(a[0])), np.cov(a[0]), rtol=1e-4)
    with pytest.raises(ValueError, match="cov: expected input to have two or fewer"):
        st.cov(st.zeros(2, 2, 2))
    with pytest.raises(ValueError, match="cov: expected fweights to be a 1-D tensor of 7"):
        st.cov(st.tensor(a), fweights=st.tensor([1, 2]))
    with pytest.raises(TypeError, match="cov: expected fweights to have an integral"):
        st.cov(st.tensor(a), fweights=st.ones(7))
    with pytest.raises(TypeError, match="cov: expected aweights to have a floating"):
        st.cov(st.tensor(a), aweights=st.tensor([1] * 7))


def test_logit():
    p = np.array([0.1, 0.5, 0.9, 1.0])
    _close(st.logit(st.tensor(p[:3])), np.log(p[:3] / (1 - p[:3])), rtol=1e-5)
    q = np.clip(p, 0.01, 0.99)
    _close(st.logit(st.tensor(p), eps=0.01), np.log(q / (1 - q)), rtol=1e-5)
    x = st.tensor(p[:3])
    assert st.logit_(x) is x
    _close(x, np.log(p[:3] / (1 - p[:3])), rtol=1e-5)


def test_isin_vander_chain_unravel():
    e, t = np.array([[1, 2], [3, 4]]), np.array([2, 3, 9])
    assert st.isin(st.tensor(e), st.tensor(t)).tolist() == np.isin(e, t).tolist()
    assert st.isin(st.tensor(e), 4, invert=True).tolist() == np.isin(e, 4, invert=True).tolist()
    assert st.isin(2, st.tensor(t)).item() is True
    x = np.array([1.0, 2.0, 3.0])
    _close(st.vander(st.tensor(x)), np.vander(x))
    _close(st.vander(st.tensor(x), N=4, increasing=True), np.vander(x, 4, increasing=True))
    ms = [_a(2, 3), _a(3, 4), _a(4, 2)]
    _close(st.chain_matmul(*[st.tensor(m) for m in ms]), np.linalg.multi_dot(ms), rtol=1e-4,
           atol=1e-5)
    got = st.unravel_index(st.tensor([0, 5, 7, -1]), (2, 4))
    want = np.unravel_index(np.array([0, 5, 7, 7]), (2, 4))
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    with pytest.raises(TypeError, match="isin: at least one"):
        st.isin(1, 2)
    with pytest.raises(ValueError, match="vander: x must be a one-dimensional"):
        st.vander(st.zeros(2, 2))
    with pytest.raises(ValueError, match="chain_matmul: expected 2-D"):
        st.chain_matmul(st.zeros(2))
    with pytest.raises(ValueError, match="chain_matmul: expected one or more"):
        st.chain_matmul()
    with pytest.raises(ValueError, match="unravel_index: index out of range"):
        st.unravel_index(st.tensor([8]), (2, 4))
    with pytest.raises(TypeError, match="unravel_index: expected an integer"):
        st.unravel_index(st.tensor([1.0]), (2, 4))


def test_numeric_functions_are_exported():
    for name in numeric.__all__ + aliases.__all__:
        exported = getattr(st, name)
        exported = getattr(exported, "_without_out", exported)  # PyTorch's out= (st._out)
        assert exported is getattr(numeric if name in numeric.__all__ else aliases, name)


# ---- torch_misc ------------------------------------------------------------------------------
def test_constants_and_names():
    assert st.e == math.e and st.pi == math.pi and st.inf == math.inf and math.isnan(st.nan)
    assert st.newaxis is None
    assert st.typename(st.zeros(1, dtype=st.int64)) == "torch.LongTensor"
    assert st.typename(st.nn.Linear(1, 1)).endswith("Linear")


def test_size():
    s = st.Size([2, 3, 4])
    assert s == (2, 3, 4) and isinstance(s, tuple) and s.numel() == 24
    assert isinstance(s[1:], st.Size) and s[1:].numel() == 12 and s[0] == 2
    assert st.Size().numel() == 1
    with pytest.raises(TypeError, match="Size: expected a sequence of ints"):
        st.Size([2.0])


def test_dtype_queries():
    i, f = st.tensor([1, 2]), st.tensor([1.0])
    assert st.result_type(i, f) is st.float32
    assert st.result_type(i, 2.5) is st.float32
    assert st.result_type(st.tensor([1, 2], dtype=st.int32), st.tensor(5)) is st.int32
    assert st.result_type(st.tensor([True]), 3) is st.int64
    assert st.result_type(st.tensor(1.0, dtype=st.float64), st.tensor([1.0])) is st.float32
    assert st.promote_types(st.int64, st.float64) is st.float64
    assert st.can_cast(st.bool, st.int32) and not st.can_cast(st.int32, st.bool)
    with pytest.raises(TypeError, match="result_type: expected Tensors or numbers"):
        st.result_type(i, "x")


def test_predicates():
    assert st.zeros(2).is_same_size(st.ones(2)) and not st.is_same_size(st.zeros(2),
                                                                        st.zeros(1, 2))
    assert st.tensor([2]).is_nonzero() and not st.is_nonzero(st.tensor([0.0]))
    with pytest.raises(RuntimeError, match="is_nonzero: .*more than one value"):
        st.is_nonzero(st.zeros(2))
    with pytest.raises(RuntimeError, match="is_nonzero: .*no values"):
        st.is_nonzero(st.zeros(0))
    assert st.zeros(1).is_signed() and not st.tensor([True]).is_signed()
    assert st.tensor([1.0, 2.0]).equal(st.tensor([1.0, 2.0]))
    assert not st.equal(st.tensor([1.0, 2.0]), st.tensor([1.0, 3.0]))
    assert st.zeros(1).get_device() == -1
    with pytest.raises(TypeError, match="is_signed: expected a Tensor"):
        st.is_signed(1.0)


def test_tensor_properties():
    x = st.zeros(2, 3, dtype=st.float64)
    assert x.itemsize == 8 and x.nbytes == 48
    y = st.ones(2, requires_grad=True) * 2
    assert not y.retains_grad
    y.retain_grad()
    assert y.retains_grad


def test_print_options():
    try:
        st.set_printoptions(precision=2)
        assert repr(st.tensor([1.23456])) == "tensor([1.23])"
        st.set_printoptions(threshold=5, edgeitems=1)
        assert "..." in repr(st.arange(10.0))
        st.set_printoptions(sci_mode=True)
        assert "e+00" in repr(st.tensor([1.5]))
    finally:
        st.set_printoptions(profile="default")
    assert "..." not in repr(st.arange(10.0))
    with pytest.raises(ValueError, match="set_printoptions: unknown profile"):
        st.set_printoptions(profile="tiny")
    with pytest.raises(ValueError, match="set_printoptions: precision must be"):
        st.set_printoptions(precision=-1)


def test_threads():
    before = st.get_num_interop_threads()
    st.set_num_interop_threads(2)
    assert st.get_num_interop_threads() == 2
    st.set_num_interop_threads(before)
    with pytest.raises(ValueError, match="set_num_interop_threads: expects a positive"):
        st.set_num_interop_threads(0)


def test_factories():
    _close(st.logspace(-1, 2, 4), np.logspace(-1, 2, 4), rtol=1e-6)
    _close(st.logspace(0, 3, 4, base=2.0), np.logspace(0, 3, 4, base=2.0))
    for name, ref in (("bartlett_window", np.bartlett), ("blackman_window", np.blackman),
                      ("hamming_window", np.hamming), ("hann_window", np.hanning)):
        _close(getattr(st, name)(6), ref(7)[:-1], atol=1e-6)
        _close(getattr(st, name)(6, periodic=False), ref(6), atol=1e-6)
    _close(st.kaiser_window(5, False, 3.0, dtype=st.float64), np.kaiser(5, 3.0), rtol=1e-12)
    assert st.hann_window(1).tolist() == [1.0] and st.hann_window(0).shape == (0,)
    with pytest.raises(ValueError, match="hann_window: window_length must be"):
        st.hann_window(-1)
    with pytest.raises(TypeError, match="hann_window: expects a floating point"):
        st.hann_window(3, dtype=st.int64)
    r = st.randint_like(st.zeros(50, dtype=st.int64), 3, 6)
    assert r.dtype is st.int64 and set(r.tolist()) <= {3, 4, 5}
    buf = array.array("d", [1.5, 2.5, 3.5])
    assert st.frombuffer(buf, dtype=st.float64, offset=8).tolist() == [2.5, 3.5]
    assert st.frombuffer(bytes(8), dtype=st.int32, count=1).tolist() == [0]
    with pytest.raises(ValueError, match="frombuffer: "):
        st.frombuffer(bytes(3), dtype=st.int32)


def test_tensor_new_and_sum_to_size():
    x = st.zeros(1, dtype=st.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new().shape == (0,)
    assert x.new([1, 2]).dtype is st.float64
    assert x.new_empty_strided((2, 2), (1, 2)).stride() == (1, 2)
    a = _a(2, 3, 4)
    _close(st.tensor(a).sum_to_size(3, 1), a.sum(axis=(0, 2)).reshape(3, 1), rtol=1e-5)
    _close(st.tensor(a).sum_to_size((2, 3, 4)), a)
    with pytest.raises(RuntimeError, match="sum_to_size: size \\(2, 4\\) is not expandable"):
        st.tensor(a).sum_to_size(2, 4)


def test_apply_map_fill_diagonal():
    x = st.tensor([1.0, 2.0, 3.0])
    assert x.apply_(lambda v: v * v) is x and x.tolist() == [1.0, 4.0, 9.0]
    y = st.tensor([[1, 2], [3, 4]])
    y.map_(st.tensor([10, 20]), lambda a, b: a + b)
    assert y.tolist() == [[11, 22], [13, 24]]
    with pytest.raises(RuntimeError, match="apply_: a leaf tensor that requires grad"):
        st.zeros(2, requires_grad=True).apply_(abs)
    m = np.zeros((5, 2))
    np.fill_diagonal(m, 7.0, wrap=True)
    assert st.zeros(5, 2).fill_diagonal_(7.0, wrap=True).tolist() == m.tolist()
    c = np.zeros((2, 2, 2))
    np.fill_diagonal(c, 1.0)
    assert st.zeros(2, 2, 2).fill_diagonal_(1.0).tolist() == c.tolist()
    leaf = st.ones(2, 2, requires_grad=True)
    z = leaf * 3.0
    z.fill_diagonal_(0.0)
    z.sum().backward()
    assert leaf.grad.tolist() == [[0.0, 3.0], [3.0, 0.0]]
    with pytest.raises(ValueError, match="fill_diagonal_: dimensions must be larger than 1"):
        st.zeros(3).fill_diagonal_(1.0)
    with pytest.raises(ValueError, match="fill_diagonal_: all dimensions of input must be"):
        st.zeros(2, 3, 2).fill_diagonal_(1.0)


def test_detach_functions():
    y = st.ones(2, requires_grad=True) * 2
    assert not st.detach(y).requires_grad and y.requires_grad
    assert st.detach_(y) is y and not y.requires_grad


def test_functional_forms():
    F = st.nn.functional
    a, b = st.tensor(_a(3, 4)), st.tensor(_a(3, 4))
    assert st.cosine_similarity(a, b).tolist() == F.cosine_similarity(a, b).tolist()
    assert st.dropout(a, 0.5, False).tolist() == a.tolist()
    z = a.clone()
    assert st.dropout_(z, 0.5, False) is z
    w, idx = st.eye(4), st.tensor([3, 1])
    assert st.embedding(w, idx).tolist() == F.embedding(idx, w).tolist()
    lp, t = st.tensor(_a(3, 4)), st.tensor(np.abs(_a(3, 4)))
    assert st.kl_div(lp, t, 2).item() == pytest.approx(F.kl_div(lp, t, "sum").item())
    assert st.kl_div(lp, t, 0).shape == (3, 4)
    logits, tgt = st.tensor(_a(5)), st.tensor((_a(5) > 0).astype(np.float64))
    assert st.binary_cross_entropy_with_logits(logits, tgt, None, None, 1).item() == \
        pytest.approx(F.binary_cross_entropy_with_logits(logits, tgt).item())
    v, i = st.adaptive_max_pool1d(st.tensor(_a(1, 2, 6)), 3)
    assert v.shape == (1, 2, 3) and i.shape == (1, 2, 3)
    x = st.tensor(_a(2, 3, 5))
    got = st.instance_norm(x, None, None, None, None, True, 0.1, 1e-5)
    assert got.tolist() == F.instance_norm(x).tolist()
    with pytest.raises(ValueError, match="kl_div: reduction must be 0 \\(none\\)"):
        st.kl_div(lp, t, 5)
    with pytest.raises(NotImplementedError, match="embedding: scale_grad_by_freq"):
        st.embedding(w, idx, -1, True)


def test_integer_composites():
    a = np.array([12, -18, 0, 7, 0, 2**40])
    b = np.array([8, 12, 5, 0, 0, 6])
    assert st.gcd(st.tensor(a), st.tensor(b)).tolist() == np.gcd(a, b).tolist()
    assert st.lcm(st.tensor(a), st.tensor(b)).tolist() == np.lcm(a, b).tolist()
    x = st.tensor(a)
    assert x.gcd_(st.tensor(b)) is x and x.tolist() == np.gcd(a, b).tolist()
    col = np.array([[4], [9]])
    assert st.lcm(st.tensor(col), st.tensor([6, 15])).tolist() == np.lcm(col, [6, 15]).tolist()
    assert st.gcd(st.tensor([12], dtype=st.int32), 8).dtype is st.int32
    assert st.bitwise_not(st.tensor(a)).tolist() == np.invert(a).tolist()
    assert st.tensor([True, False]).bitwise_not().tolist() == [False, True]
    with pytest.raises(TypeError, match="gcd: expected integer tensors, got float32"):
        st.gcd(st.zeros(2), st.zeros(2))
    with pytest.raises(TypeError, match="lcm: expected a Tensor"):
        st.lcm(2, 3)
    with pytest.raises(TypeError, match="bitwise_not: expected an integer or bool"):
        st.bitwise_not(st.zeros(1))


def test_older_linalg_and_random_forms():
    a = _a(4, 3)
    q, r = st.qr(st.tensor(a))
    _close(q @ r, a, atol=1e-6)
    assert st.tensor(a).qr(some=False)[0].shape == (4, 4)
    u, s, v = st.svd(st.tensor(a))
    _close(u @ st.diag(s) @ v.t(), a, atol=1e-6)
    _close(s, np.linalg.svd(a, compute_uv=False), rtol=1e-6)
    u0, _, v0 = st.tensor(a).svd(compute_uv=False)
    assert u0.abs().sum().item() == 0.0 and v0.abs().sum().item() == 0.0
    m = _a(3, 3)
    _close(st.tensor(m).matrix_power(3), np.linalg.matrix_power(m, 3), rtol=1e-6, atol=1e-9)
    c = st.tensor(a[:3])
    b = st.tensor(_a(3, 3))
    want = (c + b @ b).tolist()
    assert c.addmm_(b, b) is c
    _close(c, np.asarray(want), rtol=1e-6, atol=1e-9)
    p = st.full((1000,), 0.5, dtype=st.float64)
    draws = p.bernoulli()
    assert set(draws.tolist()) <= {0.0, 1.0} and 300 < draws.sum().item() < 700
    assert st.tensor([0.0, 1.0, 0.0]).multinomial(2, True).tolist() == [1, 1]
    assert st.default_generator is st.random.default_generator


def test_more_factories_and_flags():
    assert st.range(1, 4).tolist() == [1.0, 2.0, 3.0, 4.0]
    _close(st.range(0, 1, 0.25, dtype=st.float64), np.array([0, 0.25, 0.5, 0.75, 1.0]))
    assert st.range(3, 1, -1).tolist() == [3.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="range: step must be nonzero"):
        st.range(0, 1, 0)
    with pytest.raises(ValueError, match="range: upper bound and lower bound inconsistent"):
        st.range(0, 3, -1)
    x = st.zeros(2, dtype=st.int64)
    f = st.fill(x, 7)
    assert f.tolist() == [7, 7] and f.dtype is st.int64 and x.tolist() == [0, 0]
    with pytest.raises(ValueError, match="fill: only supports a 0-dimensional"):
        st.fill(x, st.zeros(2))
    t = st.empty_permuted((2, 3, 4), (2, 0, 1))
    assert t.shape == (2, 3, 4) and t.stride() == (3, 1, 6)
    with pytest.raises(ValueError, match="empty_permuted: physical_layout"):
        st.empty_permuted((2, 3), (0, 0))
    st.set_warn_always(True)
    assert st.is_warn_always_enabled()
    st.set_warn_always(False)
    try:
        st.set_deterministic_debug_mode("warn")
        assert st.get_deterministic_debug_mode() == 1
        st.set_deterministic_debug_mode(2)
        assert st.get_deterministic_debug_mode() == 2
    finally:
        st.set_deterministic_debug_mode(0)
    assert st.get_deterministic_debug_mode() == 0
    with pytest.raises(ValueError, match="set_deterministic_debug_mode: invalid mode"):
        st.set_deterministic_debug_mode(3)


def test_more_functional_forms():
    F = st.nn.functional
    x = st.tensor(_a(1, 2, 8))
    v, i = st.max_pool1d_with_indices(x, 3, 2)
    fv, fi = F.max_pool1d(x, 3, 2, return_indices=True)
    assert v.tolist() == fv.tolist() and i.tolist() == fi.tolist()
    lp = st.tensor(_a(5, 2, 3)).log_softmax(2)
    tg = st.tensor([[1, 2], [2, 2]])
    got = st.ctc_loss(lp, tg, [5, 5], [2, 2], 0, 2)
    assert got.item() == pytest.approx(F.ctc_loss(lp, tg, [5, 5], [2, 2], reduction="sum").item())


def test_diagonal_scatter_and_ldexp():
    a, s = _a(3, 4), _a(3)
    want = a.copy()
    want[np.arange(3), np.arange(3) + 1] = s
    _close(st.diagonal_scatter(st.tensor(a), st.tensor(s), 1), want)
    leaf = st.tensor(s, requires_grad=True)
    st.diagonal_scatter(st.zeros(3, 3, dtype=st.float64), leaf).sum().backward()
    assert leaf.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="diagonal_scatter: src must have shape \\(3,\\)"):
        st.diagonal_scatter(st.zeros(3, 3), st.zeros(2))
    x, e = _a(4), np.array([0, 1, -2, 5])
    _close(st.ldexp(st.tensor(x), st.tensor(e)), np.ldexp(x, e))
    y = st.tensor(x)
    assert y.ldexp_(st.tensor(e)) is y
    _close(y, np.ldexp(x, e))


def test_triangular_family():
    L = np.tril(_a(3, 3)) + 3 * np.eye(3)
    B = _a(3, 2)
    A = L @ L.T
    _close(st.cholesky_solve(st.tensor(B), st.tensor(L)), np.linalg.solve(A, B), rtol=1e-6,
           atol=1e-9)
    _close(st.tensor(B).cholesky_solve(st.tensor(L.T), upper=True), np.linalg.solve(A, B),
           rtol=1e-6, atol=1e-9)
    _close(st.cholesky_inverse(st.tensor(L)), np.linalg.inv(A), rtol=1e-6, atol=1e-9)
    x, same = st.triangular_solve(st.tensor(B), st.tensor(L), upper=False)
    _close(x, np.linalg.solve(L, B), rtol=1e-6, atol=1e-9)
    _close(same, L)
    x, _ = st.tensor(B).triangular_solve(st.tensor(L.T), transpose=True)
    _close(x, np.linalg.solve(L, B), rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="cholesky_solve: L must be a batch of square"):
        st.cholesky_solve(st.zeros(3, 1), st.zeros(3, 2))
    with pytest.raises(TypeError, match="triangular_solve: A must be a Tensor"):
        st.triangular_solve(st.zeros(2, 1), [[1.0]])


def test_memory_queries():
    x = st.zeros(3)
    assert x.pin_memory() is x and not x.is_pinned() and not x.is_shared()


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order):
    f = _a(5, 6)
    got = st.gradient(st.tensor(f), edge_order=edge_order)
    want = np.gradient(f, edge_order=edge_order)
    assert len(got) == 2
    for g, w in zip(got, want):
        _close(g, w, rtol=1e-6, atol=1e-9)
    x = np.cumsum(np.abs(_a(6)) + 0.3)
    (g,) = st.gradient(st.tensor(f), spacing=[st.tensor(x)], dim=1, edge_order=edge_order)
    _close(g, np.gradient(f, x, axis=1, edge_order=edge_order), rtol=1e-6, atol=1e-9)
    (g,) = st.gradient(st.tensor(f), spacing=0.5, dim=-1, edge_order=edge_order)
    _close(g, np.gradient(f, 0.5, axis=-1, edge_order=edge_order), rtol=1e-6, atol=1e-9)


def test_gradient_errors_and_pdist():
    with pytest.raises(ValueError, match="gradient: edge_order must be 1 or 2"):
        st.gradient(st.zeros(4), edge_order=3)
    with pytest.raises(ValueError, match="gradient: each dimension must have at least"):
        st.gradient(st.zeros(2), edge_order=2)
    with pytest.raises(ValueError, match="gradient: expected spacing to be a number or 1"):
        st.gradient(st.zeros(4), spacing=[1.0, 2.0])
    with pytest.raises(ValueError, match="gradient: coordinates for dim 0 must be"):
        st.gradient(st.zeros(4), spacing=[st.zeros(3)])
    a = _a(5, 3)
    i, j = np.triu_indices(5, 1)
    for p in (1.0, 2.0, 3.0):
        want = (np.abs(a[i] - a[j]) ** p).sum(-1) ** (1 / p)
        _close(st.pdist(st.tensor(a), p), want, rtol=1e-6)
    assert st.pdist(st.zeros(1, 3)).shape == (0,)
    with pytest.raises(ValueError, match="pdist: expected a 2-d"):
        st.pdist(st.zeros(3))
    with pytest.raises(ValueError, match="pdist: p must be a non-negative number"):
        st.pdist(st.zeros(2, 2), -1.0)
    x = st.tensor([12, 9])
    assert st.gcd_(x, st.tensor([8, 6])) is x and x.tolist() == [4, 3]
    assert st.lcm_(x, st.tensor([6, 2])).tolist() == [12, 6]
    y = st.tensor([1.0])
    assert st.ldexp_(y, st.tensor([3])) is y and y.tolist() == [8.0]
    assert st.zeros(2, 2).diagonal_scatter(st.ones(2)).tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_i0_and_frexp():
    x = np.array([0.0, 0.5, -3.0, 10.0, 50.0])
    _close(st.i0(st.tensor(x)), np.i0(x), rtol=1e-12)
    big = st.i0(st.tensor([1000.0, -np.inf, np.nan], dtype=st.float64)).tolist()
    assert big[0] == math.inf and big[1] == math.inf and math.isnan(big[2])
    y = st.tensor([1.0])
    assert st.i0_(y) is y
    v = np.array([8.0, -0.375, 0.0, 1e-310, 1.7e308, np.inf, np.nan, 3.0])
    m, e = st.frexp(st.tensor(v))
    wm, we = np.frexp(v)
    np.testing.assert_array_equal(np.asarray(m.tolist()), wm)
    assert e.dtype is st.int32 and e.tolist() == we.tolist()
    with pytest.raises(TypeError, match="frexp: only supports floating-point"):
        st.frexp(st.tensor([1]))
