"""Adadelta: step sizes from the ratio of running averages of updates and gradients."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from .optimizer import Optimizer, add_scaled_, decay_, with_weight_decay


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012) with PyTorch's update rule. With g the gradient (negated when
    maximize) plus weight_decay * p::

        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], dtype=st.float64, requires_grad=True)
        >>> opt = optim.Adadelta([w], lr=1.0, rho=0.0, eps=0.01)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.9001, -1.9]
    """

    _param_shaped_state = ("square_avg", "acc_delta")

    def __init__(self, params: Iterable, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, *, maximize: bool = False) -> None:
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "rho", "rho value")
        self._check(group["rho"] <= 1.0, "rho value", group["rho"])
        self._check_number(group, "eps", "epsilon value")
        self._check_number(group, "weight_decay", "weight_decay value")

    def _step_group(self, group: dict) -> None:
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["square_avg"] = creation.zeros_like(p)
                state["acc_delta"] = creation.zeros_like(p)
            state["step"] += 1
            g = with_weight_decay(-g if group["maximize"] else g, p, group["weight_decay"])
            square_avg = decay_(state["square_avg"], rho, g * g, 1 - rho)
            delta = (state["acc_delta"] + eps).sqrt_().div_((square_avg + eps).sqrt_()).mul_(g)
            decay_(state["acc_delta"], rho, delta * delta, 1 - rho)
            add_scaled_(p, delta, -lr)
