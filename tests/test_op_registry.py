"""Registry-driven op tests: every registered op, forward against its numpy reference (shapes,
broadcasting and edge values drawn by hypothesis), backward against float64 finite differences,
and second derivatives where the op is twice differentiable.

Ops declare how to test them: `kind` ("unary", "binary", "reduce") gets generated inputs;
anything else provides `samples()`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp

import singa_tensor as st
from singa_tensor.ops import REGISTRY

from .helpers import (
    DERANDOMIZE,
    DEVICE,
    as_tensor,
    assert_close,
    spec_inputs,
    spec_tensors,
    to_numpy,
)

SPECS = sorted(REGISTRY.values(), key=lambda s: s.name)
settings.register_profile(
    "ops", max_examples=20, deadline=None, derandomize=DERANDOMIZE,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("ops")


def _ids(specs):
    return [s.name for s in specs]


def by_kind(kind):
    return [s for s in SPECS if s.kind == kind and not s.name.startswith("_")]


UNARY, BINARY, REDUCE = by_kind("unary"), by_kind("binary"), by_kind("reduce")
CUSTOM = [s for s in SPECS if s.kind == "custom" and s.samples()]
NP_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
             "bool": np.bool_}


def _numpy_dtypes(spec):
    """The dtypes of spec that numpy's references run in; float16 and bfloat16 are checked
    against the float32 op instead (tests/test_lowp_elementwise.py)."""
    return [d for d in spec.dtypes if d in NP_DTYPES]


def _values(dtype, domain, shape):
    lo, hi = domain
    if dtype in ("float32", "float64"):
        width = 32 if dtype == "float32" else 64
        if width == 32:  # bounds must be representable in float32
            lo, hi = float(np.nextafter(np.float32(lo), np.float32(np.inf))), float(
                np.nextafter(np.float32(hi), np.float32(-np.inf)))
        return hnp.arrays(NP_DTYPES[dtype], shape, elements=hs.floats(lo, hi, width=width))
    if dtype == "bool":
        return hnp.arrays(np.bool_, shape)
    return hnp.arrays(NP_DTYPES[dtype], shape,
                      elements=hs.integers(int(np.ceil(lo)), int(np.floor(hi))))


shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


def _call(spec, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return spec.reference(*args, **kwargs)


def _compare(spec, got, want, dtype):
    want = np.asarray(want)
    tol = {"float32": (3e-5, 1e-6), "float64": (1e-10, 1e-12)}.get(dtype, (0, 0))
    assert_close(got, want, rtol=tol[0], atol=tol[1], equal_nan=True,
                 msg=f"{spec.name} [{dtype}]")


# ---- forward ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", UNARY, ids=_ids(UNARY))
@given(data=hs.data())
def test_unary_forward(spec, data):
    dtype = data.draw(hs.sampled_from(_numpy_dtypes(spec)))
    shape = data.draw(shapes)
    x = data.draw(_values(dtype, spec.domain, shape))
    t = as_tensor(x)
    if data.draw(hs.booleans()) and x.ndim >= 2:  # a non-contiguous view of the same values
        t = as_tensor(np.ascontiguousarray(x.swapaxes(0, 1))).transpose(0, 1)
    got = spec.fn(t)
    assert got.shape == x.shape
    _compare(spec, got, _call(spec, x), dtype)


EDGE = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, 0.5, -0.5])


FLOAT_UNARY = [(s, d) for s in UNARY for d in ("float32", "float64") if d in s.dtypes]


@pytest.mark.parametrize("spec, dtype", FLOAT_UNARY,
                         ids=[f"{s.name}-{d}" for s, d in FLOAT_UNARY])
def test_unary_edge_values(spec, dtype):
    x = EDGE.astype(dtype)
    got = to_numpy(spec.fn(as_tensor(x)))
    want = np.asarray(_call(spec, x)).astype(dtype)
    # large-magnitude and special inputs: same NaN/inf pattern, close finite values
    assert np.array_equal(np.isnan(got), np.isnan(want)), (spec.name, x, got, want)
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)]), (
        spec.name, got, want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-30)


def _broadcast_pair(data):
    shapes_ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                          min_side=0, max_side=4))
    return shapes_.input_shapes


@pytest.mark.parametrize("spec", BINARY, ids=_ids(BINARY))
@given(data=hs.data())
def test_binary_forward_broadcasting(spec, data):
    dtype = data.draw(hs.sampled_from(_numpy_dtypes(spec)))
    sa, sb = _broadcast_pair(data)
    a = data.draw(_values(dtype, spec.domain, sa))
    b_dom = getattr(spec, "b_domain", None) or spec.domain
    b = data.draw(_values(dtype, b_dom, sb))
    got = spec.fn(as_tensor(a), as_tensor(b))
    want = _call(spec, a, b)
    assert got.shape == np.shape(want)
    _compare(spec, got, want, dtype)


FLOAT_BINARY = [(s, d) for s in BINARY for d in ("float32", "float64") if d in s.dtypes]


@pytest.mark.parametrize("spec, dtype", FLOAT_BINARY,
                         ids=[f"{s.name}-{d}" for s, d in FLOAT_BINARY])
def test_binary_edge_values(spec, dtype):
    # every pair of special values, through broadcasting: (n, 1) against (1, n)
    a, b = EDGE.astype(dtype)[:, None], EDGE.astype(dtype)[None, :]
    got = to_numpy(spec.fn(as_tensor(a), as_tensor(b)))
    want = np.asarray(_call(spec, a, b))
    assert got.shape == want.shape
    if want.dtype == np.bool_:
        np.testing.assert_array_equal(got, want, err_msg=spec.name)
        return
    assert np.array_equal(np.isnan(got), np.isnan(want)), (spec.name, got, want)
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=spec.name)
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=2e-6, atol=1e-30, err_msg=spec.name)


@pytest.mark.parametrize("spec", [s for s in BINARY if "float32" in s.dtypes],
                         ids=_ids([s for s in BINARY if "float32" in s.dtypes]))
def test_binary_with_python_scalar(spec):
    a = np.linspace(0.5, 2.5, 6, dtype=np.float32).reshape(2, 3)
    scalar = 1.5
    got = spec.fn(as_tensor(a), scalar)
    _compare(spec, got, _call(spec, a, np.float32(scalar)), "float32")


@pytest.mark.parametrize("spec", REDUCE, ids=_ids(REDUCE))
@given(data=hs.data())
def test_reduce_forward(spec, data):
    dtype = data.draw(hs.sampled_from(spec.dtypes))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=5))
    low = dtype in ("float16", "bfloat16")
    x = data.draw(_values("float32" if low else dtype, spec.domain, shape))
    t = as_tensor(x)
    if low:  # the input rounded to the 16-bit dtype; the reference sees the rounded values
        t = t.to(getattr(st, dtype))
        x = to_numpy(t.float())
    nd = x.ndim
    dim = data.draw(hs.one_of(
        hs.none(),
        hs.integers(-nd, nd - 1) if nd else hs.none(),
        hs.lists(hs.integers(0, nd - 1), min_size=1, max_size=nd, unique=True).map(tuple)
        if nd else hs.none(),
    ))
    keepdim = data.draw(hs.booleans())
    got = spec.fn(t, dim=dim, keepdim=keepdim)
    want = _call(spec, x, dim=dim, keepdim=keepdim)
    assert got.shape == np.shape(want), (spec.name, x.shape, dim, keepdim)
    if low:
        # float32 accumulation rounded to the 16-bit dtype once or twice (mean: the sum,
        # then the quotient): two units of its precision, and an absolute term for results
        # that cancel to about zero (float32 sums of up to 125 values in [-3, 3])
        assert got.dtype is t.dtype, (spec.name, got.dtype)
        eps = 2.0 ** (-10 if dtype == "float16" else -7)
        # the reference rounded to the dtype too: beyond its range it is infinite
        with np.errstate(over="ignore"):
            want = np.asarray(want, dtype=np.float32)
        want = to_numpy(as_tensor(want).to(t.dtype).float())
        assert_close(got.float(), want, rtol=2 * eps, atol=1e-4, msg=f"{spec.name} [{dtype}]")
        return
    _compare(spec, got, want, dtype)


@pytest.mark.parametrize("spec", CUSTOM, ids=_ids(CUSTOM))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_custom_forward(spec, dtype):
    for args, kwargs in spec_inputs(spec, dtype=dtype):
        got = spec.fn(*spec_tensors(args), **kwargs)
        want = _call(spec, *args, **kwargs)
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                _compare(spec, g, w, dtype)
        else:
            _compare(spec, got, want, dtype)


# ---- gradients ----------------------------------------------------------------------------------


DIFF = [s for s in SPECS if s.differentiable and not s.name.startswith("_")
        and "float64" in s.dtypes and (s.kind != "custom" or s.samples())]
TWICE = [s for s in DIFF if s.twice_differentiable]


@pytest.mark.parametrize("spec", DIFF, ids=_ids(DIFF))
def test_gradcheck(spec):
    for args, kwargs in spec_inputs(spec, for_grad=True):
        tensors = spec_tensors(args, requires_grad=True)
        def call(*ts, kwargs=kwargs):
            return spec.fn(*ts, **kwargs)

        assert st.autograd.gradcheck(call, tensors, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("spec", TWICE, ids=_ids(TWICE))
def test_gradgradcheck(spec):
    args, kwargs = spec_inputs(spec, for_grad=True)[0]
    tensors = spec_tensors(args, requires_grad=True)
    assert st.autograd.gradgradcheck(lambda *ts: spec.fn(*ts, **kwargs), tensors, atol=1e-4,
                                     rtol=1e-3)


# ---- the registry itself ------------------------------------------------------------------------


def test_every_op_is_tested_and_documented():
    for spec in SPECS:
        assert spec.name and hasattr(spec, "fn"), spec
        if spec.name.startswith("_"):
            continue
        assert spec.fn.__doc__, f"{spec.name} has no docstring"
        reachable = spec.kind in ("unary", "binary", "reduce") or spec.samples()
        assert reachable or spec.name == "to_device", (
            f"{spec.name} has neither a kind nor samples(): the tests cannot reach it")


def test_device_switch():
    assert st.tensor([1.0]).device == st.device(DEVICE)


@pytest.mark.parametrize("dtype", ["int64", "float32"])
@pytest.mark.parametrize("mode, ref", [("trunc", lambda a, b: np.trunc(a / b)),
                                       ("floor", lambda a, b: np.floor(a / b))])
def test_div_rounding_modes(dtype, mode, ref):
    a = np.array([7, -7, 6, -6, 0, 5], dtype=dtype)
    b = np.array([2, 2, -4, 3, 5, -5], dtype=dtype)
    got = st.div(as_tensor(a), as_tensor(b), rounding_mode=mode)
    assert got.dtype.name == dtype
    np.testing.assert_array_equal(to_numpy(got), ref(a.astype(np.float64), b).astype(dtype))
    with pytest.raises(ValueError, match="rounding_mode must be"):
        st.div(as_tensor(a), as_tensor(b), rounding_mode="round")
