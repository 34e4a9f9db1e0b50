"""Adamax: Adam with the infinity norm in place of the second moment."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from .optimizer import Optimizer, add_scaled_, decay_, with_weight_decay


def check_betas(opt: Optimizer, group: dict) -> None:
    """Raise ValueError unless group["betas"] is a pair of numbers in [0, 1) (shared by the
    Adam variants)."""
    name = type(opt).__name__
    betas = group["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{name}: betas must be a pair of floats, got {betas!r}")
    for i, b in enumerate(betas):
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 <= b < 1.0:
            raise ValueError(f"{name}: invalid beta parameter at index {i}: {b}")


class Adamax(Optimizer):
    """Adamax (Kingma & Ba, section 7) with PyTorch's update rule. At step t, with g the
    gradient (negated when maximize) plus weight_decay * p::

        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.Adamax([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.9, -1.9]
    """

    _param_shaped_state = ("exp_avg", "exp_inf")

    def __init__(self, params: Iterable, lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *, maximize: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "eps", "epsilon value")
        self._check_number(group, "weight_decay", "weight_decay value")
        check_betas(self, group)

    def _step_group(self, group: dict) -> None:
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = creation.zeros_like(p)
                state["exp_inf"] = creation.zeros_like(p)
            state["step"] += 1
            g = with_weight_decay(-g if group["maximize"] else g, p, group["weight_decay"])
            exp_avg = decay_(state["exp_avg"], beta1, g, 1 - beta1)
            exp_inf = state["exp_inf"].mul_(beta2).maximum_(g.abs().add_(eps))
            add_scaled_(p, exp_avg / exp_inf, -lr / (1 - beta1 ** state["step"]))
