"""Parameters as one vector, and the hook-based weight_norm and spectral_norm of `nn.utils`
(the older interface; `nn.utils.parametrizations` has the parametrization-based ones).

The hook-based forms replace module.<name> by Parameters `<name>_g`, `<name>_v` (weight norm)
or `<name>_orig` with buffers `<name>_u`, `<name>_v` (spectral norm), and recompute
module.<name> as a plain attribute in a forward pre-hook before every call.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import autograd as _ag
from .. import creation as _cr
from ..ops import cat, mv
from ..tensor import Tensor
from .module import Module, Parameter, _set_data
from .parametrizations import (
    norm_except_dim,
    normalize,
    reshape_to_matrix,
    spectral_dim,
    weight_norm_dim,
)

__all__ = ["parameters_to_vector", "remove_spectral_norm", "remove_weight_norm",
           "spectral_norm", "vector_to_parameters", "weight_norm"]


def _tensors(op: str, parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    out = list(parameters)
    for p in out:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: expected Tensors as parameters, got {type(p).__name__}")
    devices = {p.device for p in out}
    if len(devices) > 1:
        raise TypeError(f"{op}: found parameters on different devices: "
                        f"{sorted(str(d) for d in devices)}")
    return out


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated into one vector (differentiable).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> parameters_to_vector(nn.Linear(3, 2).parameters()).shape
        (8,)
    """
    params = _tensors("parameters_to_vector", parameters)
    if not params:
        raise ValueError("parameters_to_vector: got no parameters")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Give the parameters, in order, the consecutive slices of vec (their data is replaced,
    the parameter objects stay the same).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = nn.Linear(2, 1)
        >>> vector_to_parameters(st.tensor([1.0, 2.0, 3.0]), m.parameters())
        >>> m.weight.tolist(), m.bias.tolist()
        ([[1.0, 2.0]], [3.0])
    """
    op = "vector_to_parameters"
    if not isinstance(vec, Tensor):
        raise TypeError(f"{op}: expected vec to be a Tensor, but got {type(vec).__name__}")
    params = _tensors(op, parameters)
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise ValueError(f"{op}: vec of shape {tuple(vec.shape)} does not hold the {total} "
                         f"elements of the parameters (a 1-D tensor is needed)")
    if any(p.device != vec.device for p in params):
        raise TypeError(f"{op}: vec is on {vec.device} but a parameter is not")
    start = 0
    with _ag.no_grad():
        for p in params:
            n = p.numel()
            new = vec[start:start + n].detach().reshape(p.shape)
            _set_data(p, new if new.dtype is p.dtype else new.to(p.dtype))
            start += n


# ---- weight norm (hook form) ------------------------------------------------------------------


class _WeightNormHook:
    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, self.dim))

    def __call__(self, module: Module, inputs) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module))


def _find_hook(module: Module, cls, name: str):
    for hook_id, hook in module._forward_pre_hooks.items():
        if isinstance(hook, cls) and hook.name == name:
            return hook_id, hook
    return None, None


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Split parameter module.<name> into a magnitude `<name>_g` (norm over every dimension
    but dim; dim=None: the whole tensor) and a direction `<name>_v`, recombined before each
    forward. Returns module.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = weight_norm(nn.Linear(3, 2))
        >>> [n for n, _ in m.named_parameters()]
        ['bias', 'weight_g', 'weight_v']
    """
    op = "weight_norm"
    if _find_hook(module, _WeightNormHook, name)[1] is not None:
        raise RuntimeError(f"{op}: cannot register two weight_norm hooks on the same parameter "
                           f"{name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"{op}: module '{type(module).__name__}' has no parameter '{name}'")
    hook = _WeightNormHook(name, weight_norm_dim(op, weight, dim))
    del module._parameters[name]
    with _ag.no_grad():
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, hook.dim)))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
    object.__setattr__(module, name, hook.compute_weight(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo `weight_norm`: module.<name> is one Parameter again, holding g * v / ||v||.

    Example:
        >>> from singa_tensor import nn
        >>> m = remove_weight_norm(weight_norm(nn.Linear(3, 2)))
        >>> [n for n, _ in m.named_parameters()]
        ['bias', 'weight']
    """
    hook_id, hook = _find_hook(module, _WeightNormHook, name)
    if hook is None:
        raise ValueError(f"remove_weight_norm: weight_norm of '{name}' not found in "
                         f"{type(module).__name__}")
    with _ag.no_grad():
        weight = hook.compute_weight(module).detach()
    del module._forward_pre_hooks[hook_id]
    del module._parameters[name + "_g"], module._parameters[name + "_v"]
    module.__dict__.pop(name, None)
    module.register_parameter(name, Parameter(weight))
    return module


# ---- spectral norm (hook form) ----------------------------------------------------------------


class _SpectralNormHook:
    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        self.name, self.n_power_iterations, self.dim, self.eps = (name, n_power_iterations,
                                                                  dim, eps)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = reshape_to_matrix(weight, self.dim)
        if do_power_iteration:
            with _ag.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mv(mat.T, u), self.eps))
                    u.copy_(normalize(mv(mat, v), self.eps))
            u, v = u.clone(), v.clone()
        sigma = (u * mv(mat, v)).sum()
        return weight / sigma

    def __call__(self, module: Module, inputs) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide parameter module.<name> by its largest singular value, estimated by power
    iteration before each forward (n_power_iterations steps in training mode, updating the
    buffers `<name>_u`, `<name>_v`; none in eval mode). The parameter is kept as
    `<name>_orig`; dim (default 0, or 1 for ConvTranspose) becomes the matrix rows.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = spectral_norm(nn.Linear(3, 2))
        >>> sorted(m.state_dict())
        ['bias', 'weight_orig', 'weight_u', 'weight_v']
    """
    op = "spectral_norm"
    if _find_hook(module, _SpectralNormHook, name)[1] is not None:
        raise RuntimeError(f"{op}: cannot register two spectral_norm hooks on the same "
                           f"parameter {name}")
    if not isinstance(n_power_iterations, int) or n_power_iterations <= 0:
        raise ValueError(f"{op}: expected n_power_iterations to be positive, but got "
                         f"n_power_iterations={n_power_iterations}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"{op}: module '{type(module).__name__}' has no parameter '{name}'")
    dim = spectral_dim(module, dim)
    if not -weight.ndim <= dim < weight.ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for a weight of {weight.ndim} "
                         f"dimensions")
    hook = _SpectralNormHook(name, n_power_iterations, dim % weight.ndim, eps)
    with _ag.no_grad():
        h, w = reshape_to_matrix(weight, hook.dim).shape
        kw = dict(dtype=weight.dtype, device=weight.device)
        u = normalize(_cr.randn(h, **kw), eps)
        v = normalize(_cr.randn(w, **kw), eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    object.__setattr__(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo `spectral_norm`: module.<name> is one Parameter again, holding the normalized
    weight (computed with the stored u, v, without a further power iteration).

    Example:
        >>> from singa_tensor import nn
        >>> m = remove_spectral_norm(spectral_norm(nn.Linear(3, 2)))
        >>> sorted(m.state_dict())
        ['bias', 'weight']
    """
    hook_id, hook = _find_hook(module, _SpectralNormHook, name)
    if hook is None:
        raise ValueError(f"remove_spectral_norm: spectral_norm of '{name}' not found in "
                         f"{type(module).__name__}")
    with _ag.no_grad():
        weight = hook.compute_weight(module, do_power_iteration=False).detach()
    del module._forward_pre_hooks[hook_id]
    for suffix in ("_orig", "_u", "_v"):
        module._parameters.pop(name + suffix, None)
        module._buffers.pop(name + suffix, None)
    module.__dict__.pop(name, None)
    module.register_parameter(name, Parameter(weight))
    return module
