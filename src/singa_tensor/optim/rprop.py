"""Rprop: resilient backpropagation, steps driven by the sign of the gradient only."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from ..ops.elementwise import where
from .optimizer import Optimizer


class Rprop(Optimizer):
    """Rprop with PyTorch's update rule (the iRprop- variant). Each element keeps its own step
    size s (starting at lr) and the previous gradient g_prev; with g the gradient (negated when
    maximize) and (eta_minus, eta_plus) = etas::

        s = clamp(s * eta_plus,  *step_sizes)   where g * g_prev > 0
        s = clamp(s * eta_minus, *step_sizes)   where g * g_prev < 0   (and g is set to 0 there)
        p = p - sign(g) * s;  g_prev = g

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.Rprop([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.9, -1.9]
    """

    _param_shaped_state = ("prev", "step_size")

    def __init__(self, params: Iterable, lr: float = 1e-2,
                 etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *,
                 maximize: bool = False) -> None:
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        name = type(self).__name__
        self._check_number(group, "lr", "learning rate")
        for key in ("etas", "step_sizes"):
            v = group[key]
            if not isinstance(v, (tuple, list)) or len(v) != 2 or any(
                    isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
                raise ValueError(f"{name}: {key} must be a pair of numbers, got {v!r}")
        eta_minus, eta_plus = group["etas"]
        if not 0.0 < eta_minus < 1.0 < eta_plus:
            raise ValueError(f"{name}: invalid eta values: {eta_minus}, {eta_plus} (need "
                             "0 < eta_minus < 1 < eta_plus)")
        lo, hi = group["step_sizes"]
        if not 0.0 <= lo <= hi:
            raise ValueError(f"{name}: invalid step_sizes: {lo}, {hi} (need 0 <= min <= max)")

    def _step_group(self, group: dict) -> None:
        eta_minus, eta_plus = group["etas"]
        lo, hi = group["step_sizes"]
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["prev"] = creation.zeros_like(p)
                state["step_size"] = creation.full_like(p, group["lr"])
            state["step"] += 1
            if group["maximize"]:
                g = -g
            sign = (g * state["prev"]).sign_()
            same = creation.ones_like(p)
            factor = where(sign > 0, eta_plus, where(sign < 0, eta_minus, same)).to(p.dtype)
            step_size = state["step_size"].mul_(factor).clamp_(lo, hi)
            g = where(sign < 0, 0.0, g).to(p.dtype)
            p.sub_(g.sign() * step_size)
            state["prev"].copy_(g)
