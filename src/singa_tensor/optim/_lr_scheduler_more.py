"""More learning-rate schedules: MultiplicativeLR, ConstantLR, PolynomialLR, CyclicLR,
CosineAnnealingWarmRestarts, and the combinators SequentialLR and ChainedScheduler.

They are exported by `singa_tensor.optim.lr_scheduler`, like the schedules defined there, and
follow the same conventions: construction is epoch 0, `get_last_lr()` gives the lrs the last
step set, and `state_dict()` holds everything but the optimizer (and any function).
"""

from __future__ import annotations

import math
import warnings
from bisect import bisect_right
from collections.abc import Callable, Sequence

from .lr_scheduler import LRScheduler, ReduceLROnPlateau, _check_optimizer
from .optimizer import Optimizer


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class MultiplicativeLR(LRScheduler):
    """Multiply the lr by lr_lambda(epoch) at every epoch after the first (one function, or
    one per group): lr_e = lr_{e-1} * lr_lambda(e).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = optim.lr_scheduler.MultiplicativeLR(opt, lambda e: 0.5)
        >>> for _ in range(3):
        ...     opt.step(); sched.step()
        >>> sched.get_last_lr()
        [0.125]
    """

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"MultiplicativeLR: expected {n} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            if not callable(lr_lambda):
                raise TypeError(f"MultiplicativeLR: lr_lambda must be a function or a list of "
                                f"functions, got {type(lr_lambda).__name__}")
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch > 0:
            return [g["lr"] * f(self.last_epoch) for g, f in zip(groups, self.lr_lambdas)]
        return [g["lr"] for g in groups]

    def state_dict(self) -> dict:
        """Functions are not state: they are left out and kept from the live scheduler."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})


class ConstantLR(LRScheduler):
    """Scale the lr by factor until epoch total_iters, then use the base lr.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for _ in range(3):
        ...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if not _is_number(factor) or not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: constant multiplicative factor expected to be "
                             f"between 0 and 1, got {factor}")
        if isinstance(total_iters, bool) or not isinstance(total_iters, int) or total_iters < 0:
            raise ValueError(f"ConstantLR: total_iters must be a non-negative integer, got "
                             f"{total_iters}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            # total_iters=0: the factor never applies
            return [g["lr"] * (self.factor if self.total_iters > 0 else 1.0) for g in groups]
        if self.last_epoch != self.total_iters:
            return [g["lr"] for g in groups]
        return [g["lr"] / self.factor for g in groups]

    def _closed_form(self) -> list[float]:
        scale = 1.0 if self.last_epoch >= self.total_iters else self.factor
        return [b * scale for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the lr polynomially to zero over total_iters epochs:
    lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=2.0)
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for _ in range(5):
        ...     opt.step(); sched.step(); lrs.append(round(sched.get_last_lr()[0], 6))
        >>> lrs
        [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        if isinstance(total_iters, bool) or not isinstance(total_iters, int) or total_iters <= 0:
            raise ValueError(f"PolynomialLR: total_iters must be a positive integer, got "
                             f"{total_iters}")
        if not _is_number(power):
            raise TypeError(f"PolynomialLR: power must be a number, got "
                            f"{type(power).__name__}")
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        e, n = self.last_epoch, self.total_iters
        if e == 0 or e > n:
            return [g["lr"] for g in groups]
        factor = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [g["lr"] * factor for g in groups]

    def _closed_form(self) -> list[float]:
        e, n = self.last_epoch, self.total_iters
        return [b * (1.0 - min(n, e) / n) ** self.power for b in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with warm restarts (SGDR, Loshchilov & Hutter): within a cycle of
    T_i epochs, lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2; the
    first cycle has T_0 epochs, each next one T_mult times as many. `step(epoch)` accepts a
    fractional epoch (e.g. epoch + batch / batches_per_epoch).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for _ in range(3):
        ...     opt.step(); sched.step(); lrs.append(round(sched.get_last_lr()[0], 6))
        >>> lrs
        [1.0, 0.5, 1.0, 0.5]
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1,  # noqa: N803
                 eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if isinstance(T_0, bool) or not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected positive integer T_0, but "
                             f"got {T_0}")
        if isinstance(T_mult, bool) or not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected integer T_mult >= 1, but "
                             f"got {T_mult}")
        if not _is_number(eta_min):
            raise TypeError(f"CosineAnnealingWarmRestarts: expected float or int eta_min, but "
                            f"got {type(eta_min).__name__}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lo = self.eta_min
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [lo + (b - lo) * c for b in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to `epoch` (which may be fractional)."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: expected non-negative epoch, "
                                 f"but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    # the cycle holding epoch: T_0 * (T_mult**n - 1) / (T_mult - 1) <= epoch
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


def _per_group_values(cls: str, name: str, optimizer: Optimizer, value) -> list:
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{cls}: expected {n} values for {name}, got {len(value)}")
        return list(value)
    return [value] * n


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith, 2017), stepped once per batch: the lr moves
    linearly from base_lr up to max_lr over step_size_up steps and back down over
    step_size_down (default step_size_up), the amplitude scaled by

    - "triangular": 1 (constant amplitude);
    - "triangular2": 1 / 2**(cycle - 1) (halved every cycle);
    - "exp_range": gamma**iteration;
    - or a custom scale_fn, of the cycle number or of the iteration (scale_mode).

    With cycle_momentum, momentum (SGD) or beta1 (Adam) moves the other way, from
    max_momentum down to base_momentum while the lr rises.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
        >>> sched = optim.lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2)
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for _ in range(4):
        ...     opt.step(); sched.step(); lrs.append(round(sched.get_last_lr()[0], 6))
        >>> lrs, round(opt.param_groups[0]["momentum"], 6)
        ([0.1, 0.3, 0.5, 0.3, 0.1], 0.9)
    """

    _MODES = ("triangular", "triangular2", "exp_range")

    def __init__(self, optimizer: Optimizer, base_lr: float | Sequence[float],
                 max_lr: float | Sequence[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.8,
                 max_momentum: float | Sequence[float] = 0.9, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        base_lrs = _per_group_values("CyclicLR", "base_lr", optimizer, base_lr)
        self.max_lrs = _per_group_values("CyclicLR", "max_lr", optimizer, max_lr)
        for what, v in (("step_size_up", step_size_up), ("step_size_down", step_size_down)):
            if v is not None and (not _is_number(v) or v <= 0):
                raise ValueError(f"CyclicLR: {what} must be a positive number, got {v}")
        if scale_fn is None and mode not in self._MODES:
            raise ValueError(f"CyclicLR: mode is invalid and scale_fn is None: mode must be "
                             f"one of {', '.join(map(repr, self._MODES))}, got {mode!r}")
        if scale_fn is not None and scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got "
                             f"{scale_mode!r}")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        if scale_fn is None:
            self.scale_mode = "iterations" if mode == "exp_range" else "cycle"
        else:
            self.scale_mode = scale_mode
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            defaults = optimizer.defaults
            if "momentum" not in defaults and "betas" not in defaults:
                raise ValueError("CyclicLR: optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in defaults
            base_ms = _per_group_values("CyclicLR", "base_momentum", optimizer, base_momentum)
            max_ms = _per_group_values("CyclicLR", "max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(max_ms, base_ms, optimizer.param_groups):
                    self._set_momentum(group, m_max)
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
            self.base_momentums = [g["base_momentum"] for g in optimizer.param_groups]
            self.max_momentums = [g["max_momentum"] for g in optimizer.param_groups]
        self._cycle_base_lrs = base_lrs
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group: dict, value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def scale_fn(self, x: float) -> float:
        """The amplitude scale at x (the cycle number or the iteration, per scale_mode)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        e = self.last_epoch
        cycle = math.floor(1 + e / self.total_size)
        x = 1.0 + e / self.total_size - cycle  # the position within the cycle, in [0, 1)
        if x <= self.step_ratio:
            rise = x / self.step_ratio
        else:
            rise = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else e)
        lrs = [b + (m - b) * rise * scale for b, m in zip(self._cycle_base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, b, m in zip(self.optimizer.param_groups, self.base_momentums,
                                   self.max_momentums):
                self._set_momentum(group, m - (m - b) * rise * scale)
        return lrs

    def state_dict(self) -> dict:
        """A custom scale_fn is a function, not state: it is left out and kept from the live
        scheduler."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ("optimizer", "_scale_fn_custom")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_scale_fn_custom"})


def _check_schedulers(cls: str, schedulers, optimizer) -> list:
    schedulers = list(schedulers)
    if not schedulers:
        raise ValueError(f"{cls} expects at least one scheduler")
    for i, s in enumerate(schedulers):
        if not isinstance(s, LRScheduler):
            raise TypeError(f"{cls} expects a list of schedulers, but the one at index {i} is "
                            f"{type(s).__name__}")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{cls} does not support ReduceLROnPlateau (at index {i}): it "
                             "steps on a metric, not on a schedule")
        if s.optimizer is not optimizer:
            raise ValueError(f"{cls} expects all schedulers to belong to the same optimizer, "
                             f"but the scheduler at index {i} belongs to a different one")
    return schedulers


class SequentialLR(LRScheduler):
    """Run schedulers one after another: schedulers[i] takes over at epoch milestones[i - 1]
    (starting from its own epoch 0).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> from singa_tensor.optim import lr_scheduler as sched
        >>> opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=1.0)
        >>> warmup = sched.LinearLR(opt, start_factor=0.25, total_iters=2)
        >>> decay = sched.ExponentialLR(opt, gamma=0.5)
        >>> s = sched.SequentialLR(opt, [warmup, decay], milestones=[2])
        >>> lrs = [s.get_last_lr()[0]]
        >>> for _ in range(4):
        ...     opt.step(); s.step(); lrs.append(s.get_last_lr()[0])
        >>> lrs
        [0.25, 0.625, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int], last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        schedulers = _check_schedulers("SequentialLR", schedulers, optimizer)
        milestones = list(milestones)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR expects number of schedulers provided to be one "
                             f"more than the number of milestone points, but got number of "
                             f"schedulers {len(schedulers)} and the number of milestones to be "
                             f"equal to {len(milestones)}")
        if any(b < a for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"SequentialLR: milestones must be increasing, got {milestones}")
        self.optimizer = optimizer
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        # every scheduler made its own step 0 while constructed; only the first one's counts
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in schedulers:
            s.last_epoch -= 1
        first = schedulers[0]
        first._step_count = 0
        first.step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            # the next scheduler starts from its epoch 0 (its closed form, from the base lrs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict:
        """Its own entries, and each scheduler's state_dict under `_schedulers`."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        out["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        inner = state.pop("_schedulers", None)
        self.__dict__.update(state)
        if inner is not None:
            if len(inner) != len(self._schedulers):
                raise ValueError(f"{type(self).__name__}.load_state_dict: the state holds "
                                 f"{len(inner)} schedulers, this one has "
                                 f"{len(self._schedulers)}")
            for s, sd in zip(self._schedulers, inner):
                s.load_state_dict(sd)


class ChainedScheduler(LRScheduler):
    """Step several schedulers together, each one every step: their changes to the lr
    compose (for chainable schedules, their factors multiply).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> from singa_tensor.optim import lr_scheduler as sched
        >>> opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=1.0)
        >>> s = sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.5, total_iters=2),
        ...                             sched.ExponentialLR(opt, gamma=0.5)])
        >>> lrs = [s.get_last_lr()[0]]
        >>> for _ in range(3):
        ...     opt.step(); s.step(); lrs.append(s.get_last_lr()[0])
        >>> lrs
        [0.5, 0.25, 0.25, 0.125]
    """

    def __init__(self, schedulers: Sequence[LRScheduler],
                 optimizer: Optimizer | None = None) -> None:
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        if optimizer is None:
            optimizer = getattr(schedulers[0], "optimizer", None)
        _check_optimizer(optimizer)
        self._schedulers = _check_schedulers("ChainedScheduler", schedulers, optimizer)
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def step(self) -> None:  # type: ignore[override]
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict
