"""finfo/iinfo, the default dtype, inference_mode, where with scalars, size= on factories,
format specs on 0-d tensors, numel, is_floating_point, empty_strided, asarray."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

# ---- finfo / iinfo ----------------------------------------------------------------------------

@pytest.mark.parametrize("d, npd", [(st.float16, np.float16), (st.float32, np.float32),
                                    (st.float64, np.float64)])
def test_finfo_matches_numpy(d, npd):
    f, ref = st.finfo(d), np.finfo(npd)
    assert f.bits == ref.bits and f.eps == float(ref.eps) and f.max == float(ref.max)
    assert f.min == -f.max and f.tiny == f.smallest_normal == float(ref.smallest_normal)
    assert f.resolution == 10.0 ** -ref.precision
    assert f.dtype == d.name


def test_finfo_bfloat16_from_its_bits():
    f = st.finfo(st.bfloat16)
    # the largest bfloat16 is 0x7F7F: exponent 254, significand 1.1111111b
    largest = np.array([0x7F7F0000], dtype=np.uint32).view(np.float32)[0]
    assert f.max == float(largest) and f.bits == 16
    assert f.eps == 2.0 ** -7 and f.tiny == float(np.finfo(np.float32).smallest_normal)
    # eps is the gap above 1: 1 + eps survives a round trip through bfloat16, 1 + eps/2 does not
    t = st.tensor([1 + f.eps, 1 + f.eps / 4], dtype=st.float64).to(st.bfloat16).float()
    assert t.tolist() == [1 + f.eps, 1.0]


def test_finfo_default_and_errors():
    assert st.finfo().dtype == "float32"
    with pytest.raises(TypeError, match="finfo: int64 is not a floating point"):
        st.finfo(st.int64)
    with pytest.raises(TypeError, match="iinfo: float32 is not an integer dtype"):
        st.iinfo(st.float32)
    with pytest.raises(TypeError, match="iinfo: bool is not an integer"):
        st.iinfo(st.bool)
    assert "eps=" in repr(st.finfo(st.float32))


def test_iinfo():
    for d, npd in ((st.int32, np.int32), (st.int64, np.int64)):
        i, ref = st.iinfo(d), np.iinfo(npd)
        assert (i.bits, i.min, i.max, i.dtype) == (ref.bits, int(ref.min), int(ref.max), d.name)


# ---- default dtype ------------------------------------------------------------------------------

@pytest.fixture
def float64_default():
    st.set_default_dtype(st.float64)
    yield
    st.set_default_dtype(st.float32)


def test_default_dtype_reaches_the_factories(float64_default):
    assert st.get_default_dtype() is st.float64
    made = [st.tensor([1.0]), st.zeros(2), st.ones(2), st.empty(2), st.rand(2), st.randn(2),
            st.full((2,), 1.5), st.arange(0, 1, 0.5), st.linspace(0, 1, 3), st.eye(2),
            st.where(st.tensor([True]), 1.0, 0)]
    assert [t.dtype for t in made] == [st.float64] * len(made)
    assert st.tensor([1]).dtype is st.int64 and st.finfo().bits == 64


def test_default_dtype_restored_and_checked():
    assert st.zeros(1).dtype is st.float32
    with pytest.raises(TypeError, match="set_default_dtype: only float32 and float64"):
        st.set_default_dtype(st.int64)
    with pytest.raises(TypeError, match="set_default_dtype: only float32 and float64"):
        st.set_default_dtype(st.float16)
    assert st.get_default_dtype() is st.float32


# ---- inference_mode -----------------------------------------------------------------------------

def test_inference_mode_context_and_decorator():
    w = st.ones(2, requires_grad=True)
    with st.inference_mode():
        assert not st.is_grad_enabled() and st.is_inference_mode_enabled()
        assert not (w * 2).requires_grad
    assert st.is_grad_enabled() and not st.is_inference_mode_enabled()

    @st.inference_mode()
    def f(x):
        assert st.is_inference_mode_enabled()
        return x * 2

    assert not f(w).requires_grad and st.is_grad_enabled()
    with st.inference_mode(False):
        assert (w * 2).requires_grad
    with st.no_grad(), st.inference_mode(False):
        assert not st.is_grad_enabled()


def test_inference_mode_restores_after_an_exception():
    with pytest.raises(KeyError):
        with st.inference_mode():
            raise KeyError("x")
    assert st.is_grad_enabled() and not st.is_inference_mode_enabled()


def test_inference_mode_bad_arguments():
    with pytest.raises(TypeError, match="inference_mode: mode must be a bool"):
        st.inference_mode("yes")
    with pytest.raises(TypeError, match="inference_mode: expected a function"):
        st.inference_mode()(3)


# ---- where --------------------------------------------------------------------------------------

def test_where_with_scalars():
    c = np.array([True, False, True])
    cond = st.tensor(c)
    r = st.where(cond, 1.0, 0.0)
    assert r.dtype is st.float32 and r.tolist() == np.where(c, 1.0, 0.0).tolist()
    r = st.where(cond, 2, -1)
    assert r.dtype is st.int64 and r.tolist() == [2, -1, 2]
    r = st.where(cond, 2, 0.5)
    assert r.dtype is st.float32 and r.tolist() == [2.0, 0.5, 2.0]
    assert st.where(cond, True, False).dtype is st.bool
    x = st.tensor([1.0, 2.0, 3.0])
    assert st.where(cond, x, 7).tolist() == [1.0, 7.0, 3.0]
    assert st.where(cond, 7, x).tolist() == [7.0, 2.0, 7.0]
    assert st.where(cond, 1.5, st.tensor([1, 2, 3])).tolist() == [1.5, 2.0, 1.5]


def test_where_one_argument_and_errors():
    (idx,) = st.where(st.tensor([0.0, 3.0, 0.0, 1.0]) != 0)
    assert idx.tolist() == [1, 3]
    cond = st.tensor([True])
    with pytest.raises(TypeError, match="where: give both values"):
        st.where(cond, 1.0)
    with pytest.raises(TypeError, match="where: expected a Tensor or a number, got str"):
        st.where(cond, "a", 1)


# ---- size= keyword ------------------------------------------------------------------------------

@pytest.mark.parametrize("factory", [st.zeros, st.ones, st.empty, st.rand, st.randn])
def test_size_keyword(factory):
    assert factory(size=(2, 3)).shape == (2, 3)
    assert factory(size=[4]).shape == (4,)
    assert factory(size=5).shape == (5,)
    with pytest.raises(TypeError, match="got the shape both as arguments"):
        factory(2, size=(2,))


def test_full_size_keyword():
    assert st.full(size=(2,), fill_value=3.0).tolist() == [3.0, 3.0]
    assert st.full((1, 2), 4).tolist() == [[4, 4]]
    with pytest.raises(TypeError, match="full: size and fill_value are required"):
        st.full((2,))


# ---- __format__ ---------------------------------------------------------------------------------

def test_format_spec_on_0d_tensors():
    loss = st.tensor(0.123456)
    assert f"{loss:.4f}" == f"{0.123456:.4f}" == "0.1235"
    assert f"{st.tensor(7):>4d}" == "   7"
    assert f"{st.tensor(2.5, dtype=st.float64):e}" == f"{2.5:e}"
    x = st.tensor([1.0, 2.0])
    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match=r"Tensor.__format__: format spec '.2f' needs a 0-d"):
        f"{x:.2f}"


# ---- numel, is_floating_point, empty_strided, asarray --------------------------------------------

def test_numel_and_is_floating_point():
    assert st.numel(st.zeros(2, 3, 4)) == 24 and st.numel(st.tensor(1.0)) == 1
    assert st.is_floating_point(st.zeros(1, dtype=st.bfloat16))
    assert not st.is_floating_point(st.tensor([True]))
    with pytest.raises(TypeError, match="numel: expected a Tensor, got list"):
        st.numel([1, 2])
    with pytest.raises(TypeError, match="is_floating_point: expected a Tensor"):
        st.is_floating_point(1.0)


def test_empty_strided():
    t = st.empty_strided((2, 3), (1, 2), dtype=st.float64)
    assert t.shape == (2, 3) and t.stride() == (1, 2) and t.dtype is st.float64
    t.copy_(st.arange(6.0).reshape(2, 3))
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    # the storage is just large enough: a transposed layout of 6 elements
    assert t.t().is_contiguous()
    assert st.empty_strided((0, 3), (3, 1)).numel() == 0
    assert st.empty_strided((2,), (1,), requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="empty_strided: size .* and stride .* same length"):
        st.empty_strided((2, 3), (1,))
    with pytest.raises(ValueError, match="empty_strided: negative dimension"):
        st.empty_strided((2,), (-1,))


def test_asarray_shares_and_copies():
    a = np.arange(4, dtype=np.float32)
    t = st.asarray(a)
    a[0] = 9
    assert t.tolist() == [9.0, 1.0, 2.0, 3.0]
    c = st.asarray(a, copy=True)
    a[1] = 8
    assert c.tolist() == [9.0, 1.0, 2.0, 3.0]
    x = st.ones(2)
    assert st.asarray(x) is x
    assert st.asarray(x, dtype=st.float64).dtype is st.float64
    assert st.asarray([1, 2]).tolist() == [1, 2]
    assert st.asarray([1.0], requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="asarray: copy=False, but a list must be copied"):
        st.asarray([1, 2], copy=False)
    with pytest.raises(ValueError, match="asarray: copy=False, but the data must be copied"):
        st.asarray(x, dtype=st.float64, copy=False)
    assert st.asarray(a, copy=False).tolist() == a.tolist()


# ---- legacy typed constructors and Tensor.type ---------------------------------------------------

LEGACY = [("FloatTensor", st.float32), ("DoubleTensor", st.float64), ("HalfTensor", st.float16),
          ("BFloat16Tensor", st.bfloat16), ("IntTensor", st.int32), ("LongTensor", st.int64),
          ("BoolTensor", st.bool)]


@pytest.mark.parametrize("name, d", LEGACY)
def test_legacy_constructors(name, d):
    cls = getattr(st, name)
    z = cls(2, 3)
    assert z.shape == (2, 3) and z.dtype is d and not bool(z.any())
    assert cls().shape == (0,)
    data = cls([1, 0, 1])
    assert data.dtype is d and data.tolist() == st.tensor([1, 0, 1], dtype=d).tolist()
    assert cls((1, 0)).tolist() == st.tensor([1, 0], dtype=d).tolist()  # a tuple is data
    assert isinstance(z, cls) and isinstance(z, st.Tensor)
    assert z.type() == f"torch.{name}" and repr(cls) == f"<class 'torch.{name}'>"
    others = [getattr(st, n) for n, _ in LEGACY if n != name]
    assert not any(isinstance(z, o) for o in others)
    assert not isinstance(z, st.cuda.__getattr__(name))
    assert cls(z) is z


def test_legacy_constructor_errors():
    with pytest.raises(TypeError, match=r"FloatTensor: expected torch.FloatTensor, got "
                                        r"torch.LongTensor"):
        st.FloatTensor(st.arange(3, device="cpu"))
    with pytest.raises(TypeError, match="FloatTensor: a single number is not a size"):
        st.FloatTensor(2.5)
    with pytest.raises(TypeError, match="LongTensor: expected sizes"):
        st.LongTensor(2, "a")
    with pytest.raises(RuntimeError, match="FloatTensor: legacy constructor expects device type "
                                           "cpu"):
        st.FloatTensor(2, device="cuda")
    assert not isinstance([1.0], st.FloatTensor)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchTensor'"):
        st.cuda.NoSuchTensor  # noqa: B018


def test_tensor_type_conversions():
    x = st.tensor([1.5, -2.0], device="cpu")
    assert x.type() == "torch.FloatTensor"
    assert x.type(st.int32).dtype is st.int32 and x.type(st.int32).tolist() == [1, -2]
    assert x.type(st.float32) is x
    assert x.type("torch.DoubleTensor").dtype is st.float64
    assert x.type("singa_tensor.LongTensor").type() == "torch.LongTensor"
    assert x.type(st.BoolTensor).tolist() == [True, True]
    assert x.type("float64").dtype is st.float64
    assert st.zeros(1, dtype=st.bfloat16, device="cpu").type() == "torch.BFloat16Tensor"
    with pytest.raises(ValueError, match="Tensor.type: invalid type 'torch.FooTensor'"):
        x.type("torch.FooTensor")
    with pytest.raises(TypeError, match="Tensor.type: expected a dtype"):
        x.type(3)


def test_default_dtype_in_promotion_with_python_floats(float64_default):
    assert (st.arange(3) * 1.5).dtype is st.float64
    assert (st.tensor([True]) + 0.5).dtype is st.float64
    assert (st.ones(2, dtype=st.float32) * 1.5).dtype is st.float32  # floats keep their type


def test_python_floats_promote_to_float32_by_default():
    assert (st.arange(3) * 1.5).dtype is st.float32


def test_bfloat16_values_read_back_when_requiring_grad():
    t = st.tensor([1.5, -2.0], dtype=st.bfloat16, requires_grad=True)
    assert t.tolist() == [1.5, -2.0] and t[0].item() == 1.5


def test_asarray_of_a_dlpack_producer_shares_memory():
    class Producer:  # a DLPack producer that is not a numpy array
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.zeros(3, dtype=np.float32)
    t = st.asarray(Producer(a))
    a[1] = 4
    assert t.tolist() == [0.0, 4.0, 0.0]
