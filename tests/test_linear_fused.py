"""F.linear's fused op (`_linear_fused`): one copy + one GEMM forward, two GEMMs and a row sum
backward. It must give the composition's results (x @ w.T + b with matmul, transpose and a
broadcast add), forward and every gradient, for every layout it reads in place, and leave
the cases it does not cover to the composition."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor.ops.layout import t as _t

from .helpers import to_numpy


def assert_sum_close(got, want, magnitude, terms: int, dtype: str) -> None:
    """got equals want up to the rounding of a sum of `terms` products: the fused GEMM and the
    composition may add the products in different orders (different kernels, blocking and
    threads on different CPUs), which moves each result by at most terms * eps * the sum of
    the products' magnitudes (the a-priori bound of recursive summation), not by a fixed
    number of ulps of a result that may itself be a near-cancellation."""
    eps = np.finfo(dtype).eps
    bound = 2.0 * max(terms, 1) * eps * np.asarray(magnitude, dtype=np.float64) + \
        np.finfo(dtype).tiny
    err = np.abs(to_numpy(got).astype(np.float64) - to_numpy(want).astype(np.float64))
    assert err.shape == bound.shape
    assert (err <= bound).all(), f"worst excess {(err / bound).max():.3g}x the bound"


def _composed(x, w, b):
    y = st.matmul(x, _t(w))
    return y if b is None else y + b


def _pair(shape_x, n, dtype, bias, transposed_weight, seed=0):
    """Two independent leaf sets with equal values: one for the fused op, one composed."""
    r = np.random.default_rng(seed)
    k = shape_x[-1]
    xa = r.standard_normal(shape_x).astype(dtype)
    wa = r.standard_normal((n, k)).astype(dtype)
    ba = r.standard_normal(n).astype(dtype) if bias else None

    def leaves():
        x = st.tensor(xa, requires_grad=True)
        if transposed_weight:  # w is the transpose of a contiguous (k, n) leaf
            leaf = st.tensor(np.ascontiguousarray(wa.T), requires_grad=True)
            w = leaf.t()
        else:
            leaf = w = st.tensor(wa, requires_grad=True)
        b = st.tensor(ba, requires_grad=True) if bias else None
        return x, w, leaf, b

    return leaves(), leaves(), r


# the last: 64 x 300 x 256, a float32 product large enough for the CPU's oneDNN, which adds
# the bias in its epilogue (backend/cpu.py: linear_plan)
CASES = [((3, 4), 5), ((2, 3, 4), 5), ((4,), 2), ((2, 1, 3, 7), 6), ((64, 128), 384),
         ((2, 32, 256), 300)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("transposed_weight", [False, True])
@pytest.mark.parametrize("shape_x,n", CASES)
def test_fused_linear_equals_the_composition(shape_x, n, dtype, bias, transposed_weight):
    (x, w, wl, b), (x2, w2, wl2, b2), r = _pair(shape_x, n, dtype, bias, transposed_weight)
    y = F.linear(x, w, b)
    assert y.grad_fn is not None and y.grad_fn.name == "_linear_fused"
    want = _composed(x2, w2, b2)
    assert y.shape == want.shape and y.dtype == want.dtype
    xa, wa = np.abs(to_numpy(x.detach())), np.abs(to_numpy(wl.detach()))
    wa = wa.T if transposed_weight else wa  # (n, k) either way
    ba = np.abs(to_numpy(b.detach())) if bias else 0.0
    k = shape_x[-1]
    assert_sum_close(y.detach(), want.detach(), xa @ wa.T + ba, k + 1, dtype)
    ga = r.standard_normal(tuple(y.shape)).astype(dtype)
    g = st.tensor(ga)
    y.backward(g)
    want.backward(g)
    g2, x2a = np.abs(ga.reshape(-1, n)), xa.reshape(-1, k)
    assert_sum_close(x.grad, x2.grad, (g2 @ wa).reshape(xa.shape), n, dtype)
    gw = g2.T @ x2a
    assert_sum_close(wl.grad, wl2.grad, gw.T if transposed_weight else gw, len(g2), dtype)
    if bias:
        assert_sum_close(b.grad, b2.grad, g2.sum(0), len(g2), dtype)


def test_fused_linear_against_numpy_and_a_strided_input():
    r = np.random.default_rng(3)
    xa = r.standard_normal((6, 4, 3))
    wa, ba = r.standard_normal((5, 4)), r.standard_normal(5)
    x = st.tensor(xa).permute(0, 2, 1)  # (6, 3, 4), not contiguous
    y = F.linear(x, st.tensor(wa), st.tensor(ba))
    np.testing.assert_allclose(to_numpy(y), np.swapaxes(xa, 1, 2) @ wa.T + ba, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("enabled", [True, False], ids=["onednn", "copy+gemm"])
@pytest.mark.parametrize("transposed_weight", [False, True])
def test_large_float32_linear_adds_the_bias_in_the_product(enabled, transposed_weight):
    """A float32 linear of at least 2^22 multiply-adds runs as one oneDNN matmul with the bias
    added after the sum over k (where oneDNN is installed and on); else the bias is copied into
    each output row and the GEMM adds to it. Both against float64, with a bias that is a strided
    view (it is made contiguous first) and a weight read in place either way."""
    from singa_tensor.backend import onednn

    from . import helpers

    r = np.random.default_rng(9)
    xa = r.standard_normal((80, 256)).astype(np.float32)
    wa = r.standard_normal((300, 256)).astype(np.float32)
    ba = r.standard_normal(600).astype(np.float32)
    w = st.tensor(np.ascontiguousarray(wa.T)).t() if transposed_weight else st.tensor(wa)
    b = st.tensor(ba)[::2]
    with st.backends.mkldnn.flags(enabled=enabled):
        before = onednn.matmul_calls["run"]
        y = to_numpy(F.linear(st.tensor(xa), w, b))
        ran = onednn.matmul_calls["run"] - before
    want = xa.astype(np.float64) @ wa.T.astype(np.float64) + ba[::2]
    bound = 2 * 257 * np.finfo(np.float32).eps * (np.abs(xa) @ np.abs(wa).T + np.abs(ba[::2]))
    assert (np.abs(y - want) <= bound).all()
    assert ran == (1 if enabled and onednn.is_available() and helpers.DEVICE == "cpu" else 0)


def test_fused_linear_only_grads_that_are_needed():
    r = np.random.default_rng(4)
    x = st.tensor(r.standard_normal((3, 4)))  # no grad wanted for the input
    w = st.tensor(r.standard_normal((2, 4)), requires_grad=True)
    b = st.tensor(r.standard_normal(2))
    F.linear(x, w, b).sum().backward()
    np.testing.assert_allclose(to_numpy(w.grad), np.tile(to_numpy(x).sum(0), (2, 1)),
                               rtol=1e-12)
    assert x.grad is None and b.grad is None


def test_fused_linear_double_backward_and_gradcheck():
    r = np.random.default_rng(5)
    x = st.tensor(r.standard_normal((2, 3, 4)), requires_grad=True)
    w = st.tensor(r.standard_normal((5, 4)), requires_grad=True)
    b = st.tensor(r.standard_normal(5), requires_grad=True)
    assert st.autograd.gradcheck(F.linear, (x, w, b))
    assert st.autograd.gradgradcheck(F.linear, (x, w, b))
    # d/dw of sum(d(sum(y^2))/dx) through create_graph, against the closed form:
    # dL/dx = 2 y w, so sum(dL/dx) = 2 sum_{m,n} y_mn (sum_k w_nk), whose w-gradient is
    # 2 (x^T-ish terms): compare with the composed graph instead of deriving by hand
    (gx,) = st.autograd.grad((F.linear(x, w, b) ** 2).sum(), [x], create_graph=True)
    gx.sum().backward()
    x2, w2, b2 = (st.tensor(to_numpy(t.detach()), requires_grad=True) for t in (x, w, b))
    (gx2,) = st.autograd.grad((_composed(x2, w2, b2) ** 2).sum(), [x2], create_graph=True)
    gx2.sum().backward()
    np.testing.assert_allclose(to_numpy(w.grad), to_numpy(w2.grad), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(to_numpy(b.grad), to_numpy(b2.grad), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", ["empty_batch", "zero_in_features", "mixed_float", "int"])
def test_cases_left_to_the_composition(case):
    if case == "empty_batch":
        x, w = st.zeros(0, 4, requires_grad=True), st.ones(3, 4, requires_grad=True)
    elif case == "zero_in_features":
        x, w = st.zeros(2, 0, requires_grad=True), st.ones(3, 0, requires_grad=True)
    elif case == "mixed_float":  # float16 input, float32 weight: promoted by the matmul
        x = st.ones(2, 4, dtype=st.float16, requires_grad=True)
        w = st.ones(3, 4, dtype=st.float32, requires_grad=True)
    else:
        x, w = st.ones(2, 4, dtype=st.int64), st.ones(3, 4, dtype=st.int64)
    y = F.linear(x, w)
    if y.grad_fn is not None:
        assert y.grad_fn.name != "_linear_fused"
    want = np.ones((x.shape[0], 3)) * x.shape[1]
    np.testing.assert_allclose(to_numpy(y).astype(np.float64), want)


def test_fused_linear_in_a_layer_and_graph_mode_agree_with_eager():
    st.manual_seed(0)
    layer = st.nn.Linear(4, 3)
    x = st.randn(5, 2, 4)
    opt = st.optim.SGD(layer.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        loss = (layer(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    eager = st.nn.Linear(4, 3)
    eager.load_state_dict(layer.state_dict())
    opt_e = st.optim.SGD(eager.parameters(), lr=0.1)
    compiled = st.compile(step)
    for _ in range(4):
        compiled()
        opt_e.zero_grad()
        (eager(x) ** 2).mean().backward()
        opt_e.step()
    for a, b in zip(layer.parameters(), eager.parameters()):
        np.testing.assert_allclose(to_numpy(a.detach()), to_numpy(b.detach()), rtol=1e-6,
                                   atol=1e-7)


@pytest.mark.parametrize("shape", [(2, 3), (2, 5, 3)])
def test_onnx_export_of_linear_round_trips(shape, tmp_path):
    st.manual_seed(1)
    layer = st.nn.Linear(3, 4)
    x = st.randn(*shape)
    path = tmp_path / "linear.onnx"
    st.onnx.export(layer, (x,), str(path))
    model = st.onnx.load(str(path))
    got = model(x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(to_numpy(got), to_numpy(layer(x).detach()), rtol=1e-5,
                               atol=1e-6)


def test_bad_linear_input_still_names_linear():
    with pytest.raises(ValueError, match="linear: input of shape"):
        F.linear(st.ones(2, 3), st.ones(4, 5))
    with pytest.raises(ValueError, match="linear: bias must have shape"):
        F.linear(st.ones(2, 3), st.ones(4, 3), st.ones(3))
    with pytest.raises(TypeError, match="linear: weight must be a Tensor"):
        F.linear(st.ones(2, 3), np.ones((4, 3)))
