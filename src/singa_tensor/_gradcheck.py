"""Numerical gradient checks: backward against float64 central differences, and the same
for the first derivative (second order)."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .autograd import grad
from .tensor import Tensor


def _host(t: Tensor) -> np.ndarray:
    """t's values as a host numpy array (a copy off the CPU)."""
    return t.detach().numpy(force=True)


def _numerical_jacobian(fn, inputs, eps):
    from . import creation

    def flat_out():
        out = fn(*inputs)  # grad mode stays on: fn may itself differentiate (gradgradcheck)
        outs = out if isinstance(out, tuple) else (out,)
        return [_host(o).astype(np.float64).ravel().copy() for o in outs
                if isinstance(o, Tensor)]

    def write(t, flat):  # perturb through the tensor API, so any device works
        t.detach().copy_(creation.tensor(flat.reshape(t.shape), dtype=t.dtype,
                                         device=t.device))

    base = flat_out()
    jac = []  # per input: array [n_in, n_out_total]
    for t in inputs:
        if not (isinstance(t, Tensor) and t.requires_grad):
            jac.append(None)
            continue
        if not t.is_contiguous():
            raise ValueError("gradcheck: inputs must be contiguous")
        flat = _host(t).reshape(-1).copy()
        n_out = sum(b.size for b in base)
        J = np.zeros((flat.size, n_out))
        for i in range(flat.size):
            orig = flat[i]
            flat[i] = orig + eps
            write(t, flat)
            plus = np.concatenate(flat_out()) if base else np.zeros(0)
            flat[i] = orig - eps
            write(t, flat)
            minus = np.concatenate(flat_out()) if base else np.zeros(0)
            flat[i] = orig
            write(t, flat)
            J[i] = (plus - minus) / (2 * eps)
        jac.append(J)
    return base, jac


def _analytical_jacobian(fn, inputs, create_graph=False):
    from . import creation

    out = fn(*inputs)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, Tensor)]
    diff_in = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    sizes = [o.numel() for o in outs]
    jac = [np.zeros((t.numel(), sum(sizes))) for t in diff_in]
    col = 0
    for o, size in zip(outs, sizes):
        for j in range(size):
            if not o.requires_grad:
                col += 1
                continue
            seed = np.zeros(size)
            seed[j] = 1.0
            g_out = creation.tensor(seed.reshape(o.shape), dtype=o.dtype, device=o.device)
            gs = grad(o, diff_in, g_out, retain_graph=True, allow_unused=True)
            for k, g in enumerate(gs):
                if g is not None:
                    jac[k][:, col] = _host(g).astype(np.float64).ravel()
            col += 1
    return jac


def gradcheck(fn: Callable, inputs: Sequence, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Compare backward against central finite differences (use float64 inputs).

    Example:
        >>> import singa_tensor as st
        >>> x = st.randn(3, dtype=st.float64, requires_grad=True)
        >>> st.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
        True
    """

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad and t.dtype.name != "float64":
            raise TypeError(
                f"gradcheck: inputs that require grad must be float64 (got {t.dtype.name}); "
                "float32 finite differences are too noisy"
            )
    _, numerical = _numerical_jacobian(fn, inputs, eps)
    analytical = _analytical_jacobian(fn, inputs)
    numerical = [n for n in numerical if n is not None]
    for i, (a, n) in enumerate(zip(analytical, numerical)):
        if not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=True):
            if not raise_exception:
                return False
            err = np.max(np.abs(a - n))
            raise GradcheckError(
                f"gradcheck: Jacobian mismatch for input {i} (max abs difference {err:.3g})\n"
                f"analytical:\n{a}\nnumerical:\n{n}"
            )
    return True


def gradgradcheck(fn: Callable, inputs: Sequence, grad_outputs=None, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Check second derivatives: gradcheck applied to the first derivative, computed with
    `create_graph=True`, against random output gradients.

    Example:
        >>> import singa_tensor as st
        >>> x = st.randn(3, dtype=st.float64, requires_grad=True)
        >>> st.autograd.gradgradcheck(lambda t: (t * t * t).sum(), (x,))
        True
    """
    from . import creation

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    out = fn(*inputs)
    outs = [o for o in (out if isinstance(out, tuple) else (out,))
            if isinstance(o, Tensor) and o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [
            creation.tensor(rng.standard_normal(o.shape), dtype=o.dtype, requires_grad=True)
            for o in outs
        ]
    diff_in = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    n_in = len(inputs)

    def first_grad(*args):
        ins, gos = args[:n_in], args[n_in:]
        o = fn(*ins)
        o = [x for x in (o if isinstance(o, tuple) else (o,))
             if isinstance(x, Tensor) and x.requires_grad]
        d = [t for t in ins if isinstance(t, Tensor) and t.requires_grad]
        gs = grad(o, d, list(gos), create_graph=True, allow_unused=True)
        return tuple(g if g is not None else creation.zeros_like(t) for g, t in zip(gs, d))

    del diff_in
    return gradcheck(first_grad, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when derivatives disagree."""


