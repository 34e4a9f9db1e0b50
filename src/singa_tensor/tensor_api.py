"""Tensor-level functions of PyTorch's namespace that scripts reach for: `inference_mode`,
`numel`, `is_floating_point`, `empty_strided`, `asarray`."""

from __future__ import annotations

import threading

import numpy as np

from . import autograd as _ag
from . import creation as _cr
from . import dtype as _dt
from .tensor import Tensor


class _InferenceFlag(threading.local):
    on = False  # per thread, as grad mode is


_inference = _InferenceFlag()


class inference_mode(_ag._GradMode):
    """Run without recording gradients, as a context manager or decorator (like `no_grad`;
    tensors made inside are ordinary tensors that do not require grad). `mode=False` leaves
    the grad mode as it is.

    Example:
        >>> import singa_tensor as st
        >>> w = st.ones(2, requires_grad=True)
        >>> with st.inference_mode():
        ...     y = w * 2
        >>> y.requires_grad
        False
        >>> @st.inference_mode()
        ... def f(x):
        ...     return x * 3
        >>> f(w).requires_grad
        False
    """

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: mode must be a bool, got {type(mode).__name__}")
        self.mode = mode

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"inference_mode: expected a function to decorate, got "
                            f"{type(fn).__name__}")
        return super().__call__(fn)

    def _fresh(self):
        return type(self)(self.mode)

    def __enter__(self):
        self.prev = _inference.on
        _inference.on = self.mode
        self._grad = _ag.set_grad_enabled(False if self.mode else _ag.is_grad_enabled())
        self._grad.__enter__()
        return self

    def __exit__(self, *exc):
        _inference.on = self.prev
        return self._grad.__exit__(*exc)


def is_inference_mode_enabled() -> bool:
    """True inside `inference_mode()`.

    Example:
        >>> import singa_tensor as st
        >>> with st.inference_mode():
        ...     st.is_inference_mode_enabled()
        True
    """
    return _inference.on


def _tensor(op: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def numel(input: Tensor) -> int:  # noqa: A002  (PyTorch's argument name)
    """The number of elements of input.

    Example:
        >>> import singa_tensor as st
        >>> st.numel(st.zeros(2, 3))
        6
    """
    return _tensor("numel", input).numel()


def is_floating_point(input: Tensor) -> bool:  # noqa: A002
    """True when input's dtype is a floating point type.

    Example:
        >>> import singa_tensor as st
        >>> st.is_floating_point(st.ones(1)), st.is_floating_point(st.arange(2))
        (True, False)
    """
    return _tensor("is_floating_point", input).dtype.is_floating_point


def empty_strided(size, stride, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor with the given shape and strides (in elements), on a storage
    just large enough for them.

    Example:
        >>> import singa_tensor as st
        >>> t = st.empty_strided((2, 3), (1, 2))
        >>> t.shape, t.stride(), t.is_contiguous()
        ((2, 3), (1, 2), False)
    """
    shape = _cr._shape_arg("empty_strided", tuple(size))
    strides = _cr._shape_arg("empty_strided", tuple(stride))
    if len(shape) != len(strides):
        raise ValueError(f"empty_strided: size {shape} and stride {strides} must have the same "
                         f"length")
    span = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    base = _cr.empty(span, dtype=dtype, device=device)
    t = base._view(shape, strides, 0)
    return _cr._finish(t, requires_grad, "empty_strided")


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None,
            requires_grad: bool = False) -> Tensor:
    """obj as a tensor, sharing memory when it can: a tensor of the wanted dtype and device is
    returned as is, a numpy array (or any DLPack producer) is wrapped; other data (lists,
    numbers) is copied. copy=True always copies; copy=False raises if a copy is needed.

    Example:
        >>> import numpy as np, singa_tensor as st
        >>> a = np.zeros(2, dtype=np.float32)
        >>> t = st.asarray(a); a[0] = 1
        >>> t.tolist()
        [1.0, 0.0]
    """
    d = _dt.as_dtype(dtype) if dtype is not None else None
    shared = None
    if isinstance(obj, Tensor):
        shared = obj
    elif isinstance(obj, np.ndarray):
        shared = _cr._wrap_host_array(obj, "asarray") if obj.dtype != object else None
    elif hasattr(obj, "__dlpack__"):
        shared = _cr.from_dlpack(obj)
    if shared is not None and copy is not True:
        out = shared
        if d is not None and out.dtype is not d:
            out = None if copy is False else out.to(d)
        if out is not None and device is not None and out.device != _cr._device(device):
            out = None if copy is False else out.to(device)
        if out is None:
            raise ValueError("asarray: copy=False, but the data must be copied to become a "
                             "tensor of that dtype or device")
        if isinstance(obj, np.ndarray) and copy is False and not np.shares_memory(
                obj, out.numpy()):
            raise ValueError("asarray: copy=False, but this numpy array must be copied")
        return _cr._finish(out, requires_grad, "asarray") if requires_grad else out
    if copy is False:
        raise ValueError(f"asarray: copy=False, but a {type(obj).__name__} must be copied to "
                         f"become a tensor")
    return _cr.tensor(obj, dtype=d, device=device, requires_grad=requires_grad)
