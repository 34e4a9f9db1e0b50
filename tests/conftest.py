"""Test-session setup: SINGA_TENSOR_DEVICE picks the device under test. "cuda" (or "cuda:N")
makes it the default device, so every test that creates tensors without naming a device, and
every registry-driven op test, runs there; without a usable GPU those runs skip with the
reason. "fake-cuda" runs the same through the CUDA backend's Python code on a stand-in device
built from the CPU library (tests/helpers.py), which needs no GPU; "emu-cuda" runs it on the
stand-in device with the CUDA library's own kernels built for the CPU (tools/cuda_emu)."""

from __future__ import annotations

import pytest

import singa_tensor as st

from . import helpers

_skip_reason = None


def pytest_configure(config):
    global _skip_reason
    if helpers.STAND_IN:
        helpers.install_fake_cuda()
    _skip_reason = helpers.device_problem()
    if _skip_reason is None and helpers.DEVICE != "cpu":
        st.set_default_device(helpers.DEVICE)


@pytest.fixture
def cuda():
    """The name of a CUDA device: the real one when present, else the stand-in of
    tests/helpers.py, installed for the test."""
    if helpers.real_gpu():
        yield "cuda:0"
        return
    helpers.install_fake_cuda()
    try:
        yield "cuda:0"
    finally:
        if not helpers.STAND_IN:
            helpers.uninstall_fake_cuda()


def pytest_collection_modifyitems(config, items):
    if _skip_reason is not None:
        mark = pytest.mark.skip(reason=_skip_reason)
        for item in items:
            item.add_marker(mark)


@pytest.fixture(params=["avx512", "avx2"])
def simd_build(request):
    """The CPU library's kernels that come in two builds (docs/performance.md), run in their
    AVX-512 build (skipped on a CPU without it) or their AVX2 one; skipped off the CPU."""
    from singa_tensor.backend import cpu

    if helpers.DEVICE != "cpu":
        pytest.skip("the two builds are the CPU library's")
    before = cpu.lib.st_cpu_avx512(-1)
    want = request.param == "avx512"
    if cpu.lib.st_cpu_avx512(int(want)) != int(want):
        cpu.lib.st_cpu_avx512(before)
        pytest.skip("this CPU has no AVX-512: only the AVX2 build runs")
    yield request.param
    cpu.lib.st_cpu_avx512(before)
