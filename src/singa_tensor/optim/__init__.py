"""Optimizers and learning-rate schedulers (PyTorch's names, defaults and update rules).

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor import optim
    >>> w = st.tensor([2.0], requires_grad=True)
    >>> opt = optim.SGD([w], lr=0.25)
    >>> for _ in range(3):
    ...     opt.zero_grad(); (w * w).sum().backward(); opt.step()
    >>> w.tolist()
    [0.25]
"""

from __future__ import annotations

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .dist_opt import DistOpt
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "DistOpt", "lr_scheduler"]
