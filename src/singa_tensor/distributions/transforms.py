"""Transforms: invertible (or at least differentiable) maps y = t(x) with t.inv and
log abs(det(dy/dx)), composed and registered as the bijections onto constraints (biject_to,
transform_to).

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor.distributions.transforms import ExpTransform
    >>> t = ExpTransform()
    >>> round(t(st.tensor(1.0)).item(), 4), t.inv(t(st.tensor(2.0))).item()
    (2.7183, 2.0)
"""

from __future__ import annotations

import math
import numbers

import numpy as np

import singa_tensor as st
from singa_tensor import Tensor

from . import constraints

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "PositiveDefiniteTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PowerTransform", "ReshapeTransform",
    "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "StackTransform",
    "StickBreakingTransform", "TanhTransform", "Transform", "biject_to", "identity_transform",
    "transform_to",
]


def _sum_rightmost(x, n: int):
    if n <= 0 or not isinstance(x, Tensor):
        return x
    return x.reshape(*(tuple(x.shape[:x.ndim - n]) + (-1,))).sum(-1)


class Transform:
    """A map y = t(x) between domain and codomain (constraints), with inv (its inverse, for
    bijective transforms) and log_abs_det_jacobian(x, y). sign is +1 or -1 for monotone
    scalar maps.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import AffineTransform
        >>> t = AffineTransform(1.0, 2.0)
        >>> t(st.tensor(3.0)).item(), t.inv(st.tensor(7.0)).item(), t.sign
        (7.0, 3.0, 1)
    """

    bijective = False
    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError(f"{type(self).__name__}: cache_size must be 0 or 1, got "
                             f"{cache_size!r}")
        self._cache_size = cache_size
        self._cached = None
        self._inv = None

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError(f"{type(self).__name__}: domain and codomain event dims differ; "
                         f"use domain.event_dim or codomain.event_dim")

    @property
    def inv(self) -> "Transform":
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self) -> int:
        raise NotImplementedError(f"{type(self).__name__}: sign is not defined")

    def with_cache(self, cache_size: int = 1) -> "Transform":
        if cache_size == self._cache_size:
            return self
        raise NotImplementedError(f"{type(self).__name__}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Tensor) -> Tensor:
        if self._cache_size and self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size and self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} does not implement the forward map")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} is not invertible")

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement "
                                  f"log_abs_det_jacobian")

    def forward_shape(self, shape) -> tuple:
        return tuple(shape)

    def inverse_shape(self, shape) -> tuple:
        return tuple(shape)

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform: Transform):
        super().__init__(transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)

    def __repr__(self):
        return f"{self._inv!r}.inv"


class ComposeTransform(Transform):
    """parts applied in order: ComposeTransform([f, g])(x) = g(f(x)).

    Example:
        >>> import math
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import (AffineTransform,
        ...     ComposeTransform, ExpTransform)
        >>> t = ComposeTransform([AffineTransform(0.0, 2.0), ExpTransform()])
        >>> round(t(st.tensor(0.5)).item(), 4), round(t.inv(st.tensor(math.e)).item(), 4)
        (2.7183, 0.5)
    """

    def __init__(self, parts, cache_size: int = 0):
        parts = list(parts)
        for p in parts:
            if not isinstance(p, Transform):
                raise TypeError(f"ComposeTransform: parts must be Transforms, got "
                                f"{type(p).__name__}")
        super().__init__(cache_size)
        self.parts = parts

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        dom = self.parts[0].domain
        need = self.parts[-1].codomain.event_dim
        for p in reversed(self.parts):
            need += p.domain.event_dim - p.codomain.event_dim
            need = max(need, p.domain.event_dim)
        if need > dom.event_dim:
            dom = constraints.independent(dom, need - dom.event_dim)
        return dom

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        cod = self.parts[-1].codomain
        need = self.parts[0].domain.event_dim
        for p in self.parts:
            need += p.codomain.event_dim - p.domain.event_dim
            need = max(need, p.codomain.event_dim)
        if need > cod.event_dim:
            cod = constraints.independent(cod, need - cod.event_dim)
        return cod

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def inv(self):
        if self._inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)], self._cache_size)
            inv._inv = self
            self._inv = inv
        return self._inv

    def _call(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y):
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return st.zeros_like(x)
        xs = [x]
        for p in self.parts[:-1]:
            xs.append(p(xs[-1]))
        xs.append(y)
        total = 0.0
        event_dim = self.domain.event_dim
        for p, a, b in zip(self.parts, xs[:-1], xs[1:]):
            term = p.log_abs_det_jacobian(a, b)
            total = total + _sum_rightmost(term, event_dim - p.domain.event_dim)
            event_dim += p.codomain.event_dim - p.domain.event_dim
        return total

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return tuple(shape)

    def __repr__(self):
        return "ComposeTransform(" + ", ".join(repr(p) for p in self.parts) + ")"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """base_transform with its reinterpreted_batch_ndims rightmost batch dims treated as
    event dims (the log-det-Jacobian is summed over them).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import ExpTransform, IndependentTransform
        >>> t = IndependentTransform(ExpTransform(), 1)
        >>> x = st.tensor([[0.0, 1.0]])
        >>> t.log_abs_det_jacobian(x, t(x)).tolist()
        [1.0]
    """

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size: int = 0):
        if not isinstance(base_transform, Transform):
            raise TypeError(f"IndependentTransform: expected a Transform, got "
                            f"{type(base_transform).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ValueError(f"IndependentTransform: reinterpreted_batch_ndims must be a "
                             f"non-negative int, got {reinterpreted_batch_ndims!r}")
        super().__init__(cache_size)
        self.base_transform = base_transform
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y),
                              self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost dims from in_shape to out_shape (same number of elements);
    the Jacobian's determinant is 1.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import ReshapeTransform
        >>> ReshapeTransform((4,), (2, 2))(st.zeros(3, 4)).shape
        (3, 2, 2)
    """

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError(f"ReshapeTransform: in_shape {self.in_shape} and out_shape "
                             f"{self.out_shape} have different numbers of elements")
        super().__init__(cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def _split(self, x, shape, name):
        n = len(shape)
        if tuple(x.shape[x.ndim - n:]) != shape or x.ndim < n:
            raise ValueError(f"ReshapeTransform: expected a value whose last dims are "
                             f"{shape} ({name}), got shape {tuple(x.shape)}")
        return tuple(x.shape[:x.ndim - n])

    def _call(self, x):
        batch = self._split(x, self.in_shape, "in_shape")
        return x.reshape(*(batch + self.out_shape))

    def _inverse(self, y):
        batch = self._split(y, self.out_shape, "out_shape")
        return y.reshape(*(batch + self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        batch = tuple(x.shape[:x.ndim - len(self.in_shape)])
        return st.zeros(*batch, dtype=x.dtype, device=x.device)

    def forward_shape(self, shape):
        shape = tuple(shape)
        return shape[:len(shape) - len(self.in_shape)] + self.out_shape

    def inverse_shape(self, shape):
        shape = tuple(shape)
        return shape[:len(shape) - len(self.out_shape)] + self.in_shape


class ExpTransform(Transform):
    """y = exp(x), onto the positive numbers.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import ExpTransform
        >>> ExpTransform().log_abs_det_jacobian(st.tensor(2.0), st.tensor(7.389)).item()
        2.0
    """

    bijective = True
    codomain = constraints.positive
    sign = 1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return st.exp(x)

    def _inverse(self, y):
        return st.log(y)

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent on the positive numbers.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import PowerTransform
        >>> PowerTransform(2.0)(st.tensor(3.0)).item()
        9.0
    """

    bijective = True
    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size)
        if isinstance(exponent, bool) or not isinstance(exponent, (numbers.Real, Tensor)):
            raise TypeError(f"PowerTransform: exponent must be a number or Tensor, got "
                            f"{type(exponent).__name__}")
        self.exponent = exponent

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        a, b = self.exponent, other.exponent
        if isinstance(a, Tensor) or isinstance(b, Tensor):
            return bool((st.as_tensor(a) == st.as_tensor(b)).all().item())
        return a == b

    __hash__ = object.__hash__

    @property
    def sign(self):
        e = self.exponent
        return st.sign(e) if isinstance(e, Tensor) else (1 if e > 0 else -1 if e < 0 else 0)

    def _call(self, x):
        return x ** self.exponent

    def _inverse(self, y):
        return y ** (1.0 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        e = self.exponent
        return st.log(abs(e) * y / x) if not isinstance(e, Tensor) else st.log((e * y / x).abs())


class SigmoidTransform(Transform):
    """y = sigmoid(x), onto the unit interval.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import SigmoidTransform
        >>> SigmoidTransform()(st.tensor(0.0)).item()
        0.5
    """

    bijective = True
    codomain = constraints.unit_interval
    sign = 1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return st.sigmoid(x)

    def _inverse(self, y):
        y = _clip_unit(y)
        return st.log(y) - st.log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        return -st.softplus(-x) - st.softplus(x)


def _clip_unit(y):
    eps = float(np.finfo(y.dtype.np).eps)
    return st.clamp(y, float(np.finfo(y.dtype.np).tiny), 1 - eps)


class TanhTransform(Transform):
    """y = tanh(x), onto (-1, 1).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import TanhTransform
        >>> round(TanhTransform().inv(st.tensor(0.5)).item(), 4)
        0.5493
    """

    bijective = True
    codomain = constraints.interval(-1.0, 1.0)
    sign = 1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return st.tanh(x)

    def _inverse(self, y):
        return 0.5 * (st.log1p(y) - st.log1p(-y))

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), stable for large |x|
        return 2.0 * (math.log(2.0) - x - st.softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)), onto the positive numbers.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import SoftplusTransform
        >>> round(SoftplusTransform()(st.tensor(0.0)).item(), 4)
        0.6931
    """

    bijective = True
    codomain = constraints.positive
    sign = 1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return st.softplus(x)

    def _inverse(self, y):
        return y + st.log(-st.expm1(-y))

    def log_abs_det_jacobian(self, x, y):
        return -st.softplus(-x)


class AbsTransform(Transform):
    """y = abs(x) (not injective: inv gives the non-negative preimage).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import AbsTransform
        >>> AbsTransform()(st.tensor([-2.0, 3.0])).tolist()
        [2.0, 3.0]
    """

    codomain = constraints.nonnegative

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, on event_dim rightmost dims taken together (log-det summed).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import AffineTransform
        >>> t = AffineTransform(0.0, st.tensor([2.0, 4.0]), event_dim=1)
        >>> round(t.log_abs_det_jacobian(st.zeros(2), st.zeros(2)).item(), 4)
        2.0794
    """

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size)
        for name, v in (("loc", loc), ("scale", scale)):
            if isinstance(v, bool) or not isinstance(v, (numbers.Real, Tensor)):
                raise TypeError(f"AffineTransform: {name} must be a number or Tensor, got "
                                f"{type(v).__name__}")
        if not isinstance(event_dim, int) or event_dim < 0:
            raise ValueError(f"AffineTransform: event_dim must be a non-negative int, got "
                             f"{event_dim!r}")
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return (constraints.real if self._event_dim == 0
                else constraints.independent(constraints.real, self._event_dim))

    codomain = domain

    def __eq__(self, other):
        if not isinstance(other, AffineTransform) or other._event_dim != self._event_dim:
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, Tensor) or isinstance(b, Tensor):
                if not bool((st.as_tensor(a) == st.as_tensor(b)).all().item()):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = object.__hash__

    @property
    def sign(self):
        s = self.scale
        return st.sign(s) if isinstance(s, Tensor) else (1 if s > 0 else -1 if s < 0 else 0)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        s = self.scale
        if isinstance(s, Tensor):
            out = st.log(s.abs())
        else:
            out = st.full((), math.log(abs(s)), dtype=x.dtype, device=x.device)
        shape = tuple(st.broadcast_shapes(tuple(x.shape), tuple(out.shape)))
        out = out.expand(*shape)
        return _sum_rightmost(out, self._event_dim)

    def forward_shape(self, shape):
        return tuple(st.broadcast_shapes(tuple(shape), _shape_of(self.loc),
                                         _shape_of(self.scale)))

    inverse_shape = forward_shape


def _shape_of(v):
    return tuple(v.shape) if isinstance(v, Tensor) else ()


class SoftmaxTransform(Transform):
    """y = softmax(x) over the last dim, onto the simplex (not injective; inv returns the
    log, defined up to a constant).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import SoftmaxTransform
        >>> SoftmaxTransform()(st.zeros(2)).tolist()
        [0.5, 0.5]
    """

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return st.softmax(x, -1)

    def _inverse(self, y):
        return st.log(y)


class StickBreakingTransform(Transform):
    """A bijection from R^(K-1) onto the K-simplex by stick breaking: the i-th entry takes
    the fraction sigmoid(x_i - log(K - 1 - i)) of what is left.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import StickBreakingTransform
        >>> [round(v, 4) for v in StickBreakingTransform()(st.zeros(2)).tolist()]
        [0.3333, 0.3333, 0.3333]
    """

    bijective = True
    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    __hash__ = object.__hash__

    def _offset(self, k, like):
        # log of (K - 1), (K - 2), ..., 1 for k = K - 1 entries
        return st.log(st.arange(k, 0, -1, dtype=like.dtype, device=like.device))

    def _call(self, x):
        z = st.sigmoid(x - self._offset(x.shape[-1], x))
        rest = st.cumprod(1 - z, -1)
        ones = st.ones(*(tuple(x.shape[:-1]) + (1,)), dtype=x.dtype, device=x.device)
        return st.cat([z, ones], -1) * st.cat([ones, rest], -1)

    def _inverse(self, y):
        head = y[..., :-1]
        k = head.shape[-1]
        left = 1 - st.cumsum(head, -1)
        left = st.cat([st.ones_like(head[..., :1]), left[..., :-1]], -1)
        z = _clip_unit(head / left)
        return st.log(z) - st.log1p(-z) + self._offset(k, y)

    def log_abs_det_jacobian(self, x, y):
        xo = x - self._offset(x.shape[-1], x)
        head = y[..., :-1]
        left = 1 - st.cumsum(head, -1)
        left = st.cat([st.ones_like(head[..., :1]), left[..., :-1]], -1)
        # dy_i/dx_i = z_i (1 - z_i) * left_i, the Jacobian is triangular
        return (-st.softplus(-xo) - st.softplus(xo) + st.log(left)).sum(-1)

    def forward_shape(self, shape):
        shape = tuple(shape)
        if not shape:
            raise ValueError("StickBreakingTransform: expected at least one dim")
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        shape = tuple(shape)
        if not shape:
            raise ValueError("StickBreakingTransform: expected at least one dim")
        return shape[:-1] + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """From square matrices to lower triangular ones with a positive diagonal: the strict
    lower part is kept and the diagonal exponentiated (not bijective on all matrices).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import LowerCholeskyTransform
        >>> LowerCholeskyTransform()(st.tensor([[0.0, 5.0], [2.0, 0.0]])).tolist()
        [[1.0, 0.0], [2.0, 1.0]]
    """

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.tril(-1) + st.diag_embed(st.exp(st.diagonal(x, 0, -2, -1)))

    def _inverse(self, y):
        return y.tril(-1) + st.diag_embed(st.log(st.diagonal(y, 0, -2, -1)))


class PositiveDefiniteTransform(Transform):
    """From square matrices to positive definite ones: L L^T for L the
    LowerCholeskyTransform of the input.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import PositiveDefiniteTransform
        >>> PositiveDefiniteTransform()(st.tensor([[0.0, 0.0], [1.0, 0.0]])).tolist()
        [[1.0, 1.0], [1.0, 2.0]]
    """

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        low = LowerCholeskyTransform()(x)
        return low @ low.transpose(-2, -1)

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(st.linalg.cholesky(y))


def _tril_placement(d: int, like) -> Tensor:
    """The 0/1 matrix taking the d (d - 1) / 2 strictly-lower entries, row by row, to their
    places in a flattened d x d matrix."""
    rows, cols = np.tril_indices(d, -1)
    p = np.zeros((rows.size, d * d))
    p[np.arange(rows.size), rows * d + cols] = 1.0
    return st.tensor(p, dtype=like.dtype, device=like.device)


def _corr_dim(n: int) -> int:
    d = int(round((1 + math.sqrt(1 + 8 * n)) / 2))
    if d * (d - 1) // 2 != n:
        raise ValueError(f"CorrCholeskyTransform: a vector of {n} entries is not the strictly "
                         f"lower triangle of a square matrix")
    return d


class CorrCholeskyTransform(Transform):
    """From vectors of d (d - 1) / 2 reals to Cholesky factors of d x d correlation
    matrices: tanh maps each entry into (-1, 1), and row i of the factor takes the entries
    as the fractions of its remaining unit norm, in turn.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import CorrCholeskyTransform
        >>> low = CorrCholeskyTransform()(st.tensor([0.5, -0.2, 1.0], dtype=st.float64))
        >>> [round(v, 6) for v in (low @ low.T).diagonal().tolist()]
        [1.0, 1.0, 1.0]
    """

    bijective = True
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky

    def __eq__(self, other):
        return isinstance(other, CorrCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        n = x.shape[-1]
        d = _corr_dim(n)
        batch = tuple(x.shape[:-1])
        z = (st.tanh(x) @ _tril_placement(d, x)).reshape(*(batch + (d, d)))
        keep = st.cumprod(st.sqrt(1 - z * z), -1)
        ones = st.ones(*(batch + (d, 1)), dtype=x.dtype, device=x.device)
        shifted = st.cat([ones, keep[..., :-1]], -1)
        eye = st.eye(d, dtype=x.dtype, device=x.device)
        return (z + eye) * shifted

    def _inverse(self, y):
        d = y.shape[-1]
        batch = tuple(y.shape[:-2])
        used = st.cumsum(y * y, -1)
        zeros = st.zeros(*(batch + (d, 1)), dtype=y.dtype, device=y.device)
        left = 1 - st.cat([zeros, used[..., :-1]], -1)
        z = y / st.sqrt(st.clamp(left, min=float(np.finfo(y.dtype.np).tiny)))
        vec = z.reshape(*(batch + (d * d,))) @ _tril_placement(d, y).transpose(0, 1)
        vec = st.clamp(vec, -1 + float(np.finfo(y.dtype.np).eps),
                       1 - float(np.finfo(y.dtype.np).eps))
        return 0.5 * (st.log1p(vec) - st.log1p(-vec))

    def log_abs_det_jacobian(self, x, y):
        d = y.shape[-1]
        batch = tuple(y.shape[:-2])
        used = st.cumsum(y * y, -1)
        zeros = st.zeros(*(batch + (d, 1)), dtype=y.dtype, device=y.device)
        left = 1 - st.cat([zeros, used[..., :-1]], -1)
        place = _tril_placement(d, y).transpose(0, 1)
        left = st.clamp(left, min=float(np.finfo(y.dtype.np).tiny))  # upper part: 0 * log
        half_log_left = (0.5 * st.log(left)).reshape(*(batch + (d * d,))) @ place
        tanh_term = 2.0 * (math.log(2.0) - x - st.softplus(-2.0 * x))
        return (half_log_left + tanh_term).sum(-1)

    def forward_shape(self, shape):
        shape = tuple(shape)
        if not shape:
            raise ValueError("CorrCholeskyTransform: expected at least one dim")
        d = _corr_dim(shape[-1])
        return shape[:-1] + (d, d)

    def inverse_shape(self, shape):
        shape = tuple(shape)
        if len(shape) < 2 or shape[-1] != shape[-2]:
            raise ValueError("CorrCholeskyTransform: expected square matrices")
        d = shape[-1]
        return shape[:-2] + (d * (d - 1) // 2,)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), from the distribution's support onto the unit interval;
    its log-det-Jacobian is the log density.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import Normal
        >>> from singa_tensor.distributions.transforms import CumulativeDistributionTransform
        >>> CumulativeDistributionTransform(Normal(0.0, 1.0))(st.tensor(0.0)).item()
        0.5
    """

    bijective = True
    codomain = constraints.unit_interval
    sign = 1

    def __init__(self, distribution, cache_size: int = 0):
        super().__init__(cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def __eq__(self, other):
        return (isinstance(other, CumulativeDistributionTransform)
                and other.distribution is self.distribution)

    __hash__ = object.__hash__

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


class CatTransform(Transform):
    """Applies tseq[i] to the slice of dim `dim` of length lengths[i].

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import CatTransform, ExpTransform
        >>> from singa_tensor.distributions.transforms import identity_transform
        >>> t = CatTransform([ExpTransform(), identity_transform], dim=0, lengths=[1, 1])
        >>> t(st.tensor([0.0, 0.0])).tolist()
        [1.0, 0.0]
    """

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0):
        super().__init__(cache_size)
        self.transforms = list(tseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise ValueError("CatTransform: lengths and transforms differ in number")
        self.dim = dim

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)

    def _map(self, x, fn):
        if x.shape[self.dim] != sum(self.lengths):
            raise ValueError(f"CatTransform: dim {self.dim} has size {x.shape[self.dim]}, "
                             f"expected {sum(self.lengths)}")
        parts, start = [], 0
        for t, n in zip(self.transforms, self.lengths):
            parts.append(fn(t, x.narrow(self.dim, start, n)))
            start += n
        return st.cat(parts, self.dim)

    def _call(self, x):
        return self._map(x, lambda t, v: t(v))

    def _inverse(self, y):
        return self._map(y, lambda t, v: t.inv(v))

    def log_abs_det_jacobian(self, x, y):
        parts, start = [], 0
        for t, n in zip(self.transforms, self.lengths):
            xs, ys = x.narrow(self.dim, start, n), y.narrow(self.dim, start, n)
            parts.append(t.log_abs_det_jacobian(xs, ys).expand(*xs.shape))
            start += n
        return st.cat(parts, self.dim)


class StackTransform(Transform):
    """Applies tseq[i] to the i-th slice of dim `dim`.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.transforms import StackTransform, ExpTransform
        >>> from singa_tensor.distributions.transforms import identity_transform
        >>> t = StackTransform([ExpTransform(), identity_transform], dim=0)
        >>> t(st.tensor([0.0, 0.0])).tolist()
        [1.0, 0.0]
    """

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size)
        self.transforms, self.dim = list(tseq), dim

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)

    def _map(self, x, fn):
        if x.shape[self.dim] != len(self.transforms):
            raise ValueError(f"StackTransform: dim {self.dim} has size {x.shape[self.dim]}, "
                             f"expected {len(self.transforms)}")
        return st.stack([fn(t, x.select(self.dim, i)) for i, t in enumerate(self.transforms)],
                        self.dim)

    def _call(self, x):
        return self._map(x, lambda t, v: t(v))

    def _inverse(self, y):
        return self._map(y, lambda t, v: t.inv(v))

    def log_abs_det_jacobian(self, x, y):
        return st.stack([t.log_abs_det_jacobian(x.select(self.dim, i), y.select(self.dim, i))
                         .expand(*x.select(self.dim, i).shape)
                         for i, t in enumerate(self.transforms)], self.dim)


# ---- registries ---------------------------------------------------------------------------------

class ConstraintRegistry:
    """Maps constraints (by instance or type) to factories of transforms from the reals.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import biject_to, constraints
        >>> round(biject_to(constraints.positive)(st.tensor(0.0)).item(), 4)
        1.0
    """

    def __init__(self, name: str):
        self._name = name
        self._registry: dict = {}

    def register(self, constraint, factory=None):
        if factory is None:
            return lambda f: self.register(constraint, f)
        key = constraint if isinstance(constraint, type) else type(constraint)
        self._registry[key] = factory
        return factory

    def __call__(self, constraint):
        if not isinstance(constraint, constraints.Constraint):
            raise TypeError(f"{self._name}: expected a Constraint, got "
                            f"{type(constraint).__name__}")
        for cls in type(constraint).__mro__:
            if cls in self._registry:
                return self._registry[cls](constraint)
        raise NotImplementedError(f"{self._name}: cannot transform {constraint!r}")


biject_to = ConstraintRegistry("biject_to")
transform_to = ConstraintRegistry("transform_to")

_C = constraints


def _real(c):
    return identity_transform


def _greater(c):
    return ComposeTransform([ExpTransform(), AffineTransform(c.lower_bound, 1.0)])


def _less(c):
    return ComposeTransform([ExpTransform(), AffineTransform(c.upper_bound, -1.0)])


def _interval(c):
    lo, hi = c.lower_bound, c.upper_bound
    if not isinstance(lo, Tensor) and not isinstance(hi, Tensor) and lo == 0 and hi == 1:
        return SigmoidTransform()
    return ComposeTransform([SigmoidTransform(), AffineTransform(lo, hi - lo)])


def _independent_b(c):
    return IndependentTransform(biject_to(c.base_constraint), c.reinterpreted_batch_ndims)


def _independent_t(c):
    return IndependentTransform(transform_to(c.base_constraint), c.reinterpreted_batch_ndims)


for _reg in (biject_to, transform_to):
    _reg.register(type(_C.real), _real)
    _reg.register(type(_C.less_than(0.0)), _less)
    _reg.register(type(_C.unit_interval), _interval)
    _reg.register(type(_C.half_open_interval(0.0, 1.0)), _interval)
biject_to.register(type(_C.independent(_C.real, 1)), _independent_b)
transform_to.register(type(_C.independent(_C.real, 1)), _independent_t)
biject_to.register(type(_C.real_vector), lambda c: IndependentTransform(identity_transform, 1))
transform_to.register(type(_C.real_vector),
                      lambda c: IndependentTransform(identity_transform, 1))
biject_to.register(type(_C.simplex), lambda c: StickBreakingTransform())
transform_to.register(type(_C.simplex), lambda c: SoftmaxTransform())
transform_to.register(type(_C.lower_cholesky), lambda c: LowerCholeskyTransform())
transform_to.register(type(_C.positive_definite), lambda c: PositiveDefiniteTransform())
transform_to.register(type(_C.positive_semidefinite), lambda c: PositiveDefiniteTransform())
biject_to.register(type(_C.corr_cholesky), lambda c: CorrCholeskyTransform())
transform_to.register(type(_C.corr_cholesky), lambda c: CorrCholeskyTransform())


def _positive_or_shifted(c):
    lb = c.lower_bound
    if not isinstance(lb, Tensor) and lb == 0:
        return ExpTransform()
    return _greater(c)


for _reg in (biject_to, transform_to):
    _reg.register(type(_C.positive), _positive_or_shifted)
    _reg.register(type(_C.nonnegative), _positive_or_shifted)
