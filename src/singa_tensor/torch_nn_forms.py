"""The `torch.<name>` forms of `nn.functional` layers. PyTorch keeps their argument lists
from its kernel library: `torch.embedding(weight, indices)`, `torch.dropout(input, p, train)`,
losses taking `reduction` as an int (0 none, 1 mean, 2 sum) as well as by name.
"""

from __future__ import annotations

from .nn import functional as F
from .tensor import Tensor

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(op: str, r) -> str:
    if isinstance(r, str):
        return r
    if r not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {r!r}")
    return _REDUCTIONS[r]


cosine_similarity = F.cosine_similarity
pairwise_distance = F.pairwise_distance
rms_norm = F.rms_norm
bilinear = F.bilinear
avg_pool1d = F.avg_pool1d
max_pool1d = F.max_pool1d
adaptive_avg_pool1d = F.adaptive_avg_pool1d


def adaptive_max_pool1d(input: Tensor, output_size) -> tuple:
    """Adaptive 1-d max pooling returning (values, indices), as torch.adaptive_max_pool1d does.

    Example:
        >>> import singa_tensor as st
        >>> v, i = st.adaptive_max_pool1d(st.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
        >>> v.tolist(), i.tolist()
        ([[[3.0, 2.0]]], [[[1, 2]]])
    """
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`nn.functional.dropout(input, p, training=train)`.

    Example:
        >>> import singa_tensor as st
        >>> st.dropout(st.ones(3), 0.5, False).tolist()
        [1.0, 1.0, 1.0]
    """
    return F.dropout(input, p, train)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`nn.functional.alpha_dropout(input, p, training=train)`.

    Example:
        >>> import singa_tensor as st
        >>> st.alpha_dropout(st.ones(3), 0.5, False).tolist()
        [1.0, 1.0, 1.0]
    """
    return F.alpha_dropout(input, p, train)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`nn.functional.feature_alpha_dropout(input, p, training=train)`.

    Example:
        >>> import singa_tensor as st
        >>> st.feature_alpha_dropout(st.ones(1, 2, 3), 0.5, False).shape
        (1, 2, 3)
    """
    return F.feature_alpha_dropout(input, p, train)


def _dropout_inplace(fn, name: str):
    def op(input: Tensor, p: float, train: bool) -> Tensor:
        return getattr(F, fn.__name__)(input, p, train, inplace=True)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"In-place `{fn.__name__}`.\n\n    Example:\n"
                  f"        >>> import singa_tensor as st\n        >>> x = st.ones(1, 2, 3)\n"
                  f"        >>> st.{name}(x, 0.5, False) is x\n        True\n")
    return op


dropout_ = _dropout_inplace(dropout, "dropout_")
alpha_dropout_ = _dropout_inplace(alpha_dropout, "alpha_dropout_")
feature_alpha_dropout_ = _dropout_inplace(feature_alpha_dropout, "feature_alpha_dropout_")


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of weight at indices (PyTorch's kernel-level argument order; padding_idx -1 means
    none).

    Example:
        >>> import singa_tensor as st
        >>> st.embedding(st.eye(3), st.tensor([2, 0])).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not supported")
    return F.embedding(indices, weight, None if padding_idx == -1 else padding_idx)


def kl_div(input: Tensor, target: Tensor, reduction=1, log_target: bool = False) -> Tensor:
    """`nn.functional.kl_div` with reduction as an int (0 none, 1 mean, 2 sum) or a name.

    Example:
        >>> import singa_tensor as st
        >>> round(st.kl_div(st.zeros(2), st.full((2,), 2.0), 2).item(), 4)
        2.7726
    """
    return F.kl_div(input, target, _reduction("kl_div", reduction), log_target)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight=None,
                                     pos_weight=None, reduction=1) -> Tensor:
    """`nn.functional.binary_cross_entropy_with_logits`, reduction an int or a name.

    Example:
        >>> import singa_tensor as st
        >>> round(st.binary_cross_entropy_with_logits(st.zeros(2), st.ones(2)).item(), 4)
        0.6931
    """
    return F.binary_cross_entropy_with_logits(
        input, target, weight, _reduction("binary_cross_entropy_with_logits", reduction),
        pos_weight)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction=1) -> Tensor:
    """`nn.functional.hinge_embedding_loss`, reduction an int or a name.

    Example:
        >>> import singa_tensor as st
        >>> st.hinge_embedding_loss(st.tensor([0.5]), st.tensor([-1.0])).item()
        0.5
    """
    return F.hinge_embedding_loss(input, target, margin,
                                  _reduction("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction=1) -> Tensor:
    """`nn.functional.margin_ranking_loss`, reduction an int or a name.

    Example:
        >>> import singa_tensor as st
        >>> st.margin_ranking_loss(st.tensor([1.0]), st.tensor([2.0]), st.tensor([1.0])).item()
        1.0
    """
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 _reduction("margin_ranking_loss", reduction))


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction=1) -> Tensor:
    """`nn.functional.cosine_embedding_loss`, reduction an int or a name.

    Example:
        >>> import singa_tensor as st
        >>> st.cosine_embedding_loss(st.ones(1, 2), st.ones(1, 2), st.tensor([1.0])).item()
        0.0
    """
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   _reduction("cosine_embedding_loss", reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                        swap: bool = False, reduction=1) -> Tensor:
    """`nn.functional.triplet_margin_loss`, reduction an int or a name.

    Example:
        >>> import singa_tensor as st
        >>> a = st.zeros(1, 2)
        >>> round(st.triplet_margin_loss(a, a, a).item(), 4)
        1.0
    """
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction) -> Tensor:
    """`nn.functional.poisson_nll_loss` with every argument given, reduction an int or a name.

    Example:
        >>> import singa_tensor as st
        >>> st.poisson_nll_loss(st.zeros(2), st.ones(2), True, False, 1e-8, 1).item()
        1.0
    """
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction("poisson_nll_loss", reduction))


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False) -> tuple:
    """1-d max pooling returning (values, indices).

    Example:
        >>> import singa_tensor as st
        >>> v, i = st.max_pool1d_with_indices(st.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
        >>> v.tolist(), i.tolist()
        ([[[3.0, 2.0]]], [[[1, 2]]])
    """
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode,
                        return_indices=True)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction=1, zero_infinity: bool = False) -> Tensor:
    """`nn.functional.ctc_loss`, reduction an int or a name.

    Example:
        >>> import singa_tensor as st
        >>> lp = st.zeros(3, 1, 2).log_softmax(2)
        >>> round(st.ctc_loss(lp, st.tensor([[1]]), [3], [1]).item(), 4)
        0.2877
    """
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction("ctc_loss", reduction), zero_infinity)


def instance_norm(input: Tensor, weight, bias, running_mean, running_var,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool = False) -> Tensor:
    """`nn.functional.instance_norm` in PyTorch's kernel-level argument order.

    Example:
        >>> import singa_tensor as st
        >>> y = st.instance_norm(st.tensor([[[1.0, 3.0]]]), None, None, None, None, True,
        ...                      0.1, 1e-5)
        >>> [round(v, 3) for v in y.reshape(-1).tolist()]
        [-1.0, 1.0]
    """
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


__all__ = [
    "cosine_similarity", "pairwise_distance", "rms_norm", "bilinear", "avg_pool1d", "max_pool1d",
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "dropout", "alpha_dropout",
    "feature_alpha_dropout", "dropout_", "alpha_dropout_", "feature_alpha_dropout_", "embedding",
    "kl_div", "binary_cross_entropy_with_logits", "hinge_embedding_loss", "margin_ranking_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "instance_norm",
    "max_pool1d_with_indices", "ctc_loss",
]
