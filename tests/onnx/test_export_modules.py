"""Every public Module class of singa_tensor.nn exports: each is built with small arguments,
exported with a dynamic batch axis, and run in onnxruntime at two batch sizes against our own
forward in eval mode. A class that cannot be exported (a base class or a container without a
forward) is listed with its reason. A new class in nn without an entry here fails the walk."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _r(*shape):
    """Inputs: one float tensor of shape (batch, *shape)."""
    return lambda b: (st.randn(b, *shape),)


def _prob(*shape):
    return lambda b: (st.rand(b, *shape) * 0.8 + 0.1,)


def _pair(*shape):
    return lambda b: (st.randn(b, *shape), st.randn(b, *shape))


def _target(kind, *shape):
    """Loss inputs: predictions and a target of the kind the loss reads."""
    def make(b):
        x = st.randn(b, *shape)
        if kind == "prob":
            return st.rand(b, *shape) * 0.8 + 0.1, st.rand(b, *shape)
        if kind == "class":
            return x, st.randint(0, shape[0], (b,))
        if kind == "sign":
            return x, st.tensor(np.where(np.random.default_rng(b).random(
                (b, *shape)) > 0.5, 1.0, -1.0).astype(np.float32))
        if kind == "binary":
            return x, (st.rand(b, *shape) > 0.5).float()
        if kind == "logprob":
            return x.log_softmax(-1), st.rand(b, *shape).softmax(-1)
        if kind == "multilabel":
            t = np.full((b, *shape), -1, np.int64)
            t[:, 0], t[:, 1] = 1, 0
            return x, st.tensor(t)
        return x, st.randn(b, *shape)
    return make


def _seq(b):
    return (st.randn(b, 5, 4),)


def _ids(b):
    return (st.randint(0, 6, (b, 3)),)


def _enc_layer():
    return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)


def _dec_layer():
    return nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)


def _lazy(cls, *args, shape):
    def build():
        m = cls(*args)
        m(st.randn(2, *shape))  # a lazy module takes its shapes from the first call
        return m
    return build


def _unpool(cls, n):
    pool = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}[n](2, return_indices=True)

    def make(b):
        out, idx = pool(st.randn(b, 2, *([4] * n)))
        return out, idx
    return lambda: cls(2), make


# class name -> (a function building the module, a function of the batch size giving inputs)
CASES = {
    "AdaptiveAvgPool1d": (lambda: nn.AdaptiveAvgPool1d(3), _r(2, 6)),
    "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((2, 3)), _r(2, 4, 6)),
    "AdaptiveAvgPool3d": (lambda: nn.AdaptiveAvgPool3d(2), _r(2, 4, 4, 4)),
    "AdaptiveMaxPool1d": (lambda: nn.AdaptiveMaxPool1d(3), _r(2, 6)),
    "AdaptiveMaxPool2d": (lambda: nn.AdaptiveMaxPool2d(2), _r(2, 4, 4)),
    "AdaptiveMaxPool3d": (lambda: nn.AdaptiveMaxPool3d(2), _r(2, 4, 4, 4)),
    "AlphaDropout": (lambda: nn.AlphaDropout(0.3), _r(5)),
    "AvgPool1d": (lambda: nn.AvgPool1d(2), _r(2, 6)),
    "AvgPool2d": (lambda: nn.AvgPool2d(2, padding=1), _r(2, 5, 5)),
    "AvgPool3d": (lambda: nn.AvgPool3d(2), _r(2, 4, 4, 4)),
    "BCELoss": (lambda: nn.BCELoss(), _target("prob", 3)),
    "BCEWithLogitsLoss": (lambda: nn.BCEWithLogitsLoss(), _target("binary", 3)),
    "BatchNorm1d": (lambda: nn.BatchNorm1d(3), _r(3, 4)),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(3), _r(3, 4, 4)),
    "BatchNorm3d": (lambda: nn.BatchNorm3d(3), _r(3, 2, 2, 2)),
    "Bilinear": (lambda: nn.Bilinear(3, 4, 2), lambda b: (st.randn(b, 3), st.randn(b, 4))),
    "CELU": (lambda: nn.CELU(0.7), _r(5)),
    "CTCLoss": (lambda: nn.CTCLoss(), lambda b: (
        st.randn(5, b, 4).log_softmax(-1), st.randint(1, 4, (b, 2)),
        st.full((b,), 5, dtype=st.int64), st.full((b,), 2, dtype=st.int64))),
    "ChannelShuffle": (lambda: nn.ChannelShuffle(2), _r(4, 2, 2)),
    "CircularPad1d": (lambda: nn.CircularPad1d(1), _r(2, 4)),
    "CircularPad2d": (lambda: nn.CircularPad2d(1), _r(2, 3, 3)),
    "CircularPad3d": (lambda: nn.CircularPad3d(1), _r(2, 3, 3, 3)),
    "ConstantPad1d": (lambda: nn.ConstantPad1d((1, 2), 0.5), _r(2, 4)),
    "ConstantPad2d": (lambda: nn.ConstantPad2d(1, -1.0), _r(2, 3, 3)),
    "ConstantPad3d": (lambda: nn.ConstantPad3d(1, 2.0), _r(2, 3, 3, 3)),
    "Conv1d": (lambda: nn.Conv1d(2, 3, 3, padding=1), _r(2, 6)),
    "Conv2d": (lambda: nn.Conv2d(2, 4, 3, stride=2, groups=2), _r(2, 6, 6)),
    "Conv3d": (lambda: nn.Conv3d(2, 3, 2, padding=1), _r(2, 3, 3, 3)),
    "ConvTranspose1d": (lambda: nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1,
                                                   output_padding=1, groups=2), _r(4, 5)),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0),
                                                   output_padding=(1, 2), groups=2,
                                                   dilation=(1, 1)), _r(4, 3, 3)),
    "ConvTranspose3d": (lambda: nn.ConvTranspose3d(2, 3, 2, stride=2, padding=1,
                                                   output_padding=1, dilation=1), _r(2, 3, 2, 3)),
    "CosineEmbeddingLoss": (lambda: nn.CosineEmbeddingLoss(0.1),
                            lambda b: (st.randn(b, 4), st.randn(b, 4),
                                       _target("sign", 1)(b)[1].reshape(b))),
    "CosineSimilarity": (lambda: nn.CosineSimilarity(), _pair(4)),
    "CrossEntropyLoss": (lambda: nn.CrossEntropyLoss(label_smoothing=0.1), _target("class", 4)),
    "Dropout": (lambda: nn.Dropout(0.3), _r(5)),
    "Dropout1d": (lambda: nn.Dropout1d(0.3), _r(2, 5)),
    "Dropout2d": (lambda: nn.Dropout2d(0.3), _r(2, 3, 3)),
    "Dropout3d": (lambda: nn.Dropout3d(0.3), _r(2, 2, 2, 2)),
    "ELU": (lambda: nn.ELU(0.5), _r(5)),
    "Embedding": (lambda: nn.Embedding(6, 3), _ids),
    "EmbeddingBag": (lambda: nn.EmbeddingBag(6, 3, mode="mean"), _ids),
    "FeatureAlphaDropout": (lambda: nn.FeatureAlphaDropout(0.3), _r(2, 3, 3)),
    "Flatten": (lambda: nn.Flatten(), _r(2, 3, 2)),
    "Fold": (lambda: nn.Fold((3, 3), 2), _r(8, 4)),
    "FractionalMaxPool2d": (lambda: nn.FractionalMaxPool2d(2, output_size=2), _r(2, 5, 5)),
    "FractionalMaxPool3d": (lambda: nn.FractionalMaxPool3d(2, output_size=2), _r(2, 5, 5, 5)),
    "GELU": (lambda: nn.GELU(), _r(5)),
    "GLU": (lambda: nn.GLU(), _r(6)),
    "GRU": (lambda: nn.GRU(4, 3, num_layers=2, batch_first=True, bidirectional=True), _seq),
    "GRUCell": (lambda: nn.GRUCell(4, 3), _r(4)),
    "GaussianNLLLoss": (lambda: nn.GaussianNLLLoss(),
                        lambda b: (st.randn(b, 3), st.randn(b, 3), st.rand(b, 3) + 0.5)),
    "GroupNorm": (lambda: nn.GroupNorm(2, 4), _r(4, 3, 3)),
    "Hardshrink": (lambda: nn.Hardshrink(), _r(5)),
    "Hardsigmoid": (lambda: nn.Hardsigmoid(), _r(5)),
    "Hardswish": (lambda: nn.Hardswish(), _r(5)),
    "Hardtanh": (lambda: nn.Hardtanh(-0.5, 0.7), _r(5)),
    "HingeEmbeddingLoss": (lambda: nn.HingeEmbeddingLoss(), _target("sign", 3)),
    "HuberLoss": (lambda: nn.HuberLoss(delta=0.5), _target("real", 3)),
    "Identity": (lambda: nn.Identity(), _r(3)),
    "InstanceNorm1d": (lambda: nn.InstanceNorm1d(3, affine=True), _r(3, 5)),
    "InstanceNorm2d": (lambda: nn.InstanceNorm2d(3), _r(3, 4, 4)),
    "InstanceNorm3d": (lambda: nn.InstanceNorm3d(3), _r(3, 2, 2, 2)),
    "KLDivLoss": (lambda: nn.KLDivLoss(reduction="batchmean"), _target("logprob", 4)),
    "L1Loss": (lambda: nn.L1Loss(), _target("real", 3)),
    "LPPool1d": (lambda: nn.LPPool1d(2, 2), _r(2, 6)),
    "LPPool2d": (lambda: nn.LPPool2d(2, 2), _r(2, 4, 4)),
    "LPPool3d": (lambda: nn.LPPool3d(2, 2), _r(2, 4, 4, 4)),
    "LSTM": (lambda: nn.LSTM(4, 3, num_layers=2, batch_first=True), _seq),
    "LSTMCell": (lambda: nn.LSTMCell(4, 3), _r(4)),
    "LayerNorm": (lambda: nn.LayerNorm(4), _r(3, 4)),
    "LazyBatchNorm1d": (_lazy(nn.LazyBatchNorm1d, shape=(3,)), _r(3)),
    "LazyBatchNorm2d": (_lazy(nn.LazyBatchNorm2d, shape=(3, 2, 2)), _r(3, 2, 2)),
    "LazyBatchNorm3d": (_lazy(nn.LazyBatchNorm3d, shape=(3, 2, 2, 2)), _r(3, 2, 2, 2)),
    "LazyConv1d": (_lazy(nn.LazyConv1d, 3, 2, shape=(2, 5)), _r(2, 5)),
    "LazyConv2d": (_lazy(nn.LazyConv2d, 3, 2, shape=(2, 4, 4)), _r(2, 4, 4)),
    "LazyConv3d": (_lazy(nn.LazyConv3d, 3, 2, shape=(2, 3, 3, 3)), _r(2, 3, 3, 3)),
    "LazyConvTranspose1d": (_lazy(nn.LazyConvTranspose1d, 3, 2, shape=(2, 5)), _r(2, 5)),
    "LazyConvTranspose2d": (_lazy(nn.LazyConvTranspose2d, 3, 2, shape=(2, 3, 3)), _r(2, 3, 3)),
    "LazyConvTranspose3d": (_lazy(nn.LazyConvTranspose3d, 3, 2, shape=(2, 2, 2, 2)),
                            _r(2, 2, 2, 2)),
    "LazyInstanceNorm1d": (_lazy(nn.LazyInstanceNorm1d, shape=(3, 5)), _r(3, 5)),
    "LazyInstanceNorm2d": (_lazy(nn.LazyInstanceNorm2d, shape=(3, 3, 3)), _r(3, 3, 3)),
    "LazyInstanceNorm3d": (_lazy(nn.LazyInstanceNorm3d, shape=(3, 2, 2, 2)), _r(3, 2, 2, 2)),
    "LazyLinear": (_lazy(nn.LazyLinear, 2, shape=(5,)), _r(5)),
    "LeakyReLU": (lambda: nn.LeakyReLU(0.2), _r(5)),
    "Linear": (lambda: nn.Linear(4, 3), _r(4)),
    "LocalResponseNorm": (lambda: nn.LocalResponseNorm(3), _r(4, 3, 3)),
    "LogSigmoid": (lambda: nn.LogSigmoid(), _r(5)),
    "LogSoftmax": (lambda: nn.LogSoftmax(-1), _r(5)),
    "MSELoss": (lambda: nn.MSELoss(), _target("real", 3)),
    "MarginRankingLoss": (lambda: nn.MarginRankingLoss(0.1),
                          lambda b: (st.randn(b), st.randn(b), _target("sign", 1)(b)[1]
                                     .reshape(b))),
    "MaxPool1d": (lambda: nn.MaxPool1d(2), _r(2, 6)),
    "MaxPool2d": (lambda: nn.MaxPool2d(3, stride=2, padding=1), _r(2, 5, 5)),
    "MaxPool3d": (lambda: nn.MaxPool3d(2), _r(2, 4, 4, 4)),
    "MaxUnpool1d": _unpool(nn.MaxUnpool1d, 1),
    "MaxUnpool2d": _unpool(nn.MaxUnpool2d, 2),
    "MaxUnpool3d": _unpool(nn.MaxUnpool3d, 3),
    "Mish": (lambda: nn.Mish(), _r(5)),
    "MultiLabelMarginLoss": (lambda: nn.MultiLabelMarginLoss(), _target("multilabel", 4)),
    "MultiLabelSoftMarginLoss": (lambda: nn.MultiLabelSoftMarginLoss(), _target("binary", 4)),
    "MultiMarginLoss": (lambda: nn.MultiMarginLoss(), _target("class", 4)),
    "MultiheadAttention": (lambda: nn.MultiheadAttention(8, 2, batch_first=True),
                           lambda b: (st.randn(b, 3, 8),) * 3),
    "NLLLoss": (lambda: nn.NLLLoss(), _target("class", 4)),
    "PReLU": (lambda: nn.PReLU(3), _r(3, 2)),
    "PairwiseDistance": (lambda: nn.PairwiseDistance(), _pair(4)),
    "PixelShuffle": (lambda: nn.PixelShuffle(2), _r(8, 2, 2)),
    "PixelUnshuffle": (lambda: nn.PixelUnshuffle(2), _r(2, 4, 4)),
    "PoissonNLLLoss": (lambda: nn.PoissonNLLLoss(), _target("real", 3)),
    "PositionalEmbedding": (lambda: nn.PositionalEmbedding(6, 4), _r(3, 4)),
    "RMSNorm": (lambda: nn.RMSNorm(4), _r(3, 4)),
    "RNN": (lambda: nn.RNN(4, 3, batch_first=True, nonlinearity="relu"), _seq),
    "RNNCell": (lambda: nn.RNNCell(4, 3), _r(4)),
    "RReLU": (lambda: nn.RReLU(), _r(5)),
    "ReLU": (lambda: nn.ReLU(), _r(5)),
    "ReLU6": (lambda: nn.ReLU6(), _r(5)),
    "ReflectionPad1d": (lambda: nn.ReflectionPad1d(2), _r(2, 4)),
    "ReflectionPad2d": (lambda: nn.ReflectionPad2d(1), _r(2, 3, 3)),
    "ReflectionPad3d": (lambda: nn.ReflectionPad3d(1), _r(2, 3, 3, 3)),
    "ReplicationPad1d": (lambda: nn.ReplicationPad1d(2), _r(2, 4)),
    "ReplicationPad2d": (lambda: nn.ReplicationPad2d(1), _r(2, 3, 3)),
    "ReplicationPad3d": (lambda: nn.ReplicationPad3d(1), _r(2, 3, 3, 3)),
    "SELU": (lambda: nn.SELU(), _r(5)),
    "Sequential": (lambda: nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), _r(4)),
    "SiLU": (lambda: nn.SiLU(), _r(5)),
    "Sigmoid": (lambda: nn.Sigmoid(), _r(5)),
    "SinusoidalPositionalEncoding": (lambda: nn.SinusoidalPositionalEncoding(4, 16), _r(3, 4)),
    "SmoothL1Loss": (lambda: nn.SmoothL1Loss(beta=0.5), _target("real", 3)),
    "SoftMarginLoss": (lambda: nn.SoftMarginLoss(), _target("sign", 3)),
    "Softmax": (lambda: nn.Softmax(-1), _r(5)),
    "Softmax2d": (lambda: nn.Softmax2d(), _r(3, 2, 2)),
    "Softmin": (lambda: nn.Softmin(1), _r(5)),
    "Softplus": (lambda: nn.Softplus(2.0, 5.0), _r(5)),
    "Softshrink": (lambda: nn.Softshrink(), _r(5)),
    "Softsign": (lambda: nn.Softsign(), _r(5)),
    "Tanh": (lambda: nn.Tanh(), _r(5)),
    "Tanhshrink": (lambda: nn.Tanhshrink(), _r(5)),
    "Threshold": (lambda: nn.Threshold(0.1, -2.0), _r(5)),
    "Transformer": (lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True),
                    lambda b: (st.randn(b, 4, 8), st.randn(b, 3, 8))),
    "TransformerDecoder": (lambda: nn.TransformerDecoder(_dec_layer(), 2),
                           lambda b: (st.randn(b, 3, 8), st.randn(b, 4, 8))),
    "TransformerDecoderLayer": (_dec_layer, lambda b: (st.randn(b, 3, 8), st.randn(b, 4, 8))),
    "TransformerEncoder": (lambda: nn.TransformerEncoder(_enc_layer(), 2), _r(3, 8)),
    "TransformerEncoderLayer": (_enc_layer, _r(3, 8)),
    "TripletMarginLoss": (lambda: nn.TripletMarginLoss(),
                          lambda b: (st.randn(b, 4), st.randn(b, 4), st.randn(b, 4))),
    "TripletMarginWithDistanceLoss": (lambda: nn.TripletMarginWithDistanceLoss(),
                                      lambda b: (st.randn(b, 4), st.randn(b, 4),
                                                 st.randn(b, 4))),
    "Unflatten": (lambda: nn.Unflatten(1, (2, 3)), _r(6)),
    "Unfold": (lambda: nn.Unfold(2), _r(2, 3, 3)),
    "Upsample": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), _r(2, 3, 3)),
    "UpsamplingBilinear2d": (lambda: nn.UpsamplingBilinear2d(scale_factor=2), _r(2, 3, 3)),
    "UpsamplingNearest2d": (lambda: nn.UpsamplingNearest2d(size=(4, 6)), _r(2, 3, 3)),
    "ZeroPad1d": (lambda: nn.ZeroPad1d((1, 0)), _r(2, 4)),
    "ZeroPad2d": (lambda: nn.ZeroPad2d(1), _r(2, 3, 3)),
    "ZeroPad3d": (lambda: nn.ZeroPad3d(1), _r(2, 3, 3, 3)),
}

# classes that cannot be exported (they have no forward of their own), and why
NO_FORM = {
    "Module": "the base class: its forward is the subclass's",
    "ModuleDict": "a container without a forward of its own",
    "ModuleList": "a container without a forward of its own",
    "ParameterDict": "a container without a forward of its own",
    "ParameterList": "a container without a forward of its own",
    "RNNBase": "the base class of RNN/LSTM/GRU, built through them",
    "RNNCellBase": "the base class of the recurrent cells, built through them",
}

# classes that export and agree with onnxruntime on the traced inputs, but whose graph holds
# the traced batch size (or values) in a constant, so it does not run at another batch
FIXED_BATCH = {
    "CTCLoss": "reads its targets and lengths on the host: the graph holds the traced ones",
    "FractionalMaxPool2d": "its random pooling regions are drawn per sample at trace time",
    "FractionalMaxPool3d": "its random pooling regions are drawn per sample at trace time",
}


def _module_classes() -> list:
    return sorted(name for name, obj in vars(nn).items()
                  if inspect.isclass(obj) and issubclass(obj, nn.Module)
                  and not name.startswith("_"))


def test_every_module_class_has_an_entry():
    missing = [n for n in _module_classes() if n not in CASES and n not in NO_FORM]
    assert not missing, f"add these nn classes to CASES or NO_FORM: {missing}"
    stale = sorted((set(CASES) | set(NO_FORM)) - set(_module_classes()))
    assert not stale, f"entries for classes nn no longer has: {stale}"
    both = sorted(set(NO_FORM) & set(CASES))
    assert not both, f"classes both without an ONNX form and with a case: {both}"
    assert not set(FIXED_BATCH) & set(NO_FORM) and set(FIXED_BATCH) <= set(CASES)


def _ours(m, inputs) -> list:
    with st.no_grad():
        out = m(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    flat = []
    for o in outs:
        flat.extend(o if isinstance(o, (tuple, list)) else (o,))
    return [np.asarray(o.detach().cpu().numpy()) for o in flat]


def _feeds(inputs) -> dict:
    return {f"in_{i}": x.numpy() for i, x in enumerate(inputs)}


EXPORTED = sorted(n for n in CASES if n not in NO_FORM)


@pytest.mark.parametrize("name", EXPORTED)
def test_module_exports_and_runs_in_onnxruntime_at_two_batch_sizes(name):
    build, make = CASES[name]
    st.manual_seed(0)
    m = build()
    m.eval()
    inputs = make(2)
    names = [f"in_{i}" for i in range(len(inputs))]
    proto = st.onnx.export(m, tuple(inputs), None, input_names=names,
                           dynamic_axes={n: {0: "batch"} for n in names})
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (2,) if name in FIXED_BATCH else (2, 5):
        st.manual_seed(batch)
        xs = inputs if name in FIXED_BATCH else make(batch)
        want = _ours(m, xs)
        got = sess.run(None, _feeds(xs))
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            assert g.shape == w.shape, (name, batch)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-4,
                                       atol=1e-5, err_msg=f"{name} at batch {batch}")

