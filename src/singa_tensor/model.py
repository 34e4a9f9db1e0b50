"""SINGA's Model idiom: a Module that carries its optimizer and trains through
`train_one_batch`, so SINGA-style scripts read naturally.

    class MLP(model.Model):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(4, 16), nn.Linear(16, 3)
        def forward(self, x):
            return self.fc2(st.relu(self.fc1(x)))
        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = F.cross_entropy(out, y)
            self.optimizer(loss)          # backward and update
            return out, loss

    m = MLP(); m.set_optimizer(optim.SGD(m.parameters(), lr=0.1))
    m.compile([x], is_train=True)
    out, loss = m(x, y)                   # in training mode: train_one_batch
"""

from __future__ import annotations

from typing import Callable

from . import autograd as _ag
from .nn import functional as F
from .nn.module import Module


class _Update:
    """Wraps an optimizer so that calling it with a loss runs zero_grad, backward and step (a
    DistOpt's backward_and_update, which averages the gradients over the ranks); other
    attributes reach the optimizer itself."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def __call__(self, loss) -> None:
        distributed = getattr(self.optimizer, "backward_and_update", None)
        if distributed is not None:
            distributed(loss)
            return
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def __getattr__(self, name):
        return getattr(self.optimizer, name)


class Model(Module):
    """A Module with SINGA's training interface: `set_optimizer`, `compile` and
    `train_one_batch`; calling the model in training mode after `compile(..., is_train=True)`
    trains on one batch and returns (output, loss).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn, optim
        >>> from singa_tensor.model import Model
        >>> class Net(Model):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = nn.Linear(2, 2)
        ...     def forward(self, x):
        ...         return self.fc(x)
        >>> net = Net(); net.set_optimizer(optim.SGD(net.parameters(), lr=0.1))
        >>> x, y = st.randn(4, 2), st.tensor([0, 1, 0, 1])
        >>> net.compile([x], is_train=True)
        >>> out, loss = net(x, y); out.shape
        (4, 2)
    """

    loss_fn: Callable = staticmethod(F.cross_entropy)

    def __init__(self) -> None:
        super().__init__()
        self.optimizer = None
        self._compiled = False
        self._graph = None

    def set_optimizer(self, optimizer) -> None:
        """Attach the optimizer that `train_one_batch` uses (as `self.optimizer(loss)`)."""
        self.optimizer = _Update(optimizer)

    def compile(self, inputs, is_train: bool = True, use_graph: bool = False,
                sequential: bool = False, **graph_options) -> None:
        """Check the model on example inputs and set its mode. With use_graph, training calls
        run train_one_batch in graph mode (see singa_tensor.graph): recorded once, then
        replayed; graph_options go to st.compile (warmup, on_change, plan_memory, ...)."""
        del sequential  # ops always run in program order here
        self._graph = None
        if use_graph:
            from .graph import CompiledStep

            self._graph = CompiledStep(self.train_one_batch, **graph_options)
        if is_train and self.optimizer is None:
            raise RuntimeError("compile: set an optimizer with set_optimizer() before compiling "
                               "for training")
        with _ag.no_grad():
            self.forward(*inputs)
        self.train(is_train)
        self._compiled = True

    def train_one_batch(self, x, y):
        """Forward, loss (`self.loss_fn`, cross entropy by default), backward and update;
        returns (output, loss). Override it for other training steps."""
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optimizer(loss)
        return out, loss

    def __call__(self, *args, **kwargs):
        if self.training and self._compiled:
            if self.optimizer is None:
                raise RuntimeError("Model: training needs an optimizer; call set_optimizer()")
            if self._graph is not None and not kwargs:
                return self._graph(*args)
            return self.train_one_batch(*args, **kwargs)
        return super().__call__(*args, **kwargs)


__all__ = ["Model"]
