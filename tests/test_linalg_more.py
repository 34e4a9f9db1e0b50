"""st.linalg's matrix exponential, condition numbers, tensor inverses and solves, Vandermonde
matrices, Householder products and the _ex variants, against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st


def _t(a):
    return st.tensor(np.asarray(a, dtype=np.float64))


def test_matrix_exp_of_a_general_matrix_matches_the_eigendecomposition():
    r = np.random.default_rng(0)
    a = r.standard_normal((2, 4, 4))
    w, v = np.linalg.eig(a)
    want = np.real(v @ (np.exp(w)[..., None] * np.linalg.inv(v)))
    np.testing.assert_allclose(st.linalg.matrix_exp(_t(a)).numpy(), want, rtol=1e-11,
                               atol=1e-12)


def test_matrix_exp_of_a_large_norm_and_its_inverse():
    a = np.diag([8.0, -3.0]) + np.array([[0.0, 2.0], [0.0, 0.0]])
    e = st.linalg.matrix_exp(_t(a)).numpy()
    assert abs(e[0, 0] - math.exp(8.0)) <= 1e-12 * math.exp(8.0)
    back = st.linalg.matrix_exp(_t(-a)).numpy()
    np.testing.assert_allclose(e @ back, np.eye(2), atol=1e-10)


def test_matrix_exp_refuses_bad_input():
    with pytest.raises(ValueError, match="linalg.matrix_exp: A must be square|square"):
        st.linalg.matrix_exp(st.ones(2, 3))
    with pytest.raises(ValueError, match="linalg.matrix_exp: the input has inf or nan"):
        st.linalg.matrix_exp(st.tensor([[float("inf"), 0.0], [0.0, 1.0]]))
    with pytest.raises(TypeError, match="linalg.matrix_exp"):
        st.linalg.matrix_exp(st.ones(2, 2, dtype=st.int64))


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1])
def test_cond_matches_numpy(p):
    a = np.array([[3.0, 1.0, 0.5], [0.2, 2.0, 0.1], [0.0, 0.4, 1.5]])
    np.testing.assert_allclose(st.linalg.cond(_t(a), p).item(), np.linalg.cond(a, p),
                               rtol=1e-12)


def test_cond_refuses_an_unknown_norm():
    with pytest.raises(ValueError, match="linalg.cond: p must be"):
        st.linalg.cond(st.eye(2), 3)


def test_tensorinv_and_tensorsolve_match_numpy():
    r = np.random.default_rng(1)
    a = (np.eye(6) * 3 + r.standard_normal((6, 6))).reshape(2, 3, 6)
    np.testing.assert_allclose(st.linalg.tensorinv(_t(a), 2).numpy(),
                               np.linalg.tensorinv(a, 2), rtol=1e-10, atol=1e-12)
    b = r.standard_normal((2, 3))
    np.testing.assert_allclose(st.linalg.tensorsolve(_t(a), _t(b)).numpy(),
                               np.linalg.tensorsolve(a, b), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="linalg.tensorinv: the product of the first 1 dims"):
        st.linalg.tensorinv(st.ones(2, 3, 6), 1)
    with pytest.raises(ValueError, match="linalg.tensorsolve: A's leading dims"):
        st.linalg.tensorsolve(_t(a), st.ones(3, 2, dtype=st.float64))


def test_vander_matches_numpy_and_checks_n():
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(st.linalg.vander(_t(x), N=4).numpy(),
                               np.vander(x, 4, increasing=True))
    assert st.linalg.vander(_t(x), N=0).shape == (3, 0)
    with pytest.raises(ValueError, match="linalg.vander: N must be a non-negative int"):
        st.linalg.vander(_t(x), N=-1)


def test_householder_product_rebuilds_numpys_q():
    r = np.random.default_rng(2)
    a = r.standard_normal((5, 3))
    h, tau = np.linalg.qr(a, mode="raw")
    q_want = np.linalg.qr(a)[0]
    q = st.linalg.householder_product(_t(h.T), _t(tau)).numpy()
    np.testing.assert_allclose(np.abs(q), np.abs(q_want), atol=1e-12)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)
    with pytest.raises(ValueError, match="linalg.householder_product: expected rows >= columns"):
        st.linalg.householder_product(st.ones(2, 3), st.ones(2))


def test_inv_ex_and_solve_ex_report_singular_matrices():
    a = _t([[[2.0, 0.0], [0.0, 4.0]], [[1.0, 2.0], [2.0, 4.0]]])
    inv, info = st.linalg.inv_ex(a)
    assert info.tolist() == [0, 2]
    np.testing.assert_allclose(inv[0].numpy(), [[0.5, 0.0], [0.0, 0.25]])
    assert np.isnan(inv[1].numpy()).all()
    res = st.linalg.solve_ex(a, _t([[2.0, 4.0], [1.0, 1.0]]))
    assert res.info.tolist() == [0, 2]
    np.testing.assert_allclose(res.result[0].numpy(), [1.0, 1.0])
    assert np.isnan(res.result[1].numpy()).all()
    with pytest.raises(RuntimeError, match="linalg.inv_ex: the input is singular"):
        st.linalg.inv_ex(a, check_errors=True)
    good = st.linalg.inv_ex(a[0], check_errors=True)
    assert good.info.item() == 0
