"""Shape ops (ops/shape.py): forward against numpy, first and second derivatives, view-ness
(writes through a view reach the base), and every error path."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.ops import REGISTRY
from singa_tensor.ops import masks as mask_ops
from singa_tensor.ops import padding as pad_ops
from singa_tensor.ops import shape as shape_ops

from .helpers import DEVICE, as_tensor, assert_close, to_numpy

_MODULES = (shape_ops.__name__, pad_ops.__name__, mask_ops.__name__)
SHAPE_SPECS = sorted((s for s in REGISTRY.values() if s.fn.__module__ in _MODULES
                      or s.__module__ in _MODULES), key=lambda s: s.name)
DIFF_SPECS = [s for s in SHAPE_SPECS if s.differentiable]


def _tensors(args, requires_grad=False):
    return [as_tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
            if isinstance(a, np.ndarray) else a for a in args]


def _check(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, rtol=0, atol=0)
    else:
        assert_close(got, want, rtol=0, atol=0)


def test_every_public_function_is_exported_and_documented():
    for name in shape_ops.__all__:
        fn = getattr(st, name)
        # the function itself, or with PyTorch's out= (st._out)
        assert getattr(fn, "_without_out", fn) is getattr(shape_ops, name)
        assert fn.__doc__ and ">>>" in fn.__doc__, name
    expected = {"squeeze", "unsqueeze", "slice", "select", "slice_backward", "cat", "flip",
                "narrow", "unbind", "stack", "split", "chunk", "flatten", "repeat", "tile",
                "roll", "movedim", "swapaxes", "expand_as", "view_as", "reshape_as", "tril",
                "triu", "one_hot", "pad", "_pad_constant", "_pad_gather", "_pad_scatter"}
    assert expected <= {s.name for s in SHAPE_SPECS}


@pytest.mark.parametrize("spec", SHAPE_SPECS, ids=[s.name for s in SHAPE_SPECS])
def test_forward_matches_numpy(spec):
    samples = spec.samples()
    assert samples, spec.name
    for args, kwargs in samples:
        _check(spec.fn(*_tensors(args), **kwargs), spec.reference(*args, **kwargs))


@pytest.mark.parametrize("spec", DIFF_SPECS, ids=[s.name for s in DIFF_SPECS])
def test_gradcheck_and_gradgradcheck(spec):
    for args, kwargs in spec.samples():
        ts = _tensors(args, requires_grad=True)

        def fn(*xs, kwargs=kwargs):
            return spec.fn(*xs, **kwargs)

        assert st.autograd.gradcheck(fn, ts)
        assert st.autograd.gradgradcheck(fn, ts)


# ---- view-ness ---------------------------------------------------------------------------------


def _base():
    return as_tensor(np.arange(24.0).reshape(2, 3, 4))


@pytest.mark.parametrize("make, index", [
    (lambda x: st.slice_view(x, 2, 1, None, 2), (0, 0, 1)),
    (lambda x: x.narrow(1, 1, 2), (0, 1, 0)),
    (lambda x: st.select(x, 1, 2), (0, 2, 0)),
    (lambda x: x.unbind(-1)[3], (0, 0, 3)),
    (lambda x: x.split(2, dim=2)[1], (0, 0, 2)),
    (lambda x: x.chunk(3, dim=1)[2], (0, 2, 0)),
    (lambda x: x.unsqueeze(0), (0, 0, 0)),
    (lambda x: x.unsqueeze(1).squeeze(), (0, 0, 0)),
    (lambda x: x.movedim(0, -1), (0, 0, 0)),
    (lambda x: st.swapaxes(x, 0, 2), (0, 0, 0)),
])
def test_views_share_storage(make, index):
    x = _base()
    v = make(x)
    v.fill_(-1.0)
    got = to_numpy(x)
    assert got[index] == -1.0
    assert (got == -1.0).sum() == v.numel()


def test_slice_view_offsets_and_strides():
    x = _base()
    v = st.slice_view(st.select(x, 0, 1), 1, 1, 4, 2)
    assert v.shape == (3, 2) and v.stride() == (4, 2) and v.storage_offset() == 13
    assert_close(v, np.arange(24.0).reshape(2, 3, 4)[1, :, 1:4:2])


def test_copies_do_not_alias():
    x = _base()
    for y in (st.flip(x, 0), x.roll(1), x.repeat(1, 1, 1), st.cat([x]), st.pad(x, (0, 0)),
              st.pad(x, (1, 1), mode="reflect"), st.tril(x)):
        y.fill_(7.0)
    assert_close(x, np.arange(24.0).reshape(2, 3, 4))


def test_inplace_on_view_of_leaf_is_refused():
    x = as_tensor(np.zeros((2, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        st.slice_view(x, 1, 0, 2).add_(1.0)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        st.select(x, 0, 1).mul_(2.0)


def test_gradient_through_split_and_unbind_reaches_every_piece():
    x = as_tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    a, b = x.split([1, 2], dim=1)
    (a.sum() * 2 + (b * b).sum()).backward()
    assert_close(x.grad, [[2.0, 2.0, 4.0], [2.0, 8.0, 10.0]])
    x.grad = None
    r0, r1 = x.unbind(0)
    (r0 * 3 + r1).sum().backward()
    assert_close(x.grad, [[3.0, 3.0, 3.0], [1.0, 1.0, 1.0]])


# ---- forward details -------------------------------------------------------------------------


def test_non_contiguous_inputs():
    a = np.arange(12.0).reshape(3, 4)
    t = as_tensor(np.ascontiguousarray(a.T)).transpose(0, 1)  # values of a, transposed layout
    assert_close(st.cat([t, t], 1), np.concatenate([a, a], 1))
    assert_close(st.flip(t, (0, 1)), a[::-1, ::-1])
    assert_close(st.pad(t, (1, 2, 2, 1), mode="reflect"), np.pad(a, ((2, 1), (1, 2)), "reflect"))
    assert_close(st.pad(t, (1, 1), value=-1.0), np.pad(a, ((0, 0), (1, 1)), constant_values=-1))
    assert_close(t.repeat(2, 1), np.tile(a, (2, 1)))


def test_integer_and_bool_dtypes():
    a = np.arange(12).reshape(3, 4)
    t = as_tensor(a)
    assert_close(st.cat([t, t]), np.concatenate([a, a]))
    assert_close(st.flip(t, 1), a[:, ::-1])
    assert_close(st.pad(t, (1, 0), value=5), np.pad(a, ((0, 0), (1, 0)), constant_values=5))
    assert_close(st.pad(t, (2, 2), mode="circular"), np.pad(a, ((0, 0), (2, 2)), "wrap"))
    assert_close(st.tril(t, 1), np.tril(a, 1))
    m = as_tensor(a > 5)
    assert_close(st.triu(m), np.triu(a > 5))
    assert st.stack([m, m]).dtype is st.bool


def test_empty_edges():
    e = as_tensor(np.zeros((0, 3)))
    x = as_tensor(np.ones((2, 3)))
    assert st.cat([e, x]).shape == (2, 3)
    assert st.cat([as_tensor(np.zeros(0)), x]).shape == (2, 3)  # PyTorch's legacy empty skip
    assert [p.shape for p in e.split(2)] == [(0, 3)]
    assert [p.shape for p in e.chunk(3)] == [(0, 3)] * 3
    assert x.repeat(0, 2).shape == (0, 6)
    assert st.flip(e, 0).shape == (0, 3)
    assert st.pad(e, (1, 1)).shape == (0, 5)
    assert st.pad(x, (-2, -1)).shape == (2, 0)


def test_chunk_may_return_fewer_pieces():
    assert [p.shape[0] for p in st.zeros(6).chunk(4)] == [2, 2, 2]
    assert [p.shape[0] for p in st.zeros(5).chunk(2)] == [3, 2]


def test_squeeze_unsqueeze_edges():
    z = as_tensor(np.array(3.0))
    assert z.squeeze().shape == () and z.squeeze(0).shape == () and z.unsqueeze(-1).shape == (1,)
    assert st.zeros(1, 2, 1).squeeze((0, 1)).shape == (2, 1)
    assert st.zeros(2, 3).unsqueeze(2).is_contiguous()


def test_roll_flattened_and_tile_shorter_dims():
    a = np.arange(6.0).reshape(2, 3)
    assert_close(as_tensor(a).roll(-4), np.roll(a, -4))
    assert_close(st.tile(as_tensor(a), (2,)), np.tile(a, 2))


def test_one_hot_infers_num_classes():
    idx = np.array([[1, 4], [0, 2]])
    got = st.one_hot(as_tensor(idx))
    assert got.dtype is st.int64 and got.shape == (2, 2, 5)
    assert_close(got, np.eye(5, dtype=np.int64)[idx])


def test_pad_double_backward_constant_and_reflect():
    x = as_tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    for mode in ("constant", "reflect", "replicate", "circular"):
        assert st.autograd.gradgradcheck(lambda t, m=mode: st.pad(t, (2, 1, 1, 0), mode=m) ** 2,
                                         (x,))


def test_cat_stack_gradient_only_to_inputs_that_need_it():
    a = as_tensor(np.ones((2, 2)), requires_grad=True)
    b = as_tensor(np.ones((1, 2)))
    (st.cat([a, b]) * 3).sum().backward()
    assert_close(a.grad, np.full((2, 2), 3.0))
    assert b.grad is None


def test_methods_bound_on_tensor():
    x = st.zeros(2, 3)
    assert x.flatten().shape == (6,) and x.unsqueeze(0).shape == (1, 2, 3)
    assert x.narrow(1, 0, 2).shape == (2, 2) and x.flip(0).shape == (2, 3)
    assert x.expand_as(st.zeros(4, 2, 3)).shape == (4, 2, 3)
    assert x.view_as(st.zeros(6)).shape == (6,) and x.reshape_as(st.zeros(3, 2)).shape == (3, 2)
    assert x.swapaxes(0, 1).shape == (3, 2) and x.movedim(1, 0).shape == (3, 2)
    assert x.tril().shape == x.triu().shape == (2, 3)


# ---- errors ------------------------------------------------------------------------------------

X = np.zeros((2, 3))


@pytest.mark.parametrize("call, exc, match", [
    (lambda x: st.squeeze(x, 2), IndexError, r"squeeze: dimension out of range"),
    (lambda x: st.squeeze(x, (0, 0)), ValueError, r"squeeze: dim \(0, 0\) appears multiple"),
    (lambda x: st.unsqueeze(x, 3), IndexError, r"unsqueeze: dimension out of range"),
    (lambda x: st.unsqueeze(x, 1.0), TypeError, r"unsqueeze: dim must be an int"),
    (lambda x: st.slice_view(x, 0, 0, 2, 0), ValueError, r"slice: step must be greater than zero"),
    (lambda x: st.slice_view(x, 0, 0, 2, -1), ValueError, r"slice: step must be greater"),
    (lambda x: st.slice_view(x, 2, 0, 1), IndexError, r"slice: dimension out of range"),
    (lambda x: st.slice_view(x, 0, 0.5), TypeError, r"slice: start must be an int"),
    (lambda x: st.slice_view(x.sum(), 0), IndexError, r"slice: cannot slice a 0-d tensor"),
    (lambda x: st.narrow(x, 1, 4, 1), IndexError, r"narrow: start \(4\) is out of range .*size 3"),
    (lambda x: st.narrow(x, 1, 2, 2), ValueError, r"narrow: start \(2\) \+ length \(2\) exceeds"),
    (lambda x: st.narrow(x, 1, 0, -1), ValueError, r"narrow: length must be non-negative"),
    (lambda x: st.select(x, 0, 2), IndexError, r"select: index 2 is out of range .*size 2"),
    (lambda x: st.select(x, 1, -4), IndexError, r"select: index -4 is out of range"),
    (lambda x: st.select(x.sum(), 0, 0), IndexError, r"select: cannot be applied to a 0-d"),
    (lambda x: st.unbind(x, 2), IndexError, r"unbind: dimension out of range"),
    (lambda x: st.cat(x), TypeError, r"cat: expected a list or tuple of Tensors, got Tensor"),
    (lambda x: st.cat([]), ValueError, r"cat: expected a non-empty list"),
    (lambda x: st.cat([x, X]), TypeError, r"cat: expected Tensors, got ndarray at position 1"),
    (lambda x: st.cat([x, st.zeros(3, 3, dtype=st.float64)], 1), ValueError,
     r"cat: sizes of tensors must match except in dimension 1; got shapes \(2, 3\) \(tensor 0\) "
     r"and \(3, 3\) \(tensor 1\), mismatch in dimension 0"),
    (lambda x: st.cat([x, st.zeros(3, dtype=st.float64)]), ValueError,
     r"cat: tensors must have the same number of dimensions, got shapes \(2, 3\)"),
    (lambda x: st.cat([x, x.to(st.float32)]), TypeError,
     r"cat: expected all tensors to have the same dtype, got float64 \(tensor 0\) and float32"),
    (lambda x: st.cat([x.sum()]), ValueError, r"cat: zero-dimensional tensor \(at position 0\)"),
    (lambda x: st.cat([x, x], 2), IndexError, r"cat: dimension out of range"),
    (lambda x: st.stack([x, st.zeros(3, 2, dtype=st.float64)]), ValueError,
     r"stack: expects each tensor to be equal size, but got \(2, 3\) at entry 0 and \(3, 2\)"),
    (lambda x: st.stack([x, x], 3), IndexError, r"stack: dimension out of range"),
    (lambda x: st.split(x, 0, 1), ValueError, r"split: split_size must be positive"),
    (lambda x: st.split(x, [1, 1], 1), ValueError,
     r"split: split sizes \(1, 1\) must be non-negative and sum to the size of dimension 1 \(3\)"),
    (lambda x: st.split(x, 1.5), TypeError, r"split: split_size must be ints"),
    (lambda x: st.chunk(x, 0), ValueError, r"chunk: number of chunks must be greater than 0"),
    (lambda x: st.flatten(x, 1, 0), ValueError, r"flatten: start_dim \(1\) cannot come after"),
    (lambda x: st.flatten(x, 0, 2), IndexError, r"flatten: dimension out of range"),
    (lambda x: x.repeat(2), ValueError, r"repeat: number of repeat dims \(1\) can not be smaller"),
    (lambda x: x.repeat(2, -1), ValueError, r"repeat: repeats must be non-negative"),
    (lambda x: st.flip(x, (0, -2)), ValueError, r"flip: dim \(0, -2\) appears multiple times"),
    (lambda x: st.flip(x, 2), IndexError, r"flip: dimension out of range"),
    (lambda x: st.roll(x, (1, 2), 0), ValueError, r"roll: shifts and dims must align"),
    (lambda x: st.roll(x, (1, 2)), ValueError, r"roll: shifts \(1, 2\) need dims"),
    (lambda x: st.movedim(x, (0, 1), 0), ValueError, r"movedim: source \(0, 1\) and destinat"),
    (lambda x: st.movedim(x, (0, 0), (0, 1)), ValueError, r"movedim: repeated dim in source"),
    (lambda x: st.movedim(x, 0, 5), IndexError, r"movedim: dimension out of range"),
    (lambda x: st.swapaxes(x, 0, 2), IndexError, r"transpose: dimension out of range"),
    (lambda x: st.expand_as(x, X), TypeError, r"expand_as: other must be a Tensor"),
    (lambda x: st.expand_as(x, st.zeros(3, 3)), ValueError, r"expand: the expanded size"),
    (lambda x: st.view_as(x, st.zeros(4)), ValueError, r"view: shape \(4,\) is invalid"),
    (lambda x: st.view_as(x.t(), st.zeros(6)), RuntimeError, r"view: size \(6,\) is not"),
    (lambda x: st.reshape_as(x, st.zeros(5)), ValueError, r"reshape: shape \(5,\) is invalid"),
    (lambda x: st.tril(st.zeros(3)), ValueError,
     r"tril: input must have at least 2 dimensions, got shape \(3,\)"),
    (lambda x: st.triu(x, 0.5), TypeError, r"triu: diagonal must be ints"),
    (lambda x: st.pad(x, (1, 2, 3)), ValueError, r"pad: padding length must be divisible by 2"),
    (lambda x: st.pad(x, (1, 1, 1, 1, 1, 1)), ValueError,
     r"pad: padding \(1, 1, 1, 1, 1, 1\) covers 3 dimensions but the input has shape \(2, 3\)"),
    (lambda x: st.pad(x, (1, 1), mode="edge"), ValueError, r"pad: mode must be one of"),
    (lambda x: st.pad(x, (1, 1), mode="reflect", value=1.0), ValueError,
     r"pad: padding mode 'reflect' doesn't take a value"),
    (lambda x: st.pad(x, (3, 0), mode="reflect"), ValueError,
     r"pad: padding size should be less than .* \(3, 0\) for dimension 1 of size 3"),
    (lambda x: st.pad(x, (0, 0, 0, 2), mode="reflect"), ValueError,
     r"pad: padding size should be less than .* \(0, 2\) for dimension 0 of size 2"),
    (lambda x: st.pad(x, (4, 0), mode="circular"), ValueError,
     r"pad: circular padding \(4, 0\) of dimension 1 \(size 3\) would wrap around"),
    (lambda x: st.pad(st.zeros(0, 2), (0, 0, 1, 0), mode="replicate"), ValueError,
     r"pad: replicate padding needs a non-empty dimension 0"),
    (lambda x: st.pad(x, (-2, -2)), ValueError,
     r"pad: padding \(-2, -2\) of dimension 1 \(size 3\) gives a negative size"),
    (lambda x: st.pad(x, (1.5, 1)), TypeError, r"pad: pad amounts must be ints"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(as_tensor(X))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: st.one_hot(as_tensor(np.array([0.0, 1.0]))), TypeError,
     r"one_hot: indices must be an int64 tensor, got float64"),
    (lambda: st.one_hot(as_tensor(np.array([0, -1]))), ValueError,
     r"one_hot: class values must be non-negative, got -1"),
    (lambda: st.one_hot(as_tensor(np.array([0, 3])), 3), ValueError,
     r"one_hot: class value 3 is too large for num_classes=3"),
    (lambda: st.one_hot(as_tensor(np.zeros(0, dtype=np.int64))), ValueError,
     r"one_hot: can not infer the number of classes from an empty tensor"),
    (lambda: st.one_hot(as_tensor(np.array([0])), -2), ValueError,
     r"one_hot: num_classes must be -1 or non-negative, got -2"),
    (lambda: st.cat([st.zeros(1, device="cpu"), st.zeros(1, device=DEVICE)]) if DEVICE != "cpu"
     else st.cat([st.zeros(1), st.zeros(1, dtype=st.int64)]), (RuntimeError, TypeError),
     r"cat: expected all tensors to (be on the same device|have the same dtype)"),
])
def test_more_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
