"""Automatic mixed precision (PyTorch's `torch.amp`): `autocast` regions that run matrix
products and convolutions in bfloat16 or float16, and `GradScaler`, which scales the loss so
that float16 gradients do not underflow.

Example:
    >>> import singa_tensor as st
    >>> model = st.nn.Linear(8, 2)
    >>> opt = st.optim.SGD(model.parameters(), lr=0.1)
    >>> scaler = st.amp.GradScaler("cpu")
    >>> with st.autocast("cpu", dtype=st.bfloat16):
    ...     loss = st.nn.functional.cross_entropy(model(st.randn(4, 8)), st.tensor([0, 1, 1, 0]))
    >>> scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
    >>> loss.dtype, model.weight.dtype
    (singa_tensor.float32, singa_tensor.float32)
"""

from .autocast_mode import (
    autocast,
    custom_bwd,
    custom_fwd,
    is_autocast_available,
)
from .grad_scaler import GradScaler, OptState

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "GradScaler",
           "OptState"]
