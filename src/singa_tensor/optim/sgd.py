"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable

from .. import creation
from ..ops import fused_updates
from .optimizer import Optimizer, add_scaled_, decay_, with_weight_decay


class SGD(Optimizer):
    """SGD with PyTorch's update rule. With g the gradient (negated when maximize) plus
    weight_decay * p, and b the momentum buffer (b = g on the first step)::

        b = momentum * b + (1 - dampening) * g
        g = g + momentum * b   if nesterov   else   b
        p = p - lr * g

    The CPU updates every float32 (float64) parameter of a group in one kernel call;
    `foreach=False` asks for one call per parameter instead (the same numbers). `fused` is
    accepted for PyTorch's signature: the updates are always fused kernels.
    `differentiable=True` is not supported.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.SGD([w], lr=0.1, momentum=0.9)
        >>> (w * w).sum().backward(); opt.step()
        >>> [round(v, 4) for v in w.tolist()]
        [0.8, -1.6]
    """

    _param_shaped_state = ("momentum_buffer",)

    def __init__(self, params: Iterable, lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "momentum", "momentum value")
        self._check_number(group, "weight_decay", "weight_decay value")
        self._check_number(group, "dampening", "dampening value", low=float("-inf"))
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"{type(self).__name__}: Nesterov momentum requires a momentum "
                             f"and zero dampening (got momentum={group['momentum']}, "
                             f"dampening={group['dampening']})")
        self._check_implementation(group)

    def _step_group(self, group: dict) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        hyper = dict(lr=lr, momentum=momentum, dampening=dampening,
                     weight_decay=group["weight_decay"], nesterov=group["nesterov"],
                     maximize=group["maximize"])
        lists: dict = {}  # (dtype, first) -> ([params], [grads], [buffers]) for one call each
        multi = group.get("foreach") is not False
        for p, g in self._grads(group):
            state = self.state[p] if momentum != 0 else None
            buf = state.get("momentum_buffer") if state is not None else None
            first = state is not None and buf is None
            if first:
                buf = state["momentum_buffer"] = creation.empty_like(p)
            if multi and fused_updates.multi_ready(p, g, buf):
                ps, gs, bs = lists.setdefault((p.dtype, first), ([], [], []))
                ps.append(p)
                gs.append(g)
                bs.append(buf)
                continue
            if fused_updates.sgd_step_(p, g, buf, first=first, **hyper):
                continue
            # composed path, for dtypes without a fused kernel
            g = with_weight_decay(-g if group["maximize"] else g, p, group["weight_decay"])
            if momentum != 0:
                if first:
                    buf.copy_(g)
                else:
                    decay_(buf, momentum, g, 1 - dampening)
                g = g + buf * momentum if group["nesterov"] else buf
            add_scaled_(p, g, -lr)
        for (_, first), (ps, gs, bs) in lists.items():
            fused_updates.sgd_multi_step_(ps, gs, bs, first=first, **hyper)
