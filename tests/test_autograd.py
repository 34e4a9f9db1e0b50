"""The autograd engine: backward/grad, grad modes, hooks, custom Functions, numerical checks and
in-place version counters. Expected values come from numpy or closed-form derivatives."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.autograd import GradcheckError

from .helpers import to_numpy


def f64(*vals, requires_grad=True):
    return st.tensor(np.array(vals, dtype=np.float64), requires_grad=requires_grad)


# ---- backward basics -----------------------------------------------------------------------------


def test_gradients_accumulate_across_backward_calls():
    x = f64(1.0, -2.0, 3.0)
    (x * x).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [2.0, -4.0, 6.0])
    (x * x * x).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [2.0 + 3.0, -4.0 + 12.0, 6.0 + 27.0])


def test_second_backward_without_retain_graph_raises():
    x = f64(0.5, 1.5)
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = f64(0.5, 1.5)
    y = x.exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(to_numpy(x.grad), 2 * np.exp([0.5, 1.5]))


def test_backward_on_non_scalar_needs_gradient():
    x = f64(1.0, 2.0)
    with pytest.raises(RuntimeError, match="implicitly created only for scalar"):
        (x * 2).backward()


def test_backward_with_explicit_gradient():
    x = f64(1.0, 2.0, 3.0)
    (x * x).backward(st.tensor([1.0, 0.5, -1.0], dtype=st.float64))
    np.testing.assert_allclose(to_numpy(x.grad), [2.0, 2.0, -6.0])


def test_backward_gradient_of_wrong_shape_raises():
    x = f64(1.0, 2.0, 3.0)
    with pytest.raises(RuntimeError, match=r"gradient has shape \(2,\).*\(3,\)"):
        (x * 2).backward(st.ones(2, dtype=st.float64))


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        st.ones(2).sum().backward()


# ---- higher order with autograd.grad -------------------------------------------------------------


def test_grad_cube_first_second_third_derivative():
    xs = np.array([-1.5, 0.5, 2.0])
    x = st.tensor(xs, requires_grad=True)
    (d1,) = st.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (d2,) = st.autograd.grad(d1.sum(), x, create_graph=True)
    (d3,) = st.autograd.grad(d2.sum(), x)
    np.testing.assert_allclose(to_numpy(d1), 3 * xs ** 2)
    np.testing.assert_allclose(to_numpy(d2), 6 * xs)
    np.testing.assert_allclose(to_numpy(d3), [6.0, 6.0, 6.0])
    assert x.grad is None  # grad() never touches .grad


def test_grad_sin_exp_chain_to_third_order():
    xs = np.array([-0.7, 0.1, 0.9])
    u = np.exp(xs)
    want = [
        np.cos(u) * u,
        -np.sin(u) * u ** 2 + np.cos(u) * u,
        -np.cos(u) * u ** 3 - 3 * np.sin(u) * u ** 2 + np.cos(u) * u,
    ]
    x = st.tensor(xs, requires_grad=True)
    y = x.exp().sin().sum()
    for k in range(3):
        (g,) = st.autograd.grad(y, x, create_graph=True)
        np.testing.assert_allclose(to_numpy(g), want[k], rtol=1e-12, atol=1e-12)
        y = g.sum()


def test_grad_allow_unused_and_unused_input_raises():
    x, z = f64(1.0, 2.0), f64(3.0)
    y = (x * x).sum()
    with pytest.raises(RuntimeError, match="not to have been used"):
        st.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = st.autograd.grad(y, [x, z], allow_unused=True)
    np.testing.assert_allclose(to_numpy(gx), [2.0, 4.0])
    assert gz is None


def test_grad_input_not_requiring_grad_raises():
    x = f64(1.0, 2.0)
    w = st.ones(2, dtype=st.float64)
    with pytest.raises(RuntimeError, match="does not require grad"):
        st.autograd.grad((x * w).sum(), w)


def test_grad_with_grad_outputs():
    xs = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = st.tensor(xs, requires_grad=True)
    go = np.array([[1.0, -1.0], [0.5, 2.0]])
    (g,) = st.autograd.grad(x * x, x, st.tensor(go))
    np.testing.assert_allclose(to_numpy(g), 2 * xs * go)


# ---- grad modes ----------------------------------------------------------------------------------


def test_no_grad_context_and_decorator():
    x = f64(1.0)
    with st.no_grad():
        assert not st.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert st.is_grad_enabled()

    @st.no_grad()
    def double(t):
        return t * 2

    y = double(x)
    assert not y.requires_grad and y.grad_fn is None
    assert st.is_grad_enabled()


def test_enable_grad_inside_no_grad():
    x = f64(1.0)
    with st.no_grad():
        with st.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad

    @st.enable_grad()
    def double(t):
        return t * 2

    with st.no_grad():
        assert double(x).requires_grad
        assert not st.is_grad_enabled()


def test_set_grad_enabled_as_call_and_context():
    x = f64(1.0)
    st.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        st.set_grad_enabled(True)
    assert (x * 2).requires_grad
    with st.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert st.is_grad_enabled()


def test_set_grad_enabled_as_decorator():
    x = f64(1.0)
    try:
        @st.set_grad_enabled(False)
        def double(t):
            return t * 2

        assert st.is_grad_enabled()  # decorating must not change the mode
        assert not double(x).requires_grad
        assert st.is_grad_enabled()
    finally:
        st.set_grad_enabled(True)


def test_no_grad_decorator_is_reentrant():
    @st.no_grad()
    def countdown(n):
        return countdown(n - 1) if n else st.is_grad_enabled()

    try:
        assert countdown(2) is False
        assert st.is_grad_enabled()
    finally:
        st.set_grad_enabled(True)


def test_integer_and_bool_outputs_do_not_require_grad():
    x = f64(1.5, -2.5)
    assert not (x > 0).requires_grad
    assert not x.long().requires_grad
    assert (x * 1.0).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        st.tensor([1, 2], requires_grad=True)


# ---- broadcasting --------------------------------------------------------------------------------


def test_broadcast_gradients_reduce_to_input_shape():
    an = np.arange(3.0).reshape(3, 1)
    bn = np.arange(4.0) + 1.0
    a, b = st.tensor(an, requires_grad=True), st.tensor(bn, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    np.testing.assert_allclose(to_numpy(a.grad), np.full((3, 1), bn.sum()))
    np.testing.assert_allclose(to_numpy(b.grad), np.full(4, an.sum()))


def test_scalar_plus_matrix_gradient():
    s = st.tensor(2.0, dtype=st.float64, requires_grad=True)
    m = st.tensor(np.ones((2, 3)), requires_grad=True)
    ((s + m) * (s + m)).sum().backward()
    assert s.grad.shape == ()
    np.testing.assert_allclose(s.grad.item(), 6 * 2 * 3.0)
    np.testing.assert_allclose(to_numpy(m.grad), np.full((2, 3), 6.0))


# ---- hooks ---------------------------------------------------------------------------------------


def test_leaf_hook_modifies_grad_and_can_be_removed():
    x = f64(1.0, 2.0)
    seen = []

    def hook(g):
        seen.append(to_numpy(g))
        return g * 10

    h = x.register_hook(hook)
    (x * 3).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [30.0, 30.0])
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
    h.remove()
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [3.0, 3.0])
    assert len(seen) == 1


def test_non_leaf_hook_modifies_grad_flowing_upstream():
    x = f64(1.0, 2.0)
    y = x * x
    h = y.register_hook(lambda g: g + 1.0)
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), 2.0 * np.array([1.0, 2.0]) * 2.0)
    h.remove()
    x.grad = None
    y = x * x
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [2.0, 4.0])


def test_register_hook_requires_grad():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        st.ones(2).register_hook(lambda g: g)


def test_retain_grad_keeps_non_leaf_grad():
    x = f64(1.0, 2.0)
    y = x * x
    z = y * 3
    y.retain_grad()
    z.sum().backward()
    np.testing.assert_allclose(to_numpy(y.grad), [3.0, 3.0])
    assert z.grad is None
    np.testing.assert_allclose(to_numpy(x.grad), [6.0, 12.0])


def test_post_accumulate_hook_fires_once_with_final_grad():
    w = f64(1.0, 2.0)
    calls = []
    w.register_post_accumulate_grad_hook(lambda p: calls.append(to_numpy(p.grad)))
    y = (w * 2).sum() + (w * w).sum() + (w.exp() * 3).sum()
    y.backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], 2 + 2 * to_numpy(w) + 3 * np.exp([1.0, 2.0]))


def _early_leaf_order(early_first_operand: bool) -> list:
    a, b = f64(1.0, 2.0), f64(0.3, 0.4)
    order = []
    a.register_post_accumulate_grad_hook(lambda p: order.append("a"))
    b.register_post_accumulate_grad_hook(lambda p: order.append("b"))
    chain = b.exp().sin().cos()  # a's grad is final right after the mul; b's after the chain
    chain.register_hook(lambda g: order.append("chain"))
    prod = a * chain if early_first_operand else chain * a
    prod.sum().backward()
    return order


def test_post_accumulate_hook_fires_before_unrelated_nodes():
    assert _early_leaf_order(early_first_operand=False) == ["a", "chain", "b"]


def test_post_accumulate_hook_fires_early_whatever_the_operand_order():
    assert _early_leaf_order(early_first_operand=True) == ["a", "chain", "b"]


# ---- custom Functions ----------------------------------------------------------------------------


class ScaledMul(st.autograd.Function):
    """out = x * y * scale, with a non-tensor argument."""

    seen_needs = None

    @staticmethod
    def forward(ctx, x, y, scale):
        ctx.save_for_backward(x, y)
        ctx.scale = scale
        ScaledMul.seen_needs = ctx.needs_input_grad
        return x * y * scale

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = g * y * ctx.scale if ctx.needs_input_grad[0] else None
        gy = g * x * ctx.scale if ctx.needs_input_grad[1] else None
        return gx, gy, None


def test_function_save_for_backward_and_needs_input_grad():
    xs, ys = np.array([1.0, 2.0]), np.array([3.0, -4.0])
    x = st.tensor(xs, requires_grad=True)
    y = st.tensor(ys)
    out = ScaledMul.apply(x, y, 0.5)
    assert ScaledMul.seen_needs == (True, False, False)
    np.testing.assert_allclose(to_numpy(out), xs * ys * 0.5)
    out.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), ys * 0.5)
    assert y.grad is None


def test_function_twice_differentiable_backward():
    x = f64(1.5, -0.5)
    (g,) = st.autograd.grad(ScaledMul.apply(x, x, 2.0).sum(), x, create_graph=True)
    np.testing.assert_allclose(to_numpy(g), 4 * np.array([1.5, -0.5]))
    (gg,) = st.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(to_numpy(gg), [4.0, 4.0])


class TwoOutputs(st.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g2, g3):
        return g2 * 2 + g3 * 3


def test_function_multiple_outputs():
    x = f64(1.0, 2.0)
    a, b = TwoOutputs.apply(x)
    (a.sum() + (b * b).sum()).backward()
    np.testing.assert_allclose(to_numpy(x.grad), 2 + 3 * 2 * 3 * np.array([1.0, 2.0]))
    x.grad = None
    a, _ = TwoOutputs.apply(x)
    a.sum().backward()  # the unused output's gradient arrives as zeros
    np.testing.assert_allclose(to_numpy(x.grad), [2.0, 2.0])


class DoubleAndMask(st.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mask = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(mask)
        return x * 2, mask

    @staticmethod
    def backward(ctx, g, g_mask):
        return g * 2


def test_function_mark_non_differentiable():
    x = f64(-1.0, 2.0)
    y, mask = DoubleAndMask.apply(x)
    assert y.requires_grad
    assert not mask.requires_grad
    np.testing.assert_allclose(to_numpy(mask), [0.0, 1.0])
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [2.0, 2.0])


class OnceCube(st.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    @st.autograd.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


def test_function_once_differentiable():
    xs = np.array([1.0, -2.0])
    x = st.tensor(xs, requires_grad=True)
    (g,) = st.autograd.grad(OnceCube.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(to_numpy(g), 3 * xs ** 2)
    assert not g.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        st.autograd.grad(g.sum(), x)


def test_function_forward_must_return_tensors():
    class Bad(st.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 3

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match="must return Tensors"):
        Bad.apply(f64(1.0))


def test_function_backward_wrong_count_raises():
    class Bad(st.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="returned 1 gradients.*took 2"):
        Bad.apply(f64(1.0), f64(2.0)).sum().backward()


# ---- gradcheck -----------------------------------------------------------------------------------


class WrongSin(st.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.sin()  # should be cos


def test_gradcheck_and_gradgradcheck_pass_on_correct_functions():
    x = st.tensor(np.array([[0.3, -0.7], [1.1, 0.2]]), requires_grad=True)
    y = st.tensor(np.array([0.5, 1.5]), requires_grad=True)
    assert st.autograd.gradcheck(lambda a, b: (a * b).exp(), (x, y))
    assert st.autograd.gradgradcheck(lambda a, b: (a * b).sin() * a, (x, y))
    assert st.autograd.gradcheck(lambda a: ScaledMul.apply(a, a, 3.0), (y,))


def test_gradcheck_detects_wrong_backward():
    x = st.tensor(np.array([0.3, -0.7, 1.1]), requires_grad=True)
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        st.autograd.gradcheck(WrongSin.apply, (x,))
    assert st.autograd.gradcheck(WrongSin.apply, (x,), raise_exception=False) is False


def test_gradgradcheck_detects_wrong_second_derivative():
    class WrongSquare(st.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            # right value, wrong derivative: d/dx of (x*x/x*2) is treated through x*x
            return g * (x * x * x) * 2.0 / (x * x)

    x = st.tensor(np.array([0.5, 1.3]), requires_grad=True)
    assert st.autograd.gradcheck(WrongSquare.apply, (x,))
    assert st.autograd.gradgradcheck(WrongSquare.apply, (x,))  # a correct (if odd) formula

    class WrongGrad(st.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2.0 * x.detach()  # first order right, second order lost

    assert st.autograd.gradcheck(WrongGrad.apply, (x,))
    with pytest.raises(GradcheckError):
        st.autograd.gradgradcheck(WrongGrad.apply, (x,))


def test_gradcheck_rejects_float32():
    x = st.tensor([0.5, 1.0], requires_grad=True)
    with pytest.raises(TypeError, match="float64"):
        st.autograd.gradcheck(lambda t: t * 2, (x,))


# ---- in-place and version counters ---------------------------------------------------------------


def test_inplace_on_saved_output_raises_on_backward():
    x = f64(0.5, 1.0)
    y = x.exp()  # exp saves its output
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_inplace_through_view_bumps_shared_version():
    x = st.tensor(np.array([[0.5, 1.0], [1.5, 2.0]]), requires_grad=True)
    y = x.exp()
    v = y.view(4)
    with st.no_grad():
        v.mul_(2)  # allowed under no_grad, but the storage y shares has changed
    np.testing.assert_allclose(to_numpy(y), 2 * np.exp([[0.5, 1.0], [1.5, 2.0]]))
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    w = f64(1.0, 2.0)
    with pytest.raises(RuntimeError, match="leaf"):
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf"):
        w.mul_(2.0)


def test_inplace_on_leaf_allowed_under_no_grad():
    w = f64(1.0, 2.0)
    with st.no_grad():
        w.sub_(0.5)
        w *= 2.0
    np.testing.assert_allclose(to_numpy(w), [1.0, 3.0])
    assert w.requires_grad and w.is_leaf
    (w * w).sum().backward()
    np.testing.assert_allclose(to_numpy(w.grad), [2.0, 6.0])




def test_inplace_mul_on_intermediate_gives_correct_grad():
    x = f64(1.0, 2.0)
    a = x * 2
    a.mul_(3)
    a.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [6.0, 6.0])


def test_inplace_unary_on_intermediate_gives_correct_grad():
    xs = np.array([0.2, -0.4])
    x = st.tensor(xs, requires_grad=True)
    a = x * 2
    a.sin_()
    a.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), 2 * np.cos(2 * xs))


def test_inplace_on_output_that_backward_does_not_need():
    xs = np.array([0.2, -0.4])
    x = st.tensor(xs, requires_grad=True)
    y = x.sin()  # d sin = cos(x): the output is not needed
    y.add_(1)
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), np.cos(xs))


def test_inplace_add_on_intermediate():
    x = f64(1.0, 2.0)
    a = x * 2  # mul by a constant saves only its inputs
    a.add_(1)
    a.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [2.0, 2.0])
    np.testing.assert_allclose(to_numpy(a), [3.0, 5.0])




def test_iadd_on_intermediate_tracks_both_terms():
    x = f64(1.0, 2.0)
    h = x * 2
    h += x * x
    h.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), 2 + 2 * np.array([1.0, 2.0]))


def test_augmented_assignment_operators_work_in_place():
    t = st.tensor([1.0, 2.0, 3.0])
    alias = t
    t += 1
    t *= 2
    t -= st.tensor([1.0, 1.0, 1.0])
    t /= 2
    assert t is alias
    np.testing.assert_allclose(to_numpy(t), ((np.array([1.0, 2.0, 3.0]) + 1) * 2 - 1) / 2)
    i = st.tensor([5, 7])
    i += 2
    assert i.dtype is st.int64 and i.tolist() == [7, 9]


def test_inplace_float_result_into_int_tensor_raises():
    i = st.tensor([1, 2])
    with pytest.raises(TypeError, match="can't be cast"):
        i.mul_(1.5)


def test_grad_runs_only_the_part_of_the_graph_its_inputs_need():
    x = st.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    y = (h * h).sum()
    (gh,) = st.autograd.grad(y, h)  # frees y -> h, but must leave x -> h alone
    np.testing.assert_allclose(to_numpy(gh), [6.0, 12.0])
    assert x.grad is None
    h.sum().backward()  # still possible: grad() did not touch h's own graph
    np.testing.assert_allclose(to_numpy(x.grad), [3.0, 3.0])


def test_grad_mode_is_per_thread():
    import threading

    x = st.ones(2, requires_grad=True)
    seen = {}

    def worker():
        seen["worker"] = st.is_grad_enabled() and (x * 2).requires_grad

    with st.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        seen["main"] = (x * 2).requires_grad
    assert seen == {"worker": True, "main": False}


def test_a_temporary_leaf_is_freed_without_the_garbage_collector():
    import gc
    import weakref

    gc.disable()
    try:
        x = st.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        ref = weakref.ref(x)
        del x
        assert ref() is None  # no reference cycle through its gradient accumulator
    finally:
        gc.enable()


def test_backward_after_the_leaf_is_gone_still_reaches_other_leaves():
    import weakref

    x = st.ones(2, requires_grad=True)
    w = st.full((2,), 3.0, requires_grad=True)
    y = (x + w).sum()  # add saves neither input, so the graph does not keep x alive
    ref = weakref.ref(x)
    del x
    assert ref() is None
    y.backward()
    np.testing.assert_allclose(to_numpy(w.grad), [1.0, 1.0])


def test_inplace_through_views_of_a_non_leaf_updates_its_gradient():
    xv = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x = st.tensor(xv, requires_grad=True)
    y = x * 2
    y[0].mul_(3)
    y[:, 1] += 10
    (y * y).sum().backward()
    yv = 2 * xv
    yv[0] *= 3
    yv[:, 1] += 10
    np.testing.assert_allclose(to_numpy(y), yv)
    dx = 2 * yv * 2
    dx[0] *= 3
    np.testing.assert_allclose(to_numpy(x.grad), dx)


def test_inplace_into_a_view_of_a_plain_buffer_tracks_the_written_value():
    buf = st.zeros(2, 3)
    w = st.ones(3, requires_grad=True)
    buf[1].add_(w * 5)
    assert buf.requires_grad
    (buf * buf).sum().backward()
    np.testing.assert_allclose(to_numpy(w.grad), [50.0, 50.0, 50.0])  # d/dw (5w)^2 = 50w


def test_inplace_through_views_passes_gradcheck():
    def f(x):
        y = x * 1.5 + 0.5  # (exp would save its output, which the write then invalidates)
        y[1:, ::2].mul_(x[1:, ::2].sin())
        return y.sum(dim=0)

    x = st.randn(3, 4, dtype=st.float64, requires_grad=True)
    assert st.autograd.gradcheck(f, (x,))
    assert st.autograd.gradgradcheck(f, (x,))


def test_inplace_on_an_expanded_view_is_refused():
    y = st.ones(3, requires_grad=True) * 2
    v = y.expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element"):
        v.add_(st.ones(2, 3, requires_grad=True))


def test_inplace_on_a_view_of_a_leaf_is_refused():
    x = st.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        x[0].mul_(2)


def test_leaf_gradients_never_alias_other_tensors():
    # a fresh gradient becomes .grad without a copy; anything shared must still be copied
    a, b = st.ones(3, requires_grad=True), st.ones(3, requires_grad=True)
    g_user = st.ones(3)
    (a + b).backward(g_user)  # add hands the user's tensor to both inputs
    a.grad.add_(1.0)
    assert b.grad.tolist() == [1.0] * 3 and g_user.tolist() == [1.0] * 3
    c = st.ones(3, requires_grad=True)
    seen = []
    c.register_hook(lambda g: seen.append(g))  # a hook that keeps the gradient
    (c * 2.0).sum().backward()
    c.grad.mul_(10.0)
    assert seen[0].tolist() == [2.0] * 3 and c.grad.tolist() == [20.0] * 3
    w, x = st.ones(4, 3, requires_grad=True), st.ones(2, 3)
    (x @ w.t()).sum().backward()  # the weight's gradient arrives in the weight's layout
    assert w.grad.is_contiguous() and w.grad.tolist() == [[2.0] * 3] * 4


def test_queued_callbacks_run_once_the_whole_graph_is_done():
    a, b = st.ones(2, requires_grad=True), st.ones(3, requires_grad=True)
    seen = []

    def first_leaf_hook(g):
        # queued while b's gradient is not computed yet: the callback sees both
        assert st.autograd.queue_callback(
            lambda: seen.append((a.grad.tolist(), b.grad.tolist())))
        assert st.autograd.queue_callback(  # a callback may queue another
            lambda: st.autograd.queue_callback(lambda: seen.append("second")))
    a.register_hook(first_leaf_hook)
    ((a * 2).sum() + (b * 3).sum()).backward()
    assert seen == [([2.0, 2.0], [3.0, 3.0, 3.0]), "second"]


def test_queue_callback_outside_backward_and_in_grad_queues_nothing():
    assert st.autograd.queue_callback(lambda: None) is False
    x = st.ones(2, requires_grad=True)
    answers = []
    for run in (lambda y: st.autograd.grad(y, x), lambda y: y.backward()):
        y = x * x
        y.register_hook(lambda g: answers.append(st.autograd.queue_callback(lambda: None)))
        run(y.sum())
    assert answers == [False, True]


def test_a_backward_that_raises_drops_its_callbacks():
    x = st.ones(2, requires_grad=True)
    ran = []

    def hook(g):
        st.autograd.queue_callback(lambda: ran.append(1))
        raise ValueError("hook failed")
    x.register_hook(hook)
    with pytest.raises(ValueError, match="hook failed"):
        (x * 2).sum().backward()
    assert ran == [] and st.autograd.queue_callback(lambda: None) is False


def test_variable_execution_engine_queues_as_pytorch_names_it():
    from singa_tensor.autograd import Variable

    x = Variable(st.ones(2), requires_grad=True)
    ran = []

    def hook(g):
        Variable._execution_engine.queue_callback(lambda: ran.append(x.grad.tolist()))
    x.register_hook(hook)
    (x * 2).sum().backward()
    assert ran == [[2.0, 2.0]]
    with pytest.raises(RuntimeError, match="queue_callback: final callbacks can only be "
                                           "installed during a backward pass"):
        Variable._execution_engine.queue_callback(lambda: None)
    with pytest.raises(TypeError, match="Variable: data must be a Tensor, got list"):
        Variable([1.0])
