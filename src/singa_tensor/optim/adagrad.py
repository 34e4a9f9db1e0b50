"""Adagrad: per-element learning rates from the running sum of squared gradients."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from ..ops import fused_updates
from .optimizer import Optimizer, add_scaled_, with_weight_decay


class Adagrad(Optimizer):
    """Adagrad with PyTorch's update rule. At step t, with g the gradient (negated when
    maximize) plus weight_decay * p::

        s = s + g * g                                   (s starts at initial_accumulator_value)
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.Adagrad([w], lr=0.5)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.5, -1.5]
    """

    _param_shaped_state = ("sum",)

    def __init__(self, params: Iterable, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, *, maximize: bool = False) -> None:
        defaults = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, eps=eps,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "lr_decay", "lr_decay value")
        self._check_number(group, "weight_decay", "weight_decay value")
        self._check_number(group, "initial_accumulator_value", "initial_accumulator_value")
        self._check_number(group, "eps", "epsilon value")

    def _init_group_state(self, group: dict) -> None:
        # eager, like PyTorch, so a state_dict taken before the first step already holds it
        for p in group["params"]:
            self._init_state(p, group)

    def _init_state(self, p, group: dict) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["sum"] = creation.full_like(p, group["initial_accumulator_value"])
        return state

    def _step_group(self, group: dict) -> None:
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]

        def clr_at(step):  # the decayed rate at a step count
            return lr / (1 + (step - 1) * lr_decay)

        for p, g in self._grads(group):
            state = self._init_state(p, group)
            state["step"] += 1
            clr = clr_at(state["step"])
            if fused_updates.adagrad_step_(p, g, state["sum"], clr=clr, eps=eps,
                                           weight_decay=group["weight_decay"],
                                           maximize=group["maximize"], counted=[state],
                                           clr_at=clr_at):
                continue
            # composed path, for dtypes without a fused kernel
            g = with_weight_decay(-g if group["maximize"] else g, p, group["weight_decay"])
            state["sum"].add_(g * g)
            std = state["sum"].sqrt().add_(eps)
            add_scaled_(p, g / std, -clr)
