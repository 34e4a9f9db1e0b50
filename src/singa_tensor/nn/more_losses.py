"""More loss modules: each holds its options and calls the functional loss of the same name
(nn/_functional_more.py, nn/_functional_ctc.py), where the computation is defined once."""

from __future__ import annotations

from typing import Callable

from ..tensor import Tensor
from . import _functional_more as M
from .loss import _Loss, _WeightedLoss


class MarginRankingLoss(_Loss):
    """max(0, -y (x1 - x2) + margin) for y in {1, -1}.

    Example:
        >>> import singa_tensor as st
        >>> loss = st.nn.MarginRankingLoss(margin=0.5)
        >>> loss(st.tensor([1.0]), st.tensor([2.0]), st.tensor([1.0])).item()
        1.5
    """

    def __init__(self, margin: float = 0.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return M.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """x where y is 1, max(0, margin - x) where y is -1.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.HingeEmbeddingLoss()(st.tensor([0.25]), st.tensor([-1.0])).item()
        0.75
    """

    def __init__(self, margin: float = 1.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return M.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """log(1 + exp(-y x)) for y in {1, -1}.

    Example:
        >>> import singa_tensor as st
        >>> round(st.nn.SoftMarginLoss()(st.tensor([0.0]), st.tensor([-1.0])).item(), 4)
        0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return M.soft_margin_loss(input, target, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """1 - cos(x1, x2) where y is 1, max(0, cos(x1, x2) - margin) where y is -1.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1.0, 0.0]])
        >>> st.nn.CosineEmbeddingLoss()(x, x, st.tensor([1.0])).item()
        0.0
    """

    def __init__(self, margin: float = 0.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return M.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class HuberLoss(_Loss):
    """Quadratic below delta, linear (slope delta) above.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.HuberLoss(delta=2.0)(st.tensor([3.0]), st.tensor([0.0])).item()
        4.0
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return M.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class PoissonNLLLoss(_Loss):
    """Poisson negative log-likelihood (input as log-rate by default).

    Example:
        >>> import singa_tensor as st
        >>> st.nn.PoissonNLLLoss()(st.tensor([0.0]), st.tensor([3.0])).item()
        1.0
    """

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if size_average is not None or reduce is not None:
            raise TypeError("PoissonNLLLoss: size_average and reduce are deprecated and not "
                            "supported; use reduction")
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return M.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log-likelihood of target given a mean (input) and a variance.

    Example:
        >>> import singa_tensor as st
        >>> st.nn.GaussianNLLLoss()(st.tensor([0.0]), st.tensor([2.0]), st.tensor([1.0])).item()
        2.0
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var) -> Tensor:
        return M.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-class logistic loss averaged over classes, for multi-hot targets.

    Example:
        >>> import singa_tensor as st
        >>> x, y = st.zeros(1, 3), st.tensor([[1.0, 0.0, 1.0]])
        >>> round(st.nn.MultiLabelSoftMarginLoss()(x, y).item(), 4)
        0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return M.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss of class-index targets.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[0.1, 0.2, 0.4, 0.8]])
        >>> round(st.nn.MultiMarginLoss()(x, st.tensor([3])).item(), 4)
        0.325
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        if p not in (1, 2) or isinstance(p, bool):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p!r}")
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return M.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-class multi-label hinge loss; target rows list classes, ended by -1.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[0.1, 0.2, 0.4, 0.8]])
        >>> round(st.nn.MultiLabelMarginLoss()(x, st.tensor([[3, 0, -1, 1]])).item(), 4)
        0.85
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return M.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """max(d(a, p) - d(a, n) + margin, 0) with the pairwise p-norm distance.

    Example:
        >>> import singa_tensor as st
        >>> a, p, n = st.zeros(1, 2), st.tensor([[0.0, 1.0]]), st.tensor([[0.0, 3.0]])
        >>> round(st.nn.TripletMarginLoss(margin=3.0, eps=0.0)(a, p, n).item(), 4)
        1.0
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        if size_average is not None or reduce is not None:
            raise TypeError("TripletMarginLoss: size_average and reduce are deprecated and not "
                            "supported; use reduction")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return M.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet margin loss with any distance function (default: pairwise_distance).

    Example:
        >>> import singa_tensor as st
        >>> a, p, n = st.zeros(1, 2), st.tensor([[0.0, 1.0]]), st.tensor([[0.0, 3.0]])
        >>> l1 = lambda x, y: (x - y).abs().sum(dim=-1)
        >>> st.nn.TripletMarginWithDistanceLoss(distance_function=l1, margin=3.0)(a, p, n).item()
        1.0
    """

    def __init__(self, *, distance_function: Callable | None = None, margin: float = 1.0,
                 swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if isinstance(margin, (int, float)) and not isinstance(margin, bool) and margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: margin must be greater than 0, "
                             f"got {margin}")
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return M.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """Connectionist temporal classification loss of (T, N, C) log-probabilities.

    Example:
        >>> import singa_tensor as st
        >>> lp = st.log_softmax(st.zeros(2, 1, 3), dim=2)
        >>> round(st.nn.CTCLoss()(lp, st.tensor([[1]]), [2], [1]).item(), 4)
        1.0986
    """

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths,
                target_lengths) -> Tensor:
        return M.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=self.blank,
                          reduction=self.reduction, zero_infinity=self.zero_infinity)


__all__ = ["CTCLoss", "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss",
           "HuberLoss", "MarginRankingLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss",
           "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss"]
