"""ONNX import handlers for the random ops: RandomUniform, RandomNormal, their `Like` forms,
Bernoulli and Multinomial, drawn from our counter-based generator (`st.Generator`).

A node without a `seed` attribute draws from the default generator, so `st.manual_seed`
makes a run reproducible. A node with a seed draws from a generator of its own, made when the
node first runs and seeded with the seed (a whole number as that integer, any other value by
the 64 bits of the double): a freshly loaded model then draws the same sequence of values
over its runs, whatever else draws, and the same seed gives the same stream on every device.
The values are our generator's, not numpy's or onnxruntime's: only their distribution is
specified. The draws have no gradient; the folding of the inference path leaves these nodes
to run on every call.
"""

from __future__ import annotations

import math
import struct

import singa_tensor as st

from .. import creation
from ..random import Generator
from ._handlers import handler
from .ops_math import _dtype, _like, _need


def _generator(node, attrs):
    """The node's own generator when it has a seed (made once, kept in node.memo), else None
    (the default generator)."""
    seed = attrs.get("seed")
    if seed is None:
        return None
    if node.memo is None:
        seed = float(seed)
        if math.isfinite(seed) and seed == int(seed):
            value = int(seed)
        else:
            value = struct.unpack("<q", struct.pack("<d", seed))[0]
        node.memo = Generator().manual_seed(value)
    return node.memo


def _float_dtype(node, code: int):
    d = _dtype(node, code)
    if not d.is_floating_point:
        raise node.fail(f"dtype must be a floating point type, got {d.name}")
    return d


def _shape(node, attrs) -> tuple:
    shape = attrs.get("shape")
    if shape is None:
        raise node.fail("attribute 'shape' is required")
    if any(int(s) < 0 for s in shape):
        raise node.fail(f"shape {list(shape)} has a negative dim")
    return tuple(int(s) for s in shape)


def _like_dtype(node, attrs, x):
    """A Like op's output dtype: the dtype attribute, else the input's (which must be float)."""
    if "dtype" in attrs:
        return _float_dtype(node, attrs["dtype"])
    if not x.dtype.is_floating_point:
        raise node.fail(f"the input is {x.dtype.name}: a dtype attribute must name a floating "
                        "point output type")
    return x.dtype


def _uniform(node, attrs, shape, dtype):
    low, high = float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0))
    if not low <= high:
        raise node.fail(f"low ({low}) must not exceed high ({high})")
    return creation.uniform(shape, low, high, generator=_generator(node, attrs), dtype=dtype,
                            device=node.device)


def _normal(node, attrs, shape, dtype):
    mean, scale = float(attrs.get("mean", 0.0)), float(attrs.get("scale", 1.0))
    if not scale >= 0:
        raise node.fail(f"scale must be non-negative, got {scale}")
    return creation.normal(mean, scale, shape, generator=_generator(node, attrs), dtype=dtype,
                           device=node.device)


@handler("RandomUniform")
def random_uniform(node, inputs, attrs):
    _need(node, inputs, 0)
    return _uniform(node, attrs, _shape(node, attrs), _float_dtype(node, attrs.get("dtype", 1)))


@handler("RandomNormal")
def random_normal(node, inputs, attrs):
    _need(node, inputs, 0)
    return _normal(node, attrs, _shape(node, attrs), _float_dtype(node, attrs.get("dtype", 1)))


@handler("RandomUniformLike")
def random_uniform_like(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    return _uniform(node, attrs, tuple(x.shape), _like_dtype(node, attrs, x))


@handler("RandomNormalLike")
def random_normal_like(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    return _normal(node, attrs, tuple(x.shape), _like_dtype(node, attrs, x))


@handler("Bernoulli")
def bernoulli(node, inputs, attrs):
    _need(node, inputs, 1)
    p = inputs[0]
    if not p.dtype.is_floating_point:
        raise node.fail(f"the probabilities must be floating point, got {p.dtype.name}")
    try:
        y = st.bernoulli(p.detach(), generator=_generator(node, attrs))
    except ValueError as e:
        raise node.fail(str(e).split(": ", 1)[-1]) from None
    return _like(y, _dtype(node, attrs["dtype"])) if "dtype" in attrs else y


@handler("Multinomial")
def multinomial(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if x.ndim != 2 or not x.dtype.is_floating_point:
        raise node.fail(f"input must be 2-d float log-probabilities [batch, classes], got "
                        f"{x.dtype.name} of shape {list(x.shape)}")
    n = attrs.get("sample_size", 1)
    if not isinstance(n, int) or n < 1:
        raise node.fail(f"sample_size must be a positive int, got {n}")
    out = attrs.get("dtype", 6)
    if out not in (6, 7):
        raise node.fail(f"dtype must be INT32 or INT64, got {out}")
    if x.shape[1] == 0:
        raise node.fail("input has no classes")
    logits = x.detach().to(st.float64)
    if not bool(st.isfinite(logits).any(-1).all()) or bool(st.isnan(logits).any()) or \
            bool((logits == math.inf).any()):
        raise node.fail("each row needs a finite log-probability and no NaN or +inf")
    probs = st.softmax(logits, -1)
    idx = st.multinomial(probs, n, replacement=True, generator=_generator(node, attrs))
    return _like(idx, _dtype(node, out))

