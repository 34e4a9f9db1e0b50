"""The ONNX forms of layers whose export needs more than one node per op: Unfold/Fold, the
recurrent cells, the class-index losses, EmbeddingBag, LocalResponseNorm and MaxUnpool. Each
graph is exported once with symbolic leading dims, run in onnxruntime at two sizes against our
forward, and loaded back with st.onnx.load, which must agree with onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from .test_export import _Fn  # noqa: E402 - after the optional imports it needs


def _flat(out) -> list:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [np.asarray(o.numpy()) for o in outs]


def _check(m, make, sizes=(2, 5), opset=17, dynamic=None, load=True) -> list:
    """Export m on make(sizes[0]), run the graph at every size in onnxruntime and (load) in
    st.onnx.load against m's own forward; returns the graph's op types. dynamic: the dims
    of each input that are symbolic (default: dim 0 of every input)."""
    m.eval()
    xs = make(sizes[0])
    names = [f"in_{i}" for i in range(len(xs))]
    dynamic = dynamic or [[0]] * len(xs)
    axes = {n: {d: f"{n}_{d}" for d in dims} for n, dims in zip(names, dynamic) if dims}
    proto = st.onnx.export(m, tuple(xs), None, input_names=names, dynamic_axes=axes,
                           opset_version=opset)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    back = st.onnx.load(proto) if load else None
    for size in sizes:
        st.manual_seed(size)
        xs = make(size)
        with st.no_grad():
            want = _flat(m(*xs))
        got = sess.run(None, {n: x.numpy() for n, x in zip(names, xs)})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, size
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"size {size}")
        if back is not None:
            with st.no_grad():
                loaded = _flat(back(*xs))
            for g, w in zip(loaded, got):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5,
                                           err_msg=f"loaded, size {size}")
    return [n.op_type for n in proto.graph.node]


# ---- Unfold and Fold ----------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [11, 17, 18])
def test_unfold_is_a_grouped_conv_in_im2col_order(opset):
    m = nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    ops = _check(m, lambda b: (st.randn(b, 3, 5, 6),), opset=opset)
    assert "Conv" in ops


def test_unbatched_unfold_follows_the_width():
    m = _Fn(lambda x: F.unfold(x, 2, stride=2))
    assert "Conv" in _check(m, lambda w: (st.randn(3, 4, w),), sizes=(6, 8), dynamic=[[2]])


@pytest.mark.parametrize("opset,op", [(17, "ConvTranspose"), (18, "Col2Im"), (21, "Col2Im")])
def test_fold_is_col2im_from_opset_18_and_a_transposed_conv_below(opset, op):
    # stride 2 over 5 rows leaves the last row to output_padding below opset 18
    m = nn.Fold((5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    assert op in _check(m, lambda b: (st.randn(b, 18, 12),), opset=opset)
    m = nn.Fold((5, 4), 2, stride=2)
    assert op in _check(m, lambda b: (st.randn(b, 8, 4),), opset=opset)


@pytest.mark.parametrize("opset", [17, 18])
def test_unbatched_fold(opset):
    m = _Fn(lambda x: F.fold(x, (3, 3), 2))
    _check(m, lambda n: (st.randn(8, 4),), sizes=(1,), opset=opset, dynamic=[[]])


# ---- LocalResponseNorm --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 5), (4, 3, 3), (3, 2, 2, 3)])
def test_local_response_norm_of_odd_size_is_lrn(shape):
    m = nn.LocalResponseNorm(3, alpha=0.5, beta=0.6, k=2.0)
    assert "LRN" in _check(m, lambda b: (st.randn(b, *shape),))


def test_local_response_norm_of_even_size_pads_before_the_channel():
    # ONNX's LRN puts the extra channel of an even window after the channel, ours before it
    m = nn.LocalResponseNorm(2, alpha=0.5)
    ops = _check(m, lambda b: (st.randn(b, 4, 3, 3),))
    assert "LRN" not in ops and "Pad" in ops


# ---- MaxUnpool ----------------------------------------------------------------------------------


def _pooled(n: int, size: int, unbatched: bool = False):
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]

    def make(b):
        x = st.randn(b, 2, *([size] * n))
        out, idx = pool(x, 2, return_indices=True)
        return (out[0], idx[0]) if unbatched else (out, idx)
    return make


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_scatters_into_zeros_that_follow_the_batch(n):
    m = {1: nn.MaxUnpool1d, 2: nn.MaxUnpool2d, 3: nn.MaxUnpool3d}[n](2)
    assert "ScatterElements" in _check(m, _pooled(n, 4), dynamic=[[0], [0]])


def test_max_unpool_with_output_size_and_unbatched_input():
    # 5 rows pool to 2: the given output size keeps the fifth row (zeros)
    m = _Fn(lambda v, i: F.max_unpool2d(v, i, 2, output_size=(5, 5)))
    _check(m, _pooled(2, 5), dynamic=[[0], [0]])
    m = _Fn(lambda v, i: F.max_unpool2d(v, i, 2))
    _check(m, _pooled(2, 4, unbatched=True), sizes=(2,), dynamic=[[], []])


# ---- losses whose masks and broadcasts follow the batch -----------------------------------------


@pytest.mark.parametrize("var", ["same", "per_sample", "float"])
def test_gaussian_nll_loss_follows_the_batch(var):
    def make(b):
        v = {"same": st.rand(b, 3) + 0.5, "per_sample": st.rand(b) + 0.5,
             "float": None}[var]
        return (st.randn(b, 3), st.randn(b, 3)) + ((v,) if v is not None else ())

    def loss(x, t, v=0.7):
        return F.gaussian_nll_loss(x, t, v, full=True, reduction="sum")
    _check(_Fn(loss), make)


def test_multilabel_margin_loss_counts_targets_in_the_graph():
    def make(b):
        rng = np.random.default_rng(b)
        t = rng.integers(0, 5, (b, 5))
        for row, end in zip(t, rng.integers(0, 6, b)):
            row[end:end + 1] = -1  # a row ends at its first -1; what follows is ignored
        return st.randn(b, 5), st.tensor(t)
    for reduction in ("none", "mean"):
        m = _Fn(lambda x, t, r=reduction: F.multilabel_margin_loss(x, t, reduction=r))
        assert "CumSum" in _check(m, make)


# ---- recurrent cells ----------------------------------------------------------------------------


_CELLS = {"RNNCell": lambda bias: nn.RNNCell(4, 3, bias=bias),
          "RNNCell-relu": lambda bias: nn.RNNCell(4, 3, bias=bias, nonlinearity="relu"),
          "GRUCell": lambda bias: nn.GRUCell(4, 3, bias=bias),
          "LSTMCell": lambda bias: nn.LSTMCell(4, 3, bias=bias)}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name", sorted(_CELLS))
def test_cell_without_state_is_one_step_whose_zero_state_follows_the_batch(name, bias):
    st.manual_seed(0)
    ops = _check(_CELLS[name](bias), lambda b: (st.randn(b, 4),))
    assert ops.count(name.split("Cell")[0]) == 1


@pytest.mark.parametrize("name", sorted(_CELLS))
def test_cell_with_state(name):
    st.manual_seed(1)
    cell = _CELLS[name](True)
    lstm = name == "LSTMCell"
    m = _Fn(lambda x, h, c: cell(x, (h, c))) if lstm else _Fn(lambda x, h: cell(x, h))

    def make(b):
        return (st.randn(b, 4), st.randn(b, 3)) + ((st.randn(b, 3),) if lstm else ())
    _check(m, make)


def test_unbatched_cell_and_two_steps():
    st.manual_seed(2)
    cell = nn.LSTMCell(4, 3)
    _check(cell, lambda n: (st.randn(4),), sizes=(1,), dynamic=[[]])

    def two_steps(x):
        h, c = cell(x[:, 0])
        return cell(x[:, 1], (h, c))
    assert _check(_Fn(two_steps), lambda b: (st.randn(b, 2, 4),)).count("LSTM") == 2


# ---- class-index losses -------------------------------------------------------------------------


def _classes(*spatial, ignore=-100):
    def make(b):
        t = st.randint(0, 4, (b, *spatial))
        t.reshape(-1)[0] = ignore  # one ignored position, wherever the batch puts it
        return st.randn(b, 4, *spatial), t
    return make


_WEIGHT = st.tensor([0.5, 2.0, 1.0, 1.5])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_is_softmax_cross_entropy_loss(reduction, weighted, smoothing):
    m = nn.CrossEntropyLoss(weight=_WEIGHT if weighted else None, reduction=reduction,
                            label_smoothing=smoothing, ignore_index=3)
    ops = _check(m, _classes(ignore=3))
    assert ops.count("SoftmaxCrossEntropyLoss") == 1
    ops = _check(m, _classes(2, 3, ignore=3), opset=13)  # (N, C, d1, d2) scores
    assert ops.count("SoftmaxCrossEntropyLoss") == 1


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_is_negative_log_likelihood_loss(reduction, weighted):
    m = nn.NLLLoss(weight=_WEIGHT if weighted else None, reduction=reduction)
    ops = _check(m, _classes())
    assert ops.count("NegativeLogLikelihoodLoss") == 1
    _check(m, _classes(3))


def test_class_losses_of_an_unbatched_input():
    def make(_):
        return st.randn(4), st.tensor(2)
    for reduction in ("none", "mean"):
        _check(_Fn(lambda x, t, r=reduction: F.cross_entropy(x, t, reduction=r,
                                                             label_smoothing=0.1)),
               make, sizes=(1,), dynamic=[[], []])
        _check(_Fn(lambda x, t, r=reduction: F.nll_loss(x, t, reduction=r)), make, sizes=(1,),
               dynamic=[[], []])


def test_class_losses_below_opset_12():
    # nll_loss runs as its ops (its ignored positions a mask the graph computes); the fused
    # cross entropy has no form there and says what it needs
    ops = _check(nn.NLLLoss(), _classes(), opset=11)
    assert "NegativeLogLikelihoodLoss" not in ops and "Equal" in ops
    with pytest.raises(RuntimeError, match="cross_entropy with class-index targets needs "
                                           "opset 12 or later"):
        st.onnx.export(nn.CrossEntropyLoss(), _classes()(2), None, opset_version=11)


def test_cross_entropy_with_probability_targets_runs_its_ops():
    m = nn.CrossEntropyLoss(label_smoothing=0.1)
    ops = _check(m, lambda b: (st.randn(b, 4), st.rand(b, 4).softmax(1)), opset=11)
    assert "SoftmaxCrossEntropyLoss" not in ops


# ---- EmbeddingBag -------------------------------------------------------------------------------


def _bags_1d(with_weights=False, last=False):
    """b bags over 3 * b indices with offsets that leave bag 1 empty (and, with last, put the
    final indices in no bag)."""
    def make(b):
        n = 3 * b
        offsets = [0, 2, 2] + list(range(4, n - 1, 2))[:b - 3] if b > 2 else [0, 2][:b]
        offsets = offsets + [n - 1] if last else offsets
        out = (st.randint(0, 6, (n,)), st.tensor(offsets))
        return out + ((st.randn(n),) if with_weights else ())
    return make


@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_of_rows(mode, padding_idx):
    st.manual_seed(3)
    m = nn.EmbeddingBag(6, 3, mode=mode, padding_idx=padding_idx)
    # a row of padding only is an empty bag: zeros
    ops = _check(m, lambda b: (st.tensor(np.r_[np.full((1, 3), 2), np.random.default_rng(
        b).integers(0, 6, (b - 1, 3))]),))
    assert "Gather" in ops


@pytest.mark.parametrize("opset", [11, 18])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_with_offsets_follows_indices_and_offsets(mode, last, opset):
    st.manual_seed(4)
    m = nn.EmbeddingBag(6, 3, mode=mode, include_last_offset=last, padding_idx=1)
    _check(m, _bags_1d(last=last), sizes=(5, 7), opset=opset)


def test_embedding_bag_per_sample_weights():
    st.manual_seed(5)
    m = nn.EmbeddingBag(6, 3, mode="sum")
    _check(m, _bags_1d(with_weights=True), sizes=(5, 7))
    _check(_Fn(lambda x, w: m(x, per_sample_weights=w)),
           lambda b: (st.randint(0, 6, (b, 4)), st.randn(b, 4)))
