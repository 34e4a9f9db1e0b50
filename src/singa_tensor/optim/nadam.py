"""NAdam: Adam with Nesterov momentum and a momentum schedule (Dozat, 2016)."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from .adamax import check_betas
from .optimizer import Optimizer, add_scaled_, decay_, with_weight_decay


class NAdam(Optimizer):
    """NAdam with PyTorch's update rule. At step t, with g the gradient (negated when
    maximize; weight_decay * p is added to it, or with decoupled_weight_decay the parameter
    is shrunk by 1 - lr * weight_decay first) and psi = momentum_decay::

        mu_t = beta1 * (1 - 0.96**(t * psi) / 2);  mu_prod = mu_1 * ... * mu_t
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = mu_{t+1} * m / (1 - mu_prod * mu_{t+1}) + (1 - mu_t) * g / (1 - mu_prod)
        p = p - lr * m_hat / (sqrt(v / (1 - beta2**t)) + eps)

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.NAdam([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.8944, -1.8944]
    """

    _param_shaped_state = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable, lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, maximize: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "eps", "epsilon value")
        self._check_number(group, "weight_decay", "weight_decay value")
        self._check_number(group, "momentum_decay", "momentum_decay value")
        check_betas(self, group)

    def _step_group(self, group: dict) -> None:
        lr, eps, wd, psi = group["lr"], group["eps"], group["weight_decay"], \
            group["momentum_decay"]
        beta1, beta2 = group["betas"]
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["mu_product"] = 1.0
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
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
            mu_product = state["mu_product"] = state["mu_product"] * mu
            exp_avg = decay_(state["exp_avg"], beta1, g, 1 - beta1)
            exp_avg_sq = decay_(state["exp_avg_sq"], beta2, g * g, 1 - beta2)
            denom = (exp_avg_sq / (1 - beta2 ** t)).sqrt_().add_(eps)
            add_scaled_(p, g / denom, -lr * (1 - mu) / (1 - mu_product))
            add_scaled_(p, exp_avg / denom, -lr * mu_next / (1 - mu_product * mu_next))
