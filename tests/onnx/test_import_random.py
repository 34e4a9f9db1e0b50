"""The random ops of an imported graph (onnx/ops_random.py): checked by distribution, since
their values are our generator's. Every draw uses a fixed seed (the seed attribute, or
st.manual_seed), so each bound below is checked on the same numbers on every run; the bounds
are 6 standard errors wide (or the 1e-6 critical value of the Kolmogorov-Smirnov statistic),
far from where a correct sampler falls."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

F, D, H, I32, I64 = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16,
                     TensorProto.INT32, TensorProto.INT64)
_NP = {F: np.float32, D: np.float64, H: np.float16}


def load(op, inputs=(), out=F, **attrs):
    """A one-node model of op; inputs are (name, elem type) pairs."""
    node = helper.make_node(op, [n for n, _ in inputs], ["y"], name="r", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, None)
                                        for n, t in inputs],
                          [helper.make_tensor_value_info("y", out, None)])
    return st.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))


def draw(op, *values, inputs=(), out=F, **attrs):
    return load(op, inputs, out, **attrs).run_numpy(list(values))[0]


def ks_uniform(u: np.ndarray) -> float:
    """The Kolmogorov-Smirnov distance of u from the uniform distribution on [0, 1)."""
    u = np.sort(u.reshape(-1).astype(np.float64))
    n = len(u)
    i = np.arange(1, n + 1)
    return float(max((i / n - u).max(), (u - (i - 1) / n).max()))


def ks_limit(n: int) -> float:
    return math.sqrt(-0.5 * math.log(1e-6 / 2) / n)  # P(D > limit) ~ 1e-6 for a true sampler


def normal_cdf(z):
    from math import erf

    return 0.5 * (1 + np.vectorize(erf)(np.asarray(z, np.float64) / math.sqrt(2)))


@pytest.mark.parametrize("elem", [F, D, H])
def test_random_uniform_distribution_shape_dtype(elem):
    y = draw("RandomUniform", out=elem, shape=[200, 100], low=-2.0, high=3.0, dtype=elem,
             seed=3.0)
    assert y.shape == (200, 100) and y.dtype == _NP[elem]
    y = y.astype(np.float64)
    assert y.min() >= -2.0 and y.max() <= 3.0
    n = y.size
    assert abs(y.mean() - 0.5) < 6 * 5 / math.sqrt(12 * n)
    assert abs(y.var() - 25 / 12) < 6 * 25 / 12 * math.sqrt(0.8 / n)  # var of s^2: 0.8 s^4/n
    tol = ks_limit(n) + (1e-3 if elem == H else 0)  # float16 rounds the values
    assert ks_uniform((y + 2) / 5) < tol


@pytest.mark.parametrize("elem", [F, D])
def test_random_normal_distribution(elem):
    y = draw("RandomNormal", out=elem, shape=[40000], mean=1.5, scale=0.5, dtype=elem, seed=11.0)
    assert y.shape == (40000,) and y.dtype == _NP[elem]
    n = y.size
    assert abs(y.mean() - 1.5) < 6 * 0.5 / math.sqrt(n)
    assert abs(y.std() - 0.5) < 6 * 0.5 / math.sqrt(2 * n)
    assert ks_uniform(normal_cdf((y - 1.5) / 0.5)) < ks_limit(n)


def test_like_forms_take_the_input_shape_and_dtype():
    x = np.zeros((3, 5000), np.float64)
    y = draw("RandomUniformLike", x, inputs=[("x", D)], out=D, seed=1.0)
    assert y.shape == x.shape and y.dtype == np.float64 and 0 <= y.min() and y.max() < 1
    assert abs(y.mean() - 0.5) < 6 / math.sqrt(12 * y.size)
    y = draw("RandomNormalLike", np.zeros((4, 4000), np.int64), inputs=[("x", I64)], dtype=F,
             mean=-3.0, seed=2.0)
    assert y.shape == (4, 4000) and y.dtype == np.float32
    assert abs(y.mean() + 3) < 6 / math.sqrt(y.size) and abs(y.std() - 1) < 6 / math.sqrt(
        2 * y.size)


def test_seeds_are_reproducible_and_independent_of_other_draws():
    a = load("RandomNormal", shape=[64], seed=5.0)
    b = load("RandomNormal", shape=[64], seed=5.0)
    first = a.run_numpy([])[0]
    st.manual_seed(123)
    _ = st.rand(1000)  # the default stream moves; a seeded node does not read it
    assert np.array_equal(first, b.run_numpy([])[0])
    # a seeded node goes on drawing over runs, the same sequence for every fresh load
    second = a.run_numpy([])[0]
    assert not np.array_equal(first, second) and np.array_equal(second, b.run_numpy([])[0])
    other = load("RandomNormal", shape=[64], seed=6.0).run_numpy([])[0]
    assert not np.array_equal(first, other)
    # a fractional seed is a seed as well
    c1 = load("RandomUniform", shape=[8], seed=0.25).run_numpy([])[0]
    c2 = load("RandomUniform", shape=[8], seed=0.25).run_numpy([])[0]
    assert np.array_equal(c1, c2)


def test_without_a_seed_the_default_generator_draws():
    m = load("RandomUniform", shape=[32])
    st.manual_seed(9)
    a = m.run_numpy([])[0]
    st.manual_seed(9)
    b = m.run_numpy([])[0]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, m.run_numpy([])[0])


def test_random_nodes_run_on_every_call_of_the_inference_path():
    m = load("RandomUniform", shape=[16], seed=4.0)
    with st.no_grad():
        outs = [m().tolist() for _ in range(4)]
    assert len({tuple(o) for o in outs}) == 4


def test_bernoulli_distribution_and_dtypes():
    p = np.repeat(np.array([0.0, 0.1, 0.5, 0.9, 1.0]), 20000).reshape(5, 20000)
    y = draw("Bernoulli", p, inputs=[("p", D)], out=D, seed=7.0)
    assert y.dtype == np.float64 and set(np.unique(y)) <= {0.0, 1.0}
    assert y[0].sum() == 0 and y[4].sum() == 20000
    for row, q in zip(y[1:4], (0.1, 0.5, 0.9)):
        assert abs(row.mean() - q) < 6 * math.sqrt(q * (1 - q) / row.size)
    y = draw("Bernoulli", p.astype(np.float32), inputs=[("p", F)], out=I32, dtype=I32, seed=7.0)
    assert y.dtype == np.int32 and set(np.unique(y)) == {0, 1}
    y = draw("Bernoulli", p.astype(np.float32), inputs=[("p", F)], out=TensorProto.BOOL,
             dtype=TensorProto.BOOL, seed=7.0)
    assert y.dtype == np.bool_ and y[4].all() and not y[0].any()


def test_multinomial_distribution():
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    with np.errstate(divide="ignore"):
        logits = np.log(probs).astype(np.float32) + 3.0  # unnormalized log-probabilities
    n = 30000
    y = draw("Multinomial", logits, inputs=[("x", F)], out=I64, sample_size=n, dtype=I64,
             seed=1.0)
    assert y.shape == (2, n) and y.dtype == np.int64
    assert (y[1] != 2).all()  # probability 0 is never drawn
    for row, p in zip(y, probs):
        freq = np.bincount(row, minlength=3) / n
        assert np.all(np.abs(freq - p) < 6 * np.sqrt(p * (1 - p) / n) + 1e-12)
    y = draw("Multinomial", logits, inputs=[("x", F)], out=I32)  # defaults: 1 sample, int32
    assert y.shape == (2, 1) and y.dtype == np.int32


def test_error_paths():
    def fails(match, op, *values, inputs=(), **attrs):
        with pytest.raises(OnnxImportError, match=match):
            draw(op, *values, inputs=inputs, **attrs)

    fails(r"node 'r' \(RandomUniform\): attribute 'shape' is required", "RandomUniform")
    fails(r"\(RandomUniform\): shape \[2, -1\] has a negative dim", "RandomUniform",
          shape=[2, -1])
    fails(r"\(RandomUniform\): low \(2.0\) must not exceed high \(1.0\)", "RandomUniform",
          shape=[2], low=2.0, high=1.0)
    fails(r"\(RandomNormal\): dtype must be a floating point type, got int64", "RandomNormal",
          shape=[2], dtype=I64)
    fails(r"\(RandomNormal\): scale must be non-negative, got -1.0", "RandomNormal", shape=[2],
          scale=-1.0)
    fails(r"\(RandomUniformLike\): the input is int64: a dtype attribute must name a floating "
          r"point output type", "RandomUniformLike", np.zeros(2, np.int64), inputs=[("x", I64)])
    fails(r"\(Bernoulli\): probabilities must be in \[0, 1\]", "Bernoulli",
          np.array([0.5, 1.5]), inputs=[("p", D)])
    fails(r"\(Bernoulli\): the probabilities must be floating point, got int64", "Bernoulli",
          np.array([0, 1]), inputs=[("p", I64)])
    fails(r"\(Multinomial\): input must be 2-d float log-probabilities \[batch, classes\], got "
          r"float32 of shape \[3\]", "Multinomial", np.zeros(3, np.float32), inputs=[("x", F)])
    fails(r"\(Multinomial\): sample_size must be a positive int, got 0", "Multinomial",
          np.zeros((1, 3), np.float32), inputs=[("x", F)], sample_size=0)
    fails(r"\(Multinomial\): dtype must be INT32 or INT64, got 1", "Multinomial",
          np.zeros((1, 3), np.float32), inputs=[("x", F)], dtype=F)
    fails(r"\(Multinomial\): each row needs a finite log-probability and no NaN or \+inf",
          "Multinomial", np.array([[0.0, np.nan]], np.float32), inputs=[("x", F)])
    fails(r"\(Multinomial\): each row needs a finite", "Multinomial",
          np.array([[-np.inf, -np.inf]], np.float32), inputs=[("x", F)])
