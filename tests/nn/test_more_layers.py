"""Distance, normalisation, bag, bilinear, container and lazy layers against numpy references,
their backward passes and their errors."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim

from ..helpers import to_numpy

rng = np.random.default_rng(21)


def t(a, grad=False):
    return st.tensor(np.asarray(a), requires_grad=grad)


def _close(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(to_numpy(got), want, rtol=rtol, atol=atol)


# ---- functional distances and norms ------------------------------------------------------------


def test_normalize_and_distances_against_numpy():
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    _close(F.normalize(t(a), p=3.0, dim=0),
           a / np.maximum((np.abs(a) ** 3).sum(0, keepdims=True) ** (1 / 3), 1e-12))
    _close(F.cosine_similarity(t(a), t(b), dim=1),
           (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))
    _close(F.pairwise_distance(t(a), t(b)), np.linalg.norm(a - b + 1e-6, axis=1))
    _close(F.pairwise_distance(t(a), t(b), p=float("inf"), keepdim=True),
           np.abs(a - b + 1e-6).max(1, keepdims=True))


def test_normalize_of_zero_vector_is_zero_with_finite_gradient():
    x = t(np.zeros((2, 3)), True)
    y = F.normalize(x)
    y.sum().backward()
    assert not np.any(to_numpy(y)) and np.all(np.isfinite(to_numpy(x.grad)))


def test_rms_norm_and_instance_norm_against_numpy():
    x = rng.standard_normal((2, 3, 4))
    w = rng.standard_normal(4)
    _close(F.rms_norm(t(x), (4,), t(w), eps=1e-5),
           x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w)
    want = (x - x.mean(2, keepdims=True)) / np.sqrt(x.var(2, keepdims=True) + 1e-5)
    _close(F.instance_norm(t(x)), want)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.normalize(t([[1.0]]), dim=2), IndexError, "normalize: dim 2 out of range"),
    (lambda: F.normalize(t([[1, 2]])), TypeError, "normalize: input must be a floating"),
    (lambda: F.normalize(t([[1.0]]), p="2"), TypeError, "normalize: p must be a number"),
    (lambda: F.cosine_similarity(t(np.ones((2, 3))), t(np.ones((2, 4)))), ValueError,
     "cosine_similarity: x1 of shape"),
    (lambda: F.pairwise_distance(t([1.0]), t([1.0]), p=-1.0), ValueError, "non-negative"),
    (lambda: F.rms_norm(t(np.ones((2, 3))), (4,)), ValueError, "rms_norm: normalized_shape"),
    (lambda: F.rms_norm(t(np.ones((2, 3))), 3, weight=t(np.ones(2))), ValueError,
     "rms_norm: weight must have shape"),
    (lambda: F.instance_norm(t(np.ones((2, 3)))), ValueError, "at least 3 dims"),
    (lambda: F.instance_norm(t(np.ones((2, 3, 1)))), ValueError, "more than 1 spatial"),
    (lambda: F.instance_norm(t(np.ones((2, 3, 2))), use_input_stats=False), ValueError,
     "needs running_mean"),
    (lambda: F.gumbel_softmax(t([1.0]), tau=0.0), ValueError, "tau must be positive"),
    (lambda: F.gumbel_softmax(t([1.0]), dim=3), IndexError, "gumbel_softmax: dim 3"),
])
def test_functional_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_gumbel_softmax_soft_and_hard():
    st.manual_seed(3)
    logits = t(np.log([[0.7, 0.2, 0.1]] * 4000), True)
    y = F.gumbel_softmax(logits, tau=1.0)
    _close(y.sum(dim=-1), np.ones(4000))
    hard = F.gumbel_softmax(logits, hard=True)
    h = to_numpy(hard)
    assert set(np.unique(h)) <= {0.0, 1.0} and np.all(h.sum(-1) == 1)
    # argmax of logits + Gumbel noise samples the categorical distribution
    np.testing.assert_allclose(h.mean(0), [0.7, 0.2, 0.1], atol=0.03)
    (hard * t(np.arange(3.0))).sum().backward()
    assert np.all(np.isfinite(to_numpy(logits.grad))) and np.abs(to_numpy(logits.grad)).sum()


# ---- distance and norm modules -----------------------------------------------------------------


def test_distance_modules_match_functional_and_backprop():
    a, b = t(rng.standard_normal((3, 4)), True), t(rng.standard_normal((3, 4)))
    cs = nn.CosineSimilarity(dim=1, eps=1e-6)
    pd = nn.PairwiseDistance(p=1.0, keepdim=True)
    np.testing.assert_array_equal(to_numpy(cs(a, b)), to_numpy(F.cosine_similarity(a, b, 1,
                                                                                   1e-6)))
    np.testing.assert_array_equal(to_numpy(pd(a, b)),
                                  to_numpy(F.pairwise_distance(a, b, 1.0, keepdim=True)))
    (cs(a, b).sum() + pd(a, b).sum()).backward()
    assert a.grad.shape == (3, 4)
    assert "p=1.0" in repr(pd) and "dim=1" in repr(cs)


@pytest.mark.parametrize("cls, shape", [
    (nn.InstanceNorm1d, (2, 3, 5)), (nn.InstanceNorm1d, (3, 5)),
    (nn.InstanceNorm2d, (2, 3, 4, 4)), (nn.InstanceNorm3d, (2, 3, 2, 2, 3)),
])
def test_instance_norm_modules(cls, shape):
    x = rng.standard_normal(shape) * 2 + 1
    m = cls(3, affine=True, track_running_stats=True, momentum=0.3).double()
    xb = x if len(shape) == cls._batched else x[None]
    axes = tuple(range(2, xb.ndim))
    want = (xb - xb.mean(axes, keepdims=True)) / np.sqrt(xb.var(axes, keepdims=True) + 1e-5)
    with st.no_grad():
        m.weight.fill_(2.0)
        m.bias.fill_(0.5)
    inp = t(x, True)
    y = m(inp)
    _close(y, (want * 2 + 0.5).reshape(shape))
    count = np.prod(xb.shape[2:])
    mean = xb.mean(axes).mean(0)
    var = (xb.var(axes) * count / (count - 1)).mean(0)
    _close(m.running_mean, 0.3 * mean)
    _close(m.running_var, 0.7 + 0.3 * var)
    assert m.num_batches_tracked.item() == 1
    y.sum().backward()
    assert inp.grad.shape == shape and m.weight.grad.shape == (3,)
    m.eval()
    rm, rv = to_numpy(m.running_mean), to_numpy(m.running_var)
    stats_shape = (1, 3) + (1,) * (xb.ndim - 2)
    want_eval = (xb - rm.reshape(stats_shape)) / np.sqrt(rv.reshape(stats_shape) + 1e-5)
    _close(m(t(x)), (want_eval * 2 + 0.5).reshape(shape))


def test_instance_norm_defaults_and_errors():
    m = nn.InstanceNorm2d(4)
    assert m.weight is None and m.running_mean is None and list(m.state_dict()) == []
    with pytest.raises(ValueError, match="InstanceNorm2d: expected a 3-d"):
        m(t(np.ones((2, 4))))
    with pytest.warns(UserWarning, match="num_features"):
        m(t(rng.standard_normal((1, 3, 2, 2))))
    with pytest.raises(ValueError, match="InstanceNorm1d: expected 4 channels"):
        nn.InstanceNorm1d(4, affine=True)(t(np.ones((1, 3, 5))))
    with pytest.raises(ValueError, match="InstanceNorm1d: num_features"):
        nn.InstanceNorm1d(0)


def test_rms_norm_module():
    x = rng.standard_normal((2, 3, 4))
    m = nn.RMSNorm([3, 4], eps=1e-6)
    with st.no_grad():
        m.weight.copy_(t(np.full((3, 4), 1.5)))
    inp = t(x, True)
    y = m(inp)
    _close(y, x / np.sqrt((x * x).mean((1, 2), keepdims=True) + 1e-6) * 1.5)
    y.sum().backward()
    assert m.weight.grad.shape == (3, 4)
    assert nn.RMSNorm(4, elementwise_affine=False).weight is None
    with pytest.raises(ValueError, match="RMSNorm: normalized_shape"):
        nn.RMSNorm(0)
    with pytest.raises(ValueError, match="rms_norm: normalized_shape"):
        m(t(np.ones((2, 4))))


# ---- EmbeddingBag and Bilinear -----------------------------------------------------------------


def _bag_np(w, bags, mode, weights=None, padding_idx=None):
    out = []
    for k, idx in enumerate(bags):
        keep = [i for i in range(len(idx)) if idx[i] != padding_idx]
        if not keep:
            out.append(np.zeros(w.shape[1]))
            continue
        rows = w[[idx[i] for i in keep]]
        if weights is not None:
            rows = rows * np.array([weights[k][i] for i in keep])[:, None]
        out.append({"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode])
    return np.array(out)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_offsets_and_2d(mode):
    bag = nn.EmbeddingBag(6, 3, mode=mode, padding_idx=1).double()
    w = to_numpy(bag.weight)
    assert not np.any(w[1])
    idx = [0, 2, 1, 5, 2, 4, 3]
    got = bag(t(idx), t([0, 3, 3, 5]))  # bags [0 2 1] [] [5 2] [4 3]
    _close(got, _bag_np(w, [[0, 2, 1], [], [5, 2], [4, 3]], mode, padding_idx=1))
    got.sum().backward()
    g = to_numpy(bag.weight.grad)
    assert g.shape == (6, 3) and not np.any(g[1])
    rows = [[0, 2, 1], [5, 2, 3]]
    _close(bag(t(rows)), _bag_np(w, rows, mode, padding_idx=1))
    last = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode=mode,
                                           include_last_offset=True)
    _close(last(t(idx), t([0, 3, 5, 7])), _bag_np(w, [[0, 2, 1], [5, 2], [4, 3]], mode))


def test_embedding_bag_per_sample_weights_gradient():
    w = t(rng.standard_normal((5, 2)), True)
    psw = t(rng.standard_normal(4), True)
    idx, off = t([1, 4, 4, 0]), t([0, 1])
    got = F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=psw)
    _close(got, _bag_np(to_numpy(w), [[1], [4, 4, 0]], "sum",
                        [to_numpy(psw)[:1], to_numpy(psw)[1:]]))
    assert st.autograd.gradcheck(
        lambda a, b: F.embedding_bag(idx, a, off, mode="sum", per_sample_weights=b), [w, psw])


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.embedding_bag(t([0, 1]), t(np.ones((3, 2)))), ValueError, "offsets is required"),
    (lambda: F.embedding_bag(t([[0, 1]]), t(np.ones((3, 2))), t([0])), ValueError,
     "offsets must be None"),
    (lambda: F.embedding_bag(t([0, 3]), t(np.ones((3, 2))), t([0])), IndexError,
     "out of range"),
    (lambda: F.embedding_bag(t([0, 1]), t(np.ones((3, 2))), t([1])), ValueError,
     "first offset must be 0"),
    (lambda: F.embedding_bag(t([0, 1]), t(np.ones((3, 2))), t([0, 2, 1])), ValueError,
     "non-decreasing"),
    (lambda: F.embedding_bag(t([0.0]), t(np.ones((3, 2))), t([0])), TypeError,
     "integer tensor of indices"),
    (lambda: F.embedding_bag(t([0, 1]), t(np.ones((3, 2))), t([0]), mode="min"), ValueError,
     "mode must be"),
    (lambda: F.embedding_bag(t([0, 1]), t(np.ones((3, 2))), t([0]),
                             per_sample_weights=t([1.0, 1.0])), ValueError, "only supported"),
    (lambda: F.embedding_bag(t([0, 1]), t(np.ones((3, 2))), t([0]), mode="sum",
                             per_sample_weights=t([1.0])), ValueError, "must match input"),
    (lambda: F.embedding_bag(t([0, 1]), t(np.ones((3, 2))), t([0]), max_norm=1.0),
     NotImplementedError, "max_norm"),
    (lambda: nn.EmbeddingBag(3, 2, mode="prod"), ValueError, "EmbeddingBag: mode"),
    (lambda: nn.EmbeddingBag(3, 2, padding_idx=5), ValueError, "padding_idx"),
])
def test_embedding_bag_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_bilinear_module_against_numpy_and_errors():
    m = nn.Bilinear(3, 2, 4).double()
    bound = 1 / np.sqrt(3)
    assert np.abs(to_numpy(m.weight)).max() <= bound and m.weight.shape == (4, 3, 2)
    a, b = t(rng.standard_normal((5, 3)), True), t(rng.standard_normal((5, 2)))
    y = m(a, b)
    want = np.einsum("ni,kij,nj->nk", to_numpy(a), to_numpy(m.weight), to_numpy(b))
    _close(y, want + to_numpy(m.bias))
    y.sum().backward()
    assert a.grad.shape == (5, 3) and m.weight.grad.shape == (4, 3, 2)
    assert nn.Bilinear(3, 2, 4, bias=False).bias is None
    with pytest.raises(ValueError, match="bilinear: inputs of shapes"):
        m(a, t(rng.standard_normal((5, 3))))
    with pytest.raises(ValueError, match="bilinear: weight must be 3-D"):
        F.bilinear(a, b, t(np.ones((3, 2))))
    with pytest.raises(ValueError, match="Bilinear: out_features"):
        nn.Bilinear(3, 2, -1)


# ---- parameter containers ----------------------------------------------------------------------


def test_parameter_list():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList([st.ones(2), nn.Parameter(st.zeros(2))])

        def forward(self, x):
            for w in self.ws:
                x = x * w + 1.0
            return x

    net = Net()
    net.ws.append(nn.Parameter(st.full((2,), 2.0)))
    assert len(net.ws) == 3 and list(net.state_dict()) == ["ws.0", "ws.1", "ws.2"]
    assert all(isinstance(p, nn.Parameter) for p in net.ws)
    net(st.ones(2)).sum().backward()
    assert net.ws[0].grad is not None and net.ws[-1] is net.ws[2]
    assert len(net.ws[1:]) == 2
    net.ws[0] = st.zeros(2)
    assert net.ws[0].tolist() == [0.0, 0.0]
    with pytest.raises(IndexError, match="out of range"):
        net.ws[3]
    with pytest.raises(TypeError, match="ParameterList: expected a Tensor"):
        net.ws.append(3)
    with pytest.raises(TypeError, match="iterable"):
        net.ws.extend(st.ones(2))
    opt = optim.SGD(net.parameters(), lr=0.1)
    assert len(opt.param_groups[0]["params"]) == 3


def test_parameter_dict():
    pd = nn.ParameterDict({"a": st.ones(2)})
    pd.update([("b", nn.Parameter(st.zeros(3)))])
    assert list(pd) == ["a", "b"] and "a" in pd and len(pd) == 2
    assert list(pd.state_dict()) == ["a", "b"] and isinstance(pd["a"], nn.Parameter)
    assert pd.pop("a").shape == (2,) and list(pd.keys()) == ["b"]
    with pytest.raises(KeyError, match="no parameter 'zz'"):
        pd["zz"]
    with pytest.raises(TypeError, match="keys must be strings"):
        pd[1] = st.ones(1)
    with pytest.raises(TypeError, match="ParameterDict: expected a Tensor"):
        pd["c"] = [1.0]
    with pytest.raises(ValueError, match="pairs"):
        pd.update([("x",)])


# ---- lazy modules ------------------------------------------------------------------------------


@pytest.mark.parametrize("lazy, eager, x, attr", [
    (lambda: nn.LazyLinear(3), lambda n: nn.Linear(n, 3), (2, 5), "in_features"),
    (lambda: nn.LazyConv1d(4, 3, padding=1), lambda n: nn.Conv1d(n, 4, 3, padding=1),
     (2, 5, 7), "in_channels"),
    (lambda: nn.LazyConv2d(4, 3, stride=2), lambda n: nn.Conv2d(n, 4, 3, stride=2),
     (2, 5, 7, 7), "in_channels"),
    (lambda: nn.LazyBatchNorm1d(), lambda n: nn.BatchNorm1d(n), (4, 5), "num_features"),
    (lambda: nn.LazyBatchNorm2d(momentum=0.5), lambda n: nn.BatchNorm2d(n, momentum=0.5),
     (4, 5, 2, 2), "num_features"),
])
def test_lazy_modules_become_their_eager_module(lazy, eager, x, attr):
    st.manual_seed(7)
    m = lazy()
    assert m.has_uninitialized_params()
    st.manual_seed(8)
    inp = st.randn(*x)
    st.manual_seed(9)
    y = m(inp)
    st.manual_seed(9)
    ref = eager(5)
    assert type(m) is type(ref) and getattr(m, attr) == 5
    np.testing.assert_array_equal(to_numpy(y), to_numpy(ref(inp)))  # both trained one step
    assert list(m.state_dict()) == list(ref.state_dict())
    for (k, a), (_, b) in zip(m.state_dict().items(), ref.state_dict().items()):
        assert a.shape == b.shape, k
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    y.sum().backward()
    assert all(p.grad is not None for p in m.parameters())


def test_optimizer_built_before_the_dry_run_trains_the_materialised_parameters():
    m = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(1))
    opt = optim.SGD(m.parameters(), lr=0.1)
    x, y = st.randn(8, 3), st.randn(8, 1)
    before = None
    for _ in range(3):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        if before is None:
            before = to_numpy(m[0].weight).copy()
        opt.step()
    assert m[0].weight.shape == (4, 3)
    assert opt.param_groups[0]["params"][0] is m[0].weight
    assert not np.array_equal(before, to_numpy(m[0].weight))


def test_lazy_module_moved_before_the_dry_run_keeps_dtype_and_loads_state():
    m = nn.LazyLinear(2).double()
    m(st.randn(3, 4, dtype=st.float64))
    assert m.weight.dtype is st.float64
    fresh = nn.LazyLinear(2).double()
    fresh.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(to_numpy(fresh.weight), to_numpy(m.weight))
    assert fresh.weight.shape == (2, 4)


def test_lazy_errors():
    m = nn.LazyLinear(3)
    assert "uninitialized" in repr(m)
    with pytest.raises(ValueError, match="LazyLinear: cannot infer"):
        m(st.tensor(1.0))
    with pytest.raises(ValueError, match="linear: weight must be 2-D"):
        F.linear(st.ones(2, 3), m.weight)  # an uninitialised parameter, used directly
    with pytest.raises(TypeError, match="LazyLinear: input must be a Tensor"):
        m([1.0, 2.0])
    with pytest.raises(ValueError, match="LazyLinear: out_features"):
        nn.LazyLinear(-2)


# ---- Transformer -------------------------------------------------------------------------------


def _small_transformer(**kw):
    st.manual_seed(0)
    return nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                          dim_feedforward=16, dropout=0.0, **kw).double()


@pytest.mark.parametrize("batch_first, norm_first", [(True, False), (False, True)])
def test_transformer_wires_encoder_into_decoder_and_is_causal(batch_first, norm_first):
    model = _small_transformer(batch_first=batch_first, norm_first=norm_first).eval()
    shape_src, shape_tgt = ((2, 6, 8), (2, 4, 8)) if batch_first else ((6, 2, 8), (4, 2, 8))
    src = t(rng.standard_normal(shape_src), True)
    tgt = t(rng.standard_normal(shape_tgt))
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=st.float64)
    out = model(src, tgt, tgt_mask=mask)
    want = model.decoder(tgt, model.encoder(src), tgt_mask=mask)
    np.testing.assert_array_equal(to_numpy(out), to_numpy(want))
    assert out.shape == shape_tgt and len(model.encoder.layers) == 2
    assert model.encoder.norm is not None and model.decoder.norm is not None
    # changing the last target position leaves the earlier outputs unchanged under the mask
    tgt2 = to_numpy(tgt).copy()
    seq = 1 if batch_first else 0
    tgt2[(slice(None),) * seq + (3,)] += rng.standard_normal(8)  # not a shift LayerNorm undoes
    out2 = model(src, t(tgt2), tgt_mask=mask)
    first = (slice(None),) * seq + (slice(0, 3),)
    np.testing.assert_allclose(to_numpy(out2)[first], to_numpy(out)[first], rtol=1e-12,
                               atol=1e-12)
    assert not np.allclose(to_numpy(out2), to_numpy(out))
    out.sum().backward()
    assert src.grad is not None and all(p.grad is not None for p in model.parameters())


def test_transformer_init_mask_custom_parts_and_errors():
    model = _small_transformer()
    w = to_numpy(model.encoder.layers[0].linear1.weight)  # (16, 8): xavier bound
    assert np.abs(w).max() <= np.sqrt(6 / (16 + 8))
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.tolist() == [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]]

    class Enc(nn.Module):
        def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
            return src * 2.0

    custom = nn.Transformer(d_model=8, nhead=2, num_decoder_layers=1, dim_feedforward=16,
                            custom_encoder=Enc())
    assert isinstance(custom.encoder, Enc) and custom(st.ones(3, 1, 8), st.ones(2, 1, 8)
                                                      ).shape == (2, 1, 8)
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        model(st.ones(3, 2, 8, dtype=st.float64), st.ones(3, 1, 8, dtype=st.float64))
    with pytest.raises(RuntimeError, match="d_model=8"):
        model(st.ones(3, 2, 4, dtype=st.float64), st.ones(3, 2, 4, dtype=st.float64))
    with pytest.raises(ValueError, match="both be 3-D"):
        model(st.ones(3, 2, 8), st.ones(2, 8))
    with pytest.raises(TypeError, match="custom_encoder must be a Module"):
        nn.Transformer(custom_encoder=lambda x: x)
    with pytest.raises(ValueError, match="sz must be"):
        nn.Transformer.generate_square_subsequent_mask(-1)


# ---- affine_grid and grid_sample ---------------------------------------------------------------


@pytest.mark.parametrize("align", [False, True])
def test_identity_affine_grid_samples_the_image_back(align):
    img = t(rng.standard_normal((2, 3, 4, 5)))
    theta = t(np.tile(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (2, 1, 1)))
    grid = F.affine_grid(theta, (2, 3, 4, 5), align_corners=align)
    assert grid.shape == (2, 4, 5, 2)
    for mode in ("bilinear", "nearest"):
        _close(F.grid_sample(img, grid, mode=mode, align_corners=align), to_numpy(img))


def test_grid_sample_padding_modes_by_hand():
    img = t(np.array([[[[1.0, 2.0, 3.0, 4.0]]]]))  # one row, W = 4
    # with align_corners, x = -2, 1/3, 2 (normalised) are pixels -1.5, 2 and 4.5
    g = t(np.array([[[[-2.0, 0.0], [1.0 / 3.0, 0.0], [2.0, 0.0]]]]))
    # zeros: both taps of -1.5 and of 4.5 are outside; 2 is pixel 2 exactly
    _close(F.grid_sample(img, g, padding_mode="zeros", align_corners=True),
           [[[[0.0, 3.0, 0.0]]]])
    _close(F.grid_sample(img, g, padding_mode="border", align_corners=True),
           [[[[1.0, 3.0, 4.0]]]])
    # reflection about the edge pixels: -1.5 -> 1.5, 4.5 -> 1.5
    _close(F.grid_sample(img, g, padding_mode="reflection", align_corners=True),
           [[[[2.5, 3.0, 2.5]]]])


def test_affine_grid_translation_shifts_the_samples():
    img = t(np.arange(12.0).reshape(1, 1, 3, 4))
    theta = t(np.array([[[1.0, 0, 2.0 / 3.0], [0, 1.0, 0]]]))  # one pixel right (align True)
    grid = F.affine_grid(theta, (1, 1, 3, 4), align_corners=True)
    out = F.grid_sample(img, grid, align_corners=True)
    want = np.concatenate([np.arange(12.0).reshape(3, 4)[:, 1:], np.zeros((3, 1))], 1)
    _close(out, want[None, None])


def test_grid_sample_gradient_reaches_the_grid_and_theta():
    img = t(rng.standard_normal((1, 2, 4, 4)), True)
    theta = t(np.array([[[0.9, 0.1, 0.05], [-0.1, 0.8, 0.1]]]), True)

    def fn(a, th):
        return F.grid_sample(a, F.affine_grid(th, (1, 2, 3, 3), align_corners=False),
                             padding_mode="border")

    assert st.autograd.gradcheck(fn, [img, theta])


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.grid_sample(t(np.ones((1, 1, 2, 2))), t(np.zeros((1, 2, 2, 2))), mode="cubic"),
     ValueError, "grid_sample: mode must be"),
    (lambda: F.grid_sample(t(np.ones((1, 1, 2, 2))), t(np.zeros((1, 2, 2, 2))),
                           padding_mode="wrap"), ValueError, "padding_mode must be"),
    (lambda: F.grid_sample(t(np.ones((1, 1, 2, 2))), t(np.zeros((2, 2, 2, 2)))), ValueError,
     r"grid must be \(N, H_out, W_out, 2\)"),
    (lambda: F.grid_sample(t(np.ones((1, 2, 2))), t(np.zeros((1, 2, 2, 2)))), ValueError,
     "4-D input"),
    (lambda: F.affine_grid(t(np.ones((1, 2, 3))), (1, 1, 2)), ValueError, "size must be"),
    (lambda: F.affine_grid(t(np.ones((2, 2, 3))), (1, 1, 2, 2)), ValueError,
     r"theta of shape \(1, 2, 3\)"),
])
def test_sampling_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_lazy_module_survives_deepcopy_before_the_dry_run():
    import copy

    m = nn.LazyConv2d(2, 1)
    c = copy.deepcopy(m)
    assert c.has_uninitialized_params()
    assert c(st.ones(1, 3, 2, 2)).shape == (1, 2, 2, 2) and c.weight.shape == (2, 3, 1, 1)
    assert m.has_uninitialized_params() and not hasattr(c, "_uninitialized")


def test_grid_sample_bicubic_by_hand():
    a, b, c, d = 1.0, 2.0, 5.0, 3.0
    img = t(np.array([[[[a, b, c, d]]]]))
    # cubic convolution (a = -0.75) weights of the taps -1, 0, 1, 2 at a half-way point
    w = np.array([-0.09375, 0.59375, 0.59375, -0.09375])
    # align_corners with W = 4: x = 0 is pixel 1.5, x = -2/3 pixel 0.5
    g = t(np.array([[[[0.0, 0.0], [-2.0 / 3.0, 0.0]]]]))
    got = F.grid_sample(img, g, mode="bicubic", align_corners=True)
    _close(got, [[[[w @ [a, b, c, d], w @ [0.0, a, b, c]]]]])
    border = F.grid_sample(img, g, mode="bicubic", padding_mode="border", align_corners=True)
    _close(border, [[[[w @ [a, b, c, d], w @ [a, a, b, c]]]]])  # each tap clamped
    # at the pixels themselves bicubic returns the image
    ident = F.affine_grid(t(np.array([[[1.0, 0, 0], [0, 1.0, 0]]])), (1, 1, 1, 4))
    _close(F.grid_sample(img, ident, mode="bicubic"), to_numpy(img))
