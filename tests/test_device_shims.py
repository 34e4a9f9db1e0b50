"""PyTorch's device-query namespaces: st.accelerator, st.backends (cudnn, cuda.matmul, mps,
cpu), st.use_deterministic_algorithms, and Tensor.is_cuda / is_cpu / is_xpu / is_mps."""

from __future__ import annotations

import pytest

import singa_tensor as st


@pytest.fixture(autouse=True)
def _restore_flags():
    cudnn = {n: getattr(st.backends.cudnn, n)
             for n in ("enabled", "benchmark", "deterministic", "allow_tf32")}
    precision = st.get_float32_matmul_precision()
    det = (st.are_deterministic_algorithms_enabled(),
           st.is_deterministic_algorithms_warn_only_enabled())
    yield
    for n, v in cudnn.items():
        setattr(st.backends.cudnn, n, v)
    st.set_float32_matmul_precision(precision)
    st.use_deterministic_algorithms(det[0], warn_only=det[1])


def test_accelerator_follows_cuda():
    assert st.accelerator.is_available() is st.cuda.is_available()
    assert st.accelerator.device_count() == st.cuda.device_count()
    acc = st.accelerator.current_accelerator(check_available=True)
    if st.cuda.is_available():
        assert acc.type == "cuda"
        assert st.accelerator.current_device_index() >= 0
    else:
        assert acc is None
        with pytest.raises(RuntimeError, match="accelerator.synchronize: no accelerator"):
            st.accelerator.synchronize()
        with pytest.raises(RuntimeError, match="accelerator.current_device_index"):
            st.accelerator.current_device_index()
    unchecked = st.accelerator.current_accelerator()
    assert (unchecked is not None) == (st.cuda.is_available() or st.backends.cuda.is_built())
    with pytest.raises(TypeError, match="check_available must be a bool"):
        st.accelerator.current_accelerator(check_available="yes")


def test_cudnn_flags_default_settable_and_checked():
    c = st.backends.cudnn
    assert (c.enabled, c.benchmark, c.deterministic, c.allow_tf32) == (True, False, False, True)
    c.benchmark = True
    c.deterministic = True
    assert c.benchmark is True and c.deterministic is True
    assert st.backends.cudnn.benchmark is True  # the same module seen again
    with pytest.raises(TypeError, match="backends.cudnn.benchmark must be a bool, got int"):
        c.benchmark = 1
    assert c.is_available() is False and c.version() is None
    with pytest.raises(AttributeError, match="has no attribute 'benchmak'"):
        c.benchmak  # noqa: B018


def test_cudnn_flags_context_restores():
    c = st.backends.cudnn
    with c.flags(enabled=False, benchmark=True, deterministic=True):
        assert (c.enabled, c.benchmark, c.deterministic) == (False, True, True)
    assert (c.enabled, c.benchmark, c.deterministic) == (True, False, False)
    with pytest.raises(TypeError, match="backends.cudnn.enabled must be a bool"):
        with c.flags(enabled="no"):
            pass


def test_cuda_matmul_flags_and_precision():
    m = st.backends.cuda.matmul
    assert m.allow_tf32 is False
    assert m.allow_fp16_reduced_precision_reduction is True
    assert st.get_float32_matmul_precision() == "highest"
    m.allow_tf32 = True
    assert st.get_float32_matmul_precision() == "high"
    m.allow_tf32 = False
    st.set_float32_matmul_precision("medium")
    assert m.allow_tf32 is True and st.get_float32_matmul_precision() == "medium"
    st.set_float32_matmul_precision("highest")
    assert m.allow_tf32 is False
    with pytest.raises(ValueError, match="set_float32_matmul_precision: precision must be one"):
        st.set_float32_matmul_precision("low")
    with pytest.raises(AttributeError, match="backends.cuda.matmul: unknown attribute 'allow_tf"):
        m.allow_tf = True
    with pytest.raises(TypeError, match="backends.cuda.matmul.allow_tf32 must be a bool"):
        m.allow_tf32 = "yes"
    assert isinstance(st.backends.cuda.is_built(), bool)


def test_mps_and_cpu():
    assert st.backends.mps.is_available() is False
    assert st.backends.mps.is_built() is False
    cap = st.backends.cpu.get_cpu_capability()
    assert cap in ("AVX512", "AVX2", "DEFAULT")


def test_cpu_capability_follows_the_simd_switch():
    """get_cpu_capability says which build of the kernels built twice runs (PyTorch's names);
    set_simd_level switches it, and names nothing but the two levels."""
    from singa_tensor.backend import cpu

    before = cpu.simd_level()
    try:
        assert cpu.set_simd_level("avx2") == "AVX2"
        assert st.backends.cpu.get_cpu_capability() in ("AVX2", "DEFAULT")
        level = cpu.set_simd_level("AVX512")
        assert level in ("AVX512", "AVX2")  # AVX2 where the CPU has no AVX-512
        if level == "AVX512":
            assert st.backends.cpu.get_cpu_capability() == "AVX512"
        with pytest.raises(ValueError, match="set_simd_level: expected 'avx512' or 'avx2', got "
                                             "'sse'"):
            cpu.set_simd_level("sse")
    finally:
        cpu.set_simd_level(before)


@pytest.mark.parametrize("value, want", [("avx2", "AVX2"), ("bogus", None)])
def test_cpu_capability_from_the_environment(value, want):
    """SINGA_TENSOR_CPU_CAPABILITY=avx2 at import runs the AVX2 builds; another value is
    ignored with a warning."""
    import os
    import subprocess
    import sys

    code = ("import warnings; warnings.simplefilter('error');\n"
            "try:\n    import singa_tensor as st\nexcept RuntimeWarning as e:\n"
            "    print('warned', e)\nelse:\n    print(st.backends.cpu.get_cpu_capability())")
    env = dict(os.environ, SINGA_TENSOR_CPU_CAPABILITY=value)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    if want is None:
        assert "warned SINGA_TENSOR_CPU_CAPABILITY='bogus' is neither" in out.stdout
    else:
        assert out.stdout.strip() in (want, "DEFAULT")


def test_deterministic_algorithms():
    assert st.are_deterministic_algorithms_enabled() is False
    st.use_deterministic_algorithms(True, warn_only=True)
    assert st.are_deterministic_algorithms_enabled() is True
    assert st.is_deterministic_algorithms_warn_only_enabled() is True
    st.use_deterministic_algorithms(False)
    assert st.is_deterministic_algorithms_warn_only_enabled() is False
    with pytest.raises(TypeError, match="use_deterministic_algorithms: mode must be a bool"):
        st.use_deterministic_algorithms(1)


def test_backends_is_not_the_device_backend():
    assert st.backends is not st.backend
    assert hasattr(st.backend, "load")


def test_tensor_device_flags():
    t = st.ones(2)
    assert (t.is_cpu, t.is_cuda, t.is_xpu, t.is_mps, t.is_meta) == (True, False, False, False,
                                                                    False)
    if st.cuda.is_available():
        g = t.to("cuda")
        assert g.is_cuda and not g.is_cpu
