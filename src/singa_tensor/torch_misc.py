"""PyTorch's small top-level helpers that are not ops: constants, dtype queries (result_type,
promote_types, can_cast), `Size`, print options, thread and determinism settings, window and
spacing factories, older linear-algebra forms (`qr`, `svd`), and the Tensor methods of the
same kind (`new`, `is_signed`, `sum_to_size`, `apply_` ...). The `torch.<name>` forms of
`nn.functional` layers are in torch_nn_forms.py.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from . import autograd as _ag
from . import creation as _cr
from . import dtype as _dt
from .ops._registry import bind_method
from .ops.inplace import check_inplace
from .random import default_generator
from .random_fills import bernoulli as _bernoulli
from .random_fills import multinomial as _multinomial
from .tensor import Tensor

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None


class Size(tuple):
    """A tensor shape: a tuple of ints with `numel()`.

    Example:
        >>> import singa_tensor as st
        >>> s = st.Size([2, 3])
        >>> s, s.numel(), s == (2, 3)
        (singa_tensor.Size([2, 3]), 6, True)
    """

    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        for s in sizes:
            if not isinstance(s, int) or isinstance(s, bool):
                raise TypeError(f"Size: expected a sequence of ints, got an element of type "
                                f"{type(s).__name__}")
        return super().__new__(cls, sizes)

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, i):
        r = super().__getitem__(i)
        return Size(r) if isinstance(i, slice) else r

    def __repr__(self) -> str:
        return f"singa_tensor.Size({list(self)})"


def _tensor(op: str, x) -> Tensor:
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


_LEGACY_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                 "bfloat16": "BFloat16Tensor", "int32": "IntTensor", "int64": "LongTensor",
                 "bool": "BoolTensor"}


def typename(obj) -> str:
    """The type name PyTorch prints: `torch.FloatTensor` style for tensors, the qualified
    class name otherwise.

    Example:
        >>> import singa_tensor as st
        >>> st.typename(st.zeros(2)), st.typename(3)
        ('torch.FloatTensor', 'int')
    """
    if isinstance(obj, Tensor):
        prefix = "torch.cuda." if obj.device.type == "cuda" else "torch."
        return prefix + _LEGACY_NAMES[obj.dtype.name]
    t = type(obj)
    mod = t.__module__
    return t.__qualname__ if mod in (None, "builtins") else f"{mod}.{t.__qualname__}"


# ---- dtype queries ---------------------------------------------------------------------------
def _category(d: _dt.DType) -> int:
    return 2 if d.is_floating_point else (0 if d is _dt.bool_ else 1)


def result_type(tensor1, tensor2) -> _dt.DType:
    """The dtype an arithmetic op on the two gives: the highest category (bool < integer <
    float) wins; within it, tensors with dimensions outrank 0-d tensors, which outrank
    Python numbers.

    Example:
        >>> import singa_tensor as st
        >>> st.result_type(st.tensor([1, 2]), 1.0), st.result_type(st.tensor([1, 2]), 5)
        (singa_tensor.float32, singa_tensor.int64)
    """
    groups: list[list[_dt.DType]] = [[], [], []]  # dimensioned, 0-d, Python numbers
    for v in (tensor1, tensor2):
        if isinstance(v, Tensor):
            groups[0 if v.ndim else 1].append(v.dtype)
        elif isinstance(v, (bool, int, float)):
            groups[2].append(_dt.bool_ if isinstance(v, bool) else
                             _dt.int64 if isinstance(v, int) else _dt.default_float())
        else:
            raise TypeError(f"result_type: expected Tensors or numbers, got {type(v).__name__}")
    top = builtins.max(_category(d) for g in groups for d in g)
    for g in groups:
        found = [d for d in g if _category(d) == top]
        if found:
            out = found[0]
            for d in found[1:]:
                out = _dt.promote(out, d)
            return out
    raise AssertionError("unreachable")


def promote_types(type1, type2) -> _dt.DType:
    """The smallest dtype both type1 and type2 convert to without losing their category.

    Example:
        >>> import singa_tensor as st
        >>> st.promote_types(st.int32, st.float16), st.promote_types(st.float16, st.bfloat16)
        (singa_tensor.float16, singa_tensor.float32)
    """
    return _dt.promote(_dt.as_dtype(type1), _dt.as_dtype(type2))


def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules let an op write a result of the first dtype into a
    tensor of the second: never float to integer or bool, nor integer to bool.

    Example:
        >>> import singa_tensor as st
        >>> st.can_cast(st.int64, st.float32), st.can_cast(st.float32, st.int32)
        (True, False)
    """
    return _category(_dt.as_dtype(from_)) <= _category(_dt.as_dtype(to))


def is_nonzero(input: Tensor) -> bool:
    """Whether a one-element tensor is not zero (more or fewer elements are an error).

    Example:
        >>> import singa_tensor as st
        >>> st.is_nonzero(st.tensor([0.5])), st.is_nonzero(st.tensor(0))
        (True, False)
    """
    _tensor("is_nonzero", input)
    n = input.numel()
    if n != 1:
        raise RuntimeError(f"is_nonzero: Boolean value of Tensor with "
                           f"{'no values' if n == 0 else 'more than one value'} is ambiguous")
    return bool(input.item() != 0)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have the same shape.

    Example:
        >>> import singa_tensor as st
        >>> st.is_same_size(st.zeros(2, 3), st.ones(2, 3))
        True
    """
    return _tensor("is_same_size", input).shape == _tensor("is_same_size", other).shape


def is_signed(input: Tensor) -> bool:
    """Whether the tensor's dtype holds negative numbers (every dtype here but bool).

    Example:
        >>> import singa_tensor as st
        >>> st.is_signed(st.zeros(2)), st.is_signed(st.zeros(2, dtype=st.bool))
        (True, False)
    """
    return _tensor("is_signed", input).dtype is not _dt.bool_


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have the same shape and the same elements.

    Example:
        >>> import singa_tensor as st
        >>> st.equal(st.tensor([1, 2]), st.tensor([1, 2])), st.equal(st.zeros(2), st.zeros(3))
        (True, False)
    """
    _tensor("equal", input)
    _tensor("equal", other)
    if input.shape != other.shape:
        return False
    from .ops.reduce import all as _all

    with _ag.no_grad():
        return bool(_all(input == other).item())


def get_device(input: Tensor) -> int:
    """The CUDA device index of the tensor, -1 on the CPU.

    Example:
        >>> import singa_tensor as st
        >>> st.get_device(st.zeros(1))
        -1
    """
    d = _tensor("get_device", input).device
    return -1 if d.type == "cpu" else (d.index or 0)


for _fn in (is_nonzero, is_same_size, is_signed, equal, get_device):
    bind_method(_fn)


def detach(input: Tensor) -> Tensor:
    """`input.detach()`: the same data, cut from the graph.

    Example:
        >>> import singa_tensor as st
        >>> st.detach(st.ones(1, requires_grad=True)).requires_grad
        False
    """
    return _tensor("detach", input).detach()


def detach_(input: Tensor) -> Tensor:
    """`input.detach_()`: cut input itself from the graph.

    Example:
        >>> import singa_tensor as st
        >>> y = st.ones(1, requires_grad=True) * 2
        >>> st.detach_(y).requires_grad
        False
    """
    return _tensor("detach_", input).detach_()


# ---- print options and threads ---------------------------------------------------------------
def set_printoptions(precision: int | None = None, threshold: int | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print: digits after the point, the element count past which the middle is
    elided (edgeitems shown at each end), the line width, and scientific notation (None lets
    the printer choose). profile "default", "short" or "full" sets the first four at once.

    Example:
        >>> import singa_tensor as st
        >>> st.set_printoptions(precision=2)
        >>> st.tensor([1.23456])
        tensor([1.23])
        >>> st.set_printoptions(profile="default")
    """
    from .tensor import _PRINT_OPTIONS as opts

    profiles = {"default": (8, 1000, 3, 75), "short": (2, 1000, 2, 75),
                "full": (8, 2**62, 3, 75)}
    if profile is not None:
        if profile not in profiles:
            raise ValueError(f"set_printoptions: unknown profile {profile!r} (expected one of "
                             f"{sorted(profiles)})")
        opts.clear()
        p, t, ed, lw = profiles[profile]
        opts.update(precision=p, threshold=t, edgeitems=ed, max_line_width=lw)
    for key, v in (("precision", precision), ("threshold", threshold),
                   ("edgeitems", edgeitems), ("max_line_width", linewidth)):
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"set_printoptions: {key} must be a non-negative int, got {v!r}")
        opts[key] = v
    if sci_mode is not None:
        opts.pop("formatter", None)
        opts.pop("suppress", None)
        if sci_mode:
            digits = opts.get("precision", 8)
            opts["formatter"] = {"float_kind": lambda v: f"{v:.{digits}e}"}
        else:
            opts["suppress"] = True


_interop_threads = [1]


def get_num_interop_threads() -> int:
    """Threads for running independent ops at once (ops run one after another here: 1 unless
    set).

    Example:
        >>> import singa_tensor as st
        >>> st.get_num_interop_threads() >= 1
        True
    """
    return _interop_threads[0]


def set_num_interop_threads(num: int) -> None:
    """Record the inter-op thread count (kept for scripts that set it; ops run in order).

    Example:
        >>> import singa_tensor as st
        >>> st.set_num_interop_threads(1)
    """
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise ValueError(f"set_num_interop_threads: expects a positive int, got {num!r}")
    _interop_threads[0] = num


# ---- factories -------------------------------------------------------------------------------
def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """steps values base ** v, v evenly spaced from start to end.

    Example:
        >>> import singa_tensor as st
        >>> st.logspace(0, 2, 3).tolist()
        [1.0, 10.0, 100.0]
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"logspace: number of steps must be non-negative, got {steps!r}")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.default_float()
    v = np.power(float(base), np.linspace(float(start), float(end), steps, dtype=np.float64))
    return _cr.tensor(v, dtype=d, device=device, requires_grad=requires_grad)


def _window(op: str, n: int, periodic: bool, dtype, device, requires_grad, make) -> Tensor:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"{op}: window_length must be a non-negative int, got {n!r}")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.default_float()
    if not d.is_floating_point:
        raise TypeError(f"{op}: expects a floating point dtype, got {d.name}")
    if n <= 1:
        w = np.ones(n)
    else:
        w = make(n + 1)[:-1] if periodic else make(n)
    return _cr.tensor(w, dtype=d, device=device, requires_grad=requires_grad)


def _window_factory(name: str, make, doc_values: str):
    def window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
               requires_grad: bool = False) -> Tensor:
        return _window(name, window_length, periodic, dtype, device, requires_grad, make)

    window.__name__ = window.__qualname__ = name
    window.__doc__ = (f"The {name.split('_')[0].capitalize()} window of window_length points; "
                      f"periodic (the default, for spectral analysis) drops the last point of "
                      f"the symmetric window one longer.\n\n    Example:\n"
                      f"        >>> import singa_tensor as st\n"
                      f"        >>> [round(v, 4) + 0.0 for v in st.{name}(4).tolist()]\n"
                      f"        {doc_values}\n")
    return window


bartlett_window = _window_factory("bartlett_window", np.bartlett, "[0.0, 0.5, 1.0, 0.5]")
blackman_window = _window_factory("blackman_window", np.blackman, "[0.0, 0.34, 1.0, 0.34]")
hamming_window = _window_factory("hamming_window", np.hamming, "[0.08, 0.54, 1.0, 0.54]")
hann_window = _window_factory("hann_window", np.hanning, "[0.0, 0.5, 1.0, 0.5]")


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None,
                  device=None, requires_grad: bool = False) -> Tensor:
    """The Kaiser window of window_length points with shape parameter beta; periodic drops
    the last point of the symmetric window one longer.

    Example:
        >>> import singa_tensor as st
        >>> [round(v, 4) for v in st.kaiser_window(4, beta=2.0).tolist()]
        [0.4387, 0.8348, 1.0, 0.8348]
    """
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: np.kaiser(n, beta))


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, dtype=None,
                 device=None, requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from [low, high) in a tensor shaped like input (one bound:
    high, from 0).

    Example:
        >>> import singa_tensor as st
        >>> r = st.randint_like(st.zeros(2, 3), 5)
        >>> r.shape, r.dtype, bool(((r >= 0) & (r < 5)).all())
        ((2, 3), singa_tensor.float32, True)
    """
    _tensor("randint_like", input)
    if high is None:
        low, high = 0, low
    r = _cr.randint(low, high, input.shape, dtype=dtype or input.dtype,
                    device=device or input.device)
    if requires_grad:
        r.requires_grad_(True)
    return r


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:
    """A 1-D tensor of the elements a buffer (bytes, bytearray, memoryview, array) holds
    from byte offset on (count elements, all when -1). The data are copied.

    Example:
        >>> import singa_tensor as st
        >>> import array
        >>> st.frombuffer(array.array("i", [1, 2, 3]), dtype=st.int32).tolist()
        [1, 2, 3]
    """
    d = _dt.as_dtype(dtype)
    if d.np is None:
        raise TypeError(f"frombuffer: dtype {d.name} is not supported")
    try:
        a = np.frombuffer(buffer, dtype=d.np, count=count, offset=offset)
    except (TypeError, ValueError) as err:
        raise ValueError(f"frombuffer: {err}") from None
    return _cr.tensor(a.copy(), dtype=d, requires_grad=requires_grad)


# ---- Tensor methods --------------------------------------------------------------------------
def new(self: Tensor, *args, dtype=None, device=None) -> Tensor:
    """A tensor of this one's dtype and device: `new(data)` holds data, `new(*sizes)` is
    uninitialized of that shape, `new()` is empty.

    Example:
        >>> import singa_tensor as st
        >>> x = st.zeros(1, dtype=st.float64)
        >>> x.new(2, 3).shape, x.new([1, 2]).tolist(), x.new([1]).dtype
        ((2, 3), [1.0, 2.0], singa_tensor.float64)
    """
    dtype, device = dtype or self.dtype, device or self.device
    if len(args) == 1 and isinstance(args[0], (Tensor, list, np.ndarray)):
        return _cr.tensor(args[0], dtype=dtype, device=device)
    if len(args) == 1 and isinstance(args[0], tuple):
        args = args[0]
    return _cr.empty(tuple(args) if args else (0,), dtype=dtype, device=device)


def new_empty_strided(self: Tensor, size, stride, *, dtype=None, device=None,
                      requires_grad: bool = False) -> Tensor:
    """`empty_strided(size, stride)` with this tensor's dtype and device by default.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(1).new_empty_strided((2, 3), (1, 2)).stride()
        (1, 2)
    """
    from .tensor_api import empty_strided

    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)


def sum_to_size(self: Tensor, *size) -> Tensor:
    """Sum this tensor down to size, which must broadcast to its shape (the reverse of expand).

    Example:
        >>> import singa_tensor as st
        >>> st.ones(2, 3).sum_to_size(1, 3).tolist()
        [[2.0, 2.0, 2.0]]
    """
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    lead = self.ndim - len(shape)
    if lead < 0 or any(s not in (1, n) for s, n in zip(shape, self.shape[lead:])):
        raise RuntimeError(f"sum_to_size: size {tuple(shape)} is not expandable to size "
                           f"{self.shape}")
    out = self.sum(tuple(builtins.range(lead))) if lead else self
    dims = tuple(i for i, (s, n) in enumerate(zip(shape, out.shape)) if s == 1 and n != 1)
    return out.sum(dims, keepdim=True) if dims else out


def _host_values(op: str, x: Tensor):
    if x.device.type != "cpu":
        raise RuntimeError(f"{op}: only works on CPU tensors, got one on {x.device}")
    return x.tolist() if x.ndim else [x.item()]


def _write_values(x: Tensor, values: list) -> Tensor:
    with _ag.no_grad():
        x.copy_(_cr.tensor(values, dtype=x.dtype).reshape(x.shape))
    return x


def apply_(self: Tensor, callable) -> Tensor:
    """Replace every element v by callable(v), in place (CPU tensors; slow, for tests and
    small tensors).

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([1.0, 2.0]).apply_(lambda v: v * 10).tolist()
        [10.0, 20.0]
    """
    check_inplace(self, "apply_")
    flat = np.asarray(_host_values("apply_", self), dtype=object).reshape(-1)
    return _write_values(self, [callable(v) for v in flat.tolist()])


def map_(self: Tensor, tensor: Tensor, callable) -> Tensor:
    """Replace every element a by callable(a, b), b the element of tensor (broadcast to this
    shape) at the same place, in place (CPU tensors).

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([1.0, 2.0]).map_(st.tensor(3.0), lambda a, b: a + b).tolist()
        [4.0, 5.0]
    """
    check_inplace(self, "map_")
    _tensor("map_", tensor)
    mine = np.asarray(_host_values("map_", self), dtype=object).reshape(-1)
    other = tensor.expand(*self.shape) if tensor.shape != self.shape else tensor
    theirs = np.asarray(_host_values("map_", other), dtype=object).reshape(-1)
    return _write_values(self, [callable(a, b) for a, b in zip(mine.tolist(), theirs.tolist())])


def fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Set the main diagonal (elements whose indices are all equal) to fill_value, in place;
    a tall matrix with wrap=True restarts the diagonal every ncols + 1 rows.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3).fill_diagonal_(5.0).tolist()
        [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]
    """
    check_inplace(self, "fill_diagonal_")
    if self.ndim < 2:
        raise ValueError(f"fill_diagonal_: dimensions must be larger than 1, got {self.ndim}")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise ValueError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                         f"got shape {self.shape}")
    mask = np.zeros(self.shape, dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return self.masked_fill_(_cr.tensor(mask, device=self.device), fill_value)


def pin_memory(self: Tensor, device=None) -> Tensor:
    """The tensor ready for fast copies to the GPU: CPU tensors need nothing here (the CUDA
    backend copies from any host memory), so this is the tensor itself.

    Example:
        >>> import singa_tensor as st
        >>> x = st.zeros(2)
        >>> x.pin_memory() is x, x.is_pinned()
        (True, False)
    """
    if self.device.type != "cpu":
        raise RuntimeError(f"pin_memory: cannot pin a tensor on {self.device}, only dense CPU "
                           "tensors can be pinned")
    return self


def is_pinned(self: Tensor, device=None) -> bool:
    """Whether the tensor is in page-locked host memory: never here (no such allocator).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2).is_pinned()
        False
    """
    return False


def is_shared(self: Tensor) -> bool:
    """Whether the tensor's storage is shared between processes: CUDA storage is, CPU storage
    never is here (there is no shared-memory allocator).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2).is_shared()
        False
    """
    return self.device.type == "cuda"


for _fn in (new, new_empty_strided, sum_to_size, apply_, map_, fill_diagonal_, pin_memory,
            is_pinned, is_shared):
    bind_method(_fn)


# ---- linear algebra and random draws in PyTorch's older forms --------------------------------
def matrix_power(input: Tensor, n: int) -> Tensor:
    """`linalg.matrix_power`: the n-th power of square matrices (n < 0 inverts).

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([[1.0, 1.0], [0.0, 1.0]]).matrix_power(3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
    """
    from . import linalg

    return linalg.matrix_power(input, n)


def qr(input: Tensor, some: bool = True) -> tuple:
    """(Q, R) with input = Q @ R; some=False gives the complete, square Q.

    Example:
        >>> import singa_tensor as st
        >>> q, r = st.qr(st.tensor([[3.0, 0.0], [4.0, 5.0]]))
        >>> [round(v, 4) for v in (q @ r).reshape(-1).tolist()]
        [3.0, 0.0, 4.0, 5.0]
    """
    from . import linalg

    q, r = linalg.qr(input, mode="reduced" if some else "complete")
    return q, r


def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> tuple:
    """(U, S, V) with input = U @ diag(S) @ V^T (V, not its transpose, as torch.svd returns);
    some=False gives square U and V; compute_uv=False gives zero U and V.

    Example:
        >>> import singa_tensor as st
        >>> u, s, v = st.svd(st.tensor([[3.0, 0.0], [0.0, -2.0]]))
        >>> s.tolist()
        [3.0, 2.0]
    """
    from . import linalg

    u, s, vh = linalg.svd(input, full_matrices=not some)
    v = vh.transpose(-2, -1)
    if not compute_uv:
        with _ag.no_grad():
            u, v = u * 0.0, v * 0.0
    return u, s, v


for _fn in (matrix_power, qr, svd):
    bind_method(_fn)
bind_method(_bernoulli, "bernoulli")
bind_method(_multinomial, "multinomial")


def range(start: float = 0, end: float | None = None, step: float = 1, *, dtype=None,  # noqa: A001
          device=None, requires_grad: bool = False) -> Tensor:
    """Values from start to end inclusive, step apart (PyTorch's deprecated form of arange).

    Example:
        >>> import singa_tensor as st
        >>> st.range(1, 4).tolist()
        [1.0, 2.0, 3.0, 4.0]
    """
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"range: upper bound and lower bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    n = int(math.floor((end - start) / step + 1e-9)) + 1
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.default_float()
    v = start + step * np.arange(n, dtype=np.float64)
    return _cr.tensor(v, dtype=d, device=device, requires_grad=requires_grad)


def fill(input: Tensor, value) -> Tensor:
    """A new tensor like input with every element value (out-of-place `fill_`).

    Example:
        >>> import singa_tensor as st
        >>> st.fill(st.zeros(2), 3.0).tolist()
        [3.0, 3.0]
    """
    _tensor("fill", input)
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError("fill: only supports a 0-dimensional value tensor")
        value = value.item()
    return _cr.full_like(input, value)


def empty_permuted(size, physical_layout, *, dtype=None, device=None,
                   requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor of shape size whose dimensions lie in memory in the order
    physical_layout (outermost first).

    Example:
        >>> import singa_tensor as st
        >>> t = st.empty_permuted((2, 3, 4), (0, 2, 1))
        >>> t.shape, t.stride()
        ((2, 3, 4), (12, 1, 3))
    """
    size, layout = tuple(size), tuple(physical_layout)
    if sorted(layout) != list(builtins.range(len(size))):
        raise ValueError(f"empty_permuted: physical_layout {layout} is not a permutation of "
                         f"the {len(size)} dimensions")
    t = _cr.empty(tuple(size[i] for i in layout), dtype=dtype, device=device)
    inverse = [layout.index(i) for i in builtins.range(len(size))]
    t = t.permute(*inverse)
    if requires_grad:
        t.requires_grad_(True)
    return t


_warn_always = [False]


def set_warn_always(b: bool) -> None:
    """Ask for warnings that are normally given once to be given every time.

    Example:
        >>> import singa_tensor as st
        >>> st.set_warn_always(False); st.is_warn_always_enabled()
        False
    """
    _warn_always[0] = bool(b)


def is_warn_always_enabled() -> bool:
    """Whether `set_warn_always(True)` is in effect.

    Example:
        >>> import singa_tensor as st
        >>> st.is_warn_always_enabled()
        False
    """
    return _warn_always[0]


def set_deterministic_debug_mode(debug_mode) -> None:
    """0 / "default": nondeterministic ops allowed; 1 / "warn": they warn; 2 / "error": they
    raise (`use_deterministic_algorithms` in one number).

    Example:
        >>> import singa_tensor as st
        >>> st.set_deterministic_debug_mode("default"); st.get_deterministic_debug_mode()
        0
    """
    from .backends import use_deterministic_algorithms

    modes = {"default": 0, "warn": 1, "error": 2}
    mode = modes.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in (0, 1, 2):
        raise ValueError(f"set_deterministic_debug_mode: invalid mode {debug_mode!r} (expected "
                         f"0, 1, 2 or one of {list(modes)})")
    use_deterministic_algorithms(mode > 0, warn_only=mode == 1)


def get_deterministic_debug_mode() -> int:
    """The mode `set_deterministic_debug_mode` sets: 0 off, 1 warn, 2 error.

    Example:
        >>> import singa_tensor as st
        >>> st.get_deterministic_debug_mode() in (0, 1, 2)
        True
    """
    from .backends import are_deterministic_algorithms_enabled as _on
    from .backends import is_deterministic_algorithms_warn_only_enabled as _warn_only

    if not _on():
        return 0
    return 1 if _warn_only() else 2


def init_num_threads() -> None:
    """Start the CPU thread pool (the backend starts it on first use: nothing to do).

    Example:
        >>> import singa_tensor as st
        >>> st.init_num_threads()
    """


__all__ = [
    "e", "pi", "inf", "nan", "newaxis", "Size", "typename", "result_type", "promote_types",
    "can_cast", "is_nonzero", "is_same_size", "is_signed", "equal", "get_device", "detach",
    "detach_", "set_printoptions", "get_num_interop_threads", "set_num_interop_threads",
    "logspace", "bartlett_window", "blackman_window", "hamming_window", "hann_window",
    "kaiser_window", "randint_like", "frombuffer",
    "matrix_power", "qr", "svd", "default_generator", "range", "fill", "empty_permuted",
    "set_warn_always", "is_warn_always_enabled", "set_deterministic_debug_mode",
    "get_deterministic_debug_mode", "init_num_threads",
]
