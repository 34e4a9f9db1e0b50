"""The optimizer base: parameter groups, per-parameter state, and checkpointing of both.

Subclasses supply their defaults, a `_check_group` that validates one group's hyper-parameters
(run for every group, so a group's own overrides are validated too) and `_step_group`, the
update of one group, which runs under `no_grad` with whole-tensor in-place ops.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from .. import _execution
from .. import dtype as _dt
from ..autograd import enable_grad, no_grad
from ..tensor import Tensor


class _Required:
    """Marks a hyper-parameter that every group must give (there is no sensible default)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class of all optimizers.

    `params` is an iterable of leaf tensors, or of dicts ("param groups") each holding
    `params` and any hyper-parameters that override `defaults` for that group.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.ones(2, requires_grad=True)
        >>> opt = optim.SGD([w], lr=0.5)
        >>> (w * w).sum().backward()
        >>> opt.step(); w.tolist()
        [0.0, 0.0]
    """

    # state entries with the parameter's shape: load_state_dict checks them against it
    _param_shaped_state: tuple = ()
    # (float32 master, model parameter) pairs when created with master_weights=True
    _masters: list | None = None
    _master_synced = False

    def __init_subclass__(cls, **kwargs) -> None:
        # every optimizer takes master_weights=True: float32 copies of its float16/bfloat16
        # parameters are what it updates (and keeps its state for), rounded into the model's
        # parameters after each step
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def __init__(self, *args, master_weights: bool = False, **kw):
            init(self, *args, **kw)
            if not isinstance(master_weights, bool):
                raise TypeError(f"{type(self).__name__}: master_weights must be a bool, got "
                                f"{type(master_weights).__name__}")
            if master_weights and self._masters is None:
                self._use_master_weights()

        cls.__init__ = __init__

    @staticmethod
    def _grads(group: dict):
        """(parameter, gradient) pairs of a group as stored (the fused kernels negate the
        gradient themselves when the group maximizes)."""
        for p in group["params"]:
            g = p.grad
            if g is not None:
                yield p, g

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        name = type(self).__name__
        self.defaults = dict(defaults)
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError(
                f"{name}: params should be an iterable of Tensors or dicts, but got a Tensor "
                "(wrap it in a list)"
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: params must be an ordered collection (a list), not a set")
        groups = list(params)
        if not groups:
            raise ValueError(f"{name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # ---- parameter groups --------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own hyper-parameters (defaults fill the rest).

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> opt = optim.SGD([st.zeros(2, requires_grad=True)], lr=0.1)
            >>> opt.add_param_group({"params": [st.zeros(3, requires_grad=True)], "lr": 0.01})
            >>> [g["lr"] for g in opt.param_groups]
            [0.1, 0.01]
        """
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: a param group must be a dict, got "
                            f"{type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError(f"{name}: a param group needs a 'params' entry")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                f"{name}: parameters must be an ordered collection (a list), not a set: the "
                "order of a set changes between runs and state_dict refers to parameters by "
                "position"
            )
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor")
            if not p.dtype.is_floating_point:
                raise TypeError(f"{name}: can only optimize floating point tensors, got "
                                f"{p.dtype.name}")
        if len({id(p) for p in params}) != len(params):
            warnings.warn(f"{name}: a parameter group holds duplicate parameters; this will be "
                          "an error in a future version", UserWarning, stacklevel=2)
        if self._masters is not None:
            params = self._with_masters(params)
        group["params"] = params
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"{name}: parameter group didn't specify a value of required "
                                 f"optimization parameter {key}")
            group.setdefault(key, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self._check_group(group)
        self.param_groups.append(group)
        self._init_group_state(group)

    # ---- master weights ----------------------------------------------------------------------
    def _use_master_weights(self) -> None:
        name = type(self).__name__
        if type(self).step is not Optimizer.step:
            raise ValueError(f"{name}: master_weights is not supported by this optimizer (its "
                             f"step is its own)")
        self._masters = []
        for g in self.param_groups:
            g["params"] = self._with_masters(g["params"])
        self.state = defaultdict(dict)
        for g in self.param_groups:
            self._init_group_state(g)

    def _with_masters(self, params: list) -> list:
        out = []
        for p in params:
            if p.dtype is _dt.float16 or p.dtype is _dt.bfloat16:
                with no_grad():
                    m = p.detach().to(dtype=_dt.float32).clone()
                m.requires_grad_(True)
                self._masters.append((m, p))
                out.append(m)
            else:
                out.append(p)
        return out

    def master_params(self):
        """The tensors this optimizer updates: its parameters, with the float32 master copy in
        place of each float16/bfloat16 parameter when created with `master_weights=True` (clip
        or inspect gradients there, after `GradScaler.unscale_`).

        Example:
            >>> import singa_tensor as st
            >>> w = st.zeros(2, dtype=st.bfloat16, requires_grad=True)
            >>> opt = st.optim.SGD([w], lr=0.1, master_weights=True)
            >>> [p.dtype for p in opt.master_params()]
            [singa_tensor.float32]
        """
        for g in self.param_groups:
            yield from g["params"]

    def _prepare_grads(self) -> None:
        """Give each master copy its parameter's gradient in float32 (once per step)."""
        if not self._masters or self._master_synced:
            return
        with no_grad():
            for m, p in self._masters:
                g = p.grad
                m.grad = None if g is None else g.detach().to(dtype=_dt.float32)
        self._master_synced = True

    def _write_masters(self) -> None:
        with no_grad():
            for m, p in self._masters:
                p.copy_(m)
        self._master_synced = False

    def _check_group(self, group: dict) -> None:
        """Raise ValueError naming the optimizer and the value for a bad hyper-parameter."""

    def _init_group_state(self, group: dict) -> None:
        """State a subclass creates eagerly (most create it on the first step)."""

    def _check(self, ok: bool, what: str, value) -> None:
        if not ok:
            raise ValueError(f"{type(self).__name__}: invalid {what}: {value}")

    def _check_implementation(self, group: dict) -> None:
        """PyTorch's implementation switches: foreach and fused (None or a bool) choose among
        kernels that give the same numbers here; differentiable steps are not supported."""
        name = type(self).__name__
        for key in ("foreach", "fused", "capturable"):
            v = group.get(key)
            if v is not None and not isinstance(v, bool):
                raise TypeError(f"{name}: {key} must be None or a bool, got {v!r}")
        if group.get("differentiable"):
            raise NotImplementedError(f"{name}: differentiable=True (autograd through the "
                                      f"optimizer step) is not supported")

    def _check_number(self, group: dict, key: str, what: str, low: float = 0.0) -> None:
        v = group[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{type(self).__name__}: {what} must be a number, got "
                            f"{type(v).__name__}")
        self._check(v >= low and not math.isnan(v), what, v)

    # ---- gradients and the step --------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (to None, or to zeros in place).

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> w = st.ones(2, requires_grad=True); w.sum().backward()
            >>> opt = optim.SGD([w]); opt.zero_grad(); w.grad is None
            True
        """
        groups = [g["params"] for g in self.param_groups]
        if self._masters:
            groups.append([p for _, p in self._masters])
            self._master_synced = False
        for params in groups:
            for p in params:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if g._node is not None:
                    g.detach_()
                else:
                    g.requires_grad = False
                with no_grad():
                    g.zero_()

    def step(self, closure: Callable[[], Any] | None = None):
        """Update every parameter that has a gradient. `closure`, if given, re-evaluates the
        model (with gradients enabled) and returns the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        ex = _execution.current()
        if ex is not None:  # a graph records this step: it marks where the update runs
            ex.begin_update(self)
        if self._masters:
            self._prepare_grads()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        if self._masters:
            self._write_masters()
        if ex is not None:
            ex.end_update(self)
        return loss

    def _step_group(self, group: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement step")

    # ---- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The optimizer's state as plain values: `state` maps a parameter's index (its position
        over all groups, in order) to copies of its state tensors; `param_groups` holds each
        group's hyper-parameters with `params` as lists of those indices.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> opt = optim.SGD([st.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9)
            >>> sd = opt.state_dict(); sd["param_groups"][0]["params"], sd["state"]
            ([0], {})
        """
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in g["params"]]
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            if id(p) in index:
                state[index[id(p)]] = {k: _copy_value(v) for k, v in s.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore state and hyper-parameters saved by `state_dict` into this optimizer, whose
        groups must hold the same number of parameters in the same order. State tensors are
        copied and cast to their parameter's dtype and device."""
        name = type(self).__name__
        if (not isinstance(state_dict, dict) or "state" not in state_dict
                or "param_groups" not in state_dict):
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and "
                             "'param_groups' entries")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: loaded state dict has "
                             f"{len(saved_groups)} parameter groups, the optimizer has "
                             f"{len(self.param_groups)}")
        by_index: dict[int, Tensor] = {}
        for i, (g, s) in enumerate(zip(self.param_groups, saved_groups)):
            if len(s["params"]) != len(g["params"]):
                raise ValueError(f"{name}.load_state_dict: loaded parameter group {i} has "
                                 f"{len(s['params'])} parameters, the optimizer's has "
                                 f"{len(g['params'])}")
            for idx, p in zip(s["params"], g["params"]):
                by_index[int(idx)] = p
        new_state: defaultdict = defaultdict(dict)
        for key, entries in state_dict["state"].items():
            idx = int(key)
            if idx not in by_index:
                raise ValueError(f"{name}.load_state_dict: state refers to parameter {idx}, "
                                 "which no parameter group holds")
            p = by_index[idx]
            new_state[p] = {k: self._restore_value(p, idx, k, v) for k, v in entries.items()}
        new_groups = []
        for g, s in zip(self.param_groups, saved_groups):
            ng = {}
            for k, v in s.items():
                if k == "params":
                    continue
                # containers may come back from a file as lists
                ng[k] = tuple(v) if isinstance(g.get(k), tuple) and isinstance(v, list) else v
            ng["params"] = g["params"]
            self._check_group(ng)
            new_groups.append(ng)
        for g, ng in zip(self.param_groups, new_groups):
            # updated in place so that schedulers and users holding a group see the new values
            g.clear()
            g.update(ng)
        self.state = new_state

    def _restore_value(self, p: Tensor, idx: int, key: str, value):
        if not isinstance(value, Tensor):
            return value
        if key in self._param_shaped_state and value.shape != p.shape:
            raise ValueError(f"{type(self).__name__}.load_state_dict: state '{key}' of parameter "
                             f"{idx} has shape {value.shape}, the parameter has shape {p.shape}")
        if key != "step" and value.dtype.is_floating_point:
            value = value.to(dtype=p.dtype, device=p.device)
        else:
            value = value.to(device=p.device)
        return _copy_value(value)

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {g[k]}" for k in sorted(g) if k != "params"]
        return "\n".join(lines) + "\n)"


def _copy_value(v):
    if isinstance(v, Tensor):
        with no_grad():
            return v.detach().clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_copy_value(x) for x in v)
    if isinstance(v, dict):
        return {k: _copy_value(x) for k, x in v.items()}
    return v


# ---- whole-tensor update helpers shared by the optimizers ----------------------------------
# The composed update path, for parameter dtypes that have no fused kernel (ops/fused_updates).

def add_scaled_(x: Tensor, y: Tensor, alpha: float) -> Tensor:
    """x += alpha * y, in place."""
    return x.add_(y if alpha == 1 else y * alpha)


def decay_(x: Tensor, beta: float, y: Tensor, weight: float) -> Tensor:
    """x = beta * x + weight * y, in place (an exponential moving average when
    weight = 1 - beta)."""
    if beta != 1:
        x.mul_(beta)
    return add_scaled_(x, y, weight)


def with_weight_decay(grad: Tensor, param: Tensor, weight_decay: float) -> Tensor:
    """grad + weight_decay * param (L2 penalty folded into the gradient), out of place."""
    return grad + param * weight_decay if weight_decay != 0 else grad
