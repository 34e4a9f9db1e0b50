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
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .dist_opt import DistOpt
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "DistOpt", "lr_scheduler",
           "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop", "SparseAdam", "LBFGS"]
