"""In-place random fills (`x.normal_()`, `x.bernoulli_(0.3)` ...) and the sampling functions
`bernoulli`, `multinomial`, `normal` (every PyTorch overload) and `poisson`.

Every draw comes from the counter-based generator (`generator=`, or the default one that
`st.manual_seed` seeds) through the uniform and normal fills of the kernels; the other
distributions are transforms of those draws written with ops, so a seed gives the same values on
every device and graph mode records the draws like any other. The transforms, for u uniform in
[0, 1):

- exponential(lambd): -log(1 - u) / lambd
- geometric(p): floor(log(1 - u) / log(1 - p)) + 1 (trials up to the first success)
- cauchy(median, sigma): median + sigma * tan(pi * (u - 1/2))
- log-normal(mean, std): exp of a normal draw
- bernoulli(p): u < p
- multinomial without replacement: the num_samples smallest of E_i / p_i, E_i exponential (the
  exponential race, which picks categories one after another in proportion to the weights
  left); with replacement: the inverse of the cumulative weights
- poisson(rate): the inverse of the cumulative distribution, on rates split into parts of at
  most 256 (a sum of independent Poisson draws is a Poisson draw of the summed rate)
"""

from __future__ import annotations

import math
import numbers

from . import autograd as _ag
from . import creation as _cr
from . import dtype as _dt
from . import ops
from .ops._registry import bind_method, broadcast_shapes
from .ops.inplace import check_writable
from .tensor import Tensor


def _check_tensor(op: str, x, float_only: bool) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if float_only and not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expects a floating point tensor, got {x.dtype.name}")


def _number(op: str, name: str, v) -> float:
    if isinstance(v, Tensor) and v.numel() == 1:
        v = v.item()
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}")
    v = float(v)
    if math.isnan(v):
        raise ValueError(f"{op}: {name} must not be NaN")
    return v


def _work(d: _dt.DType) -> _dt.DType:
    return _dt.float64 if d is _dt.float64 else _dt.float32


def _fill_dtype(d: _dt.DType) -> _dt.DType:
    """The dtype a plain uniform or normal fill of a d tensor is drawn in: the float dtypes
    have kernels of their own (float16/bfloat16 round the float32 draw once)."""
    return d if d.is_floating_point else _dt.float32


def _uniform(x: Tensor, generator, a: float = 0.0, b: float = 1.0, d=None) -> Tensor:
    return _cr._random_fill("uniform", "uniform", x.shape, d or _work(x.dtype), x.device,
                            generator, a, b)


def _write(op: str, x: Tensor, values: Tensor) -> Tensor:
    check_writable(x, op)
    if x.requires_grad and x.is_leaf and _ag.is_grad_enabled():
        raise RuntimeError(f"{op}: a leaf tensor that requires grad is being used in an in-place "
                           f"operation; wrap it in `with st.no_grad():` or fill a clone")
    x.copy_(values)
    return x


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from N(mean, std²).

    Example:
        >>> import singa_tensor as st
        >>> abs(st.empty(10000).normal_(2.0, 0.5).mean().item() - 2.0) < 0.05
        True
    """
    _check_tensor("normal_", self, True)
    mean, std = _number("normal_", "mean", mean), _number("normal_", "std", std)
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0.0, got std={std}")
    with _ag.no_grad():
        v = _cr._random_fill("normal_", "normal", self.shape, _fill_dtype(self.dtype),
                             self.device, generator, mean, std)
    return _write("normal_", self, v)


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from U[a, b).

    Example:
        >>> import singa_tensor as st
        >>> x = st.empty(1000).uniform_(-1, 1)
        >>> bool((x >= -1).all()) and bool((x < 1).all())
        True
    """
    _check_tensor("uniform_", self, True)
    a, b = _number("uniform_", "from", a), _number("uniform_", "to", b)
    if a > b:
        raise ValueError(f"uniform_: expects from <= to, got from={a} > to={b}")
    with _ag.no_grad():
        v = _uniform(self, generator, a, b, d=_fill_dtype(self.dtype))
    return _write("uniform_", self, v)


def _int_range(d: _dt.DType) -> tuple:
    """The integers d holds exactly, [lowest, highest + 1) (int64's top one excluded: the
    draw's bounds are int64s)."""
    if d is _dt.bool_:
        return 0, 2
    if d.is_floating_point:
        digits = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[d.name]
        return -(2 ** digits), 2 ** digits + 1
    return (-(2 ** 31), 2 ** 31) if d is _dt.int32 else (-(2 ** 63), 2 ** 63 - 1)


def random_(self: Tensor, from_: int | None = None, to: int | None = None, *,
            generator=None) -> Tensor:
    """Fill with integers drawn uniformly: `random_()` from every integer the dtype holds
    exactly (from 0), `random_(to)` from [0, to), `random_(from_, to)` from [from, to).

    Example:
        >>> import singa_tensor as st
        >>> x = st.empty(100).random_(3, 6)
        >>> sorted(set(x.tolist())) == [3.0, 4.0, 5.0]
        True
    """
    _check_tensor("random_", self, False)
    if from_ is not None and to is None:
        low, high = 0, from_  # random_(to)
    elif from_ is None:
        low, high = 0, _int_range(self.dtype)[1]  # random_(): from 0 to the largest
    else:
        low, high = from_, to
    for name, v in (("from", low), ("to", high)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"random_: {name} must be an int, got {type(v).__name__}")
    if low >= high:
        raise ValueError(f"random_: expects 'from' to be less than 'to', got from={low} >= "
                         f"to={high}")
    lowest, top = _int_range(self.dtype)
    if low < lowest or high > top:
        raise ValueError(f"random_: [{low}, {high}) does not fit in {self.dtype.name} "
                         f"(values from {lowest} to {top - 1})")
    with _ag.no_grad():
        v = _cr.randint(int(low), int(high), self.shape, generator=generator, device=self.device)
    return _write("random_", self, v)


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from the exponential distribution of rate lambd.

    Example:
        >>> import singa_tensor as st
        >>> _ = st.manual_seed(0)
        >>> abs(st.empty(20000).exponential_(4.0).mean().item() - 0.25) < 0.01
        True
    """
    _check_tensor("exponential_", self, True)
    lambd = _number("exponential_", "lambd", lambd)
    if not lambd > 0:
        raise ValueError(f"exponential_: expects lambd > 0.0, got lambd={lambd}")
    with _ag.no_grad():
        v = ops.neg(ops.log1p(ops.neg(_uniform(self, generator)))) / lambd
    return _write("exponential_", self, v)


def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to and including the first success
    (values 1, 2, ...).

    Example:
        >>> import singa_tensor as st
        >>> x = st.empty(5000).geometric_(0.5)
        >>> bool((x >= 1).all()) and abs(x.mean().item() - 2.0) < 0.1
        True
    """
    _check_tensor("geometric_", self, False)
    p = _number("geometric_", "p", p)
    if not 0 < p < 1:
        raise ValueError(f"geometric_: expects p in (0, 1), got p={p}")
    with _ag.no_grad():
        u = _uniform(self, generator, d=_dt.float64)
        v = ops.floor(ops.log1p(ops.neg(u)) / math.log1p(-p)) + 1.0
    return _write("geometric_", self, v)


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from the Cauchy distribution with the given median and scale sigma.

    Example:
        >>> import singa_tensor as st
        >>> x = st.empty(10001).cauchy_(3.0, 0.5)
        >>> abs(x.sort().values[5000].item() - 3.0) < 0.1
        True
    """
    _check_tensor("cauchy_", self, True)
    median, sigma = _number("cauchy_", "median", median), _number("cauchy_", "sigma", sigma)
    if not sigma > 0:
        raise ValueError(f"cauchy_: expects sigma > 0.0, got sigma={sigma}")
    with _ag.no_grad():
        v = ops.tan((_uniform(self, generator) - 0.5) * math.pi) * sigma + median
    return _write("cauchy_", self, v)


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with exp(N(mean, std²)) samples.

    Example:
        >>> import singa_tensor as st
        >>> bool((st.empty(100).log_normal_() > 0).all())
        True
    """
    _check_tensor("log_normal_", self, True)
    mean, std = _number("log_normal_", "mean", mean), _number("log_normal_", "std", std)
    if not std > 0:
        raise ValueError(f"log_normal_: expects std > 0.0, got std={std}")
    with _ag.no_grad():
        v = ops.exp(_cr._random_fill("log_normal_", "normal", self.shape, _work(self.dtype),
                                     self.device, generator, mean, std))
    return _write("log_normal_", self, v)


def _check_probs(op: str, p: Tensor) -> None:
    if p.numel() and not bool(((p >= 0) & (p <= 1)).all()):
        raise ValueError(f"{op}: probabilities must be in [0, 1]")


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill with 1 with probability p, else 0; p is a number or a tensor of probabilities that
    broadcasts to self.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(4).bernoulli_(st.tensor([0.0, 1.0, 0.0, 1.0])).tolist()
        [0.0, 1.0, 0.0, 1.0]
    """
    _check_tensor("bernoulli_", self, False)
    with _ag.no_grad():
        u = _uniform(self, generator)
        if isinstance(p, Tensor):
            _check_tensor("bernoulli_", p, True)
            _check_probs("bernoulli_", p)
            v = u < p.to(u.dtype)
        else:
            p = _number("bernoulli_", "p", p)
            if not 0 <= p <= 1:
                raise ValueError(f"bernoulli_: expects p in [0, 1], got p={p}")
            v = u < p
    return _write("bernoulli_", self, v)


for _fn in (normal_, uniform_, random_, exponential_, geometric_, cauchy_, log_normal_,
            bernoulli_):
    bind_method(_fn)


def bernoulli(input: Tensor, p: float | None = None, *, generator=None) -> Tensor:  # noqa: A002
    """Draws of 0 or 1, each 1 with the probability input holds at its place (or with p for
    every place when p is given); the result has input's shape and dtype.

    Example:
        >>> import singa_tensor as st
        >>> st.bernoulli(st.tensor([0.0, 1.0, 1.0])).tolist()
        [0.0, 1.0, 1.0]
    """
    _check_tensor("bernoulli", input, True)
    out = _cr.empty(input.shape, dtype=input.dtype, device=input.device)
    with _ag.no_grad():
        if p is None:
            _check_probs("bernoulli", input)
            return bernoulli_(out, input, generator=generator)
        p = _number("bernoulli", "p", p)
        if not 0 <= p <= 1:
            raise ValueError(f"bernoulli: expects p in [0, 1], got p={p}")
        return bernoulli_(out, p, generator=generator)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator=None) -> Tensor:
    """Category indices drawn in proportion to the non-negative weights of input (1-d: one
    distribution; 2-d: one per row), num_samples per distribution, int64.

    Without replacement each category is drawn at most once, so every row needs at least
    num_samples categories of nonzero weight. With replacement this builds a
    (rows, num_samples, categories) comparison, so keep that product moderate.

    Example:
        >>> import singa_tensor as st
        >>> st.multinomial(st.tensor([0.0, 5.0, 0.0, 1.0]), 2).sort().values.tolist()
        [1, 3]
    """
    _check_tensor("multinomial", input, True)
    if input.ndim not in (1, 2):
        raise ValueError(f"multinomial: input must be 1-d or 2-d, got shape {input.shape}")
    if not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, bool):
        raise TypeError(f"multinomial: num_samples must be an int, got "
                        f"{type(num_samples).__name__}")
    if num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}")
    k = input.shape[-1]
    if k == 0:
        raise ValueError("multinomial: input has no categories")
    if not replacement and num_samples > k:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples from {k} categories "
                         f"without replacement")
    with _ag.no_grad():
        w = input.detach().to(_dt.float64)
        rows = w if w.ndim == 2 else w.reshape(1, k)
        if not bool(ops.isfinite(rows).all()) or bool((rows < 0).any()):
            raise ValueError("multinomial: weights must be finite and non-negative")
        if bool((rows.sum(-1) <= 0).any()):
            raise ValueError("multinomial: the weights of a distribution sum to zero")
        if not replacement and int((rows > 0).sum(-1).min().item()) < num_samples:
            raise ValueError(f"multinomial: not enough categories of nonzero weight to draw "
                             f"{num_samples} samples without replacement")
        n = rows.shape[0]
        if replacement:
            cdf = ops.cumsum(rows, -1)
            u = _cr._random_fill("multinomial", "uniform", (n, num_samples, 1), _dt.float64,
                                 input.device, generator, 0.0, 1.0)
            x = u * cdf[:, k - 1:].reshape(n, 1, 1)
            idx = (cdf.reshape(n, 1, k) <= x).sum(-1).clamp(max=k - 1)
        else:
            u = _cr._random_fill("multinomial", "uniform", (n, k), _dt.float64, input.device,
                                 generator, 0.0, 1.0)
            race = ops.neg(ops.log1p(ops.neg(u)))
            keys = ops.where(rows > 0, race / ops.where(rows > 0, rows, 1.0), math.inf)
            idx = ops.topk(keys, num_samples, -1, largest=False).indices
        idx = idx.to(_dt.int64)
        return idx if input.ndim == 2 else idx.reshape(num_samples)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples, in each of PyTorch's forms: normal(mean_tensor, std_tensor),
    normal(mean_tensor, std=1.0), normal(mean, std_tensor) (tensors broadcast; the result
    takes their dtype), and normal(mean, std, size) of numbers.

    Example:
        >>> import singa_tensor as st
        >>> st.normal(st.zeros(3), st.zeros(3)).tolist()
        [0.0, 0.0, 0.0]
        >>> st.normal(2.0, 3.0, size=(2, 4)).shape
        (2, 4)
    """
    mt, stt = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not stt:
        if size is None:
            raise TypeError("normal: give size=... when mean and std are numbers")
        mean, std = _number("normal", "mean", mean), _number("normal", "std", std)
        if std < 0:
            raise ValueError(f"normal: std must be non-negative, got {std}")
        shape = (size,) if isinstance(size, numbers.Integral) else tuple(size)
        t = _cr._random_fill("normal", "normal", _cr._shape_arg("normal", shape), dtype, device,
                             generator, mean, std)
        return _cr._finish(t, requires_grad, "normal")
    if size is not None:
        raise TypeError("normal: size is only for numbers mean and std; the tensors give the "
                        "shape")
    for name, v in (("mean", mean), ("std", std)):
        if isinstance(v, Tensor):
            _check_tensor("normal", v, True)
        else:
            _number("normal", name, v)
    if (bool((std < 0).any()) if stt else std < 0):
        raise ValueError("normal: std must be non-negative everywhere")
    like = mean if mt else std
    shape = broadcast_shapes(*[v.shape for v in (mean, std) if isinstance(v, Tensor)], op="normal")
    d = like.dtype if not (mt and stt) else _dt.promote(mean.dtype, std.dtype)
    with _ag.no_grad():
        z = _cr._random_fill("normal", "normal", shape, _work(d), like.device, generator,
                             0.0, 1.0)
    out = z * std + mean  # differentiable in mean and std, as PyTorch's
    return out if out.dtype is d else out.to(d)


_POISSON_PART = 256.0


def poisson(input: Tensor, generator=None) -> Tensor:  # noqa: A002
    """Poisson draws, each with the rate input holds at its place (rates >= 0); the result has
    input's shape and floating point dtype.

    Example:
        >>> import singa_tensor as st
        >>> x = st.poisson(st.full((4000,), 3.0))
        >>> abs(x.mean().item() - 3.0) < 0.2, bool((x == x.round()).all())
        (True, True)
    """
    _check_tensor("poisson", input, True)
    with _ag.no_grad():
        rate = input.detach().to(_dt.float64)
        if rate.numel() and (not bool(ops.isfinite(rate).all()) or bool((rate < 0).any())):
            raise ValueError("poisson: rates must be finite and non-negative")
        total = _cr.zeros(rate.shape, dtype=_dt.float64, device=input.device)
        left = rate
        while rate.numel():
            part = left.clamp(max=_POISSON_PART)
            left = left - part
            total = total + _poisson_inverse(part, generator)
            if not bool((left > 0).any()):
                break
    return total.to(input.dtype)


def _poisson_inverse(rate: Tensor, generator) -> Tensor:
    """Inverse-CDF draws for rates of at most _POISSON_PART: count the j with F(j) < u."""
    u = _cr._random_fill("poisson", "uniform", rate.shape, _dt.float64, rate.device, generator,
                         0.0, 1.0)
    pmf = ops.exp(ops.neg(rate))
    cdf = pmf
    count = _cr.zeros(rate.shape, dtype=_dt.float64, device=rate.device)
    # beyond rate + 20 standard deviations the mass left is far below float64's resolution
    bound = int(_POISSON_PART + 20 * math.sqrt(_POISSON_PART)) + 30
    for j in range(1, bound):
        below = u >= cdf
        if j % 8 == 1 and not bool(below.any()):
            break
        count = count + below.to(_dt.float64)
        pmf = pmf * rate / float(j)
        cdf = cdf + pmf
    return count
