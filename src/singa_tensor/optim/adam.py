"""Adam (with AMSGrad) and AdamW (decoupled weight decay)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from .. import creation
from ..ops import fused_updates
from .optimizer import Optimizer, add_scaled_, decay_, with_weight_decay


class Adam(Optimizer):
    """Adam with PyTorch's update rule. At step t, with g the gradient (negated when
    maximize, plus weight_decay * p unless the decay is decoupled)::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)                              (amsgrad; v_max replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    The CPU updates every float32 (float64) parameter of a group in one kernel call;
    `foreach=False` asks for one call per parameter instead (the same numbers). `fused` and
    `capturable` are accepted for PyTorch's signature; `differentiable=True` is not supported.
    `decoupled_weight_decay=True` makes it AdamW.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.Adam([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.9, -1.9]
    """

    _param_shaped_state = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    _decoupled = False

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay or self._decoupled)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        name = type(self).__name__
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "eps", "epsilon value")
        self._check_number(group, "weight_decay", "weight_decay value")
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair of floats, got {betas!r}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{name}: invalid beta parameter at index {i}: {b}")
        self._check_implementation(group)

    def _step_group(self, group: dict) -> None:
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        decoupled = bool(group.get("decoupled_weight_decay", self._decoupled))
        hyper = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd,
                     decoupled=decoupled, maximize=group["maximize"])
        # (dtype, step) -> lists of params, grads and states for one call, and the state dicts
        lists: dict = {}
        multi = group.get("foreach") is not False
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = creation.zeros_like(p)
                state["exp_avg_sq"] = creation.zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = creation.zeros_like(p)
            if group["amsgrad"] and "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = creation.zeros_like(p)  # amsgrad switched on later
            state["step"] += 1
            t = state["step"]
            vmax = state["max_exp_avg_sq"] if group["amsgrad"] else None
            if multi and fused_updates.multi_ready(p, g, state["exp_avg"], state["exp_avg_sq"],
                                                   vmax, rule="adam"):
                for lst, t_ in zip(lists.setdefault((p.dtype, t), ([], [], [], [], [], [])),
                                   (p, g, state["exp_avg"], state["exp_avg_sq"], vmax, state)):
                    lst.append(t_)
                continue
            if fused_updates.adam_step_(p, g, state["exp_avg"], state["exp_avg_sq"], vmax,
                                        step=t, counted=[state], **hyper):
                continue
            # composed path, for dtypes without a fused kernel
            if group["maximize"]:
                g = -g
            if decoupled:
                if wd != 0:
                    p.mul_(1 - lr * wd)
            else:
                g = with_weight_decay(g, p, wd)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            decay_(exp_avg, beta1, g, 1 - beta1)
            decay_(exp_avg_sq, beta2, g * g, 1 - beta2)
            step_size = lr / (1 - beta1 ** t)
            bias_correction2_sqrt = math.sqrt(1 - beta2 ** t)
            if group["amsgrad"]:
                second = state["max_exp_avg_sq"].maximum_(exp_avg_sq)
            else:
                second = exp_avg_sq
            denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
            add_scaled_(p, exp_avg / denom, -step_size)
        for (_, t), lsts in lists.items():
            fused_updates.adam_multi_step_(*lsts[:5], step=t, counted=lsts[5], **hyper)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): the parameter is first shrunk,
    p = p * (1 - lr * weight_decay), and the Adam step then uses the plain gradient.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.AdamW([w], lr=0.1, weight_decay=0.5)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.85, -1.8]
    """

    _decoupled = True

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                         capturable=capturable, differentiable=differentiable, fused=fused)
