"""singa_tensor.linalg: values against numpy.linalg, gradients against finite differences, and
the error paths. The registry tests (test_op_registry.py -k linalg_) cover the primitives'
samples; this file covers the public namespace around them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import linalg as LA

from .helpers import as_tensor, assert_close, to_numpy

R = np.random.default_rng(1234)


def spd(*shape):
    b = R.standard_normal(shape)
    return b @ np.swapaxes(b, -1, -2) / shape[-1] + np.eye(shape[-1])


def wellcond(*shape):
    return 2.0 * np.eye(shape[-1]) + 0.5 * R.standard_normal(shape)


def t64(a, grad=False):
    return as_tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


# ---- values -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_numpy_batched(dtype):
    a = wellcond(2, 3, 4, 4).astype(dtype)
    s = spd(2, 4, 4).astype(dtype)
    b = R.standard_normal((2, 3, 4, 2)).astype(dtype)
    ta, ts, tb = as_tensor(a), as_tensor(s), as_tensor(b)
    tol = TOL[dtype]
    assert_close(LA.inv(ta), np.linalg.inv(a), **tol)
    assert_close(LA.det(ta), np.linalg.det(a), **tol)
    sign, logabs = LA.slogdet(ta)
    want = np.linalg.slogdet(a)
    assert_close(sign, want.sign, **tol)
    assert_close(logabs, want.logabsdet, **tol)
    assert_close(LA.solve(ta, tb), np.linalg.solve(a, b), **tol)
    assert_close(LA.cholesky(ts), np.linalg.cholesky(s), **tol)
    assert_close(LA.eigvalsh(ts), np.linalg.eigvalsh(s), **tol)
    assert_close(LA.svdvals(tb), np.linalg.svd(b, compute_uv=False), **tol)
    assert_close(LA.pinv(tb), np.linalg.pinv(b), **tol)
    assert LA.inv(ta).dtype.np == dtype


def test_factorisations_reconstruct_their_input():
    a = R.standard_normal((2, 5, 3))
    q, r = LA.qr(t64(a))
    assert q.shape == (2, 5, 3) and r.shape == (2, 3, 3)
    assert_close(q @ r, a, rtol=1e-10, atol=1e-12)
    assert_close(r, np.triu(to_numpy(r)), atol=0)
    q, r = LA.qr(t64(a), mode="complete")
    assert q.shape == (2, 5, 5) and r.shape == (2, 5, 3)
    assert_close(q.transpose(-2, -1) @ q,
                 np.broadcast_to(np.eye(5), (2, 5, 5)), atol=1e-12)
    q, r = LA.qr(t64(a), mode="r")
    assert q.shape == (0,) and r.shape == (2, 3, 3)
    u, s, vh = LA.svd(t64(a), full_matrices=False)
    assert_close((u * s.unsqueeze(-2)) @ vh, a, rtol=1e-10, atol=1e-12)
    u, s, vh = LA.svd(t64(a))
    assert u.shape == (2, 5, 5) and vh.shape == (2, 3, 3)
    sym = spd(3, 3)
    w, v = LA.eigh(t64(sym))
    assert_close((v * w.unsqueeze(-2)) @ v.transpose(-2, -1), sym, rtol=1e-10, atol=1e-12)
    upper = LA.cholesky(t64(sym), upper=True)
    assert_close(upper.transpose(-2, -1) @ upper, sym, rtol=1e-10, atol=1e-12)


def test_one_triangle_is_read():
    s = spd(3, 3)
    low, up = np.tril(s), np.triu(s)
    junk_low = low + np.triu(np.full((3, 3), 7.0), 1)  # garbage above the diagonal
    junk_up = up + np.tril(np.full((3, 3), 7.0), -1)
    assert_close(LA.cholesky(t64(junk_low)), np.linalg.cholesky(s), rtol=1e-10, atol=1e-12)
    assert_close(LA.cholesky(t64(junk_up), upper=True), np.linalg.cholesky(s).T, rtol=1e-10,
                 atol=1e-12)
    assert_close(LA.eigvalsh(t64(junk_up), UPLO="U"), np.linalg.eigvalsh(s), rtol=1e-10)
    assert_close(LA.eigvalsh(t64(junk_low)), np.linalg.eigvalsh(s), rtol=1e-10)


def test_solve_vectors_left_and_broadcast():
    a = wellcond(3, 3)
    b = R.standard_normal(3)
    assert_close(LA.solve(t64(a), t64(b)), np.linalg.solve(a, b), rtol=1e-10)
    ab = wellcond(2, 3, 3)
    bb = R.standard_normal((2, 3))  # a batch of vectors: B.shape == A.shape[:-1]
    want = np.linalg.solve(ab, bb[..., None])[..., 0]
    assert_close(LA.solve(t64(ab), t64(bb)), want, rtol=1e-10)
    bm = R.standard_normal((4, 3))
    assert_close(LA.solve(t64(a), t64(bm), left=False), bm @ np.linalg.inv(a), rtol=1e-9)
    assert LA.solve(t64(ab), t64(R.standard_normal((3, 2)))).shape == (2, 3, 2)


def test_solve_triangular():
    a = wellcond(3, 3)
    b = R.standard_normal((3, 2))
    assert_close(LA.solve_triangular(t64(a), t64(b), upper=True),
                 np.linalg.solve(np.triu(a), b), rtol=1e-10)
    unit = np.tril(a, -1) + np.eye(3)
    assert_close(LA.solve_triangular(t64(a), t64(b), upper=False, unitriangular=True),
                 np.linalg.solve(unit, b), rtol=1e-10)
    bl = R.standard_normal((2, 3))
    assert_close(LA.solve_triangular(t64(a), t64(bl), upper=False, left=False),
                 bl @ np.linalg.inv(np.tril(a)), rtol=1e-10)


def test_norms():
    x = R.standard_normal((2, 3, 4))
    tx = t64(x)
    for o in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        assert_close(LA.matrix_norm(tx, o), np.linalg.norm(x, o, axis=(-2, -1)), rtol=1e-10)
    assert_close(LA.matrix_norm(tx, "nuc", dim=(0, 2), keepdim=True),
                 np.linalg.norm(x, "nuc", axis=(0, 2), keepdims=True), rtol=1e-10)
    for o in (2, 1, 0, 3.5, math.inf, -math.inf):
        assert_close(LA.vector_norm(tx, o), np.linalg.norm(x.ravel(), o), rtol=1e-10)
    assert_close(LA.vector_norm(tx, 1, dim=(0, 2), keepdim=True),
                 np.sum(np.abs(x), axis=(0, 2), keepdims=True), rtol=1e-10)
    m = x[0]
    assert_close(LA.norm(t64(m)), np.linalg.norm(m), rtol=1e-10)
    assert_close(LA.norm(t64(m), "nuc"), np.linalg.norm(m, "nuc"), rtol=1e-10)
    assert_close(LA.norm(t64(m), 1), np.linalg.norm(m, 1), rtol=1e-10)
    assert_close(LA.norm(tx), np.linalg.norm(x.ravel()), rtol=1e-10)
    assert_close(LA.norm(tx, 3, dim=1), np.linalg.norm(x, 3, axis=1), rtol=1e-10)
    assert_close(LA.norm(tx, dim=(1, 2)), np.linalg.norm(x, axis=(1, 2)), rtol=1e-10)
    assert_close(LA.norm(t64(x[0, 0]), math.inf), np.abs(x[0, 0]).max(), rtol=1e-12)


def test_pinv_rank_lstsq_power_cross_multi_dot():
    a = R.standard_normal((5, 3))
    b = R.standard_normal((5, 2))
    sol = LA.lstsq(t64(a), t64(b))
    assert_close(sol.solution, np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-9)
    assert sol.rank.item() == 3 and sol.residuals.shape == (0,)
    assert sol.singular_values.shape == (0,)
    full = LA.lstsq(t64(a), t64(b), driver="gelsd")
    assert_close(full.residuals, np.linalg.lstsq(a, b, rcond=None)[1], rtol=1e-9)
    assert_close(full.singular_values, np.linalg.svd(a, compute_uv=False), rtol=1e-10)
    low = np.outer(R.standard_normal(4), R.standard_normal(4))
    assert LA.matrix_rank(t64(low)).item() == 1
    assert LA.matrix_rank(t64(np.stack([low, np.eye(4)]))).tolist() == [1, 4]
    assert LA.matrix_rank(t64(spd(3, 3)), hermitian=True).item() == 3
    assert LA.matrix_rank(t64(np.diag([1.0, 1e-3])), atol=1e-2).item() == 1
    s = spd(3, 3)
    assert_close(LA.pinv(t64(s), hermitian=True), np.linalg.inv(s), rtol=1e-9)
    assert_close(LA.pinv(t64(np.diag([2.0, 1e-3])), atol=1e-2), np.diag([0.5, 0.0]), atol=1e-12)
    w = wellcond(2, 3, 3)
    for n in (0, 1, 2, 5, -1, -3):
        assert_close(LA.matrix_power(t64(w), n), np.linalg.matrix_power(w, n), rtol=1e-9,
                     atol=1e-12)
    u, v = R.standard_normal((4, 3)), R.standard_normal((3,))
    assert_close(LA.cross(t64(u), t64(v)), np.cross(u, v), rtol=1e-12)
    mats = [R.standard_normal(s) for s in ((4,), (4, 6), (6, 2), (2, 5), (5,))]
    assert_close(LA.multi_dot([t64(m) for m in mats]), np.linalg.multi_dot(mats), rtol=1e-10)
    assert_close(LA.multi_dot([t64(mats[1]), t64(mats[2])]), mats[1] @ mats[2], rtol=1e-10)
    assert_close(LA.vecdot(t64(u), t64(u)), np.sum(u * u, -1), rtol=1e-12)


def test_top_level_names_and_methods():
    a = wellcond(2, 3, 3)
    ta = t64(a)
    assert_close(st.det(ta), np.linalg.det(a), rtol=1e-10)
    assert_close(ta.det(), np.linalg.det(a), rtol=1e-10)
    assert_close(st.inverse(ta), np.linalg.inv(a), rtol=1e-10)
    assert_close(ta.inverse(), np.linalg.inv(a), rtol=1e-10)
    assert_close(st.slogdet(ta).logabsdet, np.linalg.slogdet(a).logabsdet, rtol=1e-10)
    assert_close(ta.pinverse(), np.linalg.pinv(a), rtol=1e-9)
    assert_close(st.pinverse(ta, rcond=0.5), np.linalg.pinv(a, rcond=0.5), rtol=1e-9)
    s = spd(3, 3)
    assert_close(st.cholesky(t64(s)), np.linalg.cholesky(s), rtol=1e-10)
    assert_close(t64(s).cholesky(True), np.linalg.cholesky(s).T, rtol=1e-10)
    neg = np.diag([-1.0, 2.0, 3.0])
    zero = np.diag([0.0, 2.0, 3.0])
    assert np.isnan(st.logdet(t64(neg)).item())
    assert st.logdet(t64(zero)).item() == -math.inf
    assert_close(t64(np.diag([1.0, 2.0, 3.0])).logdet(), math.log(6.0), rtol=1e-12)
    assert st.linalg is LA


# ---- gradients ----------------------------------------------------------------------------------


def _gc(fn, *arrays):
    ts = [t64(a, grad=True) for a in arrays]
    assert st.autograd.gradcheck(fn, ts, atol=1e-5, rtol=1e-3)


def test_gradients_of_the_public_functions():
    _gc(lambda a: st.logdet(a @ a.transpose(-2, -1)), wellcond(2, 3, 3))
    _gc(lambda a, b: LA.solve(a, b, left=False), wellcond(3, 3), R.standard_normal((2, 3)))
    _gc(lambda a: LA.matrix_norm(a, "nuc") + LA.matrix_norm(a, 2), R.standard_normal((3, 2)))
    _gc(lambda a: LA.lstsq(a, a[:, :1] * 2 + 1).solution, R.standard_normal((4, 2)))
    _gc(lambda a, b: LA.multi_dot([a, b, a.transpose(0, 1)]), R.standard_normal((2, 3)),
        R.standard_normal((3, 3)))
    _gc(lambda a: LA.qr(a, mode="complete").R, R.standard_normal((2, 3, 3)))


def test_symmetric_inputs_get_the_symmetric_gradient():
    # built symmetric, eigh's and cholesky's gradients reach b as the symmetric convention's
    b = R.standard_normal((3, 3))
    _gc(lambda x: LA.eigh(x + x.transpose(0, 1)).eigenvectors.abs().sum() +
        LA.eigvalsh(x + x.transpose(0, 1), UPLO="U").sum(), b)
    _gc(lambda x: LA.cholesky(x @ x.transpose(0, 1) + st.eye(3, dtype=st.float64),
                              upper=True), b)


def test_second_derivative_and_gradient_of_logdet():
    a = t64(spd(3, 3), grad=True)
    assert st.autograd.gradgradcheck(lambda x: LA.slogdet(x).logabsdet, [a])
    g, = st.autograd.grad(st.logdet(a), [a])
    assert_close(g, np.linalg.inv(to_numpy(a)).T, rtol=1e-10)


def test_qr_backward_errors():
    a = t64(R.standard_normal((4, 2)), grad=True)
    with pytest.raises(RuntimeError, match="linalg.qr: the derivative of mode='complete'"):
        LA.qr(a, mode="complete").Q.sum().backward()
    with pytest.raises(RuntimeError, match="mode='r'"):
        LA.qr(a, mode="r").R.sum().backward()


# ---- errors --------------------------------------------------------------------------------------


SQUARE = [LA.inv, LA.det, LA.slogdet, LA.cholesky, LA.eigh, LA.eigvalsh, st.logdet]


@pytest.mark.parametrize("fn", SQUARE, ids=lambda f: f.__name__)
def test_non_square_wrong_dims_and_integer_inputs(fn):
    name = "logdet" if fn is st.logdet else f"linalg.{fn.__name__}"
    with pytest.raises(ValueError, match=f"{name}: A must be batches of square matrices"):
        fn(st.zeros(2, 3, dtype=st.float64))
    with pytest.raises(ValueError, match=f"{name}: A must have at least 2 dimensions"):
        fn(st.zeros(3, dtype=st.float64))
    with pytest.raises(TypeError, match=f"{name}: expected a float32 or float64 tensor"):
        fn(st.zeros(2, 2, dtype=st.int64))
    with pytest.raises(TypeError, match=f"{name}: A must be a Tensor"):
        fn(np.eye(2))


@pytest.mark.parametrize("fn", [LA.svd, LA.svdvals, LA.qr, LA.pinv, LA.matrix_rank],
                         ids=lambda f: f.__name__)
def test_rectangular_functions_reject_vectors_and_integers(fn):
    with pytest.raises(ValueError, match=f"linalg.{fn.__name__}: A must have at least 2"):
        fn(st.zeros(3))
    with pytest.raises(TypeError, match=f"linalg.{fn.__name__}: expected a float32"):
        fn(st.zeros(2, 2, dtype=st.int32))


def test_singular_and_not_positive_definite():
    sing = t64(np.ones((2, 2)))
    with pytest.raises(LA.LinAlgError, match="linalg.inv: the input is singular"):
        LA.inv(sing)
    with pytest.raises(RuntimeError, match="linalg.inv: the input is singular"):
        st.inverse(t64(np.stack([np.eye(2), np.zeros((2, 2))])))
    with pytest.raises(LA.LinAlgError, match="linalg.solve: the input is singular"):
        LA.solve(sing, t64(np.ones(2)))
    with pytest.raises(LA.LinAlgError, match="linalg.cholesky: the input is not positive"):
        LA.cholesky(t64(np.diag([1.0, -1.0])))
    assert LA.det(sing).item() == 0.0


def test_argument_errors():
    a = t64(np.eye(3))
    with pytest.raises(ValueError, match="linalg.qr: mode must be"):
        LA.qr(a, mode="full")
    with pytest.raises(ValueError, match="linalg.eigh: UPLO must be"):
        LA.eigh(a, UPLO="X")
    with pytest.raises(ValueError, match="linalg.eigvalsh: UPLO must be"):
        LA.eigvalsh(a, UPLO="l")
    with pytest.raises(ValueError, match="linalg.solve: .* B must have 3 rows"):
        LA.solve(a, t64(np.ones((2, 1))))
    with pytest.raises(TypeError, match="linalg.solve: A and B must have the same dtype"):
        LA.solve(a, st.ones(3, 1))
    with pytest.raises(ValueError, match="linalg.solve: with left=False"):
        LA.solve(a, t64(np.ones((3, 2))), left=False)
    with pytest.raises(ValueError, match="linalg.solve: shapes .* cannot be broadcast"):
        LA.solve(t64(np.ones((2, 3, 3))), t64(np.ones((4, 3, 1))))
    with pytest.raises(ValueError, match="linalg.solve_triangular: B must have at least 2"):
        LA.solve_triangular(a, t64(np.ones(3)), upper=True)
    with pytest.raises(ValueError, match="linalg.matrix_norm: ord must be"):
        LA.matrix_norm(a, 3)
    with pytest.raises(ValueError, match="linalg.matrix_norm: dim must be a 2-tuple"):
        LA.matrix_norm(a, dim=0)
    with pytest.raises(ValueError, match="linalg.matrix_norm: dims must be different"):
        LA.matrix_norm(a, dim=(0, -2))
    with pytest.raises(IndexError, match="linalg.matrix_norm: dim 5 is out of range"):
        LA.matrix_norm(a, dim=(0, 5))
    with pytest.raises(TypeError, match="linalg.vector_norm: ord must be a number"):
        LA.vector_norm(a, "fro")
    with pytest.raises(TypeError, match="linalg.vector_norm: expected a floating point"):
        LA.vector_norm(st.ones(3, dtype=st.int64))
    with pytest.raises(ValueError, match="linalg.norm: with ord and no dim the input must be"):
        LA.norm(t64(np.ones((2, 2, 2))), 2)
    with pytest.raises(ValueError, match="linalg.norm: dim must be an int or a tuple of 1 or 2"):
        LA.norm(t64(np.ones((2, 2, 2))), dim=(0, 1, 2))
    with pytest.raises(ValueError, match="linalg.cross: dimension -1 must have size 3"):
        LA.cross(t64(np.ones(2)), t64(np.ones(2)))
    with pytest.raises(IndexError, match="linalg.cross: dim 3 is out of range"):
        LA.cross(t64(np.ones(3)), t64(np.ones(3)), dim=3)
    with pytest.raises(ValueError, match="linalg.multi_dot: expected at least 2"):
        LA.multi_dot([a])
    with pytest.raises(ValueError, match="linalg.multi_dot: tensor 1 must be 2-D"):
        LA.multi_dot([a, t64(np.ones(3)), a])
    with pytest.raises(ValueError, match="linalg.multi_dot: tensors 0 and 1 cannot be"):
        LA.multi_dot([a, t64(np.ones((2, 2)))])
    with pytest.raises(TypeError, match="linalg.matrix_power: n must be an int"):
        LA.matrix_power(a, 1.5)
    with pytest.raises(ValueError, match="linalg.lstsq: driver must be one of"):
        LA.lstsq(a, a, driver="magic")
    with pytest.raises(ValueError, match="linalg.lstsq: .* B must have 3 rows"):
        LA.lstsq(a, t64(np.ones((2, 1))))
    with pytest.raises(TypeError, match="linalg.pinv: rtol must be a number"):
        LA.pinv(a, rtol="big")
    with pytest.raises(ValueError, match="linalg.pinv: A must be batches of square"):
        LA.pinv(t64(np.ones((2, 3))), hermitian=True)


def test_cholesky_ex_reports_instead_of_raising():
    good, bad = spd(3, 3), np.diag([1.0, 2.0, -1.0])
    low, info = LA.cholesky_ex(t64(np.stack([good, bad])))
    assert info.dtype is st.int32 and info.tolist() == [0, 3]
    assert_close(low[0], np.linalg.cholesky(good), rtol=1e-10)
    assert_close(low[1], np.eye(3), atol=0)
    up, info = LA.cholesky_ex(t64(good), upper=True)
    assert info.item() == 0
    assert_close(up, np.linalg.cholesky(good).T, rtol=1e-10)
    with pytest.raises(LA.LinAlgError, match="linalg.cholesky_ex: the input is not positive-"
                                             "definite \\(the leading minor of order 3"):
        LA.cholesky_ex(t64(bad), check_errors=True)
    x = t64(good, grad=True)
    LA.cholesky_ex(x).L.sum().backward()
    assert x.grad is not None and np.all(np.isfinite(to_numpy(x.grad)))


def test_linalg_diagonal_defaults_to_the_last_two_dims():
    x = R.standard_normal((2, 3, 3))
    assert_close(LA.diagonal(t64(x)), np.diagonal(x, 0, -2, -1), atol=0)
    assert_close(LA.diagonal(t64(x), offset=1), np.diagonal(x, 1, -2, -1), atol=0)
