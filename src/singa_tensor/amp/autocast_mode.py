"""`autocast`: regions where matrix products and convolutions run in bfloat16 or float16 while
losses and other precision-sensitive ops run in float32 (PyTorch's `torch.autocast`).

The region's state is per thread (and asyncio task). Every op dispatched through the op registry
(`ops/_registry.py` `apply`) hands its arguments to the state's `cast_args`, which applies the
rule of `_policy.py` for the op and the inputs' device type; everything else runs unchanged and
follows the dtype rules of its inputs. Casts of parameters (leaf tensors that require grad) are
cached for the rest of the outermost region, keyed by the parameter and its version, so a weight
used at every step of an unrolled loop is converted once. Backward passes run without casts: each
gradient op takes the dtypes its forward op chose.
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from typing import Callable

from .. import _execution
from .. import dtype as _dt
from ..tensor import Tensor
from . import _policy

__all__ = [
    "autocast", "is_autocast_available", "custom_fwd", "custom_bwd", "is_autocast_enabled",
    "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype", "clear_autocast_cache",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "get_autocast_cpu_dtype",
    "get_autocast_gpu_dtype", "is_autocast_cpu_enabled", "set_autocast_cpu_enabled",
    "set_autocast_cpu_dtype", "set_autocast_gpu_dtype", "autocast_increment_nesting",
    "autocast_decrement_nesting",
]

DEVICE_TYPES = ("cpu", "cuda")
_LOW = (_dt.bfloat16, _dt.float16)
# each device type's low dtype when a region names none (PyTorch's defaults)
_default_dtype = {"cpu": _dt.bfloat16, "cuda": _dt.float16}
_cache_enabled = [True]


def is_autocast_available(device_type: str) -> bool:
    """Whether `autocast` supports device_type ("cpu" and "cuda").

    Example:
        >>> import singa_tensor as st
        >>> st.amp.is_autocast_available("cpu"), st.amp.is_autocast_available("mps")
        (True, False)
    """
    return device_type in DEVICE_TYPES


def _cuda_available() -> bool:
    from .. import cuda

    return cuda.is_available()


def _check_device_type(op: str, device_type) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"{op}: device_type must be a string such as 'cpu' or 'cuda', got "
                        f"{type(device_type).__name__}")
    kind = device_type.split(":")[0]
    if kind not in DEVICE_TYPES:
        raise RuntimeError(f"{op}: unsupported autocast device_type '{device_type}' (supported: "
                           f"{', '.join(DEVICE_TYPES)})")
    return kind


class _State:
    """One thread's autocast settings: per device type, enabled and the low dtype; the cast
    cache, shared by nested regions and emptied when the outermost one exits."""

    __slots__ = ("enabled", "dtype", "cache", "cache_on", "depth")

    def __init__(self, enabled: dict, dtype: dict, cache: dict, cache_on: bool, depth: int):
        self.enabled = enabled
        self.dtype = dtype
        self.cache = cache
        self.cache_on = cache_on
        self.depth = depth

    def derive(self, device_type: str, enabled: bool, dtype, cache_on: bool) -> _State:
        en = dict(self.enabled)
        en[device_type] = enabled
        dt = dict(self.dtype)
        dt[device_type] = dtype
        return _State(en, dt, self.cache, cache_on, self.depth + 1)

    # ---- what ops/_registry.py `apply` calls ----------------------------------------------------
    def cast_args(self, spec, args: tuple) -> tuple:
        return self.cast_entry(spec, args)[0]

    def cast_entry(self, spec, args: tuple) -> tuple:
        """(args as this region casts them for spec, whether a rule of the lists applied): a
        composite that a rule covers runs its body without autocast, as PyTorch's autocast
        redispatches a listed op with itself excluded (the casts happen once, at the entry)."""
        device_type = None
        for a in args:
            if isinstance(a, Tensor):
                device_type = a._device.type
                break
        if device_type is None or not self.enabled.get(device_type):
            return args, False
        rule = _policy.policy(device_type, spec.name)
        if rule is None:
            return args, False
        return self._cast_rule(rule, device_type, args), True

    def _cast_rule(self, rule: str, device_type: str, args: tuple) -> tuple:
        if rule == _policy.LOWER:
            return self._cast_all(args, self.dtype[device_type], (_dt.float32,) + _LOW)
        if rule == _policy.FLOAT32:
            return self._cast_all(args, _dt.float32, _LOW)
        wide = _widest(args)
        return args if wide is None else self._cast_all(args, wide, _FLOATS)

    def _cast_all(self, args: tuple, dtype, eligible: tuple) -> tuple:
        out = list(args)
        changed = False
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                if a.dtype is not dtype and a.dtype in eligible:
                    out[i] = self.cast(a, dtype)
                    changed = True
            elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
                seq = [self.cast(t, dtype) if isinstance(t, Tensor) and t.dtype is not dtype
                       and t.dtype in eligible else t for t in a]
                out[i] = type(a)(seq)
                changed = True
        return tuple(out) if changed else args

    def cast(self, t: Tensor, dtype) -> Tensor:
        from ..ops.layout import cast

        # parameters are cast once per region; graph recording (an execution context) sees
        # every cast it replays, so nothing is cached while one runs
        if not (self.cache_on and t.requires_grad and t._node is None
                and _execution.current() is None):
            return cast(t, dtype)
        key = (id(t), dtype.name)
        hit = self.cache.get(key)
        version = t._storage.version
        if hit is not None and hit[0]() is t and hit[1] == version:
            return hit[2]
        y = cast(t, dtype)
        self.cache[key] = (weakref.ref(t), version, y)
        return y


_FLOATS = (_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64)


def _widest(args: tuple):
    best = None
    for a in args:
        seq = a if isinstance(a, (list, tuple)) else (a,)
        for t in seq:
            if isinstance(t, Tensor) and t.dtype.is_floating_point:
                best = t.dtype if best is None else _dt.promote(best, t.dtype)
    return best


_OFF = _State({}, {}, {}, True, 0)


def _current() -> _State:
    s = _execution.autocast_state()
    return s if s is not None else _OFF


class autocast:
    """A region (context manager or decorator) where ops run in a lower precision: matrix
    products, linear layers, convolutions, recurrent cells and attention in `dtype` (bfloat16 by
    default on "cpu", float16 on "cuda"), losses in float32, other ops in the dtypes of their
    inputs (PyTorch's `torch.autocast`). Regions nest; `enabled=False` turns autocast off
    inside an enclosing region. Call `backward()` outside the region (inside is allowed: the
    backward runs in the dtypes the forward chose either way).

    `cache_enabled` (default True) caches each parameter's cast for the region, so a weight
    used many times is converted once; it is dropped when the outermost region exits.

    Example:
        >>> import singa_tensor as st
        >>> x, w = st.randn(4, 8), st.randn(3, 8, requires_grad=True)
        >>> with st.autocast("cpu", dtype=st.bfloat16):
        ...     y = st.nn.functional.linear(x, w)
        ...     loss = st.nn.functional.mse_loss(y, st.zeros(4, 3, dtype=st.bfloat16))
        >>> y.dtype, loss.dtype
        (singa_tensor.bfloat16, singa_tensor.float32)
        >>> loss.backward(); w.grad.dtype
        singa_tensor.float32
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        kind = _check_device_type("autocast", device_type)
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, got {type(enabled).__name__}")
        if cache_enabled is not None and not isinstance(cache_enabled, bool):
            raise TypeError(f"autocast: cache_enabled must be a bool or None, got "
                            f"{type(cache_enabled).__name__}")
        self.device = kind
        self.fast_dtype = _default_dtype[kind] if dtype is None else _dt.as_dtype(dtype)
        self._enabled = enabled
        if enabled and kind == "cuda" and not _cuda_available():
            warnings.warn("autocast: device_type 'cuda' was asked for, but CUDA is not "
                          "available; autocast is disabled", UserWarning, stacklevel=2)
            self._enabled = False
        if self._enabled and self.fast_dtype not in _LOW:
            warnings.warn(f"autocast on {kind}: the target dtype {self.fast_dtype.name} is not "
                          f"supported (use bfloat16 or float16); autocast is disabled",
                          UserWarning, stacklevel=2)
            self._enabled = False
        self._cache_enabled = _cache_enabled[0] if cache_enabled is None else cache_enabled
        self._tokens: list = []

    def __enter__(self) -> autocast:
        prev = _current()
        state = prev.derive(self.device, self._enabled, self.fast_dtype, self._cache_enabled)
        if prev.depth == 0:
            state.cache = {}
        self._tokens.append(_execution.set_autocast(state))
        return self

    def __exit__(self, *exc) -> None:
        state = _execution.autocast_state()
        _execution.reset_autocast(self._tokens.pop())
        if state is not None and state.depth == 1:
            state.cache.clear()

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def run(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)

        return run

    def __repr__(self) -> str:
        return (f"autocast(device_type='{self.device}', dtype={self.fast_dtype}, "
                f"enabled={self._enabled})")


# ---- the state as functions (PyTorch's torch.* names) --------------------------------------------


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether ops on device_type are autocast here (PyTorch: CUDA when not named).

    Example:
        >>> import singa_tensor as st
        >>> with st.autocast("cpu"):
        ...     st.is_autocast_enabled("cpu"), st.is_autocast_enabled("cuda")
        (True, False)
    """
    kind = _check_device_type("is_autocast_enabled", device_type)
    return bool(_current().enabled.get(kind, False))


def is_autocast_cpu_enabled() -> bool:
    """`is_autocast_enabled("cpu")`."""
    return is_autocast_enabled("cpu")


def get_autocast_dtype(device_type: str):
    """The low dtype autocast uses on device_type (in the current region, or the default).

    Example:
        >>> import singa_tensor as st
        >>> st.get_autocast_dtype("cpu"), st.get_autocast_dtype("cuda")
        (singa_tensor.bfloat16, singa_tensor.float16)
    """
    kind = _check_device_type("get_autocast_dtype", device_type)
    return _current().dtype.get(kind, _default_dtype[kind])


def get_autocast_cpu_dtype():
    """`get_autocast_dtype("cpu")`."""
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    """`get_autocast_dtype("cuda")`."""
    return get_autocast_dtype("cuda")


def set_autocast_enabled(device_type, enabled=None) -> None:
    """Turn autocast on device_type on or off for the rest of this thread's current region (or
    for the thread). `set_autocast_enabled(bool)` alone means CUDA (PyTorch's old form).

    Example:
        >>> import singa_tensor as st
        >>> with st.autocast("cpu"):
        ...     st.set_autocast_enabled("cpu", False)
        ...     st.is_autocast_enabled("cpu")
        False
    """
    if enabled is None and isinstance(device_type, bool):
        device_type, enabled = "cuda", device_type
    kind = _check_device_type("set_autocast_enabled", device_type)
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_enabled: enabled must be a bool, got "
                        f"{type(enabled).__name__}")
    _replace_state(kind, enabled=enabled)


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the low dtype of autocast on device_type for the current region (or the default
    of later regions that name none, outside any region)."""
    kind = _check_device_type("set_autocast_dtype", device_type)
    d = _dt.as_dtype(dtype)
    if d not in _LOW:
        raise ValueError(f"set_autocast_dtype: autocast runs in bfloat16 or float16, not "
                         f"{d.name}")
    if _execution.autocast_state() is None:
        _default_dtype[kind] = d
    else:
        _replace_state(kind, dtype=d)


def _replace_state(kind: str, enabled=None, dtype=None) -> None:
    s = _execution.autocast_state()
    if s is None:  # outside any region: a state for the thread from now on
        s = _OFF.derive(kind, False, _default_dtype[kind], _cache_enabled[0])
        s.cache = {}
        _execution.set_autocast(s)
    if enabled is not None:
        s.enabled[kind] = enabled
        s.dtype.setdefault(kind, _default_dtype[kind])
    if dtype is not None:
        s.dtype[kind] = dtype


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """`set_autocast_enabled("cpu", enabled)`."""
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype) -> None:
    """`set_autocast_dtype("cpu", dtype)`."""
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype) -> None:
    """`set_autocast_dtype("cuda", dtype)`."""
    set_autocast_dtype("cuda", dtype)


_nesting = threading.local()


def autocast_increment_nesting() -> int:
    """Count one more region entered by hand (for code that sets the state with
    `set_autocast_enabled` instead of `autocast`); returns the new depth."""
    _nesting.depth = getattr(_nesting, "depth", 0) + 1
    return _nesting.depth


def autocast_decrement_nesting() -> int:
    """Count one region left by hand; at depth 0 the cast cache is dropped. Returns the new
    depth."""
    depth = max(getattr(_nesting, "depth", 0) - 1, 0)
    _nesting.depth = depth
    if depth == 0:
        clear_autocast_cache()
    return depth


def clear_autocast_cache() -> None:
    """Drop the casts of parameters cached by the current region."""
    s = _execution.autocast_state()
    if s is not None:
        s.cache.clear()


def is_autocast_cache_enabled() -> bool:
    """Whether regions cache the casts of parameters (default True)."""
    s = _execution.autocast_state()
    return s.cache_on if s is not None else _cache_enabled[0]


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Whether regions opened from now on cache the casts of parameters."""
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_cache_enabled: expected a bool, got "
                        f"{type(enabled).__name__}")
    _cache_enabled[0] = enabled
    s = _execution.autocast_state()
    if s is not None:
        s.cache_on = enabled


# ---- functions that run in float32 under autocast (the losses) -----------------------------------


def float32_function(fn: Callable) -> Callable:
    """Wrap fn so that under autocast its float16/bfloat16 tensor arguments are cast to float32
    and it runs without autocast (PyTorch's float32 list: the losses). Outside a region the
    wrapper calls fn directly."""

    if getattr(fn, "_autocast_float32", False):
        return fn

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not _execution.autocast_count:
            return fn(*args, **kwargs)
        s = _execution.autocast_state()
        if s is None:
            return fn(*args, **kwargs)
        device_type = _first_device_type(args, kwargs)
        if device_type is None or not s.enabled.get(device_type):
            return fn(*args, **kwargs)
        args = tuple(_to(a, _dt.float32, _LOW) for a in args)
        kwargs = {k: _to(v, _dt.float32, _LOW) for k, v in kwargs.items()}
        with _execution.autocast_suspended():
            return fn(*args, **kwargs)

    run._autocast_float32 = True
    return run


def wrap_float32_functions(namespace: dict) -> None:
    """Replace the functions of namespace (a module's globals) that PyTorch's autocast runs in
    float32 (the losses of `_policy.LOSSES`) by their `float32_function` wrappers."""
    for name in _policy.LOSSES:
        fn = namespace.get(name)
        if callable(fn):
            namespace[name] = float32_function(fn)


def _first_device_type(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            return a._device.type
    return None


def _to(a, dtype, eligible):
    if isinstance(a, Tensor) and a.dtype is not dtype and a.dtype in eligible:
        from ..ops.layout import cast

        return cast(a, dtype)
    return a


# ---- custom autograd Functions -------------------------------------------------------------------


def custom_fwd(fwd: Callable | None = None, *, device_type: str, cast_inputs=None):
    """Decorator for the `forward` of an `autograd.Function` under autocast (PyTorch's
    `torch.amp.custom_fwd`). Without `cast_inputs`, forward runs in the caller's autocast
    state, and `custom_bwd` runs backward in the same state. With `cast_inputs` (a dtype),
    inside an enabled region the floating tensor arguments are cast to it and forward runs with
    autocast off.

    Example:
        >>> import singa_tensor as st
        >>> class Square(st.autograd.Function):
        ...     @staticmethod
        ...     @st.amp.custom_fwd(device_type="cpu", cast_inputs=st.float32)
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     @st.amp.custom_bwd(device_type="cpu")
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> with st.autocast("cpu"):
        ...     y = Square.apply(st.ones(2, dtype=st.bfloat16, requires_grad=True))
        >>> y.dtype
        singa_tensor.float32
    """
    kind = _check_device_type("custom_fwd", device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    target = None if cast_inputs is None else _dt.as_dtype(cast_inputs)

    @functools.wraps(fwd)
    def forward(ctx, *args, **kwargs):
        ctx._fwd_used_autocast = is_autocast_enabled(kind)
        ctx._fwd_autocast_dtype = get_autocast_dtype(kind)
        if target is None or not ctx._fwd_used_autocast:
            return fwd(ctx, *args, **kwargs)
        elig = tuple(d for d in _FLOATS if d is not target)
        args = tuple(_to(a, target, elig) for a in args)
        kwargs = {k: _to(v, target, elig) for k, v in kwargs.items()}
        with autocast(kind, enabled=False):
            return fwd(ctx, *args, **kwargs)

    return forward


def custom_bwd(bwd: Callable | None = None, *, device_type: str):
    """Decorator for the `backward` of an `autograd.Function` whose forward has `custom_fwd`:
    backward runs in the autocast state forward ran in (see `custom_fwd`)."""
    kind = _check_device_type("custom_bwd", device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(ctx, *grads):
        used = getattr(ctx, "_fwd_used_autocast", False)
        dtype = getattr(ctx, "_fwd_autocast_dtype", _default_dtype[kind])
        with autocast(kind, dtype=dtype, enabled=used):
            return bwd(ctx, *grads)

    return backward

