"""The CUDA backend and device plumbing.

Tests marked by the `cuda` fixture run on a real GPU when one is usable, and otherwise on the
stand-in device of tests/helpers.py (backend/cuda.py over the CPU library), so the Python side
of the backend is exercised on every machine. Tests that need CuPy on a real GPU skip without
one, with the reason."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import backend, nn
from singa_tensor.ops import REGISTRY

from . import helpers

REAL_GPU = helpers.real_gpu()
needs_gpu = pytest.mark.skipif(not REAL_GPU, reason="needs a usable CUDA device (and CuPy)")


# the `cuda` fixture (tests/conftest.py): the real device when present, else the stand-in


# ---- everywhere: device names and the errors without a GPU -------------------------------------


def test_device_parsing():
    assert st.device("cuda").index == 0 and st.device("cuda:3").index == 3
    assert st.device(1) == "cuda:1" and str(st.device("cuda", 2)) == "cuda:2"
    assert st.device("cpu").index is None
    with pytest.raises(ValueError, match="bad device index in 'cuda:x'"):
        st.device("cuda:x")
    with pytest.raises(ValueError, match="bad device index in 'cuda:-1'"):
        st.device("cuda:-1")
    with pytest.raises(ValueError, match="non-negative int"):
        st.device("cuda", -2)


@pytest.mark.skipif(REAL_GPU or helpers.STAND_IN is not None,
                    reason="a CUDA device is present")
def test_asking_for_cuda_without_a_device_raises_clearly():
    assert st.cuda.is_available() is False and st.cuda.device_count() == 0
    for make in (lambda: st.zeros(2, device="cuda"), lambda: st.ones(2).cuda(),
                 lambda: st.tensor([1.0], device="cuda:1"), lambda: st.set_default_device("cuda")):
        with pytest.raises(RuntimeError, match="cuda backend is not available"):
            make()
    assert st.get_default_device() == "cpu"
    with pytest.raises(RuntimeError, match="no CUDA device"):
        st.cuda.synchronize()


def test_cpu_tensors_have_no_cuda_array_interface():
    t = st.ones(2, device="cpu")
    assert not hasattr(t, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="not on a CUDA device"):
        t.__cuda_array_interface__  # noqa: B018


# ---- on a CUDA device (real, or the stand-in) --------------------------------------------------


def test_transfers_both_ways_keep_values_dtypes_and_views(cuda):
    rng = np.random.default_rng(0)
    for a in (rng.standard_normal((3, 4)), rng.integers(-5, 5, (2, 3)), rng.random(5) > 0.5,
              np.float32(2.5) * np.ones(()), np.zeros((0, 3), np.float32)):
        t = st.tensor(a, device="cpu")
        d = t.to(cuda)
        assert d.device == cuda and d.is_cuda and d.dtype is t.dtype and d.shape == a.shape
        back = d.cpu()
        assert back.device == "cpu"
        np.testing.assert_array_equal(back.numpy(), t.numpy())
    x = st.arange(12.0, device="cpu").reshape(3, 4)
    view = x.to(cuda).T[1:, ::2]  # a strided device view copies out correctly
    np.testing.assert_array_equal(view.cpu().numpy(), x.numpy().T[1:, ::2])
    h = st.tensor([1.0, 2.0], dtype=st.bfloat16, device="cpu").cuda()
    assert h.dtype is st.bfloat16 and h.float().cpu().tolist() == [1.0, 2.0]
    assert st.zeros(2, device=cuda).cuda() is not None
    assert d.to(cuda) is d


def test_device_tensor_reads_go_through_host_copies(cuda):
    d = st.tensor([[1.5, -2.0], [3.0, 4.0]], device=cuda)
    assert d.tolist() == [[1.5, -2.0], [3.0, 4.0]] and d[1, 0].item() == 3.0
    np.testing.assert_array_equal(np.asarray(d), [[1.5, -2.0], [3.0, 4.0]])
    assert "device='cuda:0'" in repr(d)
    with pytest.raises(TypeError, match="on cuda:0; copy it with .cpu"):
        d.numpy()
    np.testing.assert_array_equal(d.numpy(force=True), d.cpu().numpy())


def test_creation_on_the_device(cuda):
    st.manual_seed(3)
    r_cpu = st.randn(5, dtype=st.float64, device="cpu")
    st.manual_seed(3)
    r_dev = st.randn(5, dtype=st.float64, device=cuda)
    np.testing.assert_allclose(r_dev.cpu().numpy(), r_cpu.numpy(), rtol=1e-12)
    assert st.arange(4, device=cuda).tolist() == [0, 1, 2, 3]
    assert st.eye(2, device=cuda).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert st.full((2,), 7, device=cuda).device == cuda
    previous = st.get_default_device()
    st.set_default_device(cuda)
    try:
        assert st.zeros(1).device == cuda and st.tensor([1]).device == cuda
        st.set_default_device("cpu")
        assert st.zeros(1).device == "cpu"
    finally:
        st.set_default_device(previous)


def test_mixed_devices_raise_before_any_kernel(cuda):
    a, b = st.ones(2, device="cpu"), st.ones(2, device=cuda)
    for op in (lambda: a + b, lambda: st.matmul(a.reshape(1, 2), b.reshape(2, 1)),
               lambda: st.where(b > 0, a, b), lambda: st.cat([a, b]),
               lambda: st.gather(b, 0, st.tensor([0], device="cpu"))):
        with pytest.raises(RuntimeError, match="same device.*(cpu.*cuda:0|cuda:0.*cpu)"):
            op()


def test_gradients_flow_back_across_devices(cuda):
    x = st.tensor([1.0, 2.0, 3.0], device="cpu", requires_grad=True)
    y = (x.to(cuda) * st.tensor([2.0, 3.0, 4.0], device=cuda)).sum()
    y.backward()
    assert x.grad.device == "cpu" and x.grad.tolist() == [2.0, 3.0, 4.0]
    w = st.tensor([1.0, -1.0], device=cuda, requires_grad=True)
    (w.cpu() ** 2).sum().backward()
    assert w.grad.device == cuda and w.grad.tolist() == [2.0, -2.0]


def test_out_of_memory_is_a_clear_error(cuda):
    with pytest.raises(MemoryError, match=r"cuda:0: out of memory allocating 1125899906842624 "
                                          r"bytes"):
        st.empty(1 << 48, dtype=st.float32, device=cuda)
    assert st.ones(2, device=cuda).sum().item() == 2.0  # the device still works


def test_launch_errors_become_runtime_errors(cuda):
    if REAL_GPU:
        pytest.skip("injecting a launch error needs the stand-in device")
    be = backend.get(st.device(cuda))
    x = st.ones(3, device=cuda)
    be_mod = backend._loaded["cuda"]
    be_mod.fake_lib.error = "too many resources requested for launch"
    with pytest.raises(RuntimeError, match="st_exp_f32 on cuda:0: too many resources"):
        st.exp(x)
    assert st.exp(x).cpu().tolist()[0] == pytest.approx(np.e)
    assert be.kernel("st_no_such_kernel") is None
    assert be_mod.fake_lib.streams  # every launch got a stream argument


@pytest.mark.parametrize("shape_a, shape_b, ta, tb", [
    ((3, 4), (4, 5), False, False), ((3, 4), (4, 5), False, True), ((3, 4), (4, 5), True, False),
    ((2, 3, 4), (2, 4, 5), True, True), ((2, 3, 4), (4, 5), False, False),
    ((5, 1, 3, 4), (2, 4, 5), False, True), ((1, 4), (4, 1), False, False),
    ((3, 0), (0, 2), False, False), ((2, 3), (3, 4), True, True)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_matmul_matches_cpu(cuda, shape_a, shape_b, ta, tb, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((shape_a, shape_b)).encode()))
    a = rng.integers(-3, 4, shape_a).astype(dtype)
    b = rng.integers(-3, 4, shape_b).astype(dtype)
    da, db = st.tensor(a, device=cuda), st.tensor(b, device=cuda)
    # a transposed operand is stored the other way round, so the kernel gets a transpose flag
    if ta:
        da = st.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), device=cuda).mT
    if tb:
        db = st.tensor(np.ascontiguousarray(np.swapaxes(b, -1, -2)), device=cuda).mT
    fake = None if REAL_GPU else backend._loaded["cuda"].fake_cublas
    calls = len(fake.calls) if fake else 0
    got = st.matmul(da, db).cpu().numpy()
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-6)
    if fake and dtype != "int64" and a.size and b.size:
        assert len(fake.calls) > calls  # float products went through (the model of) cuBLAS


def test_memory_statistics_track_live_tensors(cuda):
    be = backend.get(st.device(cuda))
    before = be.allocated_bytes()
    t = st.empty(1 << 20, device=cuda)
    assert be.allocated_bytes() >= before + (1 << 22)
    del t
    assert be.allocated_bytes() <= before + 4096
    st.cuda.synchronize() if REAL_GPU else be.synchronize()


# ---- every op on both devices -----------------------------------------------------------------


def _work_dtype(spec):
    return "float64" if "float64" in spec.dtypes else spec.dtypes[0]


def _outputs(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, st.Tensor)]


PARITY = sorted((s for s in REGISTRY.values()
                 if s.name != "to_device" and helpers.spec_inputs(s)), key=lambda s: s.name)


@pytest.mark.parametrize("spec", PARITY, ids=[s.name for s in PARITY])
def test_every_op_matches_cpu(cuda, spec):
    dtype = _work_dtype(spec)
    grad = spec.differentiable and dtype == "float64"
    # gradients are compared too, so the values are those of the gradient checks; the
    # reductions' own samples cover more dim and keepdim forms than the generated ones
    for args, kwargs in helpers.spec_inputs(spec, dtype=dtype, for_grad=True,
                                            prefer_samples=True):
        results = []
        for device in ("cpu", cuda):
            st.manual_seed(0)
            ts = helpers.spec_tensors(args, requires_grad=grad, device=device)
            outs = _outputs(spec.fn(*ts, **kwargs))
            grads = []
            diff = [o for o in outs if o.requires_grad]
            if grad and diff:
                rng = np.random.default_rng(1)
                loss = sum((o * st.tensor(rng.standard_normal(o.shape), device=device)).sum()
                           for o in diff)
                leaves = [t for t in ts if isinstance(t, st.Tensor) and t.requires_grad]
                grads = st.autograd.grad(loss, leaves, allow_unused=True)
            results.append(([o.detach().cpu() for o in outs],
                            [g.cpu() if g is not None else None for g in grads]))
        (o_cpu, g_cpu), (o_dev, g_dev) = results
        assert len(o_cpu) == len(o_dev)
        for c, d in zip(o_cpu + g_cpu, o_dev + g_dev):
            if c is None:
                assert d is None
                continue
            assert c.shape == d.shape and c.dtype is d.dtype, (spec.name, c, d)
            helpers.assert_close(d, c.numpy(), rtol=1e-9, atol=1e-11, msg=spec.name)


# ---- modules -------------------------------------------------------------------------------------


def test_module_to_cuda_and_one_training_step_match_cpu(cuda):
    def run(device):
        st.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        model.to(device)
        assert all(p.device == device for p in model.parameters())
        opt = st.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = st.tensor(np.linspace(-1, 1, 20).reshape(5, 4), dtype=st.float32, device=device)
        y = st.tensor([0, 1, 2, 1, 0], device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), [p.detach().cpu().numpy() for p in model.parameters()]

    loss_cpu, params_cpu = run("cpu")
    loss_dev, params_dev = run(cuda)
    assert loss_dev == pytest.approx(loss_cpu, rel=1e-5)
    for a, b in zip(params_cpu, params_dev):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


# ---- exchange with CuPy (real GPU only) -------------------------------------------------------


@needs_gpu
def test_cuda_array_interface_and_dlpack_with_cupy():
    import cupy

    t = st.arange(6.0).reshape(2, 3).cuda()
    c = cupy.asarray(t)  # zero-copy through __cuda_array_interface__
    c[0, 0] = 42.0
    assert t[0, 0].item() == 42.0
    cai = t.T.__cuda_array_interface__
    assert cai["shape"] == (3, 2) and cai["strides"] == (4, 12) and cai["version"] == 3
    d = cupy.from_dlpack(t)
    d[1, 2] = -1.0
    assert t[1, 2].item() == -1.0 and t.__dlpack_device__() == (2, 0)
    src = cupy.arange(8, dtype=cupy.float32).reshape(2, 4)[:, 1::2]
    back = st.from_dlpack(src)
    assert back.device == "cuda:0" and back.tolist() == [[1.0, 3.0], [5.0, 7.0]]
    src[0, 0] = 10.0
    assert back[0, 0].item() == 10.0
    del src
    assert back.sum().item() == 25.0  # the producer's memory stays alive


@needs_gpu
def test_real_out_of_memory_leaves_the_device_usable():
    with pytest.raises(MemoryError, match="out of memory allocating"):
        st.empty(1 << 50, dtype=st.bool, device="cuda")
    st.cuda.synchronize()
    assert st.ones(3, device="cuda").sum().item() == 3.0
