"""ASGD: averaged stochastic gradient descent (Polyak & Juditsky, 1992)."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from .optimizer import Optimizer, add_scaled_, with_weight_decay


class ASGD(Optimizer):
    """Averaged SGD with PyTorch's update rule. At step t, with g the gradient (negated when
    maximize) plus weight_decay * p, eta starting at lr and mu at 1::

        p = p * (1 - lambd * eta) - eta * g
        ax = ax + mu * (p - ax)             (ax = p while mu == 1)
        eta = lr / (1 + lambd * lr * t)**alpha
        mu = 1 / max(1, t - t0)

    The running average of the iterates is `state[p]["ax"]`.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.ASGD([w], lr=0.1, lambd=0.0)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.8, -1.6]
    """

    _param_shaped_state = ("ax",)

    def __init__(self, params: Iterable, lr: float = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0.0, *,
                 maximize: bool = False) -> None:
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "lambd", "lambd value")
        self._check_number(group, "alpha", "alpha value", low=float("-inf"))
        self._check_number(group, "t0", "t0 value", low=float("-inf"))
        self._check_number(group, "weight_decay", "weight_decay value")

    def _step_group(self, group: dict) -> None:
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["eta"] = float(lr)
                state["mu"] = 1.0
                state["ax"] = creation.zeros_like(p)
            state["step"] += 1
            t, eta, mu = state["step"], state["eta"], state["mu"]
            g = with_weight_decay(-g if group["maximize"] else g, p, group["weight_decay"])
            if lambd != 0:
                p.mul_(1 - lambd * eta)
            add_scaled_(p, g, -eta)
            if mu != 1:
                add_scaled_(state["ax"], p - state["ax"], mu)
            else:
                state["ax"].copy_(p)
            state["eta"] = lr / (1 + lambd * lr * t) ** alpha
            state["mu"] = 1.0 / max(1.0, t - t0)
