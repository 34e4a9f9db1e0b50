"""In-place ops and memory overlap, for every in-place method the op registry declares.

An operand that partly overlaps the tensor written to is read as it was before the write (the
op computes through a temporary, as PyTorch's result is); writing into a tensor of which
several elements share one memory location (an expanded view) is refused with PyTorch's
message."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.ops._registry import METHODS

_INPLACE_KINDS = ("inplace_unary", "inplace_binary", "inplace")
INPLACE = sorted(n for n, d in METHODS.items()
                 if d.how in _INPLACE_KINDS or (n.endswith("_") and not n.startswith("__")))
# in-place methods that change only a tensor's shape and strides: they write no memory
METADATA = {"squeeze_", "unsqueeze_", "t_", "transpose_", "swapaxes_", "swapdims_", "resize_",
            "resize_as_"}
RANDOM = {"bernoulli_", "cauchy_", "exponential_", "geometric_", "log_normal_", "normal_",
          "random_", "uniform_"}


def _i(*v):
    return st.tensor(list(v), dtype=st.int64)


_ROWS = [[2, 0, 1, 1], [0, 1, 2, 0], [1, 2, 0, 2]]  # a permutation of rows in every column
_MASK = [[True, False, True, False], [False, False, True, True], [True, True, False, False]]


def _binary(T):
    return (T(3, 4),), {}


# name -> (shape of the tensor written to, dtype, args(T) -> (args, kwargs)); T(*shape) is a
# float (or int, with the op's dtype) operand. Ops not listed take no arguments.
SPECS = {
    "addbmm_": ((3, 4), None, lambda T: ((T(2, 3, 5), T(2, 5, 4)), {})),
    "baddbmm_": ((2, 3, 4), None, lambda T: ((T(2, 3, 5), T(2, 5, 4)), {})),
    "addcdiv_": ((3, 4), None, lambda T: ((T(3, 4), T(3, 4)), {"value": 0.5})),
    "addcmul_": ((3, 4), None, lambda T: ((T(3, 4), T(3, 4)), {"value": 0.5})),
    "addmm_": ((3, 4), None, lambda T: ((T(3, 5), T(5, 4)), {})),
    "addmv_": ((3,), None, lambda T: ((T(3, 4), T(4)), {})),
    "addr_": ((3, 4), None, lambda T: ((T(3), T(4)), {})),
    "apply_": ((3, 4), None, lambda T: ((lambda v: v * 2 + 1,), {})),
    "bernoulli_": ((3, 4), None, lambda T: ((T(3, 4),), {})),
    "bitwise_not_": ((3, 4), st.int64, lambda T: ((), {})),
    "clamp_": ((3, 4), None, lambda T: ((T(3, 4) - 0.2, T(3, 4) + 0.1), {})),
    "clip_": ((3, 4), None, lambda T: ((T(3, 4) - 0.2, T(3, 4) + 0.1), {})),
    "clamp_max_": ((3, 4), None, _binary),
    "clamp_min_": ((3, 4), None, _binary),
    "copy_": ((3, 4), None, _binary),
    "cumprod_": ((3, 4), None, lambda T: ((0,), {})),
    "cumsum_": ((3, 4), None, lambda T: ((1,), {})),
    "fill_": ((3, 4), None, lambda T: ((1.5,), {})),
    "fill_diagonal_": ((3, 4), None, lambda T: ((2.0,), {})),
    "gcd_": ((3, 4), st.int64, _binary),
    "lcm_": ((3, 4), st.int64, _binary),
    "geometric_": ((3, 4), None, lambda T: ((0.5,), {})),
    "heaviside_": ((3, 4), None, _binary),
    "index_add_": ((3, 4), None, lambda T: ((0, _i(0, 2), T(2, 4)), {})),
    "index_copy_": ((3, 4), None, lambda T: ((0, _i(2, 0), T(2, 4)), {})),
    "index_fill_": ((3, 4), None, lambda T: ((0, _i(1), 5.0), {})),
    "index_put_": ((3, 4), None, lambda T: (((_i(0, 2),), T(2, 4)), {})),
    "ldexp_": ((3, 4), None, _binary),
    "lerp_": ((3, 4), None, lambda T: ((T(3, 4), T(3, 4)), {})),
    "map_": ((3, 4), None, lambda T: ((T(3, 4), lambda a, b: a - 2 * b), {})),
    "masked_fill_": ((3, 4), None, lambda T: ((st.tensor(_MASK), 2.0), {})),
    "masked_scatter_": ((3, 4), None, lambda T: ((st.tensor(_MASK), T(3, 4)), {})),
    "polygamma_": ((3, 4), None, lambda T: ((1,), {})),
    "put_": ((3, 4), None, lambda T: ((_i(0, 5, 11), T(3)), {})),
    "random_": ((3, 4), None, lambda T: ((0, 10), {})),
    "renorm_": ((3, 4), None, lambda T: ((2, 0, 1.0), {})),
    "resize_": ((3, 4), None, lambda T: ((12,), {})),
    "resize_as_": ((3, 4), None, lambda T: ((T(4, 3),), {})),
    "scatter_": ((3, 4), None, lambda T: ((0, st.tensor(_ROWS), T(3, 4)), {})),
    "scatter_add_": ((3, 4), None, lambda T: ((0, st.tensor(_ROWS), T(3, 4)), {})),
    "scatter_reduce_": ((3, 4), None, lambda T: ((0, st.tensor(_ROWS), T(3, 4), "sum"), {})),
    "transpose_": ((3, 4), None, lambda T: ((0, 1), {})),
    "swapaxes_": ((3, 4), None, lambda T: ((0, 1), {})),
    "swapdims_": ((3, 4), None, lambda T: ((0, 1), {})),
    "unsqueeze_": ((3, 4), None, lambda T: ((0,), {})),
    "xlogy_": ((3, 4), None, _binary),
}
BINARY = {"add_", "sub_", "mul_", "div_", "divide_", "true_divide_", "atan2_", "arctan2_",
          "copysign_", "floor_divide_", "fmod_", "hypot_", "maximum_", "minimum_", "pow_",
          "remainder_", "multiply_", "subtract_", "eq_", "ge_", "greater_", "greater_equal_",
          "gt_", "le_", "less_", "less_equal_", "lt_", "ne_", "not_equal_", "logical_and_",
          "logical_or_", "logical_xor_"}
SHIFTED = {"acosh_": 1.5, "arccosh_": 1.5}  # ops whose domain starts above the default values


def _spec(name: str):
    label = METHODS[name].label if name.startswith("__") else name
    if label in SPECS:
        return label, SPECS[label]
    if label in BINARY:
        return label, ((3, 4), None, _binary)
    return label, ((3, 4), None, lambda T: ((), {}))


def _numel(shape) -> int:
    return int(np.prod(shape)) if shape else 1


def _values(n: int, dtype, shift: float) -> st.Tensor:
    r = np.random.default_rng(7)
    if dtype is st.int64:
        return st.tensor(r.integers(1, 10, n))
    return st.tensor(0.1 + 0.8 * r.random(n) + shift, dtype=st.float64)


def _run(name, x, args, kwargs):
    st.manual_seed(3)
    return getattr(x, name)(*args, **kwargs)


def test_every_inplace_method_is_covered():
    assert len(INPLACE) > 100
    assert "__iadd__" in INPLACE and "add_" in INPLACE and "zero_" in INPLACE
    for name in INPLACE:  # each runs on a fresh tensor with the arguments given above
        label, (shape, dtype, make) = _spec(name)
        shift = SHIFTED.get(label, 0.0)
        x = _values(_numel(shape), dtype, shift).reshape(*shape)

        def T(*s, dtype=dtype, shift=shift):
            return _values(_numel(s), dtype, shift).reshape(*s)

        args, kwargs = make(T)
        _run(name, x, args, kwargs)


@pytest.mark.parametrize("name", [n for n in INPLACE if n not in METADATA])
def test_partly_overlapping_operands_read_the_values_before_the_write(name):
    label, (shape, dtype, make) = _spec(name)
    n = _numel(shape)
    base = _values(n + 100, dtype, SHIFTED.get(label, 0.0))
    start = 50
    # every operand is a window of base that starts a little before or after x's own window
    starts = iter([start - 1, start + 1, start - 3, start + 2, start - 2])
    used = []

    def T(*s):
        at = next(starts)
        used.append(at)
        return base[at:at + _numel(s)].reshape(*s)

    x = base[start:start + n].reshape(*shape)
    args, kwargs = make(T)
    # the same computation through copies made before anything is written
    expect_x = x.clone()
    copies = [a.clone() if isinstance(a, st.Tensor) else a for a in args]
    _run(name, expect_x, copies, kwargs)
    _run(name, x, args, kwargs)
    got = base[start:start + n].numpy()
    np.testing.assert_allclose(got, expect_x.reshape(-1).numpy(), rtol=1e-12, atol=0,
                               err_msg=f"{name} with operands at {used}")
    # the memory around x is untouched
    untouched = base.numpy()[[i for i in range(n + 100) if not start <= i < start + n]]
    fresh = _values(n + 100, dtype, SHIFTED.get(label, 0.0)).numpy()
    np.testing.assert_array_equal(untouched,
                                  fresh[[i for i in range(n + 100) if not start <= i < start + n]])


_SHARED = ("more than one element of the written-to tensor refers to a single memory "
           "location. Please clone\\(\\) the tensor before performing the operation.")


@pytest.mark.parametrize("name", [n for n in INPLACE if n not in METADATA])
def test_writing_into_an_expanded_view_is_refused(name):
    label, (shape, dtype, make) = _spec(name)
    x = _values(_numel(shape[1:]), dtype, SHIFTED.get(label, 0.0)).reshape(1, *shape[1:])
    before = x.clone()
    view = x.expand(*shape)
    args, kwargs = make(lambda *s: _values(_numel(s), dtype, SHIFTED.get(label, 0.0))
                        .reshape(*s))
    with pytest.raises(RuntimeError, match=rf"^{label}: unsupported operation: {_SHARED}"):
        _run(name, view, args, kwargs)
    assert x.tolist() == before.tolist()  # nothing was written


def test_metadata_inplace_methods_still_work_on_expanded_views():
    v = st.zeros(1, 4).expand(3, 4)
    assert v.t_().shape == (4, 3)
    assert st.zeros(1, 4).expand(3, 4).unsqueeze_(0).shape == (1, 3, 4)


def test_the_reported_case():
    x = st.arange(10.0)
    x[1:].add_(x[:-1])
    assert x.tolist() == [0.0, 1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0, 17.0]
    x = st.arange(10.0)
    x[1:].copy_(x[:-1])
    assert x.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    x = st.arange(12.0).reshape(3, 4)
    x.add_(x[0])  # a broadcast operand that is the first row of x itself
    assert x.tolist() == [[0.0, 2.0, 4.0, 6.0], [4.0, 6.0, 8.0, 10.0], [8.0, 10.0, 12.0, 14.0]]
    x = st.zeros(4)
    with pytest.raises(RuntimeError, match=r"^add_: unsupported operation: more than one"):
        x.expand(3, 4).add_(st.ones(3, 4))
    with pytest.raises(RuntimeError, match=r"^add_: unsupported operation: more than one"):
        v = x.expand(3, 4)
        v += 1
    assert x.tolist() == [0.0] * 4


def test_full_overlap_and_plain_strided_views_are_written_in_place():
    x = st.arange(6.0)
    x.mul_(x)  # the very same view: each element read before it is written
    assert x.tolist() == [0.0, 1.0, 4.0, 9.0, 16.0, 25.0]
    y = st.arange(12.0).reshape(3, 4)
    y[:, ::2].add_(100)
    y.t().mul_(2)
    assert y.tolist() == [[200.0, 2.0, 204.0, 6.0], [208.0, 10.0, 212.0, 14.0],
                          [216.0, 18.0, 220.0, 22.0]]
    z = st.arange(8.0)
    z[::2].add_(z[1::2])  # interleaved, no shared element
    assert z.tolist() == [1.0, 1.0, 5.0, 3.0, 9.0, 5.0, 13.0, 7.0]


def test_strided_layouts_overlapping_or_not():
    from singa_tensor.ops.inplace import has_internal_overlap

    # layouts only as_strided-like views reach, made directly from the storage
    base = st.zeros(11)
    overlapping = base._view((3, 3), (2, 1), 0)  # rows share elements
    assert has_internal_overlap(overlapping)
    with pytest.raises(RuntimeError, match=r"^add_: unsupported operation: more than one"):
        overlapping.add_(1)
    interleaved = base._view((3, 3), (2, 3), 0)  # offsets 0,2,3,4,5,6,7,8,10: all distinct
    assert not has_internal_overlap(interleaved)
    interleaved.add_(1)
    assert base.tolist() == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    assert not has_internal_overlap(base[::3]) and has_internal_overlap(base[:1].expand(2))


def test_autograd_inplace_checks_are_unchanged():
    w = st.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"a leaf tensor that requires grad"):
        w.add_(1)
    leaf = st.ones(4, requires_grad=True)
    a = leaf * 1
    a[1:].add_(a[:-1])  # overlapping, tracked: the gradient sees the pre-write values
    a.sum().backward()
    assert a.tolist() == [1.0, 2.0, 2.0, 2.0]
    assert leaf.grad.tolist() == [2.0, 2.0, 2.0, 1.0]
