"""The Distribution base class: batch and event shapes, sampling, argument validation."""

from __future__ import annotations

import numbers
from typing import Any

import singa_tensor as st
from singa_tensor import Tensor


class Distribution:
    """A batch of probability distributions of one family.

    batch_shape is the shape of the batch of (independent, differently parameterised)
    distributions, event_shape the shape of one draw of one of them; a sample of
    sample_shape has shape sample_shape + batch_shape + event_shape. With validate_args
    (the default, see set_default_validate_args) parameters are checked on construction and
    log_prob's values against the support.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Normal(st.zeros(3), 1.0)
        >>> d.batch_shape, d.event_shape, d.sample((2,)).shape
        ((3,), (), (2, 3))
    """

    has_rsample = False
    _validate_default = True

    def __init__(self, batch_shape=(), event_shape=(), validate_args: bool | None = None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._validate_args = (Distribution._validate_default if validate_args is None
                               else bool(validate_args))
        if self._validate_args:
            self._check_parameters()

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Whether distributions validate their arguments unless told otherwise.

        Example:
            >>> import singa_tensor as st
            >>> st.distributions.Distribution.set_default_validate_args(True)
        """
        if not isinstance(value, bool):
            raise TypeError(f"Distribution.set_default_validate_args: expected a bool, got "
                            f"{type(value).__name__}")
        Distribution._validate_default = value

    # ---- shapes ---------------------------------------------------------------------------------

    @property
    def batch_shape(self) -> tuple:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> tuple:
        return _shape(type(self).__name__, sample_shape) + self._batch_shape + self._event_shape

    def expand(self, batch_shape, _instance=None):
        """The same distribution broadcast to a larger batch_shape (parameters are expanded,
        not copied).

        Example:
            >>> import singa_tensor as st
            >>> st.distributions.Normal(0.0, 1.0).expand((2, 3)).batch_shape
            (2, 3)
        """
        batch_shape = _shape(f"{type(self).__name__}.expand", batch_shape)
        new = object.__new__(type(self))
        try:
            target = _broadcast(self._batch_shape, batch_shape)
        except ValueError:
            target = None
        if target != batch_shape:
            raise ValueError(f"{type(self).__name__}.expand: batch_shape {self._batch_shape} "
                             f"cannot be expanded to {batch_shape}")
        for name in self._param_names:
            value = getattr(self, name, None)
            if isinstance(value, Tensor):
                extra = value.shape[len(self._batch_shape):]
                setattr(new, name, value.expand(*(batch_shape + extra)))
        new.__dict__.update({k: v for k, v in self.__dict__.items()
                             if k not in self._param_names})
        new._batch_shape = batch_shape
        return new

    _param_names: tuple = ()

    # ---- what subclasses provide ----------------------------------------------------------------

    arg_constraints: dict = {}
    support: Any = None

    def _check_parameters(self) -> None:
        """Raise ValueError for parameters outside their constraints (by default those of
        arg_constraints, for the parameters given)."""
        from . import constraints
        for name, c in self.arg_constraints.items():
            value = self.__dict__.get(name)
            if not isinstance(value, Tensor) or constraints.is_dependent(c):
                continue
            check(type(self).__name__, name, value, c.check(value), repr(c))

    def _support_ok(self, value: Tensor) -> Tensor | None:
        """A bool tensor: value lies in the support (None: any value does)."""
        from . import constraints
        support = self.support
        if support is None or support is constraints.real or constraints.is_dependent(support):
            return None
        return support.check(value)

    @property
    def _support_name(self) -> str:
        return repr(self.support)

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def rsample(self, sample_shape=()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sampler "
                                  f"(rsample); use sample")

    def sample(self, sample_shape=()) -> Tensor:
        """A draw of shape sample_shape + batch_shape + event_shape, outside the graph."""
        with st.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Tensor:
        return st.exp(self.entropy())

    # ---- validation helpers ---------------------------------------------------------------------

    def _validate_sample(self, value) -> Tensor:
        name = type(self).__name__
        if not isinstance(value, Tensor):
            raise TypeError(f"{name}.log_prob: the value must be a Tensor, got "
                            f"{type(value).__name__}")
        if not self._validate_args:
            return value
        n = len(self._event_shape)
        if n and tuple(value.shape[-n:]) != self._event_shape:
            raise ValueError(f"{name}.log_prob: the value's last dims {tuple(value.shape)} do "
                             f"not match the event shape {self._event_shape}")
        try:
            _broadcast(tuple(value.shape[:value.ndim - n]), self._batch_shape)
        except ValueError:
            raise ValueError(f"{name}.log_prob: a value of shape {tuple(value.shape)} does not "
                             f"broadcast with batch shape {self._batch_shape}") from None
        ok = self._support_ok(value)
        if ok is not None and not bool(ok.all().item()):
            raise ValueError(f"{name}.log_prob: the value is outside the support "
                             f"({self._support_name})")
        return value

    def __repr__(self) -> str:
        parts = []
        for k in self._param_names:
            v = self.__dict__.get(k)
            if isinstance(v, Tensor):
                parts.append(f"{k}: {v.item() if v.numel() == 1 else tuple(v.shape)}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _shape(op: str, shape) -> tuple:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        ok = not isinstance(shape, str) and all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in shape)
    except TypeError:
        ok = False
    if not ok:
        raise TypeError(f"{op}: a shape must be a tuple of ints, got {shape!r}")
    out = tuple(int(s) for s in shape)
    if any(s < 0 for s in out):
        raise ValueError(f"{op}: a shape cannot have negative sizes, got {out}")
    return out


def _broadcast(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")  # callers add the op
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)


def broadcast_all(op: str, *values):
    """The parameters as tensors of one dtype (that of the tensors among them, float32 for
    numbers alone) and one broadcast shape."""
    dtype = device = None
    for v in values:
        if isinstance(v, Tensor):
            if not v.dtype.is_floating_point:
                raise TypeError(f"{op}: parameters must be floating point tensors or numbers, "
                                f"got {v.dtype.name}")
            dtype = v.dtype if dtype is None else (st.float64 if st.float64 in (dtype, v.dtype)
                                                    else dtype)
            device = device or v.device
        elif isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{op}: parameters must be tensors or numbers, got "
                            f"{type(v).__name__}")
    dtype = dtype or st.float32
    ts = [v.to(dtype) if isinstance(v, Tensor) else st.tensor(float(v), dtype=dtype,
                                                                 device=device) for v in values]
    shape = ()
    try:
        for t in ts:
            shape = _broadcast(shape, tuple(t.shape))
    except ValueError as e:
        raise ValueError(f"{op}: parameter {e}") from None
    return [t if tuple(t.shape) == shape else t.expand(*shape) for t in ts]


def check(dist: str, name: str, value: Tensor, ok: Tensor, what: str) -> None:
    """Raise the validation error for parameter `name` unless ok holds everywhere."""
    if not bool(ok.all().item()):
        raise ValueError(f"{dist}: expected parameter {name} (shape {tuple(value.shape)}) to be "
                         f"{what}, but found invalid values")
