"""Loss modules: each holds its options and calls the functional loss of the same name
(nn/_functional_losses.py), where the computation is defined once."""

from __future__ import annotations

from ..tensor import Tensor
from . import _functional_losses as L
from .module import Module


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.MSELoss()(st.tensor([1.0, 2.0]), st.tensor([0.0, 0.0])).item()
        2.5
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.L1Loss()(st.tensor([1.0, -3.0]), st.tensor([0.0, 0.0])).item()
        2.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below beta, linear above.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.SmoothL1Loss()(st.tensor([0.5, 3.0]), st.tensor([0.0, 0.0])).item()
        1.3125
    """

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class BCELoss(_WeightedLoss):
    """Binary cross entropy on probabilities.

    Example:
        >>> import singa_tensor as st
        >>> round(st.nn.BCELoss()(st.tensor([0.5]), st.tensor([1.0])).item(), 4)
        0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """Binary cross entropy on logits (numerically stable), with an optional pos_weight.

    Example:
        >>> import singa_tensor as st
        >>> round(st.nn.BCEWithLogitsLoss()(st.tensor([0.0]), st.tensor([1.0])).item(), 4)
        0.6931
    """

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(weight, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class indices given log-probabilities.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.NLLLoss()(st.tensor([[-1.0, -2.0]]), st.tensor([1])).item()
        2.0
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits against class indices or class probabilities.

    Example:
        >>> import singa_tensor as st
        >>> round(st.nn.CrossEntropyLoss()(st.tensor([[0.0, 0.0]]), st.tensor([0])).item(), 4)
        0.6931
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence with input as log-probabilities.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.KLDivLoss(reduction="sum")(st.tensor([0.0]), st.tensor([1.0])).item()
        0.0
    """

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "KLDivLoss", "L1Loss", "MSELoss",
           "NLLLoss", "SmoothL1Loss"]
