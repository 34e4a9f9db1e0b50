"""Geometry arguments of every convolution, pool, unfold and fold (and the nn layers over them):
a zero, negative or wrong-length kernel size, stride, padding, dilation, output padding,
groups or output size raises an error naming the op and the argument, never a result of zeros
or garbage."""

from __future__ import annotations

import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn


def _x(nd: int, channels: int = 2, size: int = 6):
    return st.randn(1, channels, *([size] * nd))


def _conv(fn, nd: int):
    def call(kernel_size=3, **kw):
        ks = (kernel_size,) * nd if isinstance(kernel_size, int) else tuple(kernel_size)
        return fn(_x(nd), st.randn(2, 2, *ks), **kw)
    return call


def _unpool(nd: int):
    def call(**kw):
        y, i = getattr(F, f"max_pool{nd}d")(_x(nd), 2, return_indices=True)
        return getattr(F, f"max_unpool{nd}d")(y, i, **kw)
    return call


def _pool(name: str, nd: int, *lead):
    return lambda **kw: getattr(F, name)(_x(nd), *lead, **kw)


CONV = dict(kernel_size=3, stride=1, padding=0, dilation=1, groups=1)
CONV_T = dict(kernel_size=3, stride=1, padding=0, output_padding=0, dilation=1, groups=1)

# op name -> (call(**geometry), good geometry, number of spatial dims)
OPS = {}
for _nd in (1, 2, 3):
    OPS[f"conv{_nd}d"] = (_conv(getattr(F, f"conv{_nd}d"), _nd), CONV, _nd)
    OPS[f"conv_transpose{_nd}d"] = (_conv(getattr(F, f"conv_transpose{_nd}d"), _nd), CONV_T,
                                    _nd)
    OPS[f"max_pool{_nd}d"] = (_pool(f"max_pool{_nd}d", _nd),
                              dict(kernel_size=2, stride=2, padding=0, dilation=1), _nd)
    OPS[f"avg_pool{_nd}d"] = (_pool(f"avg_pool{_nd}d", _nd),
                              dict(kernel_size=2, stride=2, padding=0), _nd)
    OPS[f"adaptive_avg_pool{_nd}d"] = (_pool(f"adaptive_avg_pool{_nd}d", _nd),
                                       dict(output_size=2), _nd)
    OPS[f"adaptive_max_pool{_nd}d"] = (_pool(f"adaptive_max_pool{_nd}d", _nd),
                                       dict(output_size=2), _nd)
    OPS[f"lp_pool{_nd}d"] = (_pool(f"lp_pool{_nd}d", _nd, 2.0), dict(kernel_size=2, stride=2),
                             _nd)
    OPS[f"max_unpool{_nd}d"] = (_unpool(_nd), dict(kernel_size=2, stride=2, padding=0), _nd)
OPS["unfold"] = (lambda **kw: F.unfold(_x(2), **kw),
                 dict(kernel_size=2, dilation=1, padding=0, stride=1), 2)
OPS["fold"] = (lambda **kw: F.fold(st.randn(1, 8, 25), **kw),
               dict(output_size=6, kernel_size=2, dilation=1, padding=0, stride=1), 2)

NON_NEGATIVE = {"padding", "output_padding"}


def _bad_values(op: str, arg: str, nd: int) -> list:
    bad = [-1] if arg in NON_NEGATIVE else [0, -1]
    if op.startswith("conv") and arg == "kernel_size":
        return [0]  # a convolution's kernel size is its weight's shape: only 0 is writable
    if arg != "groups":
        bad.append((1,) * (nd + 1))  # one entry too many
    return bad


CASES = [(op, arg, bad) for op, (_, good, nd) in OPS.items() for arg in good
         for bad in _bad_values(op, arg, nd)]


def test_the_table_covers_every_conv_pool_unfold_and_fold_of_functional():
    names = {n for n in dir(F) if n.startswith(("conv", "max_pool", "avg_pool", "adaptive_",
                                                "lp_pool", "max_unpool"))
             or n in ("unfold", "fold")}
    assert names - set(OPS) <= {"conv_tbc", "max_pool1d_with_indices", "max_pool2d_with_indices",
                                "max_pool3d_with_indices", "adaptive_max_pool1d_with_indices",
                                "adaptive_max_pool2d_with_indices",
                                "adaptive_max_pool3d_with_indices"}


@pytest.mark.parametrize("op", sorted(OPS))
def test_good_geometry_runs(op):
    call, good, _ = OPS[op]
    out = call(**good)
    out = out[0] if isinstance(out, tuple) else out
    assert min(out.shape) > 0


@pytest.mark.parametrize("op,arg,bad", CASES, ids=[f"{o}-{a}-{b}" for o, a, b in CASES])
def test_bad_geometry_names_the_op_and_the_argument(op, arg, bad):
    call, good, _ = OPS[op]
    kw = dict(good)
    kw[arg] = bad
    with pytest.raises((ValueError, TypeError), match=rf"^{op}: .*{arg}"):
        call(**kw)


TOO_BIG = {  # geometry whose output would have no positions
    "conv1d": dict(kernel_size=7), "conv2d": dict(kernel_size=7), "conv3d": dict(kernel_size=7),
    "conv_transpose1d": dict(padding=9), "conv_transpose2d": dict(padding=9),
    "conv_transpose3d": dict(padding=9),
    "max_pool1d": dict(kernel_size=7), "max_pool2d": dict(kernel_size=7),
    "max_pool3d": dict(kernel_size=7), "avg_pool1d": dict(kernel_size=7),
    "avg_pool2d": dict(kernel_size=7), "avg_pool3d": dict(kernel_size=7),
    "lp_pool1d": dict(kernel_size=7), "lp_pool2d": dict(kernel_size=7),
    "lp_pool3d": dict(kernel_size=7), "unfold": dict(kernel_size=7),
    "fold": dict(kernel_size=7),
}


@pytest.mark.parametrize("op", sorted(TOO_BIG))
def test_an_empty_output_is_refused(op):
    call, good, _ = OPS[op]
    with pytest.raises(ValueError, match=rf"^{op}: "):
        call(**{**good, **TOO_BIG[op]})


def test_the_reported_cases():
    with pytest.raises(ValueError, match=r"^conv_transpose2d: stride must be positive, got "
                                         r"\(0, 0\)"):
        F.conv_transpose2d(_x(2), st.randn(2, 2, 3, 3), stride=0)
    with pytest.raises(ValueError, match=r"^conv2d: kernel_size must be positive, got \(0, 3\)"):
        F.conv2d(_x(2), st.randn(2, 2, 0, 3))


# ---- the nn layers over them -------------------------------------------------------------------

def _layer(cls_name: str, *lead):
    return lambda **kw: getattr(nn, cls_name)(*lead, **kw)


LAYERS = {}
for _nd in (1, 2, 3):
    LAYERS[f"Conv{_nd}d"] = (_layer(f"Conv{_nd}d", 2, 2), CONV, _nd, lambda nd=_nd: _x(nd))
    LAYERS[f"ConvTranspose{_nd}d"] = (_layer(f"ConvTranspose{_nd}d", 2, 2), CONV_T, _nd,
                                      lambda nd=_nd: _x(nd))
    LAYERS[f"MaxPool{_nd}d"] = (_layer(f"MaxPool{_nd}d"), OPS[f"max_pool{_nd}d"][1], _nd,
                                lambda nd=_nd: _x(nd))
    LAYERS[f"AvgPool{_nd}d"] = (_layer(f"AvgPool{_nd}d"), OPS[f"avg_pool{_nd}d"][1], _nd,
                                lambda nd=_nd: _x(nd))
    LAYERS[f"AdaptiveAvgPool{_nd}d"] = (_layer(f"AdaptiveAvgPool{_nd}d"), dict(output_size=2),
                                        _nd, lambda nd=_nd: _x(nd))
    LAYERS[f"AdaptiveMaxPool{_nd}d"] = (_layer(f"AdaptiveMaxPool{_nd}d"), dict(output_size=2),
                                        _nd, lambda nd=_nd: _x(nd))
    if hasattr(nn, f"LPPool{_nd}d"):
        LAYERS[f"LPPool{_nd}d"] = (_layer(f"LPPool{_nd}d", 2.0), dict(kernel_size=2, stride=2),
                                   _nd, lambda nd=_nd: _x(nd))
LAYERS["Unfold"] = (_layer("Unfold"), OPS["unfold"][1], 2, lambda: _x(2))
LAYERS["Fold"] = (_layer("Fold"), OPS["fold"][1], 2, lambda: st.randn(1, 8, 25))

LAYER_CASES = [(name, arg, bad) for name, (_, good, nd, _) in LAYERS.items() for arg in good
               for bad in ([-1] if arg in NON_NEGATIVE else [0, -1])
               + ([] if arg == "groups" else [(1,) * (nd + 1)])]


@pytest.mark.parametrize("name,arg,bad", LAYER_CASES,
                         ids=[f"{n}-{a}-{b}" for n, a, b in LAYER_CASES])
def test_layers_refuse_bad_geometry_naming_the_argument(name, arg, bad):
    make, good, _, x = LAYERS[name]
    make(**good)(x())  # the good geometry works
    kw = dict(good)
    kw[arg] = bad
    with pytest.raises((ValueError, TypeError), match=rf"^\w+: .*{arg}"):
        make(**kw)(x())  # at construction or at the first call
