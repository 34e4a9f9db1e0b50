"""The fused scaled dot-product attention (ops/attention_fused.py, kernels st_attention_*):
forward against numpy, gradients against the composition's autograd, finite differences to
second order, the dispatch rules of F.scaled_dot_product_attention, memory on long sequences,
and the error paths. Runs on the device under test (SINGA_TENSOR_DEVICE, fake-cuda too)."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor.backend import cpu as cpu_backend
from singa_tensor.ops import attention as attention_mod
from singa_tensor.ops import attention_fused
from singa_tensor.ops.attention import _sdpa_reference
from singa_tensor.ops.attention_fused import (
    PackedSelfAttention,
    ScaledDotProductAttentionFused,
    scaled_dot_product_attention_fused,
    self_attention_packed,
)
from tests.helpers import DEVICE, as_tensor, to_numpy

RNG = np.random.default_rng(7)
RTOL = {np.float32: 1e-5, np.float64: 1e-10}


def assert_close(got, want, dtype):
    """Within rtol of want, elementwise and relative to want's largest magnitude (entries
    near 0 are sums of cancelling terms, each rounded at the dtype's precision)."""
    rtol = RTOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol,
                               atol=rtol * max(1.0, float(np.abs(want).max())))


@pytest.fixture
def fused_calls(monkeypatch):
    """Counts runs of the fused forward; the CPU threshold is dropped so that small shapes
    take the fused path wherever the rules allow it."""
    calls = []
    real = ScaledDotProductAttentionFused.forward

    def counting(ctx, *args, **attrs):
        calls.append(args[0].shape)
        return real(ctx, *args, **attrs)

    monkeypatch.setattr(ScaledDotProductAttentionFused, "forward", staticmethod(counting))
    monkeypatch.setattr(attention_fused, "CPU_MIN_SCORES", 0)
    return calls


def qkv(lead, n, m, e, ev, dtype=np.float64):
    return tuple(RNG.standard_normal(lead + s).astype(dtype) for s in ((n, e), (m, e), (m, ev)))


def sdpa_with_grads(arrays, grad, fused: bool, monkeypatch, **kw):
    """Output and (dq, dk, dv) of F.scaled_dot_product_attention, fused or composed."""
    monkeypatch.setattr(attention_mod, "use_fused",
                        attention_fused.use_fused if fused else (lambda *a: False))
    ts = [as_tensor(a, requires_grad=True) for a in arrays]
    out = F.scaled_dot_product_attention(*ts, **kw)
    out.backward(as_tensor(grad))
    return [to_numpy(out.detach())] + [to_numpy(t.grad) for t in ts]


CASES = [  # (lead dims, L, S, E, Ev, kwargs)
    ((2,), 5, 7, 4, 3, {}),
    ((2,), 7, 5, 4, 3, {"is_causal": True}),
    ((2, 3), 70, 130, 16, 8, {"is_causal": True}),
    ((2, 3), 130, 70, 8, 16, {}),
    ((), 9, 9, 5, 6, {"scale": 0.3}),
    ((1,), 200, 150, 32, 32, {"is_causal": True, "scale": 1.7}),
    ((3,), 1, 1, 1, 1, {}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead,n,m,e,ev,kw", CASES)
def test_forward_matches_numpy(fused_calls, dtype, lead, n, m, e, ev, kw):
    arrays = qkv(lead, n, m, e, ev, dtype)
    out = F.scaled_dot_product_attention(*(as_tensor(a) for a in arrays), **kw)
    assert fused_calls == [lead + (n, e)]
    assert out.shape == lead + (n, ev) and out.dtype.name == np.dtype(dtype).name
    want = _sdpa_reference(*(a.astype(np.float64) for a in arrays), **kw)
    assert_close(to_numpy(out), want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead,n,m,e,ev,kw", CASES)
def test_gradients_match_the_composition(fused_calls, monkeypatch, dtype, lead, n, m, e, ev,
                                         kw):
    arrays = qkv(lead, n, m, e, ev, dtype)
    grad = RNG.standard_normal(lead + (n, ev)).astype(dtype)
    got = sdpa_with_grads(arrays, grad, True, monkeypatch, **kw)
    assert len(fused_calls) == 1
    want = sdpa_with_grads(arrays, grad, False, monkeypatch, **kw)
    assert len(fused_calls) == 1
    for g, w in zip(got, want):
        assert_close(g, w, dtype)


@pytest.mark.parametrize("lead,n,m,e,ev,kw", CASES)
def test_float32_in_both_vector_widths(fused_calls, monkeypatch, simd_build, lead, n, m, e, ev,
                                       kw):
    """The block work (maximum, exponentials, 8 x 8 transposes of blocks whose sides are not
    multiples of 8) in the AVX-512 and the AVX2 build, forward and gradients, against float64."""
    arrays = qkv(lead, n, m, e, ev, np.float32)
    grad = RNG.standard_normal(lead + (n, ev)).astype(np.float32)
    got = sdpa_with_grads(arrays, grad, True, monkeypatch, **kw)
    assert len(fused_calls) == 1
    want = sdpa_with_grads([a.astype(np.float64) for a in arrays], grad.astype(np.float64), True,
                           monkeypatch, **kw)
    for g, w in zip(got, want):
        assert_close(g, w, np.float32)


def _non_finite_qkv(dtype):
    """q, k, v of (2, 2, 37, 5) with a NaN query row, a +inf and a -inf key entry (scores of
    +inf, -inf or NaN depending on the query's sign) and a NaN entry in the value of key 0,
    which every row sees. (A key that the causal rule hides never reaches the fused output,
    where the composition multiplies its value by a probability of 0: NaN * 0.)"""
    q, k, v = qkv((2, 2), 37, 37, 5, 5, dtype)
    q[0, 0, 3, :] = np.nan
    k[0, 1, 20, 1] = np.inf
    k[1, 0, 9, 2] = -np.inf
    v[1, 1, 0, 0] = np.nan
    return q, k, v


def _check_non_finite(monkeypatch, dtype, causal):
    arrays = _non_finite_qkv(dtype)
    fused = sdpa_with_grads(arrays, np.ones((2, 2, 37, 5), dtype), True, monkeypatch,
                            is_causal=causal)[0]
    composed = sdpa_with_grads(arrays, np.ones((2, 2, 37, 5), dtype), False, monkeypatch,
                               is_causal=causal)[0]
    assert np.isnan(composed).any() and np.isfinite(composed).any()
    np.testing.assert_array_equal(np.isnan(fused), np.isnan(composed))
    ok = np.isfinite(composed)
    assert_close(fused[ok], composed[ok], dtype)


# the emulated CUDA device's reference products meet the NaN too
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_inputs_give_what_the_composition_gives(fused_calls, monkeypatch, dtype,
                                                          causal):
    """NaN rows where softmax gives NaN (a NaN score, or +inf then inf - inf), the weight 0
    for -inf scores, and the finite rows unchanged."""
    _check_non_finite(monkeypatch, dtype, causal)
    assert len(fused_calls) == 1


@pytest.mark.parametrize("causal", [False, True])
def test_non_finite_inputs_in_both_vector_widths(fused_calls, monkeypatch, simd_build, causal):
    _check_non_finite(monkeypatch, np.float32, causal)


def test_one_pass_and_two_pass_backward_agree(fused_calls, monkeypatch):
    """The CPU backward runs one pass per batch entry when there are at least as many entries
    as threads, else a query pass and a key pass: both give the composition's gradients."""
    arrays = qkv((2,), 150, 140, 8, 8)
    grad = RNG.standard_normal((2, 150, 8))
    want = sdpa_with_grads(arrays, grad, False, monkeypatch, is_causal=True)
    saved = st.get_num_threads()
    try:
        for threads in (1, 4):
            st.set_num_threads(threads)
            got = sdpa_with_grads(arrays, grad, True, monkeypatch, is_causal=True)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    finally:
        st.set_num_threads(saved)
    assert len(fused_calls) == 2


@pytest.mark.parametrize("kw", [{}, {"is_causal": True, "scale": 0.8}])
def test_gradcheck_and_gradgradcheck(fused_calls, kw):
    arrays = qkv((2,), 3, 4, 3, 2)
    ts = [as_tensor(a, requires_grad=True) for a in arrays]

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **kw)

    assert st.autograd.gradcheck(fn, ts)
    assert st.autograd.gradgradcheck(fn, ts)
    assert fused_calls


def test_double_backward_matches_the_composition(fused_calls, monkeypatch):
    arrays = qkv((2,), 4, 6, 3, 5)

    def second_order(fused: bool):
        monkeypatch.setattr(attention_mod, "use_fused",
                            attention_fused.use_fused if fused else (lambda *a: False))
        ts = [as_tensor(a, requires_grad=True) for a in arrays]
        out = F.scaled_dot_product_attention(*ts, is_causal=True)
        gq, gk, gv = st.autograd.grad((out * out).sum(), ts, create_graph=True)
        (gq.sum() + (gk * gk).sum() + (gv * ts[1][..., :1]).sum()).backward()
        return [to_numpy(t.grad) for t in ts]

    got, want = second_order(True), second_order(False)
    assert len(fused_calls) == 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def test_non_contiguous_inputs(fused_calls, monkeypatch):
    """(batch, seq, heads, dim) transposed to (batch, heads, seq, dim), as attention layers do."""
    raw = [RNG.standard_normal((2, s, 3, d)) for s, d in ((6, 4), (5, 4), (5, 7))]
    grad = RNG.standard_normal((2, 3, 6, 7))

    def run(fused: bool):
        monkeypatch.setattr(attention_mod, "use_fused",
                            attention_fused.use_fused if fused else (lambda *a: False))
        leaves = [as_tensor(a, requires_grad=True) for a in raw]
        views = [t.transpose(1, 2) for t in leaves]
        assert not any(v.is_contiguous() for v in views)
        out = F.scaled_dot_product_attention(*views, is_causal=True)
        out.backward(as_tensor(grad))
        return [to_numpy(out.detach())] + [to_numpy(t.grad) for t in leaves]

    got = run(True)
    assert fused_calls == [(2, 3, 6, 4)]
    want = _sdpa_reference(*(np.swapaxes(a, 1, 2) for a in raw), is_causal=True)
    np.testing.assert_allclose(got[0], want, rtol=1e-10, atol=1e-12)
    for g, w in zip(got, run(False)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_long_sequence_takes_the_fused_path_in_little_memory(monkeypatch):
    """L = S = 1024 on the CPU, default threshold: the fused op runs, and the allocator's peak
    during forward and backward stays below the one (L, S) score matrix the composition makes."""
    calls = []
    real = ScaledDotProductAttentionFused.forward
    monkeypatch.setattr(ScaledDotProductAttentionFused, "forward",
                        staticmethod(lambda ctx, *a, **k: calls.append(1) or real(ctx, *a, **k)))
    n, e = 1024, 32
    assert n * n >= attention_fused.CPU_MIN_SCORES
    arrays = [RNG.standard_normal((1, n, e)).astype(np.float32) for _ in range(3)]
    ts = [st.tensor(a, device="cpu", requires_grad=True) for a in arrays]
    grad = st.tensor(RNG.standard_normal((1, n, e)).astype(np.float32), device="cpu")
    scores = n * n * 4
    base = cpu_backend.allocated_bytes()
    cpu_backend.reset_peak_bytes()
    out = F.scaled_dot_product_attention(*ts, is_causal=True)
    out.backward(grad)
    peak = cpu_backend.peak_bytes()[0] - base
    assert calls == [1]
    assert peak < scores // 2, f"peak {peak} bytes, scores {scores}"
    want = _sdpa_reference(*(a.astype(np.float64) for a in arrays), is_causal=True)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-4, atol=1e-5)
    assert np.isfinite(ts[0].grad.numpy()).all()


def test_masks_dropout_and_broadcasting_use_the_composition(fused_calls):
    q, k, v = (as_tensor(a) for a in qkv((2,), 4, 5, 3, 3))
    F.scaled_dot_product_attention(q, k, v, attn_mask=as_tensor(np.ones((4, 5), bool)))
    F.scaled_dot_product_attention(q, k, v, attn_mask=as_tensor(np.zeros((4, 5))))
    F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    F.scaled_dot_product_attention(q[:1], k, v)  # batch dims broadcast
    F.scaled_dot_product_attention(q.to(st.float32), k.to(st.float32), v)  # mixed dtypes
    wide = [as_tensor(a) for a in qkv((1,), 3, 3, 257, 2)]
    out = F.scaled_dot_product_attention(*wide)  # E above the kernels' limit
    np.testing.assert_allclose(to_numpy(out), _sdpa_reference(*map(to_numpy, wide)),
                               rtol=1e-10)
    assert fused_calls == []
    F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
    assert len(fused_calls) == 1


def test_cpu_threshold_keeps_small_scores_on_the_composition(monkeypatch):
    q = st.zeros(2, 8, 4, device="cpu")
    assert not attention_fused.use_fused(q, q, q, None, 0.0)
    monkeypatch.setattr(attention_fused, "CPU_MIN_SCORES", 64)
    assert attention_fused.use_fused(q, q, q, None, 0.0)


def test_registered_as_an_internal_op():
    assert ScaledDotProductAttentionFused.name.startswith("_")
    assert st.ops.REGISTRY[ScaledDotProductAttentionFused.name] is ScaledDotProductAttentionFused
    assert not hasattr(st, "scaled_dot_product_attention_fused")


@pytest.mark.parametrize("args,kwargs,exc,msg", [
    (("q", "k", "x"), {}, TypeError, "value must be a Tensor"),
    (("q", "k32", "v"), {}, TypeError, "key has dtype float32 but query has float64"),
    (("qi", "qi", "qi"), {}, TypeError, "expected float16, bfloat16, float32 or float64 tensors, "
                                    "got int64"),
    (("q", "k", "v2"), {}, ValueError, r"same leading dimensions .*\(2, 4, 3\)"),
    (("q", "k", "v3d"), {}, ValueError, "same number of dimensions"),
    (("q", "k5", "v"), {}, ValueError, "same last dimension"),
    (("q", "k", "vshort"), {}, ValueError, "same sequence length"),
    (("qwide", "kwide", "v"), {}, ValueError, "between 1 and 256"),
    (("q", "k", "v"), {"is_causal": 1}, TypeError, "is_causal must be a bool"),
    (("q", "k", "v"), {"scale": "2"}, TypeError, "scale must be a float or None"),
])
def test_errors(args, kwargs, exc, msg):
    t = {
        "q": np.zeros((2, 4, 3)), "k": np.zeros((2, 6, 3)), "v": np.zeros((2, 6, 2)),
        "k32": np.zeros((2, 6, 3), np.float32), "qi": np.zeros((2, 4, 3), np.int64),
        "v2": np.zeros((3, 6, 2)), "v3d": np.zeros((1, 2, 6, 2)), "k5": np.zeros((2, 6, 5)),
        "vshort": np.zeros((2, 5, 2)), "qwide": np.zeros((2, 4, 300)),
        "kwide": np.zeros((2, 6, 300)),
    }
    call = [as_tensor(t[a]) if a in t else a for a in args]
    with pytest.raises(exc, match=msg):
        scaled_dot_product_attention_fused(*call, **kwargs)


def test_spec_samples_match_its_reference():
    for args, kwargs in ScaledDotProductAttentionFused.samples():
        got = ScaledDotProductAttentionFused.fn(*(as_tensor(a) for a in args), **kwargs)
        want = ScaledDotProductAttentionFused.reference(*args, **kwargs)
        np.testing.assert_allclose(to_numpy(got), want, rtol=1e-10, atol=1e-12)


def test_device_under_test_is_used():
    q = as_tensor(np.zeros((1, 2, 2)))
    out = scaled_dot_product_attention_fused(q, q, q)
    assert str(out.device) == str(st.device(DEVICE))


def test_causal_multihead_attention_without_weights_takes_the_fused_path(fused_calls):
    # a causal flag with no other mask stays a flag through nn.MultiheadAttention, so the
    # fused kernels run; the result equals the same layer given the causal mask explicitly
    st.manual_seed(0)
    mha = st.nn.MultiheadAttention(16, 4, batch_first=True)
    x = as_tensor(RNG.standard_normal((2, 6, 16)).astype(np.float32))
    mask = st.triu(st.ones(6, 6, dtype=st.bool, device=x.device), diagonal=1)
    got, _ = mha(x, x, x, need_weights=False, is_causal=True, attn_mask=None)
    # on the CPU the packed kernels take the projection whole (test_packed_* below)
    packed = attention_fused.use_packed(as_tensor(np.zeros((2, 6, 48), np.float32)), 4, True)
    assert len(fused_calls) == (0 if packed else 1)
    want, _ = mha(x, x, x, need_weights=False, attn_mask=mask)
    assert len(fused_calls) == (0 if packed else 1)  # an explicit mask: the composition
    assert_close(to_numpy(got), to_numpy(want), np.float32)


@pytest.mark.parametrize("dtype", [st.bfloat16, st.float16], ids=["bf16", "f16"])
def test_16_bit_kernels_round_the_float32_results_once(dtype):
    # the CPU's 16-bit kernels widen groups of batch entries into float32 (9 entries of this
    # size make 2 groups forward and 3 backward) and round each result once; the row
    # statistics stay float32
    if DEVICE != "cpu":
        pytest.skip("the 16-bit fused kernels are the CPU backend's; other backends cast")
    assert attention_fused._native(st.zeros(1, dtype=dtype))
    arrays = [a.astype(np.float32) for a in qkv((9,), 256, 256, 128, 128)]
    ts = [st.tensor(a).to(dtype).requires_grad_() for a in arrays]
    wide = [t.detach().float().requires_grad_() for t in ts]
    out = scaled_dot_product_attention_fused(*ts, is_causal=True)
    want = scaled_dot_product_attention_fused(*wide, is_causal=True)
    assert out.dtype is dtype
    grad = RNG.standard_normal((9, 256, 128)).astype(np.float32)
    g16 = st.tensor(grad).to(dtype)
    out.backward(g16)
    want.backward(g16.float())
    eps = float(st.finfo(dtype).eps)
    g, r = to_numpy(out.float()), to_numpy(want.detach())
    # the output: one rounding (half an ulp) of a float32 result whose summation order may
    # differ from the whole-batch float32 call's in the last float32 bits
    np.testing.assert_array_less(np.abs(g - r), eps * np.abs(r) + 1e-6 * np.abs(r).max())
    for t, w in zip(ts, wide):
        assert t.grad.dtype is dtype
        g, r = to_numpy(t.grad.float()), to_numpy(w.grad)
        # the backward reads the rounded output (delta = sum dout * out), so the gradients'
        # cancelling terms differ by the 16-bit rounding at the gradient's scale, beside the
        # final rounding of each element
        np.testing.assert_array_less(np.abs(g - r), eps * np.abs(r) + 4 * eps * np.abs(r).max())


def test_16_bit_kernels_keep_float32_statistics(monkeypatch):
    seen = {}
    real = ScaledDotProductAttentionFused.forward

    def spy(ctx, *args, **attrs):
        out = real(ctx, *args, **attrs)
        seen["lse"] = ctx.lse.dtype
        return out

    monkeypatch.setattr(ScaledDotProductAttentionFused, "forward", staticmethod(spy))
    q = st.randn(2, 40, 8).to(st.bfloat16)
    scaled_dot_product_attention_fused(q, q, q)
    assert seen["lse"] is st.float32  # natively, or from the float32 kernels after a cast


# ---- self-attention on one projected tensor (PackedSelfAttention) -------------------------------


def _split_path(x, heads, batch_first, causal):
    """The same attention through split heads and the (N, H, L, D) fused op."""
    q, k, v = attention_fused._packed_parts(x, heads, batch_first)
    return attention_fused._packed_merge(scaled_dot_product_attention_fused(q, k, v, causal),
                                         batch_first)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n, l, heads, d", [(3, 70, 4, 12), (1, 150, 1, 7), (2, 9, 3, 5)])
def test_packed_equals_the_split_heads(dtype, batch_first, causal, n, l, heads, d):
    # the packed kernels read q, k and v where the projection put them and write the output
    # and d qkv in place; the arithmetic is the split path's, so the bits are too. (1, 150, 1)
    # has fewer batch entries than threads (the two-pass backward), 130 keys span key blocks
    shape = (n, l, 3 * heads * d) if batch_first else (l, n, 3 * heads * d)
    x0 = RNG.standard_normal(shape).astype(dtype)
    g = RNG.standard_normal(shape[:2] + (heads * d,)).astype(dtype)
    x = as_tensor(x0, requires_grad=True)
    got = self_attention_packed(x, heads, batch_first, causal)
    got.backward(as_tensor(g))
    x2 = as_tensor(x0, requires_grad=True)
    want = _split_path(x2, heads, batch_first, causal)
    want.backward(as_tensor(g))
    packed = st.backend.get(x.device).kernel("st_attention_strided_f32") is not None
    assert (type(got.grad_fn).__name__ == "_packed_self_attentionBackward") == packed
    np.testing.assert_array_equal(to_numpy(got.detach()), to_numpy(want.detach()))
    np.testing.assert_array_equal(to_numpy(x.grad), to_numpy(x2.grad))
    ref = PackedSelfAttention.reference(x0.astype(np.float64), heads, batch_first, causal)
    assert_close(to_numpy(got.detach()), ref, dtype)


def test_packed_gradcheck_and_gradgradcheck():
    # float64 finite differences; the second order goes through the composed backward
    x = as_tensor(RNG.standard_normal((2, 5, 12)), requires_grad=True)
    for causal in (False, True):
        def fn(t, causal=causal):
            return self_attention_packed(t, 2, True, causal, 0.7)

        assert st.autograd.gradcheck(fn, (x,), atol=1e-6, rtol=1e-4)
        assert st.autograd.gradgradcheck(fn, (x,), atol=1e-5, rtol=1e-3)
    y = as_tensor(RNG.standard_normal((4, 2, 9)), requires_grad=True)
    assert st.autograd.gradgradcheck(lambda t: self_attention_packed(t, 3, False), (y,),
                                     atol=1e-5, rtol=1e-3)


def test_packed_reads_a_non_contiguous_projection():
    x0 = RNG.standard_normal((30, 2, 24))
    x = as_tensor(x0, requires_grad=True)
    got = self_attention_packed(x.transpose(0, 1), 2)  # (2, 30, 24) view, batch first
    got.sum().backward()
    x2 = as_tensor(x0, requires_grad=True)
    want = _split_path(x2.transpose(0, 1), 2, True, False)
    want.sum().backward()
    assert_close(to_numpy(got.detach()), to_numpy(want.detach()), np.float64)
    assert_close(to_numpy(x.grad), to_numpy(x2.grad), np.float64)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_self_attention_takes_the_packed_path(batch_first):
    # self-attention without masks or weights runs one packed op; masks, weights and
    # cross-attention keep the split heads. Every path gives the same numbers.
    st.manual_seed(1)
    mha = st.nn.MultiheadAttention(16, 4, batch_first=batch_first)
    x0 = RNG.standard_normal((2, 20, 16) if batch_first else (20, 2, 16)).astype(np.float32)
    x = as_tensor(x0, requires_grad=True)
    got, w = mha(x, x, x, need_weights=False)
    assert w is None
    names, todo = [], [got.grad_fn]
    while todo and len(names) < 50:  # the graph's nodes, breadth first
        node = todo.pop(0)
        names.append(type(node).__name__)
        todo += [edge[0] for edge in node.next if edge is not None]
    packed = attention_fused.use_packed(
        as_tensor(np.zeros(x0.shape[:2] + (48,), np.float32)), 4, batch_first)
    assert ("_packed_self_attentionBackward" in names) == packed, names
    got.sum().backward()
    x2 = as_tensor(x0, requires_grad=True)
    want, _ = mha(x2, x2, x2, need_weights=True)  # the weights force the composition
    want.sum().backward()
    assert_close(to_numpy(got.detach()), to_numpy(want.detach()), np.float32)
    np.testing.assert_allclose(to_numpy(x.grad), to_numpy(x2.grad), rtol=1e-4, atol=1e-5)


def test_transformer_layer_in_graph_mode_and_onnx_export_with_the_packed_path(tmp_path):
    st.manual_seed(2)
    layer = st.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    x = as_tensor(RNG.standard_normal((2, 24, 16)).astype(np.float32))
    eager = to_numpy(layer(x).detach())
    step = st.compile(lambda t: layer(t))
    for _ in range(3):  # capture, then replays with new inputs
        np.testing.assert_allclose(to_numpy(step(x).detach()), eager, rtol=1e-6, atol=1e-6)
    x3 = as_tensor(RNG.standard_normal((2, 24, 16)).astype(np.float32))
    np.testing.assert_allclose(to_numpy(step(x3).detach()), to_numpy(layer(x3).detach()),
                               rtol=1e-6, atol=1e-6)
    if DEVICE != "cpu":
        return
    ort = pytest.importorskip("onnxruntime")
    layer.eval()
    path = str(tmp_path / "layer.onnx")
    st.onnx.export(layer, (x,), path)  # the packed op has no ONNX form: the trace splits heads
    sess = ort.InferenceSession(path)
    got = sess.run(None, {sess.get_inputs()[0].name: to_numpy(x)})[0]
    np.testing.assert_allclose(got, to_numpy(layer(x).detach()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("args, kwargs, exc, msg", [
    (("x", 2), {}, TypeError, "qkv must be a Tensor"),
    ((np.zeros((2, 4, 12)), 0), {}, ValueError, "heads must be a positive int"),
    ((np.zeros((2, 4, 12)), 2.0), {}, ValueError, "heads must be a positive int"),
    ((np.zeros((2, 4, 12)), 5), {}, ValueError, "3 \\* heads \\* head_dim"),
    ((np.zeros((4, 12)), 2), {}, ValueError, "must be 3-D"),
    ((np.zeros((2, 4, 12), dtype=np.int64), 2), {}, TypeError, "floating point"),
    ((np.zeros((2, 4, 12)), 2), {"is_causal": 1}, TypeError, "is_causal must be a bool"),
    ((np.zeros((2, 4, 12)), 2), {"scale": "1"}, TypeError, "scale must be a float"),
])
def test_packed_errors(args, kwargs, exc, msg):
    qkv = args[0] if isinstance(args[0], str) else as_tensor(args[0])
    with pytest.raises(exc, match=f"self_attention_packed: .*{msg}"):
        self_attention_packed(qkv, args[1], **kwargs)
