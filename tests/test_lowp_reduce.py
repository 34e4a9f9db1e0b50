"""float16 and bfloat16 reductions, norms, losses, attention, recurrent layers and optimizer
steps: each returns the input's 16-bit dtype, computed in float32 and rounded once. Every op is
checked against the same op in float32 on the same (already rounded) inputs, the float32
result rounded to the 16-bit format; tolerances are in ulps of the 16-bit format, a couple of
them where the float32 op accumulates in another order than the 16-bit kernel."""

import math

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim
from singa_tensor.ops import fused_updates as fu
from singa_tensor.ops._registry import kernel, ptr
from singa_tensor.ops.attention_fused import scaled_dot_product_attention_fused
from singa_tensor.ops.norm import BatchNormTrain
from singa_tensor.ops.rnn import recurrent_sequence

from .helpers import DEVICE, to_numpy

LOW = [st.float16, st.bfloat16]
IDS = ["float16", "bfloat16"]
R = np.random.default_rng(2101)

# the float32 reference may sum in another order than the 16-bit kernel: each ordering is
# within a few float32 ulps, far below a 16-bit ulp, so one rounding (1/2 ulp) plus the chance
# of landing on the other side of a rounding boundary (1/2 ulp) bounds the difference
ULPS = 1.0


def _mantissa_bits(dtype) -> int:
    return 11 if dtype is st.float16 else 8


def _ulp(v: np.ndarray, dtype) -> np.ndarray:
    """The spacing of dtype's values at |v| (float64), subnormals included."""
    p = _mantissa_bits(dtype)
    emin = -14 if dtype is st.float16 else -126  # smallest normal exponent
    a = np.abs(np.asarray(v, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, emin)
    return np.exp2(e - (p - 1))


def low(a, dtype, requires_grad=False) -> st.Tensor:
    """a (float values) rounded to dtype on the device under test."""
    t = st.tensor(np.asarray(a, dtype=np.float32), device=DEVICE).to(dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def widened(t: st.Tensor, requires_grad=False) -> st.Tensor:
    """t's (exact) float32 values as a new leaf."""
    w = t.detach().float()
    if requires_grad:
        w.requires_grad = True
    return w


def assert_rounded_once(got: st.Tensor, want: st.Tensor, dtype, ulps: float = ULPS,
                        msg: str = "") -> None:
    """got (dtype) within ulps of dtype of the float32 result want."""
    assert got.dtype is dtype, f"{msg}: dtype {got.dtype.name}, expected {dtype.name}"
    g = to_numpy(got.float()).astype(np.float64)
    w = to_numpy(want.float()).astype(np.float64)
    assert g.shape == w.shape, f"{msg}: shape {g.shape} != {w.shape}"
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(g - w) / _ulp(w, dtype))
    err[np.isnan(err)] = np.inf
    assert err.size == 0 or err.max() <= ulps, (
        f"{msg}: {int((err > ulps).sum())} of {err.size} elements beyond {ulps} ulp, worst "
        f"{err.max():.3g} ulp: got {g.reshape(-1)[np.argmax(err)]}, want "
        f"{w.reshape(-1)[np.argmax(err)]}")


def assert_close_to_scale(got: st.Tensor, want: st.Tensor, dtype, ulps: float,
                          msg: str = "") -> None:
    """got (dtype) within ulps of dtype at the largest |want|: for results that cancel (a
    gradient computed from an output saved in the 16-bit dtype, as PyTorch saves it), whose
    error scales with the terms, not with each result."""
    assert got.dtype is dtype, f"{msg}: dtype {got.dtype.name}, expected {dtype.name}"
    g = to_numpy(got.float()).astype(np.float64)
    w = to_numpy(want.float()).astype(np.float64)
    scale = _ulp(np.abs(w).max(), dtype)
    err = np.abs(g - w) / scale
    assert err.max() <= ulps, f"{msg}: {err.max():.3g} ulp of the largest element, over {ulps}"


def _normal(*shape, scale=1.0):
    return R.standard_normal(shape) * scale


# ---- reductions ---------------------------------------------------------------------------------

# (shape, dim): one row, rows, a middle axis (tiles), several dims, a long row split across
# threads and blocks, many small lines grouped into chunks
SHAPES = [((7,), None), ((5, 9), 1), ((4, 6, 3), 1), ((3, 4, 5), (0, 2)), ((3, 5), 0),
          ((70000,), None), ((300, 70), 1), ((2, 33000), 1), ((1000, 5, 3), 1),
          ((20000, 5), 0), ((3, 9000, 4), 1)]


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("shape,dim", SHAPES)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "logsumexp", "var", "std"])
def test_reductions_round_the_float32_result_once(op, shape, dim, dtype):
    x = low(_normal(*shape), dtype)
    got = getattr(st, op)(x, dim)
    want = getattr(st, op)(widened(x), dim)
    # sum and mean of signed values cancel: the rounding of the result is relative to it,
    # the accumulation error to the magnitudes summed, which is what 2 ulp cover here
    assert_rounded_once(got, want, dtype, 2.0 if op in ("sum", "mean") else ULPS,
                        f"{op}{shape} dim={dim}")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_sum_of_many_values_is_not_a_rounded_running_sum(dtype):
    # 4096 values near 1 (1 + 2^-9 in float16, 1 in bfloat16): a running sum kept in the
    # 16-bit format would stall, at 2048 in float16 and at 256 in bfloat16
    x = st.full((4096,), 1.0 + 2.0 ** -9, dtype=dtype, device=DEVICE)
    assert x.sum().dtype is dtype and x.mean().dtype is dtype
    assert_rounded_once(x.sum(), widened(x).sum(), dtype)
    assert_rounded_once(x.mean(), widened(x).mean(), dtype)


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("shape,dim", [((6,), 0), ((4, 5), 1), ((3, 4, 5), 1), ((20, 30), 0)])
def test_prod_and_scans(shape, dim, dtype):
    x = low(R.uniform(0.8, 1.25, shape) * R.choice([-1.0, 1.0], shape), dtype)
    xf = widened(x)
    assert_rounded_once(x.prod(dim), xf.prod(dim), dtype, msg="prod")
    assert_rounded_once(x.cumsum(dim), xf.cumsum(dim), dtype, 2.0, msg="cumsum")
    assert_rounded_once(x.cumprod(dim), xf.cumprod(dim), dtype, msg="cumprod")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("shape,dim", [((9,), 0), ((5, 8), 1), ((4, 6, 3), 1), ((2, 40000), 1),
                                       ((400, 50), 0)])
def test_arg_reductions_max_min_sort_topk_are_exact(shape, dim, dtype):
    # 16-bit values widen to float32 exactly, so the order and the extremes are the same
    x = low(_normal(*shape), dtype)
    xf = widened(x)
    for op in ("argmax", "argmin"):
        got = getattr(st, op)(x, dim)
        assert got.dtype is st.int64
        np.testing.assert_array_equal(to_numpy(got), to_numpy(getattr(st, op)(xf, dim)))
    for op in ("max", "min"):
        v, i = getattr(st, op)(x, dim)
        vf, i_f = getattr(st, op)(xf, dim)
        assert v.dtype is dtype
        np.testing.assert_array_equal(to_numpy(v.float()), to_numpy(vf))
        np.testing.assert_array_equal(to_numpy(i), to_numpy(i_f))
    for descending in (False, True):
        v, i = st.sort(x, dim, descending=descending)
        vf, i_f = st.sort(xf, dim, descending=descending)
        assert v.dtype is dtype and i.dtype is st.int64
        np.testing.assert_array_equal(to_numpy(v.float()), to_numpy(vf))
        np.testing.assert_array_equal(to_numpy(i), to_numpy(i_f))
    k = min(3, shape[dim])
    v, i = st.topk(x, k, dim)
    vf, i_f = st.topk(xf, k, dim)
    assert v.dtype is dtype
    np.testing.assert_array_equal(to_numpy(v.float()), to_numpy(vf))
    np.testing.assert_array_equal(to_numpy(i), to_numpy(i_f))
    np.testing.assert_array_equal(to_numpy(st.argsort(x, dim)), to_numpy(st.argsort(xf, dim)))


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_nan_and_infinities_pass_through(dtype):
    x = low([[1.0, math.nan, 3.0], [-math.inf, 2.0, 0.5], [math.inf, 1.0, -1.0]], dtype)
    assert math.isnan(x.sum(1)[0].item()) and math.isnan(x.amax(1)[0].item())
    assert x.argmax(1).tolist() == [1, 1, 0]
    assert x.amin(1)[1].item() == -math.inf and x.amax(1)[2].item() == math.inf
    assert x.logsumexp(1)[2].item() == math.inf
    assert math.isnan(x.softmax(1)[0, 0].item())


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("shape,dim", [((5, 7), 1), ((4, 6, 3), 1), ((2, 70000), 1),
                                       ((3, 4), 0)])
def test_softmax_and_log_softmax(shape, dim, dtype):
    x = low(_normal(*shape, scale=3.0), dtype)
    xf = widened(x)
    assert_rounded_once(x.softmax(dim), xf.softmax(dim), dtype, msg="softmax")
    assert_rounded_once(F.log_softmax(x, dim), F.log_softmax(xf, dim), dtype, msg="log_softmax")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("p", [2, 1, math.inf, 3])
def test_norm(p, dtype):
    x = low(_normal(6, 50), dtype)
    assert_rounded_once(st.norm(x, p, 1), st.norm(widened(x), p, 1), dtype, msg=f"norm p={p}")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("op", ["sum", "mean", "softmax", "log_softmax", "logsumexp", "var",
                                "amax", "cumsum", "prod", "max", "sort"])
def test_gradients_come_back_in_the_low_dtype(op, dtype):
    x = low(R.uniform(0.5, 1.5, (4, 6)), dtype, requires_grad=True)
    xf = widened(x, requires_grad=True)
    seed = low(_normal(4, 6), dtype)

    def run(t):
        if op in ("sum", "mean", "logsumexp", "var", "amax", "prod"):
            return getattr(st, op)(t, 1, keepdim=True).expand(4, 6)
        if op == "log_softmax":
            return F.log_softmax(t, 1)
        if op in ("max", "sort"):
            return (getattr(st, op)(t, 1)[0]) if op == "sort" else \
                st.max(t, 1, keepdim=True)[0].expand(4, 6)
        return getattr(t, op)(1)

    y = run(x)
    assert y.dtype is dtype
    y.backward(seed)
    run(xf).backward(seed.float())
    assert x.grad.dtype is dtype
    # the backward reads the forward's 16-bit output and input (as PyTorch does) and rounds
    # once at the end
    assert_close_to_scale(x.grad, xf.grad, dtype, 4.0, msg=f"{op} grad")


# ---- norms --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_layer_batch_group_norm(dtype):
    x = low(_normal(4, 6, 5, scale=2.0) + 1.0, dtype, requires_grad=True)
    xf = widened(x, requires_grad=True)
    w, b = low(_normal(6), dtype), low(_normal(6), dtype)
    seed = low(_normal(4, 6, 5), dtype)
    cases = [
        ("layer_norm", lambda t, w, b: F.layer_norm(t, (5,))),
        ("batch_norm", lambda t, w, b: F.batch_norm(t, None, None, w, b, training=True)),
        ("group_norm", lambda t, w, b: F.group_norm(t, 3, w, b)),
    ]
    for name, fn in cases:
        x.grad = xf.grad = None
        y = fn(x, w, b)
        yf = fn(xf, w.float(), b.float())
        assert_rounded_once(y, yf, dtype, msg=name)
        y.backward(seed)
        yf.backward(seed.float())
        assert x.grad.dtype is dtype, name
        # statistics in float32 on both sides; the float32 gradient rounded once
        assert_rounded_once(x.grad, xf.grad, dtype, 2.0, msg=f"{name} grad")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("name,shape", [("layer_norm", (1500, 120)),
                                        ("batch_norm", (40, 6, 30, 30)),
                                        ("group_norm", (30, 6, 40, 30))])
def test_norms_over_several_chunks_with_affine_gradients(name, shape, dtype):
    # more elements than one float32 chunk of the kernels: statistics and the weight and bias
    # gradients sum across chunks
    c = shape[-1] if name == "layer_norm" else shape[1]
    x = low(_normal(*shape) * 2.0 + 0.5, dtype, requires_grad=True)
    w, b = low(_normal(c), dtype, requires_grad=True), low(_normal(c), dtype, requires_grad=True)
    xf, wf, bf = (widened(t, requires_grad=True) for t in (x, w, b))

    def run(t, w, b):
        if name == "layer_norm":
            return F.layer_norm(t, (c,), w, b)
        if name == "batch_norm":
            return F.batch_norm(t, None, None, w, b, training=True)
        return F.group_norm(t, 2, w, b)

    y, yf = run(x, w, b), run(xf, wf, bf)
    assert_rounded_once(y, yf, dtype, msg=name)
    seed = low(_normal(*shape), dtype)
    y.backward(seed)
    yf.backward(seed.float())
    for t, tf, what in ((x, xf, "input"), (w, wf, "weight"), (b, bf, "bias")):
        assert t.grad.dtype is dtype, what
        # sums over the batch of products rounded once in float32, then once to 16 bits;
        # the input gradient cancels (mean subtracted), so relative to the largest element
        assert_close_to_scale(t.grad, tf.grad, dtype, 2.0, msg=f"{name} {what} grad")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_batch_norm_statistics_of_16_bit_inputs_are_float32(dtype):
    x = low(_normal(5, 3, 4) * 3.0 + 100.0, dtype)
    stats: list = []
    y = BatchNormTrain.fn(x, None, None, 1e-5, stats)
    assert y.dtype is dtype and [s.dtype for s in stats] == [st.float32, st.float32]
    xf = to_numpy(widened(x)).astype(np.float64)
    np.testing.assert_allclose(to_numpy(stats[0]), xf.mean((0, 2)), rtol=1e-6)
    np.testing.assert_allclose(to_numpy(stats[1]), xf.var((0, 2)), rtol=1e-4)


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_batch_norm_running_statistics_and_eval(dtype):
    x = low(_normal(8, 3, 4) + 2.0, dtype)
    rm, rv = st.zeros(3, device=DEVICE), st.ones(3, device=DEVICE)
    y = F.batch_norm(x, rm, rv, training=True, momentum=0.5)
    assert y.dtype is dtype and rm.dtype is st.float32
    xf = widened(x)
    rmf, rvf = st.zeros(3, device=DEVICE), st.ones(3, device=DEVICE)
    F.batch_norm(xf, rmf, rvf, training=True, momentum=0.5)
    np.testing.assert_allclose(to_numpy(rm), to_numpy(rmf), rtol=1e-6)
    np.testing.assert_allclose(to_numpy(rv), to_numpy(rvf), rtol=1e-6)
    assert_rounded_once(F.batch_norm(x, rm, rv), F.batch_norm(xf, rm, rv), dtype, msg="eval")


# ---- losses -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.1}, {"reduction": "none"},
                                    {"reduction": "sum", "ignore_index": 2},
                                    {"weight": True}])
def test_cross_entropy_through_the_fused_kernel(kwargs, dtype):
    x = low(_normal(9, 5, scale=2.0), dtype, requires_grad=True)
    xf = widened(x, requires_grad=True)
    t = st.tensor(R.integers(0, 5, 9), device=DEVICE)
    kw = dict(kwargs)
    wf = None
    if kw.pop("weight", False):
        w = low(R.uniform(0.5, 2.0, 5), dtype)
        kw["weight"], wf = w, w.float()
    loss = F.cross_entropy(x, t, **kw)
    want = F.cross_entropy(xf, t, **{**kw, **({"weight": wf} if wf is not None else {})})
    assert_rounded_once(loss, want, dtype, msg="cross_entropy")
    seed = low(np.ones(loss.shape), dtype)
    loss.backward(seed)
    want.backward(seed.float())
    assert x.grad.dtype is dtype
    assert_rounded_once(x.grad, xf.grad, dtype, msg="cross_entropy grad")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_cross_entropy_second_order_goes_through_float32(dtype):
    x = low(_normal(3, 4), dtype, requires_grad=True)
    t = st.tensor([0, 3, 1], device=DEVICE)
    (g,) = st.autograd.grad(F.cross_entropy(x, t), [x], create_graph=True)
    assert g.dtype is dtype
    xf = widened(x, requires_grad=True)
    (gf,) = st.autograd.grad(F.cross_entropy(xf, t), [xf], create_graph=True)
    assert_rounded_once(g, gf, dtype, msg="grad with create_graph")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_pointwise_and_probability_losses_return_the_input_dtype(dtype):
    a = low(R.uniform(0.05, 0.95, (6, 4)), dtype)
    b = low(R.uniform(0.05, 0.95, (6, 4)), dtype)
    logp = F.log_softmax(low(_normal(6, 4), dtype), 1)
    tgt = st.tensor(R.integers(0, 4, 6), device=DEVICE)
    cases = {
        "mse_loss": lambda p, q, lp: F.mse_loss(p, q),
        "l1_loss": lambda p, q, lp: F.l1_loss(p, q, reduction="sum"),
        "smooth_l1_loss": lambda p, q, lp: F.smooth_l1_loss(p, q, beta=0.1),
        "binary_cross_entropy": lambda p, q, lp: F.binary_cross_entropy(p, q),
        "bce_with_logits": lambda p, q, lp: F.binary_cross_entropy_with_logits(p, q),
        "nll_loss": lambda p, q, lp: F.nll_loss(lp, tgt),
        "kl_div": lambda p, q, lp: F.kl_div(lp, q, reduction="batchmean"),
        "cross_entropy_probs": lambda p, q, lp: F.cross_entropy(p, q),
    }
    for name, fn in cases.items():
        got = fn(a, b, logp)
        want = fn(widened(a), widened(b), widened(logp))
        # the terms are rounded to the 16-bit dtype where the elementwise ops round them, so
        # allow a few ulps for those roundings on top of the final one
        assert_rounded_once(got, want, dtype, 4.0, msg=name)


# ---- attention and recurrent layers -------------------------------------------------------------


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("n", [3, 20])  # composed (few scores) and fused on the CPU
def test_scaled_dot_product_attention(n, dtype):
    q, k, v = (low(_normal(2, n, 8), dtype, requires_grad=True) for _ in range(3))
    qf, kf, vf = (widened(t, requires_grad=True) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    want = F.scaled_dot_product_attention(qf, kf, vf, is_causal=True)
    # the composition (short sequences) rounds the scores and weights where its ops round
    # them, so an output that cancels to near zero is off by more ulps of itself: bound the
    # error by 8 ulps of the 16-bit dtype at the output's scale
    assert out.dtype is dtype
    scale = float(np.abs(to_numpy(want)).max())
    err = float(np.abs(to_numpy(out.float()) - to_numpy(want.detach())).max())
    assert err <= 8 * float(st.finfo(dtype).eps) * scale, ("sdpa", err, scale)
    seed = low(_normal(2, n, 8), dtype)
    out.backward(seed)
    want.backward(seed.float())
    for t, tf in ((q, qf), (k, kf), (v, vf)):
        assert t.grad.dtype is dtype
        np.testing.assert_allclose(to_numpy(t.grad.float()), to_numpy(tf.grad), rtol=0.1,
                                   atol=0.05 * float(np.abs(to_numpy(tf.grad)).max()))


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers(mode, dtype):
    st.manual_seed(3)
    m32 = getattr(nn, mode)(5, 4, batch_first=True).to(DEVICE)
    m16 = getattr(nn, mode)(5, 4, batch_first=True).to(DEVICE)
    m16.load_state_dict(m32.state_dict())
    m16 = m16.to(dtype)
    # both on the rounded weights
    m32.load_state_dict({k: v.float() for k, v in m16.state_dict().items()})
    x = low(_normal(2, 6, 5), dtype, requires_grad=True)
    out, _ = m16(x)
    xf = widened(x, requires_grad=True)
    out32, _ = m32(xf)
    assert out.dtype is dtype
    np.testing.assert_allclose(to_numpy(out.float()), to_numpy(out32), atol=0.03)
    out.sum().backward()
    assert x.grad.dtype is dtype
    assert all(p.grad.dtype is dtype for p in m16.parameters())


# ---- kernels of pooling and convolution ---------------------------------------------------------


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_im2col_col2im_and_maxpool_index_kernels(dtype):
    n, c, h, w, k, s, p = 2, 3, 6, 7, 3, 2, 1
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    geo = (k, k, s, s, p, p, 1, 1, oh, ow)
    x = low(_normal(n, c, h, w), dtype)
    xf = widened(x)

    def run(t, op, out_shape, out_dtype, *args):
        out = st.empty(*out_shape, dtype=out_dtype, device=DEVICE)
        kernel(t, op)(ptr(t), ptr(out), *args)
        return out

    cols = run(x, "im2col", (n, c * k * k, oh * ow), dtype, n, c, h, w, *geo)
    cols_f = run(xf, "im2col", (n, c * k * k, oh * ow), st.float32, n, c, h, w, *geo)
    np.testing.assert_array_equal(to_numpy(cols.float()), to_numpy(cols_f))
    back = run(cols, "col2im", (n, c, h, w), dtype, n, c, h, w, *geo)
    back_f = run(widened(cols), "col2im", (n, c, h, w), st.float32, n, c, h, w, *geo)
    assert_rounded_once(back, back_f, dtype, msg="col2im")
    idx = run(x, "maxpool2d_index", (n * c, oh, ow), st.int64, n * c, h, w, *geo)
    idx_f = run(xf, "maxpool2d_index", (n * c, oh, ow), st.int64, n * c, h, w, *geo)
    np.testing.assert_array_equal(to_numpy(idx), to_numpy(idx_f))


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_window_pools_return_the_input_dtype(dtype):
    x = low(_normal(2, 3, 4, 5, 6), dtype, requires_grad=True)
    xf = widened(x, requires_grad=True)
    cases = {
        "max_pool3d": lambda t: F.max_pool3d(t, 2, stride=1),
        "avg_pool3d": lambda t: F.avg_pool3d(t, 3, stride=2, padding=1),
        "adaptive_max_pool2d": lambda t: F.adaptive_max_pool2d(t.reshape(2, 12, 5, 6), (2, 4)),
    }
    for name, fn in cases.items():
        x.grad = xf.grad = None
        y, yf = fn(x), fn(xf)
        # the window sums accumulate in float32: one rounding of the float32 pool
        assert_rounded_once(y, yf, dtype, msg=name)
        y.sum().backward()
        yf.sum().backward()
        assert x.grad.dtype is dtype, name
        assert_rounded_once(x.grad, xf.grad, dtype, msg=f"{name} grad")


# ---- optimizer steps ----------------------------------------------------------------------------


def _fused_step(kind, p, g, states, **kw):
    if kind == "sgd":
        return fu.sgd_step_(p, g, states[0], lr=0.1, momentum=0.9, dampening=0.1,
                            weight_decay=0.01, nesterov=False, maximize=False, first=kw["first"])
    if kind == "adam":
        return fu.adam_step_(p, g, states[0], states[1], states[2], lr=0.01, beta1=0.9,
                             beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=True,
                             maximize=False, step=kw["step"])
    if kind == "rmsprop":
        return fu.rmsprop_step_(p, g, states[0], states[1], states[2], lr=0.01, alpha=0.99,
                                eps=1e-8, weight_decay=0.0, momentum=0.9, maximize=False)
    return fu.adagrad_step_(p, g, states[0], clr=0.1, eps=1e-10, weight_decay=0.0,
                            maximize=False)


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("kind", ["sgd", "adam", "rmsprop", "adagrad"])
def test_fused_update_is_the_float32_update_rounded_once(kind, dtype):
    n = 3000
    p = low(_normal(n), dtype)
    nstate = {"sgd": 1, "adam": 3, "rmsprop": 3, "adagrad": 1}[kind]
    states = [low(R.uniform(0.0, 0.1, n), dtype) for _ in range(nstate)]
    for step in (1, 2):
        g = low(_normal(n), dtype)
        pf, gf, sf = widened(p), widened(g), [widened(s) for s in states]
        assert _fused_step(kind, p, g, states, first=step == 1, step=step)
        assert _fused_step(kind, pf, gf, sf, first=step == 1, step=step)
        for got, want, name in zip([p] + states, [pf] + sf, ["param"] + ["state"] * nstate):
            # the same float32 arithmetic on the same values, then one rounding each
            assert_rounded_once(got, want, dtype, 0.5, msg=f"{kind} {name} step {step}")


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_optimizers_step_bfloat16_parameters_in_their_dtype(dtype):
    for make in (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                 lambda ps: optim.Adam(ps, lr=0.01)):
        w = low(_normal(5), dtype, requires_grad=True)
        opt = make([w])
        (w.float() ** 2).sum().backward()
        assert w.grad.dtype is dtype
        opt.step()
        assert w.dtype is dtype
        assert all(s.dtype is dtype for s in opt.state[w].values() if isinstance(s, st.Tensor)
                   and s.numel() == 5)


def test_fused_update_rejects_a_state_of_another_dtype():
    p = low(_normal(4), st.bfloat16)
    with pytest.raises(TypeError, match="adam_step_: state 0 has dtype float32 but the "
                                        "parameter has dtype bfloat16"):
        fu.adam_step_(p, low(_normal(4), st.bfloat16), st.zeros(4, device=DEVICE),
                      low(np.zeros(4), st.bfloat16), None, lr=0.1, beta1=0.9, beta2=0.99,
                      eps=1e-8, weight_decay=0.0, decoupled=False, maximize=False, step=1)


def test_mixed_16_bit_operands_are_rejected_with_the_op_named():
    h = low(np.zeros((2, 3)), st.bfloat16)
    with pytest.raises(TypeError, match="recurrent_sequence: gates_x has dtype float16 but h0 "
                                        "has bfloat16"):
        recurrent_sequence("GRU", low(np.zeros((4, 9)), st.float16),
                           low(np.zeros((9, 3)), st.bfloat16), None, h)
    q = low(np.zeros((1, 20, 4)), st.bfloat16)
    with pytest.raises(TypeError, match="scaled_dot_product_attention: key has dtype float16"):
        scaled_dot_product_attention_fused(q, q.to(st.float16), q)
