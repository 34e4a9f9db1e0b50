"""`nn.utils`: gradient clipping over a set of parameters (here), parameters as one vector and
the hook-based weight_norm / spectral_norm (`utils_params.py`), and the submodules `rnn`,
`parametrize` and `parametrizations`."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable

from .. import creation
from ..autograd import no_grad
from ..ops import clamp, norm, stack
from ..tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "parametrize",
           "parametrizations", "remove_spectral_norm", "remove_weight_norm", "rnn",
           "spectral_norm", "vector_to_parameters", "weight_norm"]
__all__ += ["clip_grads_with_norm_", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
            "fuse_linear_bn_eval", "fuse_linear_bn_weights", "get_total_norm"]


def _grads(parameters: Tensor | Iterable[Tensor], op: str) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = []
    for p in parameters:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: expected Tensors as parameters, got {type(p).__name__}")
        if p.grad is not None:
            grads.append(p.grad)
    return grads


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """Scale the gradients in place so that their joint norm (the norm of all gradients taken
    as one vector) is at most max_norm. Returns that norm, measured before clipping.

    norm_type is any p accepted by `st.norm`, including inf (largest absolute value).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils import clip_grad_norm_
        >>> w = st.zeros(2, requires_grad=True); w.grad = st.tensor([3.0, 4.0])
        >>> clip_grad_norm_([w], max_norm=1.0).item()
        5.0
        >>> [round(v, 4) for v in w.grad.tolist()]
        [0.6, 0.8]
    """
    op = "clip_grad_norm_"
    grads = _grads(parameters, op)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if math.isnan(max_norm) or max_norm < 0:
        raise ValueError(f"{op}: max_norm must be a non-negative number, got {max_norm}")
    if not grads:
        return creation.tensor(0.0)
    with no_grad():
        dtype = grads[0].dtype
        per_grad = [norm(g.detach(), norm_type) for g in grads]
        per_grad = [n if n.dtype is dtype else n.to(dtype=dtype) for n in per_grad]
        total = per_grad[0] if len(per_grad) == 1 else norm(stack(per_grad), norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(
                f"{op}: the total norm of order {norm_type} for gradients from `parameters` is "
                "non-finite, so it cannot be clipped. To disable this error and scale the "
                "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        # a coefficient tensor, not a Python float: no device-to-host sync to decide on clipping
        coef = clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.detach().mul_(coef)
    return total


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clamp every gradient element to [-clip_value, clip_value], in place.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils import clip_grad_value_
        >>> w = st.zeros(3, requires_grad=True); w.grad = st.tensor([-2.0, 0.5, 3.0])
        >>> clip_grad_value_(w, 1.0); w.grad.tolist()
        [-1.0, 0.5, 1.0]
    """
    op = "clip_grad_value_"
    clip_value = float(clip_value)
    if math.isnan(clip_value) or clip_value < 0:
        raise ValueError(f"{op}: clip_value must be a non-negative number, got {clip_value}")
    with no_grad():
        for g in _grads(parameters, op):
            g.detach().clamp_(min=-clip_value, max=clip_value)


# nn.utils.rnn (packed sequences), as in PyTorch; also importable as singa_tensor.nn.utils.rnn
from . import utils_rnn as rnn  # noqa: E402

sys.modules[__name__ + ".rnn"] = rnn

# nn.utils.parametrize and nn.utils.parametrizations, under PyTorch's paths as well
from . import parametrizations, parametrize  # noqa: E402
from .utils_fuse import (  # noqa: E402
    clip_grads_with_norm_,
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
    get_total_norm,
)
from .utils_params import (  # noqa: E402
    parameters_to_vector,
    remove_spectral_norm,
    remove_weight_norm,
    spectral_norm,
    vector_to_parameters,
    weight_norm,
)

sys.modules[__name__ + ".parametrize"] = parametrize
sys.modules[__name__ + ".parametrizations"] = parametrizations
