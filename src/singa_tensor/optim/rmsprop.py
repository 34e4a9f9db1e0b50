"""RMSprop, optionally centered and with momentum."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from ..ops import fused_updates
from .optimizer import Optimizer, add_scaled_, decay_, with_weight_decay


class RMSprop(Optimizer):
    """RMSprop with PyTorch's update rule. With g the gradient (negated when maximize) plus
    weight_decay * p::

        v = alpha * v + (1 - alpha) * g * g
        a = alpha * a + (1 - alpha) * g;  d = sqrt(v - a * a) + eps   (centered)
        d = sqrt(v) + eps                                           (otherwise)
        b = momentum * b + g / d;  p = p - lr * b                   (momentum > 0)
        p = p - lr * g / d                                          (otherwise)

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.RMSprop([w], lr=0.01, alpha=0.75)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.98, -1.98]
    """

    _param_shaped_state = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False, *, maximize: bool = False) -> None:
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                        momentum=momentum, centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "eps", "epsilon value")
        self._check_number(group, "momentum", "momentum value")
        self._check_number(group, "weight_decay", "weight_decay value")
        self._check_number(group, "alpha", "alpha value")

    def _step_group(self, group: dict) -> None:
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        for p, g in self._grads(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["square_avg"] = creation.zeros_like(p)
            # buffers for options switched on after the first step start at zero, as at step 1
            if momentum > 0 and "momentum_buffer" not in state:
                state["momentum_buffer"] = creation.zeros_like(p)
            if group["centered"] and "grad_avg" not in state:
                state["grad_avg"] = creation.zeros_like(p)
            state["step"] += 1
            if fused_updates.rmsprop_step_(
                    p, g, state["square_avg"], state["momentum_buffer"] if momentum > 0 else None,
                    state["grad_avg"] if group["centered"] else None, lr=lr, alpha=alpha, eps=eps,
                    weight_decay=group["weight_decay"], momentum=momentum,
                    maximize=group["maximize"], counted=[state]):
                continue
            # composed path, for dtypes without a fused kernel
            g = with_weight_decay(-g if group["maximize"] else g, p, group["weight_decay"])
            square_avg = decay_(state["square_avg"], alpha, g * g, 1 - alpha)
            if group["centered"]:
                grad_avg = decay_(state["grad_avg"], alpha, g, 1 - alpha)
                avg = (square_avg - grad_avg * grad_avg).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg.add_(eps)
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum).add_(g / avg)
                add_scaled_(p, buf, -lr)
            else:
                add_scaled_(p, g / avg, -lr)
