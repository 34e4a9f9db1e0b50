"""Constraints: the sets parameters and values of distributions live in, each with
check(value), a bool tensor telling which entries (or, for event_dim > 0, which events) lie
in the set.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor.distributions import constraints
    >>> constraints.positive.check(st.tensor([1.0, -1.0])).tolist()
    [True, False]
"""

from __future__ import annotations

import numpy as np

import singa_tensor as st
from singa_tensor import Tensor

__all__ = [
    "Constraint", "boolean", "cat", "corr_cholesky", "dependent", "dependent_property",
    "greater_than", "greater_than_eq", "half_open_interval", "independent", "integer_interval",
    "interval", "is_dependent", "less_than", "lower_cholesky", "lower_triangular",
    "nonnegative", "nonnegative_integer", "one_hot", "positive", "positive_definite",
    "positive_integer", "positive_semidefinite", "real", "real_vector", "simplex", "stack",
    "symmetric", "unit_interval",
]


def _tensor(value, op: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}.check: expected a Tensor, got {type(value).__name__}")
    return value


class Constraint:
    """A set of values; check(value) is a bool tensor, reduced over the event_dim rightmost
    dims. is_discrete marks sets of integers.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import constraints
        >>> constraints.unit_interval.check(st.tensor([0.5, 2.0])).tolist()
        [True, False]
    """

    is_discrete = False
    event_dim = 0

    def check(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.check is not implemented")

    def __repr__(self) -> str:
        return type(self).__name__.lstrip("_") + "()"


class _Dependent(Constraint):
    """A placeholder for a support that depends on other parameters: check raises."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value):
        raise ValueError("constraints.dependent: cannot determine the validity of a value "
                         "under a dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether constraint is the dependent placeholder.

    Example:
        >>> from singa_tensor.distributions import constraints
        >>> constraints.is_dependent(constraints.dependent), constraints.is_dependent(
        ...     constraints.real)
        (True, False)
    """
    return isinstance(constraint, _Dependent)


class dependent_property(property):
    """A property that is also the dependent constraint (for supports that depend on the
    parameters, as in Uniform).

    Example:
        >>> from singa_tensor.distributions import constraints
        >>> class A:
        ...     @constraints.dependent_property
        ...     def support(self):
        ...         return constraints.real
        >>> A().support
        Real()
    """

    def __init__(self, fget=None, fset=None, fdel=None, doc=None, *, is_discrete=False,
                 event_dim=0):
        super().__init__(fget, fset, fdel, doc)
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, fget):
        # used with arguments, @dependent_property(is_discrete=..., event_dim=...)
        return dependent_property(fget, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _Real(Constraint):
    def check(self, value):
        value = _tensor(value, "real")
        return value == value  # not NaN


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        value = _tensor(value, "boolean")
        return (value == 0) | (value == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        value = _tensor(value, "integer_interval")
        return _integral(value) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


def _integral(value: Tensor) -> Tensor:
    if value.dtype.is_floating_point:
        return value == value.floor()
    return value == value


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        value = _tensor(value, "integer_greater_than")
        return _integral(value) & (value >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return _tensor(value, "greater_than") > self.lower_bound

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return _tensor(value, "greater_than_eq") >= self.lower_bound

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return _tensor(value, "less_than") < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        value = _tensor(value, "interval")
        return (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        value = _tensor(value, "half_open_interval")
        return (value >= self.lower_bound) & (value < self.upper_bound)

    def __repr__(self):
        return (f"HalfOpenInterval(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


class _Independent(Constraint):
    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        if not isinstance(base_constraint, Constraint):
            raise TypeError(f"constraints.independent: expected a Constraint, got "
                            f"{type(base_constraint).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ValueError(f"constraints.independent: reinterpreted_batch_ndims must be a "
                             f"non-negative int, got {reinterpreted_batch_ndims!r}")
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        ok = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if ok.ndim < n:
            raise ValueError(f"constraints.independent: a value of {value.ndim} dims has "
                             f"fewer than the {self.event_dim} event dims")
        for _ in range(n):
            ok = ok.all(-1)
        return ok

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


def _event(value: Tensor, name: str, ndim: int) -> Tensor:
    value = _tensor(value, name)
    if value.ndim < ndim:
        raise ValueError(f"constraints.{name}: expected a value of at least {ndim} dims, got "
                         f"shape {tuple(value.shape)}")
    return value


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        value = _event(value, "simplex", 1)
        tol = 1e-5 if value.dtype is st.float32 else 1e-6
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < tol)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        value = _event(value, "one_hot", 1)
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        value = _event(value, "lower_triangular", 2)
        return (value.triu(1) == 0).all(-1).all(-1)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        value = _event(value, "lower_cholesky", 2)
        tri = (value.triu(1) == 0).all(-1).all(-1)
        return tri & (st.diagonal(value, 0, -2, -1) > 0).all(-1)


class _CorrCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        value = _event(value, "corr_cholesky", 2)
        tol = 1e-5 if value.dtype is st.float32 else 1e-10
        norms = (value * value).sum(-1).sqrt()
        unit = ((norms - 1).abs() <= tol * value.shape[-1]).all(-1)
        return _LowerCholesky().check(value) & unit


class _Symmetric(Constraint):
    event_dim = 2

    def check(self, value):
        value = _event(value, "symmetric", 2)
        if value.shape[-1] != value.shape[-2]:
            return st.zeros(value.shape[:-2], dtype=st.bool, device=value.device)
        diff = (value - value.transpose(-2, -1)).abs()
        tol = (1e-5 if value.dtype is st.float32 else 1e-10) * (1 + value.abs())
        return (diff <= tol).all(-1).all(-1)


class _PositiveDefinite(_Symmetric):
    strict = True

    def check(self, value):
        sym = _Symmetric.check(self, value)
        v = value.detach().numpy(force=True)
        eig = np.linalg.eigvalsh(v) if v.shape[-1] else np.ones(v.shape[:-1])
        ok = (eig > 0).all(-1) if self.strict else (eig >= 0).all(-1)
        return sym & st.tensor(ok, dtype=st.bool, device=value.device)


class _PositiveSemidefinite(_PositiveDefinite):
    strict = False


class _RealVector(_Independent):
    def __init__(self):
        super().__init__(_Real(), 1)

    def __repr__(self):
        return "RealVector()"


class _Cat(Constraint):
    """Constraint applied piecewise to slices of dim `dim` with the given lengths."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        if len(self.lengths) != len(self.cseq):
            raise ValueError("constraints.cat: lengths and constraints differ in number")
        self.dim = dim

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        value = _tensor(value, "cat")
        parts, start = [], 0
        for c, n in zip(self.cseq, self.lengths):
            parts.append(c.check(value.narrow(self.dim, start, n)))
            start += n
        return st.cat(parts, self.dim)


class _Stack(Constraint):
    """Constraint applied to each slice of dim `dim`."""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        value = _tensor(value, "stack")
        return st.stack([c.check(value.select(self.dim, i)) for i, c in enumerate(self.cseq)],
                        self.dim)


dependent = _Dependent()
real = _Real()
real_vector = _RealVector()
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
unit_interval = _Interval(0.0, 1.0)
independent = _Independent
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
positive_semidefinite = _PositiveSemidefinite()
cat = _Cat
stack = _Stack
