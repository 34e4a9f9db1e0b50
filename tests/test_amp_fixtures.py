"""Mixed precision against PyTorch 2.13's own results (tests/data/amp_fixtures.npz, written by
tools/make_amp_fixtures.py from the same case functions): the dtypes autocast and the 16-bit
ops choose, and their values.

Elementwise 16-bit ops round one float32 result, so they must equal PyTorch bit for bit.
Products and reductions accumulate in another order than PyTorch's kernels (and than each
other's on other CPUs), so they are compared within a few bfloat16 ulps of the result's scale.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import singa_tensor as st

from .helpers import to_numpy

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_amp_fixtures",
                                               ROOT / "tools" / "make_amp_fixtures.py")
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)
DATA = np.load(ROOT / "tests" / "data" / "amp_fixtures.npz")

# one rounding of a float32 result: PyTorch's bits
EXACT = {"bf16_add", "bf16_mul", "bf16_div", "bf16_mul_scalar", "bf16_add_scalar", "f16_mul",
         "bf16_with_f32"}
BF16_ULP = 2.0 ** -8  # the spacing of bfloat16 numbers in [1, 2), relative


def _run(name):
    inputs, fn = fixtures.CASES[name]
    return fn(st, *[st.tensor(a) for a in inputs])


@pytest.mark.parametrize("name", list(fixtures.CASES))
def test_against_pytorch(name):
    got = _run(name)
    assert got.dtype.name == str(DATA[f"{name}/dtype"]), name
    for i, a in enumerate(fixtures.CASES[name][0]):  # the inputs are the ones PyTorch saw
        np.testing.assert_array_equal(a, DATA[f"{name}/in{i}"])
    want = DATA[f"{name}/out"]
    have = to_numpy(got.float())
    if name in EXACT:
        np.testing.assert_array_equal(have, want, err_msg=name)
    else:
        scale = max(float(np.abs(want).max()), 1e-6)
        err = float(np.abs(have - want).max()) / scale
        assert err <= 4 * BF16_ULP, (name, err)


def test_an_autocast_training_step_matches_pytorchs_gradients():
    x, w1, w2 = (st.tensor(a) for a in fixtures.GRAD_INPUTS)
    loss, g1, g2 = fixtures._grads_case(st, x, w1, w2, st.arange(16) % 10)
    assert loss.dtype is st.float32 and g1.dtype is st.float32
    np.testing.assert_allclose(loss.item(), float(DATA["mlp/loss"]), rtol=4 * BF16_ULP)
    for got, key in ((g1, "mlp/g1"), (g2, "mlp/g2")):
        want = DATA[key]
        err = np.abs(to_numpy(got) - want).max() / np.abs(want).max()
        assert err <= 8 * BF16_ULP, (key, err)


def test_grad_scaler_follows_pytorchs_schedule():
    scales, w = fixtures._scaler_scales(st)
    np.testing.assert_array_equal(scales, DATA["scaler/scales"])
    np.testing.assert_allclose(w, DATA["scaler/w"], rtol=1e-6)
