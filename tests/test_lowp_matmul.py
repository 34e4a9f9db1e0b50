"""Matrix products and convolutions that compute in bfloat16/float16: each result is the float32
accumulation of the 16-bit inputs, rounded once to the 16-bit dtype, and results and gradients
keep that dtype.

The bound. For C = round(sum_k a_k b_k) accumulated in float32 (u = 2^-24), with the inputs
exactly representable (they are 16-bit values), the float32 sum s obeys |s - exact| <=
k u sum_k |a_k||b_k| (the classic gamma_k bound; BLAS, oneDNN and cuBLAS all sum in float32
in some order), and rounding s to the 16-bit dtype adds at most half a unit in the last place
of the result's binade, a whole one where s crosses into the next binade. So each test checks

    |got - exact| <= ulps * ulp16(exact) + k * 2^-24 * sum_k |a_k||b_k|

with ulps = 1 for one rounding; where a composed op rounds an intermediate result first (the
product, then the added input), one ulp of that intermediate is added. exact is computed in
float64 from the same 16-bit inputs. A product accumulated in
16-bit arithmetic misses this bound by many ulps at k in the hundreds (the inputs are chosen
with a positive mean so that errors add up), and so does a product whose inputs were rounded
again on the way.

The same checks run through oneDNN (where this CPU computes the dtype natively) and through
the library's own kernel (`st.backends.mkldnn.enabled = False`: the operands widened for
sgemm), on the CUDA stand-in through the cuBLAS call, and on the emulated CUDA library through
its tiled kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor.backend import cpu, onednn
from singa_tensor.backend import cublas_gemm as cg

from . import helpers

LOW = {"bfloat16": st.bfloat16, "float16": st.float16}
_PRECISION = {"bfloat16": (8, -125), "float16": (11, -13)}  # mantissa bits, frexp exponent min


def ulp16(x: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of the 16-bit dtype's numbers in the binade of each |x| (its subnormal
    spacing below the normal range)."""
    bits, emin = _PRECISION[dtype]
    _, e = np.frexp(np.abs(np.asarray(x, np.float64)))
    return np.ldexp(1.0, np.maximum(e, emin) - bits)


def low_tensor(a: np.ndarray, dtype: str, requires_grad: bool = False) -> st.Tensor:
    """a rounded to the 16-bit dtype, on the device under test."""
    t = helpers.as_tensor(np.asarray(a, np.float32)).to(LOW[dtype])
    return t.requires_grad_() if requires_grad else t


def exact(t: st.Tensor) -> np.ndarray:
    """The 16-bit tensor's values in float64 (exact)."""
    return helpers.to_numpy(t.detach().float()).astype(np.float64)


def assert_rounded_product(got, ref, mag, k, dtype, inter=None, inter_ulps=1, msg=""):
    """got within the bound of the module docstring around ref (float64), mag = sum |a||b|.
    A composed op that rounds an intermediate result first (a product before an addition)
    adds the ulps of that intermediate, `inter` (its exact value, or a bound on its size)."""
    assert got.dtype is LOW[dtype], f"{msg}: dtype {got.dtype}, want {dtype}"
    g = exact(got)
    assert g.shape == ref.shape, f"{msg}: shape {g.shape} != {ref.shape}"
    tol = ulp16(ref, dtype) + k * 2.0 ** -24 * mag
    if inter is not None:
        tol = tol + inter_ulps * ulp16(inter, dtype)
    err = np.abs(g - ref)
    bad = err > tol
    assert not bad.any(), (
        f"{msg}: {int(bad.sum())} of {err.size} elements outside the bound; worst "
        f"{(err / tol).max():.3g} x the bound (got {g[bad][:3]}, want {ref[bad][:3]})")


def operands(shape_a, shape_b, seed=0):
    rng = np.random.default_rng(seed)
    # a positive mean makes every row of a product a long sum of same-signed terms, where a
    # 16-bit accumulation would lose many ulps
    return (rng.uniform(-0.5, 1.5, shape_a), rng.uniform(-0.5, 1.5, shape_b))


@pytest.fixture(params=["onednn", "own"])
def path(request):
    """Products through oneDNN where it has native code here (the CPU), or the library's own
    kernel (oneDNN off)."""
    enabled = request.param == "onednn"
    with st.backends.mkldnn.flags(enabled=enabled):
        yield request.param


# (a shape, b shape, how each operand is laid out): views reach the kernel as they lie
LAYOUTS = [
    ((40, 300), (300, 24), None),
    ((300, 40), (300, 24), "a.T"),
    ((40, 300), (24, 300), "b.T"),
    ((300, 40), (24, 300), "a.T b.T"),
    ((40, 600), (300, 24), "a[:,::2]"),       # no BLAS layout: copied
    ((50, 320), (300, 24), "a[5:45,10:310]"),  # rows with a leading dimension > k
    ((3, 17, 260), (3, 260, 9), None),         # batched
    ((3, 260, 17), (3, 9, 260), "a.mT b.mT"),  # batched, both transposed
    ((4, 17, 260), (260, 9), None),            # one shared right matrix (folded into rows)
    ((17, 260), (4, 260, 9), None),            # a broadcast left matrix (batch stride 0)
    ((2, 1, 17, 130), (3, 130, 9), None),      # broadcast batch dims
    ((5, 260), (260,), None),                  # matrix-vector
    ((260,), (260,), None),                    # dot
    ((260,), (3, 260, 9), None),               # vector @ batch
]


def _view(t, how):
    if how is None:
        return t
    if how == "a[:,::2]":
        return t[:, ::2]
    if how == "a[5:45,10:310]":
        return t[5:45, 10:310]
    raise AssertionError(how)


def _layout(a, b, how):
    ha = hb = None
    for part in (how or "").split():
        if part.startswith("a"):
            ha = part
        else:
            hb = part
    a = a.T if ha == "a.T" else a.mT if ha == "a.mT" else _view(a, ha)
    b = b.T if hb == "b.T" else b.mT if hb == "b.mT" else _view(b, hb)
    return a, b


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("sa,sb,how", LAYOUTS, ids=[f"{a}@{b}:{h}" for a, b, h in LAYOUTS])
def test_matmul_rounds_the_float32_product_once(dtype, sa, sb, how, path):
    na, nb = operands(sa, sb, seed=len(sa) * 7 + len(sb))
    a, b = _layout(low_tensor(na, dtype), low_tensor(nb, dtype), how)
    onednn.clear_plans()  # so the plans this call makes, or refuses, are the only ones cached
    before = onednn.matmul_calls["run"]
    got = st.matmul(a, b)
    ea, eb = exact(a), exact(b)
    ref = np.matmul(ea, eb)
    mag = np.matmul(np.abs(ea), np.abs(eb))
    assert_rounded_product(got, ref, mag, ea.shape[-1], dtype, msg=f"{dtype} {how}")
    work = got.numel() * ea.shape[-1]
    if path == "own" or helpers.DEVICE != "cpu" or work < cpu.ONEDNN_MIN_WORK:
        # oneDNN off, or a product too small for it: the library's kernel ran
        assert onednn.matmul_calls["run"] == before
    elif _onednn_native(dtype):
        # every layout reaches oneDNN in place, unless oneDNN has only reference code for this
        # call's layout on this CPU (float16 rows with a leading dimension > k on AVX512-FP16):
        # then its plan is refused and the library's kernel ran
        refused = [key for key, plan in onednn._matmuls.items() if plan is None]
        assert onednn.matmul_calls["run"] > before or refused, (dtype, how)


def _onednn_native(dtype: str) -> bool:
    """Whether oneDNN computes this dtype's products natively on this CPU (AVX512-BF16, AMX;
    not AVX2, where the library's own kernel runs)."""
    return onednn.matmul_plan(dtype, 0, 0, 8, 8, 8, 8, 8, 8, 1, 0, 0, 0, False, 1) is not None


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mm_bmm_and_operator_keep_the_dtype(dtype, path):
    na, nb = operands((3, 20, 70), (3, 70, 6), seed=3)
    a, b = low_tensor(na, dtype), low_tensor(nb, dtype)
    ea, eb = exact(a), exact(b)
    mag = np.abs(ea) @ np.abs(eb)
    assert_rounded_product(st.bmm(a, b), ea @ eb, mag, 70, dtype, msg="bmm")
    assert_rounded_product(a @ b, ea @ eb, mag, 70, dtype, msg="@")
    assert_rounded_product(st.mm(a[1], b[2]), ea[1] @ eb[2], np.abs(ea[1]) @ np.abs(eb[2]), 70,
                           dtype, msg="mm")
    assert a[0].matmul(b[0]).dtype is LOW[dtype]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_empty_products_and_k_zero(dtype, path):
    z = st.matmul(low_tensor(np.ones((0, 3)), dtype), low_tensor(np.ones((3, 4)), dtype))
    assert z.shape == (0, 4) and z.dtype is LOW[dtype]
    k0 = st.matmul(low_tensor(np.ones((2, 0)), dtype), low_tensor(np.ones((0, 3)), dtype))
    assert k0.dtype is LOW[dtype] and exact(k0).tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_matmul_gradients_are_low_precision_products(dtype, path):
    na, nb = operands((2, 30, 90), (90, 12), seed=5)
    a, b = low_tensor(na, dtype, True), low_tensor(nb, dtype, True)
    g = low_tensor(operands((2, 30, 12), (1,), seed=6)[0], dtype)
    st.matmul(a, b).backward(g)
    assert a.grad.dtype is LOW[dtype] and b.grad.dtype is LOW[dtype]
    ea, eb, eg = exact(a), exact(b), exact(g)
    # da = g @ b^T (k = 12); db = sum over the batch of a^T @ g, one product over 60 rows
    assert_rounded_product(a.grad, eg @ eb.T, np.abs(eg) @ np.abs(eb.T), 12, dtype, msg="da")
    db = np.einsum("bmk,bmn->kn", ea, eg)
    mag = np.einsum("bmk,bmn->kn", np.abs(ea), np.abs(eg))
    assert_rounded_product(b.grad, db, mag, 60, dtype, msg="db")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(64, 200), (2, 40, 200), (200,)])
def test_linear_forward_and_backward_against_float64(dtype, shape, path):
    nx, nw = operands(shape, (16, 200), seed=len(shape))
    x, w = low_tensor(nx, dtype, True), low_tensor(nw, dtype, True)
    bias = low_tensor(np.linspace(-2, 3, 16), dtype, True)
    before = onednn.matmul_calls["run"]
    y = F.linear(x, w, bias)
    ex, ew, eb = exact(x), exact(w), exact(bias)
    # the bias is the product's starting value: k + 1 terms, one rounding
    assert_rounded_product(y, ex @ ew.T + eb, np.abs(ex) @ np.abs(ew.T) + np.abs(eb), 201, dtype,
                           msg="linear")
    g = low_tensor(operands(y.shape, (1,), seed=9)[0] - 0.5, dtype)
    y.backward(g)
    for t in (x, w, bias):
        assert t.grad.dtype is LOW[dtype] and t.grad.shape == t.shape
    eg = exact(g).reshape(-1, 16)
    x2 = ex.reshape(-1, 200)
    rows = eg.shape[0]
    assert_rounded_product(x.grad.reshape(-1, 200), eg @ ew, np.abs(eg) @ np.abs(ew), 16, dtype,
                           msg="dx")
    assert_rounded_product(w.grad, eg.T @ x2, np.abs(eg.T) @ np.abs(x2), rows, dtype, msg="dw")
    assert_rounded_product(bias.grad, eg.sum(0), np.abs(eg).sum(0), rows, dtype, msg="db")
    if (path == "onednn" and helpers.DEVICE == "cpu" and _onednn_native(dtype)
            and x.numel() * 16 >= cpu.ONEDNN_MIN_WORK):
        # the forward (bias as the starting value: oneDNN's sum post-op) and both gradients
        assert onednn.matmul_calls["run"] >= before + 3


def test_linear_16bit_gradients_track_float32_ones():
    # a gradcheck in the 16-bit dtype: the same layer in float32 gives gradients that the
    # bfloat16 ones match to a few bfloat16 ulps relative to the gradient's scale
    nx, nw = operands((32, 64), (8, 64), seed=11)
    x, w = low_tensor(nx, "bfloat16", True), low_tensor(nw, "bfloat16", True)
    x32, w32 = [t.detach().float().requires_grad_() for t in (x, w)]
    (F.linear(x, w) ** 2).sum().backward()
    (F.linear(x32, w32) ** 2).sum().backward()
    for lo, hi in ((x.grad, x32.grad), (w.grad, w32.grad)):
        h = helpers.to_numpy(hi)
        err = np.abs(exact(lo) - h).max() / np.abs(h).max()
        assert err < 8 * 2.0 ** -8, err


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_addmm_baddbmm_addbmm_keep_the_dtype(dtype, path):
    na, nb = operands((4, 10, 50), (4, 50, 7), seed=12)
    a, b = low_tensor(na, dtype), low_tensor(nb, dtype)
    inp = low_tensor(np.linspace(-1, 1, 7), dtype)
    ea, eb, ei = exact(a), exact(b), exact(inp)
    mag = np.abs(ea) @ np.abs(eb)
    # composed: the product is rounded, then the sum with input
    assert_rounded_product(st.addmm(inp, a[0], b[0]), ea[0] @ eb[0] + ei, mag[0] + np.abs(ei),
                           51, dtype, inter=ea[0] @ eb[0], msg="addmm")
    assert_rounded_product(st.baddbmm(inp, a, b), ea @ eb + ei, mag + np.abs(ei), 51, dtype,
                           inter=ea @ eb, msg="baddbmm")
    got = st.addbmm(inp, a, b, beta=0.5, alpha=2.0)
    assert got.dtype is LOW[dtype] and got.shape == (10, 7)
    ref = 0.5 * ei + 2.0 * (ea @ eb).sum(0)
    # each of the 4 products rounded (at most the size of their sum of magnitudes), then
    # their sum, its scaling and the added input each rounded
    big = 2 * mag.sum(0) + np.abs(ei)
    tol = 3 * ulp16(ref, dtype) + 4 * ulp16(big, dtype) + 200 * 2.0 ** -24 * big
    assert (np.abs(exact(got) - ref) <= tol).all()
    assert st.addmm(inp, a[0], b[0], beta=0, alpha=3.0).dtype is LOW[dtype]
    assert st.einsum("bij,bjk->bik", a, b).dtype is LOW[dtype]


def test_mixed_dtypes_promote():
    a = low_tensor(np.ones((2, 3)), "bfloat16")
    assert (a @ low_tensor(np.ones((3, 2)), "float16")).dtype is st.float32
    assert (a @ helpers.as_tensor(np.ones((3, 2), np.float32))).dtype is st.float32
    assert F.linear(a, helpers.as_tensor(np.ones((4, 3), np.float32))).dtype is st.float32


def test_bad_input_raises_clearly():
    a, b = low_tensor(np.ones((2, 3)), "bfloat16"), low_tensor(np.ones((4, 5)), "bfloat16")
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) cannot be "):
        st.matmul(a, b)
    with pytest.raises(ValueError, match="bmm: batch sizes differ"):
        st.bmm(low_tensor(np.ones((2, 2, 3)), "bfloat16"),
               low_tensor(np.ones((3, 3, 2)), "bfloat16"))
    with pytest.raises(ValueError, match="linear: input of shape .* in_features=5"):
        F.linear(a, low_tensor(np.ones((4, 5)), "bfloat16"))
    with pytest.raises(ValueError, match="matmul: both arguments need to be at least 1-D"):
        st.matmul(low_tensor(np.ones(()), "float16"), low_tensor(np.ones(()), "float16"))
    with pytest.raises(TypeError, match="matmul: not supported for dtype bool"):
        st.matmul(a, helpers.as_tensor(np.ones((3, 2), bool)))
    with pytest.raises(ValueError, match="cannot be broadcast together"):
        st.matmul(low_tensor(np.ones((2, 2, 3)), "bfloat16"),
                  low_tensor(np.ones((3, 3, 2)), "bfloat16"))


# ---- convolution ----------------------------------------------------------------------------


def _conv_ref(x, w, b, stride, pad):
    n, c, h, ww = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (ww + 2 * pad - kw) // stride + 1
    cols = np.empty((n, c, kh, kw, oh, ow))
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    cols = cols.reshape(n, c * kh * kw, oh * ow)
    wm = w.reshape(o, -1)
    out = (wm @ cols).reshape(n, o, oh, ow)
    mag = (np.abs(wm) @ np.abs(cols)).reshape(n, o, oh, ow)
    return out + b.reshape(1, o, 1, 1), mag + np.abs(b).reshape(1, o, 1, 1), cols


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("stride,pad,k", [(1, 1, 3), (2, 0, 3), (1, 0, 1)])
def test_conv2d_in_16_bits(dtype, stride, pad, k, path):
    rng = np.random.default_rng(stride * 10 + pad + k)
    x = low_tensor(rng.uniform(-0.5, 1.5, (2, 6, 9, 9)), dtype, True)
    w = low_tensor(rng.uniform(-0.5, 1.5, (5, 6, k, k)), dtype, True)
    b = low_tensor(rng.uniform(-1, 1, 5), dtype, True)
    y = st.conv2d(x, w, b, stride=stride, padding=pad)
    ref, mag, cols = _conv_ref(exact(x), exact(w), exact(b), stride, pad)
    # oneDNN adds the bias before its one rounding; im2col + GEMM rounds the product first
    assert_rounded_product(y, ref, mag, 6 * k * k + 1, dtype, inter=ref - exact(b)[:, None, None],
                           msg="conv2d")
    y.backward(low_tensor(np.ones(y.shape), dtype))
    for t in (x, w, b):
        assert t.grad.dtype is LOW[dtype] and t.grad.shape == t.shape
    # the bias gradient is the sum of ones over n * oh * ow positions: exact in either dtype
    assert exact(b.grad).tolist() == [float(y.shape[0] * y.shape[2] * y.shape[3])] * 5
    # the weight gradient of an all-ones upstream gradient: each window position's input
    # values summed over the batch and the output positions, the same for every output channel
    terms = cols.shape[0] * cols.shape[2]
    gw = np.broadcast_to(cols.sum((0, 2)).reshape(w.shape[1:]), w.shape)
    mag_w = np.broadcast_to(np.abs(cols).sum((0, 2)).reshape(w.shape[1:]), w.shape)
    # oneDNN sums in float32 and rounds once; im2col + GEMM rounds each image's product (each
    # at most the size of mag_w) before their sum over the batch
    assert_rounded_product(w.grad, gw, mag_w, terms, dtype, inter=mag_w, inter_ulps=2,
                           msg="conv2d dw")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_conv_transpose2d_in_16_bits(dtype, path):
    rng = np.random.default_rng(31)
    x = low_tensor(rng.uniform(-0.5, 1.5, (2, 4, 5, 5)), dtype, True)
    w = low_tensor(rng.uniform(-0.5, 1.5, (4, 3, 3, 3)), dtype, True)
    b = low_tensor(rng.uniform(-1, 1, 3), dtype)
    y = st.conv_transpose2d(x, w, b, stride=2, padding=1)

    def f64(t, absolute=False):
        v = exact(t)
        return helpers.as_tensor(np.abs(v) if absolute else v)

    # the float64 op on the same values is the reference; on its absolute values, the bound
    ref = helpers.to_numpy(st.conv_transpose2d(f64(x), f64(w), f64(b), stride=2, padding=1))
    mag = helpers.to_numpy(st.conv_transpose2d(f64(x, True), f64(w, True), f64(b, True),
                                               stride=2, padding=1))
    # each tap's product rounded, their overlapping sum rounded, then the bias added
    assert_rounded_product(y, ref, mag, 4 + 9 + 1, dtype, inter=mag, inter_ulps=2,
                           msg="conv_transpose2d")
    y.backward(low_tensor(np.ones(y.shape), dtype))
    assert x.grad.dtype is LOW[dtype] and w.grad.dtype is LOW[dtype]


def test_bf16_conv_uses_onednn_where_it_has_native_code():
    if helpers.DEVICE != "cpu":
        pytest.skip("oneDNN runs CPU convolutions only")
    plan = onednn.conv2d_plan(2, 6, 9, 9, 5, 3, 3, 9, 9, (1, 1), (1, 1, 1, 1), (1, 1), 1, True,
                              st.get_num_threads(), "bfloat16")
    before = onednn.calls["forward"]
    x = low_tensor(np.ones((2, 6, 9, 9)), "bfloat16")
    w = low_tensor(np.ones((5, 6, 3, 3)), "bfloat16")
    y = st.conv2d(x, w, low_tensor(np.zeros(5), "bfloat16"), padding=1)
    assert onednn.calls["forward"] == before + (plan is not None)
    assert exact(y)[0, 0, 4, 4] == 54.0 and exact(y)[0, 0, 0, 0] == 24.0
    if plan is not None:
        assert not any(v.startswith("ref") for v in plan.impl.values())


def test_the_file_holds_with_onednn_held_to_avx2():
    # what an AVX2-only CPU runs: oneDNN (held to AVX2 by its ISA switch) has no native
    # bfloat16/float16 code there, so every 16-bit product and convolution takes the library's
    # own path; this file's bounds must hold on it too
    if helpers.DEVICE != "cpu":
        pytest.skip("oneDNN's ISA switch concerns CPU products only")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2")
    probe = ("from singa_tensor.backend import onednn as o; "
             "print(o.matmul_plan('bfloat16', 0, 0, 64, 64, 64, 64, 64, 64, 1, 0, 0, 0, False, 1))")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "None", r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                        "-k", "not held_to_avx2"], env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


# ---- cuBLAS: the choice of data and compute types, and the call -------------------------------


def test_cublas_types_per_dtype_and_tf32_flag():
    assert cg.gemm_types("bf16", False) == (cg.CUDA_R_16BF, cg.COMPUTE_32F) == (14, 68)
    assert cg.gemm_types("f16", True) == (cg.CUDA_R_16F, cg.COMPUTE_32F) == (2, 68)
    assert cg.gemm_types("f32", False) is None  # sgemm, full float32
    assert cg.gemm_types("f32", True) == (cg.CUDA_R_32F, cg.COMPUTE_32F_FAST_TF32) == (0, 77)
    assert cg.gemm_types("f64", True) is None  # dgemm; TF32 is for float32 only
    with pytest.raises(ValueError, match="no cuBLAS GEMM for dtype suffix 'i32'"):
        cg.gemm_types("i32", False)
    with pytest.raises(ValueError, match="no cuBLAS GEMM for dtype suffix 'u8'"):
        cg.make_gemm("u8", None, object(), lambda: 0, int)


class _RecordingCublas:
    CUBLAS_POINTER_MODE_HOST = 0

    def __init__(self):
        self.calls = []

    def setPointerMode(self, h, mode):  # noqa: N802 - CuPy's name
        pass

    def getMathMode(self, h):  # noqa: N802
        return 0

    def setMathMode(self, h, mode):  # noqa: N802
        self.calls.append(("setMathMode", (h, mode)))

    def __getattr__(self, name):
        if name.endswith("StridedBatched") or name == "gemmStridedBatchedEx":
            return lambda *args: self.calls.append((name, args))
        raise AttributeError(name)


def test_cublas_call_arguments_follow_the_flags():
    blas, own = _RecordingCublas(), []
    flags = type("Flags", (), {"allow_tf32": False})()

    def kernel(*args):
        own.append(args)

    gemm = {s: cg.make_gemm(s, kernel, blas, lambda: 7, int, flags) for s in cg.SUFFIXES}
    # row-major C (m x n) = A (m x k) @ B^T: cuBLAS gets B first (n, m swapped)
    gemm["bf16"](0, 1, 4, 5, 3, 1.0, 1000, 3, 2000, 3, 0.0, 3000, 5, 2, 12, 15, 20, None)
    name, args = blas.calls[-1]
    assert name == "gemmStridedBatchedEx"
    (h, opa, opb, m, n, k, _, pa, ta, lda, sa, pb, tb, ldb, sb, _, pc, tc, ldc, sc, batch,
     compute, algo) = args
    assert (h, opa, opb, m, n, k) == (7, 1, 0, 5, 4, 3)
    assert (pa, ta, lda, sa, pb, tb, ldb, sb) == (2000, 14, 3, 15, 1000, 14, 3, 12)
    assert (pc, tc, ldc, sc, batch, compute, algo) == (3000, 14, 5, 20, 2, 68, -1)
    gemm["f16"](0, 0, 4, 5, 3, 1.0, 1, 3, 2, 5, 0.0, 3, 5, 1, 0, 0, 0, None)
    assert blas.calls[-1][1][8] == 2 and blas.calls[-1][1][21] == 68
    gemm["f32"](0, 0, 4, 5, 3, 1.0, 1, 3, 2, 5, 0.0, 3, 5, 1, 0, 0, 0, None)
    assert blas.calls[-1][0] == "sgemmStridedBatched"
    flags.allow_tf32 = True
    gemm["f32"](0, 0, 4, 5, 3, 1.0, 1, 3, 2, 5, 0.0, 3, 5, 1, 0, 0, 0, None)
    assert blas.calls[-1][0] == "gemmStridedBatchedEx" and blas.calls[-1][1][21] == 77
    gemm["f64"](0, 0, 4, 5, 3, 1.0, 1, 3, 2, 5, 0.0, 3, 5, 1, 0, 0, 0, None)
    assert blas.calls[-1][0] == "dgemmStridedBatched"
    n_calls = len(blas.calls)
    gemm["bf16"](0, 0, 4, 5, 0, 1.0, 1, 1, 2, 5, 0.0, 3, 5, 1, 0, 0, 0, None)  # k == 0
    assert len(blas.calls) == n_calls and len(own) == 1  # the library's own kernel


def test_cublas_reduced_precision_reduction_flags():
    blas = _RecordingCublas()
    flags = type("Flags", (), {"allow_tf32": False,
                               "allow_bf16_reduced_precision_reduction": True,
                               "allow_fp16_reduced_precision_reduction": False})()
    assert not cg.strict_reduction("bf16", flags) and cg.strict_reduction("f16", flags)
    assert not cg.strict_reduction("f32", flags) and not cg.strict_reduction("f64", flags)
    args = (0, 0, 2, 2, 2, 1.0, 1, 2, 2, 2, 0.0, 3, 2, 1, 0, 0, 0, None)
    cg.make_gemm("bf16", None, blas, lambda: 5, int, flags)(*args)
    assert [c[0] for c in blas.calls] == ["gemmStridedBatchedEx"]  # the default mode
    blas.calls.clear()
    cg.make_gemm("f16", None, blas, lambda: 5, int, flags)(*args)
    # the DISALLOW_REDUCED_PRECISION_REDUCTION bit around the call, then the mode restored
    assert blas.calls[0] == ("setMathMode", (5, 16))
    assert blas.calls[1][0] == "gemmStridedBatchedEx" and blas.calls[2] == ("setMathMode", (5, 0))
    # PyTorch's defaults: both allowed
    assert st.backends.cuda.matmul.allow_bf16_reduced_precision_reduction is True
    assert not cg.strict_reduction("bf16", st.backends.cuda.matmul)


def test_cublas_tf32_follows_the_public_flags():
    blas = _RecordingCublas()
    gemm = cg.make_gemm("f32", None, blas, lambda: 1, int)  # reads st.backends.cuda.matmul
    before = st.get_float32_matmul_precision()
    try:
        for precision, name in (("highest", "sgemmStridedBatched"),
                                ("high", "gemmStridedBatchedEx"),
                                ("medium", "gemmStridedBatchedEx")):
            st.set_float32_matmul_precision(precision)
            gemm(0, 0, 2, 2, 2, 1.0, 1, 2, 2, 2, 0.0, 3, 2, 1, 0, 0, 0, None)
            assert blas.calls[-1][0] == name, precision
        st.set_float32_matmul_precision("highest")
        st.backends.cuda.matmul.allow_tf32 = True
        gemm(0, 0, 2, 2, 2, 1.0, 1, 2, 2, 2, 0.0, 3, 2, 1, 0, 0, 0, None)
        assert blas.calls[-1][1][21] == cg.COMPUTE_32F_FAST_TF32
    finally:
        st.set_float32_matmul_precision(before)
    assert st.backends.cuda.matmul.allow_tf32 is (before != "highest")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16bit_products_on_the_cuda_device_go_through_cublas(cuda, dtype):
    fake = None if helpers.real_gpu() else st.backend._loaded["cuda"].fake_cublas
    na, nb = operands((3, 20, 150), (150, 9), seed=21)
    a = st.tensor(na, dtype=st.float32, device=cuda).to(LOW[dtype])
    b = st.tensor(nb, dtype=st.float32, device=cuda).to(LOW[dtype]).T.contiguous().T
    calls = len(fake.calls) if fake else 0
    got = a @ b
    assert got.device == cuda
    ea, eb = exact(a), exact(b)
    assert_rounded_product(got, ea @ eb, np.abs(ea) @ np.abs(eb), 150, dtype, msg=cuda)
    if fake is not None:
        assert len(fake.calls) == calls + 1
        assert fake.calls[-1][-2:] == ({"bfloat16": 14, "float16": 2}[dtype], 68)


def test_cuda_tiled_kernel_accumulates_16bit_in_float():
    # the CUDA library's own st_gemm_bf16/f16 (the ABI twin of cuBLAS) on the emulator
    if helpers.STAND_IN != "emulated":
        pytest.skip("runs in the emu-cuda session (test_cuda_emulated.py), where the "
                    "emulated CUDA library is built")
    ffi, lib = helpers.emulated_cuda_library()
    for dtype, sfx in (("bfloat16", "bf16"), ("float16", "f16")):
        for ta, tb in ((0, 0), (1, 0), (0, 1), (1, 1)):
            m, n, k, batch = 37, 70, 130, 2
            na, nb = operands((batch, m, k), (batch, k, n), seed=ta * 2 + tb)
            a = low_tensor(na, dtype).to("cpu")
            b = low_tensor(nb, dtype).to("cpu")
            ea, eb = exact(a), exact(b)
            sa = ea.transpose(0, 2, 1) if ta else ea
            sb = eb.transpose(0, 2, 1) if tb else eb
            bits_a = np.ascontiguousarray(_bits(sa, dtype))
            bits_b = np.ascontiguousarray(_bits(sb, dtype))
            c = np.full((batch, m, n), 0x7FC0, np.uint16)  # NaN: beta 0 must not read it
            p = [ffi.cast("uint16_t *", ffi.from_buffer(x)) for x in (bits_a, bits_b, c)]
            lda, ldb = sa.shape[-1], sb.shape[-1]
            getattr(lib, f"st_gemm_{sfx}")(ta, tb, m, n, k, 1.0, p[0], lda, p[1], ldb, 0.0, p[2],
                                           n, batch, m * k, k * n, m * n, ffi.NULL)
            got = _from_bits(c, dtype)
            ref, mag = ea @ eb, np.abs(ea) @ np.abs(eb)
            tol = ulp16(ref, dtype) + k * 2.0 ** -24 * mag
            assert (np.abs(got - ref) <= tol).all(), (dtype, ta, tb)


def _bits(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float16":
        return x.astype(np.float16).view(np.uint16)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # exact values


def _from_bits(c: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float16":
        return c.view(np.float16).astype(np.float64)
    return (c.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
