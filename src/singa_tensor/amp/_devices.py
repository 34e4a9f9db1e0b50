"""The per-device spellings of amp that PyTorch scripts use: `torch.cpu.amp.autocast`,
`torch.cuda.amp.autocast` and `torch.cuda.amp.GradScaler` (`st.cpu.amp`, `st.cuda.amp`), each
`st.amp`'s class with the device fixed."""

from __future__ import annotations

import types

from .. import dtype as _dt
from .autocast_mode import autocast as _autocast
from .autocast_mode import custom_bwd as _custom_bwd
from .autocast_mode import custom_fwd as _custom_fwd
from .grad_scaler import GradScaler as _GradScaler


def _namespace(device_type: str, default_dtype) -> types.ModuleType:
    mod = types.ModuleType(f"singa_tensor.{device_type}.amp",
                           f"`st.amp` for {device_type} (PyTorch's torch.{device_type}.amp).")

    class autocast(_autocast):
        __doc__ = (f"`st.autocast('{device_type}', ...)`, {default_dtype.name} by default.\n\n"
                   f"    Example:\n"
                   f"        >>> import singa_tensor as st\n"
                   f"        >>> with st.{device_type}.amp.autocast():\n"
                   f"        ...     st.is_autocast_enabled('{device_type}')\n"
                   f"        True\n")

        def __init__(self, enabled: bool = True, dtype=default_dtype,
                     cache_enabled: bool = True) -> None:
            super().__init__(device_type, dtype=dtype, enabled=enabled,
                             cache_enabled=cache_enabled)

    autocast.__module__ = mod.__name__
    autocast.__qualname__ = "autocast"
    mod.autocast = autocast

    def custom_fwd(fwd=None, *, cast_inputs=None):
        """`st.amp.custom_fwd` for this device type."""
        return _custom_fwd(fwd, device_type=device_type, cast_inputs=cast_inputs)

    def custom_bwd(bwd=None):
        """`st.amp.custom_bwd` for this device type."""
        return _custom_bwd(bwd, device_type=device_type)

    mod.custom_fwd, mod.custom_bwd = custom_fwd, custom_bwd
    names = ["autocast", "custom_fwd", "custom_bwd"]
    if device_type == "cuda":
        class GradScaler(_GradScaler):
            """`st.amp.GradScaler('cuda', ...)`."""

            def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                         backoff_factor: float = 0.5, growth_interval: int = 2000,
                         enabled: bool = True) -> None:
                super().__init__("cuda", init_scale, growth_factor, backoff_factor,
                                 growth_interval, enabled)

        GradScaler.__module__ = mod.__name__
        mod.GradScaler = GradScaler
        names.append("GradScaler")
    mod.__all__ = names
    return mod


cpu_amp = _namespace("cpu", _dt.bfloat16)
cuda_amp = _namespace("cuda", _dt.float16)
