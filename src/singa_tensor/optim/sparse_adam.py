"""SparseAdam: Adam whose moments and values move only where the gradient is nonzero."""

from __future__ import annotations

import math
from collections.abc import Iterable

from .. import creation
from ..ops.elementwise import where
from .adamax import check_betas
from .optimizer import Optimizer


class SparseAdam(Optimizer):
    """The "lazy" Adam of PyTorch's SparseAdam. singa_tensor has no sparse gradient layout,
    so the sparsity is read from the dense gradient: the entries whose gradient is exactly
    zero are treated as absent, and neither their moments nor their values change (an
    embedding row that no index of the batch touched stays as it is, moments included).
    The step count t is per parameter and counts every step that gave it a gradient. On the
    entries with a nonzero gradient g (negated when maximize)::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m / (sqrt(v) + eps)

    Like PyTorch's, it has no weight decay.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0, 3.0], requires_grad=True)
        >>> opt = optim.SparseAdam([w], lr=0.1)
        >>> w.grad = st.tensor([2.0, 0.0, -1.0]); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.9, -2.0, 3.1]
    """

    _param_shaped_state = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, *,
                 maximize: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "eps", "epsilon value")
        check_betas(self, group)

    def _step_group(self, group: dict) -> None:
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
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
            present = g != 0
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            # m += (1 - beta1) * (g - m) on the present entries only (0 elsewhere)
            exp_avg.add_(where(present, (g - exp_avg) * (1 - beta1), 0.0).to(p.dtype))
            exp_avg_sq.add_(where(present, (g * g - exp_avg_sq) * (1 - beta2), 0.0).to(p.dtype))
            step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
            update = exp_avg / exp_avg_sq.sqrt().add_(eps) * step_size
            p.sub_(where(present, update, 0.0).to(p.dtype))
