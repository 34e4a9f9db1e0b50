"""Every registered op, called with mangled arguments: wrong shapes, wrong dtypes, out-of-range
integers, empty and 0-d tensors, non-tensors. Each call must either work or raise one of the
documented Python exceptions; a kernel reading out of bounds would crash the test process."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import singa_tensor as st
from singa_tensor.ops import REGISTRY

from .helpers import DERANDOMIZE, as_tensor, spec_inputs, spec_tensors

ALLOWED = (ValueError, TypeError, IndexError, RuntimeError, ZeroDivisionError, MemoryError)


def _public_fn(spec):
    """What users call for this op: the spec's function when st exports it, else st.<op name>
    (clamp, pow, gelu ... wrap a raw kernel spec). Internal specs (pad kernels, backward-only
    views) take arguments their callers have already validated, so they are not fuzzed."""
    fn = spec.fn
    if getattr(st, getattr(fn, "__name__", ""), None) is fn:
        return fn
    return getattr(st, spec.name, None)


SPECS = [s for s in sorted(REGISTRY.values(), key=lambda s: s.name)
         if _public_fn(s) is not None and s.name != "to_device" and spec_inputs(s)]


def _mangle(draw, value):
    """A replacement for one argument, of the same kind or deliberately wrong."""
    if isinstance(value, np.ndarray):
        choice = draw(hs.sampled_from(["shape", "empty", "scalar", "int", "bool", "big", "list",
                                       "none", "transposed"]))
        r = np.random.default_rng(draw(hs.integers(0, 100)))
        if choice == "shape":
            shape = draw(hs.lists(hs.integers(0, 4), min_size=0, max_size=4))
            return as_tensor(r.standard_normal(shape).astype(value.dtype))
        if choice == "empty":
            return as_tensor(np.zeros((0,) + value.shape[1:], dtype=value.dtype))
        if choice == "scalar":
            return as_tensor(np.asarray(1, dtype=value.dtype))
        if choice == "int":
            return as_tensor(r.integers(-10, 10, size=value.shape))
        if choice == "bool":
            return as_tensor(r.standard_normal(value.shape) > 0)
        if choice == "big":
            return as_tensor(np.full(value.shape, 1000, dtype=np.int64))
        if choice == "list":
            return value.tolist()
        if choice == "none":
            return None
        t = as_tensor(np.ascontiguousarray(value.T))
        return t.T if t.ndim >= 2 else t
    if isinstance(value, bool):
        return draw(hs.booleans())
    if isinstance(value, int):
        return draw(hs.sampled_from([value, -value - 1, value + 7, -100, 1000, 0]))
    if isinstance(value, float):
        return draw(hs.sampled_from([value, float("nan"), float("inf"), -1.0, 0.0]))
    if isinstance(value, tuple):
        return tuple(_mangle(draw, v) for v in value)
    if isinstance(value, list):
        return [_mangle(draw, v) for v in value]
    if isinstance(value, str):
        return draw(hs.sampled_from([value, "bogus", ""]))
    return value


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@settings(max_examples=15, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=hs.data())
def test_mangled_arguments_never_crash(spec, data):
    args, kwargs = data.draw(hs.sampled_from(spec_inputs(spec)))
    args = list(args)
    n_mangle = data.draw(hs.integers(1, max(1, len(args))))
    for _ in range(n_mangle):
        if not args:
            break
        i = data.draw(hs.integers(0, len(args) - 1))
        args[i] = _mangle(data.draw, args[i])
    kwargs = {k: _mangle(data.draw, v) for k, v in kwargs.items()}
    try:
        out = _public_fn(spec)(*spec_tensors(args), **kwargs)
    except ALLOWED as e:
        assert str(e), f"{spec.name} raised {type(e).__name__} without a message"
        return
    outs = out if isinstance(out, tuple) else (out,)
    for o in outs:  # whatever came back must be a readable tensor
        if isinstance(o, st.Tensor):
            o.detach().cpu().tolist()


@settings(max_examples=60, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.too_slow])
@given(key=hs.lists(hs.one_of(hs.integers(-8, 8), hs.none(), hs.just(Ellipsis),
                              hs.builds(slice, hs.none() | hs.integers(-8, 8),
                                        hs.none() | hs.integers(-8, 8),
                                        hs.none() | hs.integers(-3, 3)),
                              hs.lists(hs.integers(-8, 8), max_size=3),
                              hs.lists(hs.booleans(), min_size=1, max_size=4)),
                    max_size=4))
def test_mangled_subscripts_never_crash(key):
    x = as_tensor(np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    for k in (tuple(key), key[0] if key else ()):
        try:
            x[k].tolist()
        except ALLOWED as e:
            assert str(e)
        try:
            y = x.clone()
            y[k] = 1.0
        except ALLOWED as e:
            assert str(e)
