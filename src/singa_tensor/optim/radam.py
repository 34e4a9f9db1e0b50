"""RAdam: Adam with a rectified adaptive learning rate (Liu et al., 2019)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from .. import creation
from .adamax import check_betas
from .optimizer import Optimizer, add_scaled_, decay_, with_weight_decay


class RAdam(Optimizer):
    """RAdam with PyTorch's update rule. At step t, with g the gradient (negated when
    maximize; weight_decay * p is added to it, or with decoupled_weight_decay the parameter
    is shrunk by 1 - lr * weight_decay first)::

        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho_t > 5:
            r = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p = p - lr * m_hat * r * sqrt(1 - beta2**t) / (sqrt(v) + eps)
        else:
            p = p - lr * m_hat

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.RAdam([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.8, -1.6]
    """

    _param_shaped_state = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 maximize: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "eps", "epsilon value")
        self._check_number(group, "weight_decay", "weight_decay value")
        check_betas(self, group)

    def _step_group(self, group: dict) -> None:
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        rho_inf = 2 / (1 - beta2) - 1
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = creation.zeros_like(p)
                state["exp_avg_sq"] = creation.zeros_like(p)
            state["step"] += 1
            t = state["step"]
            if group["maximize"]:
                g = -g
            if group["decoupled_weight_decay"]:
                if wd != 0:
                    p.mul_(1 - lr * wd)
            else:
                g = with_weight_decay(g, p, wd)
            exp_avg = decay_(state["exp_avg"], beta1, g, 1 - beta1)
            exp_avg_sq = decay_(state["exp_avg_sq"], beta2, g * g, 1 - beta2)
            bias_correction1 = 1 - beta1 ** t
            bias_correction2 = 1 - beta2 ** t
            rho_t = rho_inf - 2 * t * beta2 ** t / bias_correction2
            if rho_t > 5.0:
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                 / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                adaptive = exp_avg / exp_avg_sq.sqrt().add_(eps)
                add_scaled_(p, adaptive,
                            -lr * rect * math.sqrt(bias_correction2) / bias_correction1)
            else:
                add_scaled_(p, exp_avg, -lr / bias_correction1)
