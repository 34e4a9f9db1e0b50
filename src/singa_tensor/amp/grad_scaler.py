"""`GradScaler`: dynamic loss scaling for float16 training (PyTorch's `torch.amp.GradScaler`).

Small float16 gradients underflow to zero. The scaler multiplies the loss by a large factor before
backward, divides the gradients by it before the optimizer steps, skips the step when a gradient
is inf or NaN (the scale was too large) and then shrinks the scale, and grows the scale again
after `growth_interval` clean steps. The inf/NaN check runs on the gradients' device: each
optimizer's check is one flag tensor, read once per step.
"""

from __future__ import annotations

import enum
import warnings
from typing import Any

from .. import dtype as _dt
from ..autograd import no_grad
from ..tensor import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _number(op: str, name: str, v, low: float, high: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}")
    v = float(v)
    if not (v > low) or (high is not None and not (v < high)) or v != v or v == float("inf"):
        bound = f"> {low}" if high is None else f"in ({low}, {high})"
        raise ValueError(f"{op}: {name} must be finite and {bound}, got {v}")
    return v


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN gradients, and adapt the
    scale (PyTorch's `torch.amp.GradScaler`; `st.cuda.amp.GradScaler` is the CUDA one).

    `device` is where the scale lives ("cuda" by default, as in PyTorch; pass "cpu" for CPU
    training; a "cuda" scaler without CUDA warns and is disabled, as PyTorch's is). The scale
    starts at `init_scale`, is multiplied by `backoff_factor` after a step with inf/NaN
    gradients (that step is skipped) and by `growth_factor` after `growth_interval` consecutive
    clean steps. With `enabled=False` every method is a pass-through.

    Example:
        >>> import singa_tensor as st
        >>> w = st.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = st.optim.SGD([w], lr=0.1)
        >>> scaler = st.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
        >>> scaler.scale((w * w).sum()).backward()
        >>> w.grad.tolist()               # scaled gradients
        [2048.0, 4096.0]
        >>> scaler.step(opt); scaler.update()
        >>> w.tolist(), scaler.get_scale()
        ([0.800000011920929, 1.600000023841858], 2048.0)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        op = "GradScaler"
        if not isinstance(device, str):
            raise TypeError(f"{op}: device must be a string ('cpu', 'cuda'), got "
                            f"{type(device).__name__}")
        if not isinstance(enabled, bool):
            raise TypeError(f"{op}: enabled must be a bool, got {type(enabled).__name__}")
        self._device = device
        if enabled and device.split(":")[0] == "cuda":
            from .. import cuda

            if not cuda.is_available():  # PyTorch's rule: a CUDA scaler without CUDA is off
                warnings.warn("GradScaler: device 'cuda' was asked for, but CUDA is not "
                              "available; the scaler is disabled", UserWarning, stacklevel=2)
                enabled = False
        self._enabled = enabled
        self._init_scale = _number(op, "init_scale", init_scale, 0.0)
        self._growth_factor = _number(op, "growth_factor", growth_factor, 1.0)
        self._backoff_factor = _number(op, "backoff_factor", backoff_factor, 0.0, 1.0)
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) \
                or growth_interval <= 0:
            raise ValueError(f"{op}: growth_interval must be a positive int, got "
                             f"{growth_interval!r}")
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._scale: Tensor | None = None
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    # ---- scaling ---------------------------------------------------------------------------------
    def _lazy_init(self, like: Tensor) -> None:
        from ..creation import full

        self._scale = full((), self._init_scale, dtype=_dt.float32, device=like.device)
        self._growth_tracker = self._init_growth_tracker

    def scale(self, outputs):
        """outputs (a tensor, or a list/tuple of them, nested) multiplied by the scale.

        Example:
            >>> import singa_tensor as st
            >>> st.amp.GradScaler("cpu", init_scale=8.0).scale(st.tensor(0.5)).item()
            4.0
        """
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init(outputs)
            return outputs * self._scale.to(outputs.device)
        if isinstance(outputs, (list, tuple)):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled)
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or a list/tuple of "
                        f"Tensors, got {type(outputs).__name__}")

    def _state(self, optimizer) -> dict:
        key = id(optimizer)
        st = self._per_optimizer.get(key)
        if st is None:
            st = {"stage": OptState.READY, "found_inf": None, "optimizer": optimizer}
            self._per_optimizer[key] = st
        return st

    def _check_started(self, op: str) -> None:
        if self._scale is None:
            raise RuntimeError(f"GradScaler.{op}: no scale yet; call scale(loss) and backward "
                               f"before {op}()")

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale in place (call it before clipping
        gradients) and record whether any is inf or NaN. At most once per optimizer between
        `update()` calls.

        Example:
            >>> import singa_tensor as st
            >>> w = st.ones(2, requires_grad=True); opt = st.optim.SGD([w], lr=1.0)
            >>> scaler = st.amp.GradScaler("cpu", init_scale=4.0)
            >>> scaler.scale(w.sum()).backward(); scaler.unscale_(opt); w.grad.tolist()
            [1.0, 1.0]
        """
        if not self._enabled:
            return
        self._check_started("unscale_")
        st = self._state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("GradScaler.unscale_: already called on this optimizer since "
                               "the last update()")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("GradScaler.unscale_: called after step() (call it before the "
                               "step, and update() after)")
        st["found_inf"] = self._unscale_grads(optimizer)
        st["stage"] = OptState.UNSCALED

    def _unscale_grads(self, optimizer) -> Tensor:
        from ..creation import zeros

        prepare = getattr(optimizer, "_prepare_grads", None)
        if prepare is not None:  # master weights: their float32 gradients are unscaled
            prepare()
        inv = (1.0 / self._scale.double()).float()
        found = zeros((), dtype=_dt.float32, device=self._scale.device)
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is _dt.float16:
                        raise ValueError("GradScaler.unscale_: attempting to unscale float16 "
                                         "gradients (keep float32 parameters under autocast, or "
                                         "give the optimizer master_weights=True)")
                    # inf * 0 and NaN * 0 are NaN, every finite value * 0 is 0: one flag per
                    # gradient, summed on the device without a read to the host
                    found = found + (g * 0).sum().float().to(found.device)
                    g.mul_(inv if inv.device == g.device else inv.to(g.device))
        return found.isnan().float()

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless `unscale_` ran) and step the optimizer unless a gradient is inf or
        NaN; returns what optimizer.step returned (None when skipped). Under data parallelism
        the decision is the same on every rank: DistOpt reduces the flag over its group, and
        DDP's gradients are equal on every rank already."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: a closure is not supported while the scaler "
                               "is enabled")
        self._check_started("step")
        st = self._state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("GradScaler.step: step() has already been called since the last "
                               "update()")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        found = st["found_inf"]
        reduce = getattr(optimizer, "_reduce_found_inf", None)
        if reduce is not None:
            found = reduce(found)
            st["found_inf"] = found
        retval = None
        if not found.item():
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Adjust the scale from the steps since the last update (or set it to new_scale, a
        float or a one-element tensor)."""
        if not self._enabled:
            return
        self._check_started("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise ValueError("GradScaler.update: new_scale must hold one element")
                value = float(new_scale.item())
            else:
                value = _number("GradScaler.update", "new_scale", new_scale, 0.0)
            self._scale.fill_(value)
        else:
            flags = [s["found_inf"] for s in self._per_optimizer.values()
                     if s["found_inf"] is not None]
            if not flags:
                raise RuntimeError("GradScaler.update: no inf checks were recorded before "
                                   "update() (call step(optimizer) first)")
            found = any(bool(f.item()) for f in flags)
            if found:
                self._scale.fill_(float(self._scale.item()) * self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = float(self._scale.item()) * self._growth_factor
                    if grown < float("inf"):  # a scale that would overflow stays where it is
                        self._scale.fill_(grown)
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # ---- settings and checkpoints ----------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled; init_scale before the first scale())."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = _number("GradScaler", "growth_factor", new_factor, 1.0)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = _number("GradScaler", "backoff_factor", new_factor, 0.0, 1.0)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        if isinstance(new_interval, bool) or not isinstance(new_interval, int) \
                or new_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                             f"{new_interval!r}")
        self._growth_interval = new_interval

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker (an empty
        dict when disabled), as PyTorch saves them.

        Example:
            >>> import singa_tensor as st
            >>> sorted(st.amp.GradScaler("cpu").state_dict())
            ['_growth_tracker', 'backoff_factor', 'growth_factor', 'growth_interval', 'scale']
        """
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": (self._growth_tracker if self._scale is not None
                                    else self._init_growth_tracker)}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not isinstance(state_dict, dict):
            raise TypeError(f"GradScaler.load_state_dict: expected a dict, got "
                            f"{type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty, possibly "
                               "saved from a disabled GradScaler")
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "_growth_tracker"} - set(state_dict)
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing {sorted(missing)}")
        self._init_scale = _number("GradScaler", "scale", float(state_dict["scale"]), 0.0)
        self.set_growth_factor(state_dict["growth_factor"])
        self.set_backoff_factor(state_dict["backoff_factor"])
        self.set_growth_interval(int(state_dict["growth_interval"]))
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
            self._growth_tracker = self._init_growth_tracker

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_per_optimizer"] = {}
        return state

    def __repr__(self) -> str:
        return (f"GradScaler(device='{self._device}', scale={self.get_scale()}, "
                f"enabled={self._enabled})")
