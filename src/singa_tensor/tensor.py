"""The Tensor: a strided view (shape, strides, offset) of a device Storage, plus autograd state.

Views (reshape of contiguous data, transpose, slicing, expand) share the storage and its
version counter. Arithmetic, reductions and the rest are methods attached from `ops/`, which
hold the single definition of every op.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import backend as _backend
from . import dtype as _dt
from .backend.device import Device

# the kernels' strided loops hold this many dimensions (kMaxDims in cpp/src/common.h)
MAX_DIMS = 32

_STRIDES: dict = {}


def contiguous_strides(shape) -> tuple:
    s = _STRIDES.get(shape)
    if s is None:
        if len(_STRIDES) > 4096:
            _STRIDES.clear()
        s = _STRIDES[shape] = _contiguous_strides(tuple(shape))
    return s


def _contiguous_strides(shape) -> tuple:
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def _is_contiguous(shape, strides) -> bool:
    acc = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


class Tensor:
    """An n-dimensional array on a device, with reverse-mode automatic differentiation.

    Create tensors with `st.tensor`, `st.zeros`, `st.randn` and friends rather than with this
    class directly.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> y = (x * x).sum()
        >>> y.backward()
        >>> x.grad.tolist()
        [[2.0, 4.0], [6.0, 8.0]]
    """

    # Attributes every tensor sets live in slots; the rarely changed ones are class-level
    # defaults (an instance __dict__ appears only when one is set), which keeps creating a
    # tensor, done once per op, cheap.
    __slots__ = ("_storage", "_offset", "_shape", "_strides", "_contig", "dtype", "_device",
                 "_be", "requires_grad", "_node", "__dict__", "__weakref__")
    __array_priority__ = 1000  # numpy defers mixed operators to Tensor
    grad = None
    _base = None
    _out = 0
    _accum = None
    _hooks = None
    _post_hooks = None
    _non_diff = False
    _retains = False

    # ---- construction ------------------------------------------------------------------------
    @staticmethod
    def _make(storage, shape: tuple, strides: tuple | None, offset: int, dtype, device,
              be=None) -> Tensor:
        if len(shape) > MAX_DIMS:
            raise ValueError(f"tensors have at most {MAX_DIMS} dimensions, got shape {shape}")
        t = object.__new__(Tensor)
        t._storage = storage
        t._offset = offset
        t._shape = shape
        if strides is None:
            t._strides = contiguous_strides(shape)
            t._contig = True
        else:
            t._strides = strides
            t._contig = _is_contiguous(shape, strides)
        t.dtype = dtype
        t._device = device
        t._be = be if be is not None else _backend.get(device)
        t.requires_grad = False
        t._node = None
        return t

    @staticmethod
    def _empty(shape: tuple, dtype, device, be=None) -> Tensor:
        be = be if be is not None else _backend.get(device)
        n = 1
        for s in shape:
            n *= s
        if n * dtype.itemsize >= 1 << 62:
            raise MemoryError(f"cannot allocate a tensor of shape {shape} ({dtype.name})")
        return Tensor._make(be.empty(n, dtype), shape, None, 0, dtype, device, be)

    def _view(self, shape: tuple, strides: tuple, offset: int) -> Tensor:
        """A raw view sharing storage; autograd bookkeeping is the caller's business. The view
        remembers the tensor whose storage it shows (`_base`), so that an in-place write
        through it can update that tensor's place in the graph."""
        t = Tensor._make(self._storage, shape, strides, offset, self.dtype, self._device,
                         self._be)
        t._base = self._base if self._base is not None else self
        return t

    def _alias(self) -> Tensor:
        """Same data and view, no autograd history."""
        t = Tensor._make(self._storage, self._shape, self._strides, self._offset, self.dtype,
                         self._device, self._be)
        t._contig = self._contig
        return t

    def __init__(self, *args, **kwargs):
        raise TypeError("use st.tensor(data), st.zeros(shape) or another factory to make tensors")

    # ---- properties --------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        """The size of each dimension, a tuple of ints (`()` for a 0-d tensor)."""
        return self._shape

    @property
    def device(self) -> Device:
        """The device holding the data (cpu, or cuda:N)."""
        return self._device

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    def dim(self) -> int:
        """The number of dimensions (as the `ndim` property)."""
        return len(self._shape)

    def numel(self) -> int:
        """The number of elements (the product of the shape; 1 for a 0-d tensor)."""
        n = 1
        for s in self._shape:
            n *= s
        return n

    def size(self, dim: int | None = None):
        """The shape, or the length of one dimension.

        Example:
            >>> import singa_tensor as st
            >>> st.zeros(2, 3).size(), st.zeros(2, 3).size(-1)
            ((2, 3), 3)
        """
        if dim is None:
            return self._shape
        return self._shape[_wrap_dim(dim, self.ndim, "size")]

    def stride(self, dim: int | None = None):
        """Elements to step in memory per index of each dimension (a tuple), or of one dimension."""
        if dim is None:
            return self._strides
        return self._strides[_wrap_dim(dim, self.ndim, "stride")]

    def storage_offset(self) -> int:
        """Where the tensor starts in its storage, in elements (non-zero for some views)."""
        return self._offset

    def is_contiguous(self) -> bool:
        """True when the elements lie in row-major order without gaps."""
        return self._contig

    def element_size(self) -> int:
        """Bytes per element of the dtype."""
        return self.dtype.itemsize

    def data_ptr(self) -> int:
        """The address of the tensor's first element: host memory on the CPU, device memory
        on a CUDA device. For handing the data to code of your own (a C function through
        cffi or ctypes, a CUDA kernel); mind `stride()` for a view and `is_contiguous()`,
        and keep the tensor alive while the address is in use.

        Example:
            >>> import singa_tensor as st
            >>> t = st.arange(4.0)
            >>> t[1:].data_ptr() - t.data_ptr() == t.element_size()
            True
        """
        base = int(self._be.ffi.cast("uintptr_t", self._storage.ptr))
        return base + self._offset * self.dtype.itemsize if base else 0

    @property
    def is_leaf(self) -> bool:
        """True unless an op that autograd recorded made this tensor."""
        return self._node is None

    @property
    def grad_fn(self):
        """The autograd node that made this tensor (None for a leaf)."""
        return self._node

    @property
    def is_cuda(self) -> bool:
        """True when the tensor lives on a CUDA device."""
        return self._device.type == "cuda"

    def is_floating_point(self) -> bool:
        """True for float16, bfloat16, float32 and float64 tensors."""
        return self.dtype.is_floating_point

    @property
    def T(self) -> Tensor:
        """The dimensions in reverse order (a view; the transpose of a matrix)."""
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        """The last two dimensions swapped (a view): a batch of transposed matrices."""
        return self.transpose(-2, -1)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    # ---- conversion to Python and numpy ------------------------------------------------------
    def _numpy(self) -> np.ndarray:
        """The values as numpy: a view where the backend's memory is host memory (it has
        `view_numpy`), else a host copy."""
        view = getattr(self._be, "view_numpy", None)
        if view is None:
            return self.detach().cpu()._numpy()
        return view(self._storage, self.dtype, self._shape, self._strides, self._offset)

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The tensor as a numpy array: a view (no copy) on the CPU.

        Example:
            >>> import singa_tensor as st
            >>> st.arange(3).numpy()
            array([0, 1, 2])
        """
        if self.requires_grad and not force:
            raise RuntimeError(
                "numpy(): can't call numpy() on a tensor that requires grad; use "
                "tensor.detach().numpy()"
            )
        if self.dtype is _dt.bfloat16:
            raise TypeError("numpy(): numpy has no bfloat16; use tensor.float().numpy()")
        if not hasattr(self._be, "view_numpy"):
            if not force:
                raise TypeError(
                    f"numpy(): the tensor is on {self._device}; copy it with .cpu() first"
                )
            return self.detach().cpu().numpy()
        a = self._numpy()
        return a.view(np.bool_) if self.dtype is _dt.bool_ else a

    def __array__(self, dtype=None, copy=None):
        """numpy's conversion protocol: `np.asarray(t)` shares a CPU tensor's memory,
        `np.array(t)` (copy=True) never does, and copy=False raises ValueError when the
        conversion needs a copy (another device, bfloat16, another dtype)."""
        a = self.detach().cpu().to_numpy_value()
        shared = self._device.type == "cpu" and self.dtype is not _dt.bfloat16
        if dtype is not None and np.dtype(dtype) != a.dtype:
            shared = False
            a = a.astype(dtype)
        elif copy and shared:
            return a.copy()
        if copy is False and not shared:
            raise ValueError(f"__array__: a {self.dtype.name} tensor on {self._device} cannot "
                             f"become a numpy array{'' if dtype is None else f' of {dtype}'} "
                             f"without a copy, and copy=False was asked for")
        return a

    def to_numpy_value(self) -> np.ndarray:
        if self.dtype is _dt.bfloat16:
            return self.float().numpy()
        return self.detach().cpu().numpy()

    def item(self):
        """The value of a one-element tensor as a Python number.

        Example:
            >>> import singa_tensor as st
            >>> st.tensor([2.5]).item()
            2.5
        """
        if self.numel() != 1:
            raise ValueError(
                f"item(): only one-element tensors can be converted to Python scalars, got "
                f"shape {self._shape}"
            )
        return self.to_numpy_value().reshape(()).item()

    def tolist(self):
        """Nested Python lists of the values.

        Example:
            >>> import singa_tensor as st
            >>> st.eye(2).tolist()
            [[1.0, 0.0], [0.0, 1.0]]
        """
        return self.to_numpy_value().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                f"bool(): the truth value of a tensor with {self.numel()} elements is ambiguous"
            )
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __repr__(self) -> str:
        if self.dtype is _dt.bfloat16:
            body = np.array2string(self.float().to_numpy_value(), separator=", ", prefix="tensor(")
        else:
            body = np.array2string(self.to_numpy_value(), separator=", ", prefix="tensor(")
        extras = []
        if self._device.type != "cpu":
            extras.append(f"device='{self._device}'")
        if self.dtype not in (_dt.float32, _dt.int64, _dt.bool_):
            extras.append(f"dtype={self.dtype!r}")
        if self._node is not None:
            extras.append(f"grad_fn={self._node!r}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __reduce__(self):
        raise TypeError("Tensors are not pickled; use st.save / st.load")

    def __deepcopy__(self, memo) -> Tensor:
        """copy.deepcopy: a new leaf with its own storage (same device, dtype, requires_grad
        and Parameter status; the gradient copied too). Non-leaf tensors refuse, as the graph
        behind them cannot be copied.

        Example:
            >>> import copy
            >>> import singa_tensor as st
            >>> a = st.ones(2, requires_grad=True)
            >>> b = copy.deepcopy(a); b.requires_grad, b.tolist()
            (True, [1.0, 1.0])
        """
        if not self.is_leaf:
            raise RuntimeError("deepcopy: only tensors created by the user (graph leaves) can "
                               "be deep-copied; detach() it first")
        from .autograd import no_grad

        with no_grad():
            out = self.clone()
        out.requires_grad = self.requires_grad
        if getattr(self, "_is_param", False):
            out._is_param = True
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out

    # ---- interchange: CUDA array interface and DLPack ----------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA memory description for CuPy, Numba and others (CUDA tensors only: on other
        devices the attribute does not exist, so consumers do not mistake host memory)."""
        export = getattr(self._be, "cuda_array_interface", None)
        if export is None:
            raise AttributeError(f"__cuda_array_interface__: the tensor is on {self._device}, "
                                 "not on a CUDA device")
        self._check_export("__cuda_array_interface__")
        return export(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this tensor's memory (CPU or CUDA).

        Example:
            >>> import numpy as np, singa_tensor as st
            >>> t = st.arange(3)
            >>> a = np.from_dlpack(t); a[0] = 7
            >>> t.tolist()
            [7, 1, 2]
        """
        self._check_export("__dlpack__")
        return _backend.dlpack(self, stream=stream, max_version=max_version,
                               dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple:
        return _backend.dlpack_device(self)

    def _check_export(self, what: str) -> None:
        if self.requires_grad:
            raise RuntimeError(f"{what}: can't export a tensor that requires grad; use "
                               "tensor.detach()")
        if self.dtype is _dt.bfloat16:
            raise TypeError(f"{what}: bfloat16 cannot be exported; use tensor.float()")

    # ---- autograd ----------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs=None) -> None:
        """Accumulate the gradient of this tensor with respect to graph leaves into `.grad`.

        Example:
            >>> import singa_tensor as st
            >>> x = st.tensor(3.0, requires_grad=True)
            >>> (x * x).backward(); x.grad.item()
            6.0
        """
        from . import autograd

        autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    def detach(self) -> Tensor:
        """A tensor sharing this one's data, cut from the graph."""
        return self._alias()

    @property
    def data(self) -> Tensor:
        """This tensor's values without autograd history (a detached alias). Assigning a tensor
        makes this one show that tensor's data (its shape, dtype and device too) while keeping
        its identity, which is how a module converts its parameters in place.

        Example:
            >>> import singa_tensor as st
            >>> w = st.zeros(2, requires_grad=True)
            >>> w.data = st.ones(3)
            >>> w.shape, w.requires_grad
            ((3,), True)
        """
        return self._alias()

    @data.setter
    def data(self, new: Tensor) -> None:
        if not isinstance(new, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(new).__name__}")
        for name in ("_storage", "_offset", "_shape", "_strides", "_contig", "dtype",
                     "_device", "_be"):
            setattr(self, name, getattr(new, name))

    def detach_(self) -> Tensor:
        self._node = None
        self.requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set `requires_grad` in place (leaf tensors only).

        Example:
            >>> import singa_tensor as st
            >>> st.zeros(2).requires_grad_().requires_grad
            True
        """
        if not self.is_leaf and not requires_grad:
            raise RuntimeError(
                "requires_grad_(): you can only change requires_grad flags of leaf tensors; "
                "use detach() to get a tensor without history"
            )
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(
                f"requires_grad_(): only floating point tensors can require gradients, this one "
                f"is {self.dtype.name}"
            )
        self.requires_grad = bool(requires_grad)
        return self

    def register_hook(self, fn: Callable) -> Callable:
        """Call fn(grad) whenever the gradient for this tensor is computed; if it returns a
        tensor, that replaces the gradient. Returns a handle whose call removes the hook.

        Example:
            >>> import singa_tensor as st
            >>> x = st.ones(2, requires_grad=True)
            >>> _ = x.register_hook(lambda g: g * 10)
            >>> x.sum().backward(); x.grad.tolist()
            [10.0, 10.0]
        """
        if not self.requires_grad:
            raise RuntimeError("register_hook(): cannot register a hook on a tensor that "
                               "doesn't require gradient")
        if self._node is not None:
            self._node.register_hook(self._out, fn)
            hooks = self._node._hooks[self._out]
        else:
            if self._hooks is None:
                self._hooks = []
            self._hooks.append(fn)
            hooks = self._hooks
        return _HookHandle(hooks, fn)

    def register_post_accumulate_grad_hook(self, fn: Callable) -> Callable:
        """For a leaf: call fn(tensor) as soon as its `.grad` is final during a backward (all
        paths into it processed). Distributed training uses this to overlap communication.

        Example:
            >>> import singa_tensor as st
            >>> w = st.ones(2, requires_grad=True)
            >>> seen = []
            >>> _ = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
            >>> (w * 3).sum().backward(); seen
            [[3.0, 3.0]]
        """
        if self._node is not None:
            raise RuntimeError("register_post_accumulate_grad_hook(): only leaf tensors "
                               "accumulate gradients")
        if not self.requires_grad:
            raise RuntimeError("register_post_accumulate_grad_hook(): the tensor doesn't "
                               "require grad")
        if self._post_hooks is None:
            self._post_hooks = []
        self._post_hooks.append(fn)
        return _HookHandle(self._post_hooks, fn)

    def retain_grad(self) -> None:
        """Keep `.grad` for a non-leaf tensor after backward."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad(): the tensor doesn't require grad")
        if self._node is None or self._retains:
            return
        self._retains = True
        import weakref

        ref = weakref.ref(self)

        def keep(g):
            t = ref()
            if t is not None:
                g2 = g.detach()
                t.grad = g2.clone() if t.grad is None else t.grad + g2
            return None

        self._node.register_hook(self._out, keep)

    # ---- devices and dtypes ------------------------------------------------------------------
    def to(self, *args, dtype=None, device=None, copy: bool = False,
           non_blocking: bool = False) -> Tensor:
        """Convert to another dtype and/or device; returns self when nothing changes.

        Example:
            >>> import singa_tensor as st
            >>> st.ones(2).to(st.float64).dtype
            singa_tensor.float64
        """
        for a in args:
            if isinstance(a, _dt.DType):
                dtype = a
            elif isinstance(a, Device):
                device = a
            elif isinstance(a, str):
                if a in _dt._NAMES:
                    dtype = _dt._NAMES[a]
                else:
                    device = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            else:
                raise TypeError(f"to(): unexpected argument {a!r}")
        from . import ops

        out = self
        if dtype is not None:
            dtype = _dt.as_dtype(dtype)
            if dtype is not out.dtype:
                out = ops.cast(out, dtype)
        if device is not None:
            device = _backend.as_device(device)
            if device != out.device:
                out = ops.to_device(out, device)
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        """A copy on a CUDA device (default cuda:0; an int picks the index); self if already
        there. Gradients flow back to this tensor's device."""
        if device is None:
            device = "cuda"
        elif isinstance(device, int) and not isinstance(device, bool):
            device = Device("cuda", device)
        return self.to(device=device)

    def float(self) -> Tensor:
        """The tensor as float32 (itself if it already is)."""
        return self.to(_dt.float32)

    def double(self) -> Tensor:
        """The tensor as float64 (itself if it already is)."""
        return self.to(_dt.float64)

    def half(self) -> Tensor:
        """The tensor as float16 (itself if it already is)."""
        return self.to(_dt.float16)

    def bfloat16(self) -> Tensor:
        """The tensor as bfloat16 (itself if it already is)."""
        return self.to(_dt.bfloat16)

    def int(self) -> Tensor:
        """The tensor as int32 (itself if it already is)."""
        return self.to(_dt.int32)

    def long(self) -> Tensor:
        """The tensor as int64 (itself if it already is)."""
        return self.to(_dt.int64)

    def bool(self) -> Tensor:
        """The tensor as bool (itself if it already is)."""
        return self.to(_dt.bool_)

    def type_as(self, other: Tensor) -> Tensor:
        """The tensor in other's dtype."""
        return self.to(other.dtype)

    def new_tensor(self, data, dtype=None) -> Tensor:
        from . import creation

        return creation.tensor(data, dtype=dtype or self.dtype, device=self.device)

    def new_zeros(self, *shape, dtype=None) -> Tensor:
        from . import creation

        return creation.zeros(*shape, dtype=dtype or self.dtype, device=self.device)

    def new_ones(self, *shape, dtype=None) -> Tensor:
        from . import creation

        return creation.ones(*shape, dtype=dtype or self.dtype, device=self.device)

    def new_full(self, shape, fill_value, dtype=None) -> Tensor:
        from . import creation

        return creation.full(shape, fill_value, dtype=dtype or self.dtype, device=self.device)

    def new_empty(self, *shape, dtype=None) -> Tensor:
        from . import creation

        return creation.empty(*shape, dtype=dtype or self.dtype, device=self.device)


class _HookHandle:
    def __init__(self, hooks: list, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)

    __call__ = remove


def _wrap_dim(dim, ndim: int, op: str) -> int:
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], "
            f"but got {dim})"
        )
    return int(dim) % n if ndim else 0
