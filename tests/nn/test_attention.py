"""Attention and Transformer layers against numpy references and PyTorch fixtures
(tests/data/attention_fixtures.npz, written by tools/make_attention_fixtures.py)."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn
from singa_tensor.ops.attention import _sdpa_reference
from tests.helpers import DEVICE, as_tensor, assert_close, to_numpy

RNG = np.random.default_rng(4)
FIXTURES = np.load(pathlib.Path(__file__).resolve().parents[1] / "data" /
                   "attention_fixtures.npz")


def t64(a, requires_grad=False):
    return as_tensor(np.asarray(a, np.float64), requires_grad=requires_grad)


def fixture(case: str, kind: str) -> dict:
    p = f"{case}/{kind}/"
    return {k[len(p):]: FIXTURES[k] for k in FIXTURES.files if k.startswith(p)}


def loaded(module, case):
    module.load_state_dict(fixture(case, "param"))
    return module.to(DEVICE)


def inputs(case):
    return {k: as_tensor(v) for k, v in fixture(case, "in").items()}


# ---- scaled_dot_product_attention --------------------------------------------------------------


def _qkv(*shapes):
    return [RNG.standard_normal(s) for s in shapes]


@pytest.mark.parametrize("case", [
    dict(),
    dict(is_causal=True),
    dict(scale=0.3),
    dict(mask=(3, 5), is_causal=True),
    dict(mask=(2, 1, 1, 5)),
    dict(float_mask=(1, 2, 3, 5)),
    dict(float_mask=(5,), is_causal=True),
])
def test_sdpa_matches_numpy(case):
    q, k, v = _qkv((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6))
    kw = {key: case[key] for key in ("is_causal", "scale") if key in case}
    mask = None
    if "mask" in case:
        mask = RNG.uniform(size=case["mask"]) > 0.4
        mask[..., 0] = True
    if "float_mask" in case:
        mask = RNG.standard_normal(case["float_mask"])
    got = F.scaled_dot_product_attention(t64(q), t64(k), t64(v),
                                         None if mask is None else as_tensor(mask), **kw)
    assert got.shape == (2, 2, 3, 6)
    assert_close(got, _sdpa_reference(q, k, v, mask, **kw), rtol=1e-10, atol=1e-12)


def test_sdpa_explicit_softmax_formula():
    # independent of the shared reference: one row by hand
    q, k, v = _qkv((1, 2), (3, 2), (3, 1))
    s = (q @ k.T)[0] / math.sqrt(2)
    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    got = F.scaled_dot_product_attention(t64(q), t64(k), t64(v))
    assert_close(got, (w @ v).reshape(1, 1), rtol=1e-12)


def test_sdpa_bool_mask_equals_float_minus_inf_and_causal_equals_tril():
    q, k, v = _qkv((2, 4, 3), (2, 4, 3), (2, 4, 2))
    tril = np.tril(np.ones((4, 4), bool))
    by_bool = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), as_tensor(tril))
    by_float = F.scaled_dot_product_attention(t64(q), t64(k), t64(v),
                                              t64(np.where(tril, 0.0, -np.inf)))
    by_flag = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), is_causal=True)
    assert_close(by_bool, to_numpy(by_float), rtol=1e-12)
    assert_close(by_flag, to_numpy(by_bool), rtol=1e-12)
    # the first query sees only the first key
    assert_close(by_flag[:, 0], v[:, 0], rtol=1e-12)


def test_sdpa_fully_masked_row_gives_zeros_like_pytorch():
    q, k, v = _qkv((3, 4), (2, 4), (2, 4))
    mask = np.array([[True, True], [False, False], [True, False]])
    qt = t64(q, requires_grad=True)
    out = F.scaled_dot_product_attention(qt, t64(k), t64(v), as_tensor(mask))
    assert_close(out[1], np.zeros(4))
    assert_close(out[2], v[0], rtol=1e-12)
    out.sum().backward()
    g = to_numpy(qt.grad)
    assert np.isfinite(g).all() and (g[1] == 0).all()
    fmask = np.where(mask, 0.0, -np.inf)
    out_f = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), t64(fmask))
    assert_close(out_f, to_numpy(out), rtol=1e-12)


def test_sdpa_dropout_scales_kept_weights_and_is_reproducible():
    q, k = _qkv((1, 6, 4), (1, 5, 4))
    v = np.eye(5)[None]  # output rows are the attention weights themselves
    weights = _sdpa_reference(q, k, v)
    st.manual_seed(3)
    a = to_numpy(F.scaled_dot_product_attention(t64(q), t64(k), t64(v), dropout_p=0.4))
    st.manual_seed(3)
    b = to_numpy(F.scaled_dot_product_attention(t64(q), t64(k), t64(v), dropout_p=0.4))
    np.testing.assert_array_equal(a, b)
    kept = a != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(a[kept], weights[kept] / 0.6, rtol=1e-12)
    zero = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), dropout_p=1.0)
    assert_close(zero, np.zeros((1, 6, 5)))


@pytest.mark.parametrize("mask_kind", ["bool", "float", "causal"])
def test_sdpa_gradcheck_and_gradgradcheck(mask_kind):
    q, k, v = (t64(a, requires_grad=True) for a in _qkv((1, 2, 3, 2), (1, 2, 4, 2), (1, 2, 4, 3)))
    args = [q, k, v]
    kw = {}
    if mask_kind == "bool":
        m = np.array([[True, False, True, True], [False, False, False, False],
                      [True, True, False, True]])
        kw["attn_mask"] = as_tensor(m)
    elif mask_kind == "float":
        args.append(t64(RNG.standard_normal((2, 1, 4)), requires_grad=True))
    else:
        kw["is_causal"] = True

    def fn(*ts):
        return F.scaled_dot_product_attention(*ts, **kw)

    assert st.autograd.gradcheck(fn, args)
    assert st.autograd.gradgradcheck(fn, args, atol=1e-4)


def test_sdpa_bad_input():
    q, k, v = (as_tensor(a) for a in _qkv((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    with pytest.raises(ValueError, match="scaled_dot_product_attention: query and key must "
                                         "have the same last dimension"):
        F.scaled_dot_product_attention(q, as_tensor(RNG.standard_normal((2, 5, 3))), v)
    with pytest.raises(ValueError, match=r"key and value must have the same sequence length"):
        F.scaled_dot_product_attention(q, k, as_tensor(RNG.standard_normal((2, 4, 6))))
    with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 4\) cannot be broadcast to "
                                         r"the attention scores' shape \(2, 3, 5\)"):
        F.scaled_dot_product_attention(q, k, v, as_tensor(np.ones((3, 4), bool)))
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 3, 5\)"):
        F.scaled_dot_product_attention(q, k, v, as_tensor(np.ones((4, 3, 5), bool)))
    with pytest.raises(TypeError, match="attn_mask must be a bool or floating point tensor, "
                                        "got int64"):
        F.scaled_dot_product_attention(q, k, v, as_tensor(np.ones((3, 5), np.int64)))
    with pytest.raises(TypeError, match="query must be a floating point tensor, got int64"):
        F.scaled_dot_product_attention(as_tensor(np.ones((2, 3, 4), np.int64)), k, v)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(ValueError, match="batch dimensions .* cannot be broadcast"):
        F.scaled_dot_product_attention(as_tensor(RNG.standard_normal((3, 3, 4))), k, v)
    with pytest.raises(ValueError, match="at least 2-D"):
        F.scaled_dot_product_attention(as_tensor(np.ones(4)), k, v)


# ---- MultiheadAttention ------------------------------------------------------------------------


def test_mha_parameters_and_init_follow_pytorch():
    m = nn.MultiheadAttention(12, 3)
    assert [n for n, _ in m.named_parameters()] == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    w = to_numpy(m.in_proj_weight)
    bound = math.sqrt(6.0 / (12 + 36))  # xavier_uniform over (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert (to_numpy(m.in_proj_bias) == 0).all() and (to_numpy(m.out_proj.bias) == 0).all()
    m = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, bias=False)
    assert {n: tuple(p.shape) for n, p in m.named_parameters()} == {
        "q_proj_weight": (8, 8), "k_proj_weight": (8, 5), "v_proj_weight": (8, 3),
        "out_proj.weight": (8, 8)}


def test_mha_self_attention_matches_pytorch():
    m = loaded(nn.MultiheadAttention(8, 2, batch_first=True), "mha_self")
    i, o = inputs("mha_self"), fixture("mha_self", "out")
    x = i["x"]
    y, w = m(x, x, x, key_padding_mask=i["kpm"], attn_mask=i["am"])
    assert_close(y, o["y"], rtol=1e-4, atol=1e-5)
    assert_close(w, o["w"], rtol=1e-4, atol=1e-5)
    y2, w2 = m(x, x, x, key_padding_mask=i["kpm"], need_weights=False)
    assert w2 is None
    assert_close(y2, o["y_noweights"], rtol=1e-4, atol=1e-5)


def test_mha_cross_attention_with_kdim_vdim_matches_pytorch():
    m = loaded(nn.MultiheadAttention(8, 2, kdim=6, vdim=4), "mha_kv")
    i, o = inputs("mha_kv"), fixture("mha_kv", "out")
    y, w = m(i["q"], i["k"], i["v"], attn_mask=i["am"], average_attn_weights=False)
    assert w.shape == (2, 2, 5, 7)
    assert_close(y, o["y"], rtol=1e-4, atol=1e-5)
    assert_close(w, o["w"], rtol=1e-4, atol=1e-5)


def _mha_numpy(x, kv, w, b, ow, ob, heads, blocked=None):
    """Sequence-first (L, N, E) reference: per-head softmax attention by hand."""
    e = x.shape[-1]
    d = e // heads
    q = x @ w[:e].T + b[:e]
    k = kv @ w[e:2 * e].T + b[e:2 * e]
    v = kv @ w[2 * e:].T + b[2 * e:]
    out = np.zeros_like(q)
    for n in range(x.shape[1]):
        for h in range(heads):
            sl = slice(h * d, (h + 1) * d)
            s = q[:, n, sl] @ k[:, n, sl].T / math.sqrt(d)
            if blocked is not None:
                s = np.where(blocked[n], -np.inf, s)
            p = np.exp(s - s.max(-1, keepdims=True))
            out[:, n, sl] = (p / p.sum(-1, keepdims=True)) @ v[:, n, sl]
    return out @ ow.T + ob


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_matches_numpy_for_self_and_cross_attention(batch_first):
    m = nn.MultiheadAttention(6, 3, batch_first=batch_first).double().to(DEVICE)
    with st.no_grad():
        m.in_proj_bias.copy_(t64(RNG.standard_normal(18)))
    w, b = to_numpy(m.in_proj_weight), to_numpy(m.in_proj_bias)
    ow, ob = to_numpy(m.out_proj.weight), to_numpy(m.out_proj.bias)
    x, mem = RNG.standard_normal((4, 2, 6)), RNG.standard_normal((5, 2, 6))
    kpm = np.zeros((2, 5), bool)
    kpm[1, 3:] = True

    def lay(a):
        return t64(a.transpose(1, 0, 2) if batch_first else a)

    def back(t):
        a = to_numpy(t)
        return a.transpose(1, 0, 2) if batch_first else a

    xs = lay(x)
    got, _ = m(xs, xs, xs, need_weights=False)
    assert_close(back(got), _mha_numpy(x, x, w, b, ow, ob, 3), rtol=1e-10, atol=1e-12)
    ms = lay(mem)
    got, weights = m(xs, ms, ms, key_padding_mask=as_tensor(kpm))
    blocked = np.broadcast_to(kpm[:, None, :], (2, 4, 5))
    assert_close(back(got), _mha_numpy(x, mem, w, b, ow, ob, 3, blocked), rtol=1e-10,
                 atol=1e-12)
    assert weights.shape == (2, 4, 5)
    assert_close(weights[1, :, 3:], np.zeros((4, 2)))
    assert_close(weights.sum(-1), np.ones((2, 4)), rtol=1e-12)


def test_mha_mask_semantics():
    m = nn.MultiheadAttention(4, 2, batch_first=True).double().to(DEVICE)
    x = t64(RNG.standard_normal((2, 3, 4)))
    blocked = np.triu(np.ones((3, 3), bool), 1)
    by_bool, _ = m(x, x, x, attn_mask=as_tensor(blocked))
    by_float, _ = m(x, x, x, attn_mask=t64(np.where(blocked, -np.inf, 0.0)))
    by_hint, _ = m(x, x, x, is_causal=True, need_weights=False)
    assert_close(by_float, to_numpy(by_bool), rtol=1e-12)
    assert_close(by_hint, to_numpy(by_bool), rtol=1e-12)
    # per-head masks (N * heads, L, S) reach the right head
    per_head = np.zeros((4, 3, 3), bool)
    per_head[1] = blocked  # batch 0, head 1
    _, w = m(x, x, x, attn_mask=as_tensor(per_head), average_attn_weights=False)
    assert_close(w[0, 1][blocked], np.zeros(3))
    assert (to_numpy(w[0, 0])[blocked] > 0).all()


def test_mha_fully_padded_batch_entry_is_nan_with_weights_like_pytorch():
    m = nn.MultiheadAttention(4, 2, batch_first=True).double().to(DEVICE)
    x = t64(RNG.standard_normal((2, 3, 4)))
    kpm = as_tensor(np.array([[True] * 3, [False, True, False]]))
    y, w = m(x, x, x, key_padding_mask=kpm)
    assert np.isnan(to_numpy(y[0])).all() and np.isnan(to_numpy(w[0])).all()
    assert np.isfinite(to_numpy(y[1])).all()
    # need_weights=False goes through scaled_dot_product_attention: zeros, then out_proj
    y2, _ = m(x, x, x, key_padding_mask=kpm, need_weights=False)
    assert_close(y2[0], np.broadcast_to(to_numpy(m.out_proj.bias), (3, 4)))
    assert_close(y2[1], to_numpy(y[1]), rtol=1e-12)


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_unbatched_equals_batch_of_one(batch_first):
    m = nn.MultiheadAttention(4, 2, batch_first=batch_first).double().to(DEVICE)
    x = RNG.standard_normal((3, 4))
    am = RNG.uniform(size=(2, 3, 3)) > 0.7  # (heads, L, S) when unbatched
    am[..., 0] = False
    y, w = m(t64(x), t64(x), t64(x), key_padding_mask=as_tensor(np.array([False, False, True])),
             attn_mask=as_tensor(am))
    xb = t64(x[None] if batch_first else x[:, None])
    yb, wb = m(xb, xb, xb, key_padding_mask=as_tensor(np.array([[False, False, True]])),
               attn_mask=as_tensor(am))
    assert y.shape == (3, 4) and w.shape == (3, 3)
    assert_close(y, to_numpy(yb)[0] if batch_first else to_numpy(yb)[:, 0], rtol=1e-12)
    assert_close(w, to_numpy(wb)[0], rtol=1e-12)


def test_mha_dropout_only_in_training():
    m = nn.MultiheadAttention(4, 2, dropout=0.5, batch_first=True).double().to(DEVICE)
    x = t64(RNG.standard_normal((2, 5, 4)))
    m.eval()
    a, _ = m(x, x, x)
    b, _ = m(x, x, x)
    assert_close(a, to_numpy(b), rtol=0)
    m.train()
    st.manual_seed(0)
    c, w = m(x, x, x, average_attn_weights=False)
    assert not np.allclose(to_numpy(c), to_numpy(a))
    assert (to_numpy(w) == 0).any()


def test_functional_mha_gradcheck_over_inputs_and_weights():
    e, h = 4, 2
    x = t64(RNG.standard_normal((3, 2, e)), requires_grad=True)
    w = t64(RNG.standard_normal((3 * e, e)) * 0.5, requires_grad=True)
    b = t64(RNG.standard_normal(3 * e) * 0.1, requires_grad=True)
    ow = t64(RNG.standard_normal((e, e)) * 0.5, requires_grad=True)
    kpm = as_tensor(np.array([[False, False, True], [False, False, False]]))

    def fn(x, w, b, ow):
        out, attn = F.multi_head_attention_forward(x, x, x, e, h, w, b, None, None, False, 0.0,
                                                   ow, None, key_padding_mask=kpm)
        return out.sum() + (attn * attn).sum()

    assert st.autograd.gradcheck(fn, (x, w, b, ow))
    assert st.autograd.gradgradcheck(lambda x, w: fn(x, w, b, ow), (x, w), atol=1e-4)


def test_mha_separate_weights_gradcheck():
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, batch_first=True).double().to(DEVICE)
    q = t64(RNG.standard_normal((1, 2, 4)), requires_grad=True)
    k = t64(RNG.standard_normal((1, 3, 3)), requires_grad=True)
    v = t64(RNG.standard_normal((1, 3, 2)), requires_grad=True)
    assert st.autograd.gradcheck(lambda q, k, v: m(q, k, v, need_weights=False)[0], (q, k, v))
    m(q, k, v)[0].sum().backward()
    assert all(p.grad is not None for p in m.parameters())


def test_mha_bad_input():
    with pytest.raises(ValueError, match="MultiheadAttention: embed_dim 10 must be divisible "
                                         "by num_heads 3"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(NotImplementedError, match="MultiheadAttention: add_bias_kv"):
        nn.MultiheadAttention(4, 2, add_bias_kv=True)
    m = nn.MultiheadAttention(4, 2, batch_first=True)
    x = as_tensor(RNG.standard_normal((2, 3, 4)).astype(np.float32))
    with pytest.raises(ValueError, match=r"MultiheadAttention: attn_mask must have shape "
                                         r"\(3, 3\) or \(4, 3, 3\)"):
        m(x, x, x, attn_mask=as_tensor(np.ones((2, 3, 3), bool)))
    with pytest.raises(ValueError, match=r"MultiheadAttention: key_padding_mask must have shape "
                                         r"\(2, 3\)"):
        m(x, x, x, key_padding_mask=as_tensor(np.ones((3, 2), bool)))
    with pytest.raises(ValueError, match="MultiheadAttention: key and value must have embed_dim "
                                         "4 features"):
        y = as_tensor(np.ones((2, 3, 5), np.float32))
        m(x, y, y)
    with pytest.raises(ValueError, match="query and key must have the same batch size"):
        m(x, x[:1], x[:1])
    with pytest.raises(ValueError, match="key and value must have the same batch and sequence"):
        m(x, x, x[:, :2])
    with pytest.raises(ValueError, match=r"all be 3-D \(batched\) or all 2-D"):
        m(x, x[0], x[0])
    with pytest.raises(ValueError, match="in_proj_weight must have shape"):
        m(as_tensor(np.ones((2, 3, 6), np.float32)), x, x)
    with pytest.raises(TypeError, match="key_padding_mask must be a Tensor or None"):
        m(x, x, x, key_padding_mask=[[True] * 3] * 2)
    with pytest.raises(TypeError, match="MultiheadAttention: attn_mask must be a bool or "
                                        "floating point tensor, got int64"):
        m(x, x, x, attn_mask=as_tensor(np.zeros((3, 3), np.int64)))


def test_float_masks_take_the_query_dtype():
    q = as_tensor(RNG.standard_normal((2, 3, 4)).astype(np.float32))
    mask = t64(RNG.standard_normal((3, 3)))
    assert F.scaled_dot_product_attention(q, q, q, mask).dtype is st.float32
    m = nn.MultiheadAttention(4, 2, batch_first=True).to(DEVICE)
    y, w = m(q, q, q, attn_mask=mask, key_padding_mask=t64(np.zeros((2, 3))))
    assert y.dtype is st.float32 and w.dtype is st.float32


# ---- Transformer layers ------------------------------------------------------------------------


def test_encoder_layer_post_norm_matches_pytorch():
    layer = loaded(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
                   "enc_post")
    assert sorted(layer.state_dict()) == sorted(fixture("enc_post", "param"))
    i, o = inputs("enc_post"), fixture("enc_post", "out")
    assert_close(layer(i["src"], src_key_padding_mask=i["kpm"]), o["y"], rtol=1e-4, atol=1e-5)
    assert_close(layer(i["src"], src_mask=i["causal"], is_causal=True), o["y_causal"],
                 rtol=1e-4, atol=1e-5)
    assert_close(layer(i["src"], is_causal=True), o["y_causal"], rtol=1e-4, atol=1e-5)


def test_encoder_layer_pre_norm_gelu_matches_pytorch():
    layer = loaded(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu",
                                              norm_first=True), "enc_pre")
    i, o = inputs("enc_pre"), fixture("enc_pre", "out")
    assert_close(layer(i["src"]), o["y"], rtol=1e-4, atol=1e-5)


def test_decoder_layer_matches_pytorch():
    layer = loaded(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True), "dec")
    assert sorted(layer.state_dict()) == sorted(fixture("dec", "param"))
    i, o = inputs("dec"), fixture("dec", "out")
    y = layer(i["tgt"], i["mem"], tgt_mask=i["causal"], memory_key_padding_mask=i["mkpm"],
              tgt_is_causal=True)
    assert_close(y, o["y"], rtol=1e-4, atol=1e-5)


def test_encoder_stack_matches_pytorch_and_copies_are_independent():
    base = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(base, 2, norm=nn.LayerNorm(8))
    a, b = enc.layers[0], enc.layers[1]
    assert a.linear1.weight is not b.linear1.weight and a is not base
    assert_close(a.linear1.weight, to_numpy(base.linear1.weight), rtol=0)
    loaded(enc, "enc_stack")
    i, o = inputs("enc_stack"), fixture("enc_stack", "out")
    assert_close(enc(i["src"]), o["y"], rtol=1e-4, atol=1e-5)
    assert not np.allclose(to_numpy(a.linear1.weight), to_numpy(b.linear1.weight))
    assert not np.allclose(to_numpy(base.linear1.weight), to_numpy(a.linear1.weight))


def test_decoder_stack_runs_and_trains():
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True), 2,
                                norm=nn.LayerNorm(8)).to(DEVICE)
    tgt = as_tensor(RNG.standard_normal((2, 4, 8)).astype(np.float32))
    mem = as_tensor(RNG.standard_normal((2, 6, 8)).astype(np.float32))
    out = dec(tgt, mem, tgt_is_causal=True)
    assert out.shape == (2, 4, 8)
    out.sum().backward()
    assert all(p.grad is not None for p in dec.parameters())


def test_encoder_layer_gradcheck_and_causality():
    layer = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, batch_first=True,
                                       activation=F.silu).double().to(DEVICE)
    x = t64(RNG.standard_normal((1, 3, 4)), requires_grad=True)
    assert st.autograd.gradcheck(lambda x: layer(x, is_causal=True), (x,))
    # with a causal mask, changing the last position leaves earlier outputs alone
    x2 = to_numpy(x).copy()
    x2[0, 2] += 1.0
    y1, y2 = layer(x, is_causal=True), layer(t64(x2), is_causal=True)
    assert_close(y1[0, :2], to_numpy(y2)[0, :2], rtol=1e-12)


def test_encoder_layer_dropout_only_in_training():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3, batch_first=True).to(DEVICE)
    x = as_tensor(RNG.standard_normal((2, 5, 8)).astype(np.float32))
    layer.eval()
    assert_close(layer(x), to_numpy(layer(x)), rtol=0)
    layer.train()
    assert not np.allclose(to_numpy(layer(x)), to_numpy(layer(x)))


def test_transformer_bad_input():
    with pytest.raises(ValueError, match="TransformerEncoderLayer: activation must be 'relu', "
                                         "'gelu' or a callable, got 'tanhh'"):
        nn.TransformerEncoderLayer(8, 2, activation="tanhh")
    with pytest.raises(ValueError, match="MultiheadAttention: embed_dim 8 must be divisible by "
                                         "num_heads 3"):
        nn.TransformerDecoderLayer(8, 3)
    with pytest.raises(ValueError, match="TransformerEncoderLayer: dim_feedforward must be a "
                                         "positive int"):
        nn.TransformerEncoderLayer(8, 2, dim_feedforward=0)
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 0)


# ---- positions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [6, 7])
def test_sinusoidal_positional_encoding(d_model):
    pe = to_numpy(nn.sinusoidal_positional_encoding(5, d_model, dtype=st.float64,
                                                    device=DEVICE))
    pos = np.arange(5)[:, None]
    want = np.zeros((5, d_model))
    for c in range(d_model):
        angle = pos[:, 0] / 10000 ** (2 * (c // 2) / d_model)
        want[:, c] = np.sin(angle) if c % 2 == 0 else np.cos(angle)
    np.testing.assert_allclose(pe, want, rtol=1e-12, atol=1e-12)
    enc = nn.SinusoidalPositionalEncoding(d_model, max_len=8, batch_first=False).double()
    x = RNG.standard_normal((5, 2, d_model))
    assert_close(enc.to(DEVICE)(t64(x)), x + want[:, None], rtol=1e-12)
    assert list(enc.state_dict()) == []


def test_positional_embedding_adds_learned_rows_and_trains():
    pos = nn.PositionalEmbedding(6, 3).double().to(DEVICE)
    x = RNG.standard_normal((2, 4, 3))
    out = pos(t64(x))
    assert_close(out, x + to_numpy(pos.weight)[:4], rtol=1e-12)
    out.sum().backward()
    g = np.zeros((6, 3))
    g[:4] = 2.0
    assert_close(pos.weight.grad, g)
    with pytest.raises(ValueError, match="PositionalEmbedding: sequence length 7 exceeds the 6 "
                                         "positions"):
        pos(t64(np.zeros((1, 7, 3))))
    with pytest.raises(ValueError, match="PositionalEmbedding: input has 4 features, expected 3"):
        pos(t64(np.zeros((1, 2, 4))))
