"""Binary ops compute the gradient of an input only when that input needs one: x * c, x / c
and the like leave the constant's gradient (a whole tensor op or several) undone, and the one
computed is the same as when both inputs need theirs."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

from .helpers import as_tensor, to_numpy

R = np.random.default_rng(11)
A = R.uniform(0.5, 2.0, (3, 4))
B = R.uniform(0.5, 2.0, (3, 4)) * np.where(R.random((3, 4)) < 0.5, -1.0, 1.0)
OPS = {
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: st.pow(a, b),
    "maximum": st.maximum,
    "minimum": st.minimum,
    "fmax": st.fmax,
    "fmin": st.fmin,
    "atan2": st.atan2,
    "hypot": st.hypot,
    "fmod": st.fmod,
    "remainder": st.remainder,
}


def _grads(op, need_a: bool, need_b: bool):
    a = as_tensor(A).requires_grad_(need_a)
    b = as_tensor(B).requires_grad_(need_b)
    w = as_tensor(np.linspace(0.5, 1.5, 12).reshape(3, 4))
    (OPS[op](a, b) * w).sum().backward()
    return (to_numpy(a.grad) if need_a else None), (to_numpy(b.grad) if need_b else None)


@pytest.mark.parametrize("op", list(OPS))
def test_one_sided_gradients_equal_the_two_sided_ones(op):
    ga, gb = _grads(op, True, True)
    only_a, none_b = _grads(op, True, False)
    none_a, only_b = _grads(op, False, True)
    assert none_a is None and none_b is None
    np.testing.assert_array_equal(only_a, ga)
    np.testing.assert_array_equal(only_b, gb)


def test_a_constant_operand_costs_no_gradient_kernels():
    # recorded in graph mode, the backward of x / 3.0 is one division (g / 3.0): the
    # constant's gradient, g * out / b * -1, is not computed
    x = st.randn(6, requires_grad=True)
    c = st.randn(6)

    def step():
        x.grad = None
        (x / 3.0).sum().backward()
        (x * c).sum().backward()
        return x.grad

    fn = st.compile(step, warmup=0, fuse=False)
    for _ in range(2):
        got = fn()
    np.testing.assert_allclose(to_numpy(got), 1.0 / 3.0 + to_numpy(c), rtol=1e-6)
    symbols = [s for _, _, s in fn._latest.graph.calls]
    assert symbols.count("st_div_f32") == 2 and symbols.count("st_mul_f32") == 2, symbols
