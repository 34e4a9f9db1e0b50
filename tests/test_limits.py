"""Inputs at the edges of what the kernels hold: many dimensions, huge sizes, integer
division by zero, non-finite values cast to integers. Each must give a clear Python error
or a defined result, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.tensor import MAX_DIMS

from .helpers import DEVICE, to_numpy


def test_many_strided_dimensions_match_numpy():
    base = np.arange(2 ** 17, dtype=np.float32).reshape([2] * 17)
    x = st.tensor(base, device=DEVICE).permute(*reversed(range(17)))  # nothing merges
    want = np.transpose(base, list(reversed(range(17)))) * 2 + 1
    np.testing.assert_array_equal(to_numpy(x * 2 + 1), want)


def test_too_many_dimensions_is_a_clear_error():
    with pytest.raises(ValueError, match=f"at most {MAX_DIMS} dimensions"):
        st.ones(1, device=DEVICE).reshape(*([1] * (MAX_DIMS + 1)))


def test_impossible_allocation_is_memory_error():
    with pytest.raises(MemoryError, match=r"shape \(1099511627776, 1073741824\)"):
        st.zeros(2 ** 40, 2 ** 30, device=DEVICE)


@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_integer_division_by_zero_raises(op):
    a = st.tensor([7, -7], device=DEVICE)
    with pytest.raises(ZeroDivisionError, match=f"{op}: integer division by zero"):
        getattr(st, op)(a, st.tensor([2, 0], device=DEVICE))


def test_integer_min_by_minus_one_does_not_trap():
    lo = np.iinfo(np.int64).min
    got = st.floor_divide(st.tensor([lo], device=DEVICE), -1)
    assert got.tolist() == [lo]  # wraps as in two's complement, like numpy


def test_non_finite_to_integer_is_defined():
    x = st.tensor([float("nan"), float("inf"), -float("inf"), 3.7], device=DEVICE)
    info = np.iinfo(np.int64)
    assert x.long().tolist() == [0, info.max, info.min, 3]


def test_caching_allocator_reuses_freed_blocks():
    from singa_tensor import backend

    be = backend.get(st.device(DEVICE))
    if not hasattr(be, "cached_bytes"):
        pytest.skip("backend has no caching allocator statistics")
    n = 1 << 22  # 16 MiB of float32, above the small-buffer path
    a = st.empty(n, device=DEVICE)
    del a
    cached = be.cached_bytes()
    assert cached >= n * 4
    allocated = be.allocated_bytes()
    b = st.empty(n, device=DEVICE)  # served from the cache: the cache shrinks by its block
    assert be.cached_bytes() <= cached - n * 4
    assert be.allocated_bytes() >= allocated + n * 4
    del b
    assert be.cached_bytes() >= cached


def test_cache_limit_zero_returns_freed_blocks_to_the_system():
    from singa_tensor.backend import cpu

    cpu.empty_cache()
    cpu.set_cache_limit(0)
    try:
        a = st.empty(1 << 20)  # 4 MiB, above the small-buffer path
        del a
        assert cpu.cached_bytes() == 0
    finally:
        cpu.set_cache_limit(4 << 30)
    with pytest.raises(ValueError, match="non-negative byte count"):
        cpu.set_cache_limit(-1)


def test_cache_limit_from_the_environment_is_validated():
    import os
    import subprocess
    import sys

    # the parent's environment carries PYTHONPATH, where the package may be installed
    env = {**os.environ, "SINGA_TENSOR_CPU_CACHE_LIMIT": "lots"}
    r = subprocess.run([sys.executable, "-c", "import singa_tensor as st; st.ones(1)"],
                       capture_output=True, text=True, env=env)
    assert r.returncode != 0
    assert "SINGA_TENSOR_CPU_CACHE_LIMIT must be a non-negative number of bytes" in r.stderr


def test_index_add_into_an_empty_tensor_writes_nothing():
    # the destination has no elements (a zero-size dim before dim): nothing may be written
    x = st.zeros(0, 3, device=DEVICE)
    out = st.index_add(x, 1, st.tensor([0, 1, 2], device=DEVICE), st.zeros(0, 3, device=DEVICE))
    assert out.shape == (0, 3)
