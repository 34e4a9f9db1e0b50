"""Tensor (intra-layer) model parallelism in the style of Megatron-LM: one layer's weight is split
over the ranks of a process group, each rank computes with its shard, and collectives joined
into the autograd graph put the pieces together.

- `ColumnParallelLinear` splits the weight by output rows: its input is replicated, its output
  is sharded along the last dim (or all-gathered with `gather_output=True`).
- `RowParallelLinear` splits the weight by input columns: its input is sharded along the last
  dim (split here unless `input_is_parallel=True`), the partial products are all-reduced.
- `VocabParallelEmbedding` splits the table by rows; `vocab_parallel_cross_entropy` takes the
  loss over logits whose vocabulary dim is sharded, without gathering them.
- `all_gather_batch` joins the batches of a group's ranks, so that tensor-parallel layers can
  follow data-parallel ones (SINGA's hybrid partitioning).
- `model_parallel_seed` and `get_rng_state_tracker().fork()` give each rank of a group its own
  random stream for dropout on sharded activations, while the default stream stays the same on
  every rank.

A Column layer with `gather_output=False` followed by a Row layer with `input_is_parallel=True`
costs one all-reduce in forward and one in backward, whatever sits elementwise between them.

The collectives are autograd Functions whose backwards are each other (the all-reduce's backward
is the identity, the identity-with-all-reduced-gradient's backward is the all-reduce, the
all-gather's is the split and back), so gradients of gradients flow too. They assume what every
rank computes downstream is the same (replicated), as the layers are meant to be used.

Outside an initialized process group, or on a group of one rank, no collective runs and the
layers compute exactly what nn.Linear and nn.Embedding do. `from_linear` and `from_embedding`
keep this rank's slice of a full layer, so a model built alike on every rank can be converted.
"""

from __future__ import annotations

import contextlib
import math

from .. import creation
from .. import random as _random
from ..autograd import Function, no_grad
from ..nn import functional as F
from ..nn import init
from ..nn.layers import Embedding, Linear, _positive_int
from ..nn.module import Module, Parameter
from ..ops.shape import cat
from ..tensor import Tensor
from . import ReduceOp, all_gather, all_reduce, get_rank, get_world_size, is_initialized
from ._base import Group

# ---- the communication ops, as autograd Functions ----------------------------------------------


class _CopyToGroup(Function):
    """Identity forward; the gradient is all-reduced (Megatron's "f")."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        return _ReduceFromGroup.apply(grad, ctx.group), None


class _ReduceFromGroup(Function):
    """All-reduce (sum) forward; the gradient passes unchanged (Megatron's "g")."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = x.clone()
        all_reduce(out, ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return _CopyToGroup.apply(grad, ctx.group), None


class _GatherFromGroup(Function):
    """All-gather along the last dim, in rank order; the gradient is this rank's slice."""

    @staticmethod
    def forward(ctx, x, group, rank, size):
        ctx.args = (group, rank, size)
        x = x.contiguous()
        parts = [creation.empty_like(x) for _ in range(size)]
        all_gather(parts, x, group=group)
        return cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        return _SplitToGroup.apply(grad, *ctx.args), None, None, None


class _SplitToGroup(Function):
    """This rank's slice along the last dim; the gradient is all-gathered."""

    @staticmethod
    def forward(ctx, x, group, rank, size):
        ctx.args = (group, rank, size)
        n = x.shape[-1] // size
        return x.narrow(-1, rank * n, n).contiguous()

    @staticmethod
    def backward(ctx, grad):
        return _GatherFromGroup.apply(grad, *ctx.args), None, None, None


# ---- helpers -----------------------------------------------------------------------------------


def _shard_of(op: str, group) -> tuple:
    """(group, this rank's index in it, its size); (None, 0, 1) outside a process group."""
    if group is not None and not isinstance(group, Group):
        raise TypeError(f"{op}: group must be a dist.Group from new_group() or None, got "
                        f"{type(group).__name__}")
    if group is None and not is_initialized():
        return None, 0, 1
    rank, size = get_rank(group), get_world_size(group)
    if rank < 0:
        raise ValueError(f"{op}: this rank is not a member of {group}; every rank that builds "
                         f"the layer must belong to its group")
    return group, rank, size


def _per_rank(op: str, name: str, value: int, size: int) -> int:
    if value % size:
        raise ValueError(f"{op}: {name}={value} does not split evenly over {size} ranks; it "
                         f"must be a multiple of the group size")
    return value // size


def _check_last_dim(op: str, input, expected: int, what: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    if input.ndim == 0 or input.shape[-1] != expected:
        raise ValueError(f"{op}: input of shape {tuple(input.shape)} does not match the layer: "
                         f"the last input dimension must be {expected} ({what})")


def _init_linear(weight: Tensor, bias: Tensor | None, in_features: int) -> None:
    # nn.Linear's kaiming_uniform_(a=sqrt(5)) with the fan-in of the full layer, not the shard's
    bound = math.sqrt(3.0) * init.calculate_gain("leaky_relu", math.sqrt(5)) / \
        math.sqrt(in_features)
    init.uniform_(weight, -bound, bound)
    if bias is not None:
        b = 1.0 / math.sqrt(in_features)
        init.uniform_(bias, -b, b)


def _check_from(op: str, layer, cls) -> None:
    if not isinstance(layer, cls):
        raise TypeError(f"{op}: expected an nn.{cls.__name__}, got {type(layer).__name__}")


# ---- layers ------------------------------------------------------------------------------------


class _ParallelLinear(Module):
    """What the two parallel linears share: their sizes, the group, the weight shard (split
    along `split`, "out_features" or "in_features") and the bias, initialised as nn.Linear's
    full layer would be."""

    def _build(self, in_features: int, out_features: int, bias: bool, group, split: str,
               device, dtype) -> int:
        """Set the layer up; returns the features of `split` this rank holds."""
        name = type(self).__name__
        self.in_features = _positive_int(name, "in_features", in_features)
        self.out_features = _positive_int(name, "out_features", out_features)
        self.group, self.tp_rank, self.tp_size = _shard_of(name, group)
        full = out_features if split == "out_features" else in_features
        per = _per_rank(name, split, full, self.tp_size)
        shape = (per, in_features) if split == "out_features" else (out_features, per)
        self.weight = Parameter(creation.empty(*shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(creation.empty(shape[0], dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        return per

    def reset_parameters(self) -> None:
        _init_linear(self.weight, self.bias, self.in_features)


class ColumnParallelLinear(_ParallelLinear):
    """nn.Linear with the weight split by output rows over the ranks of group: rank r holds
    rows [r*out/R, (r+1)*out/R) of weight and bias (out_features must divide evenly).

    The input is the full (replicated) one; its gradient is all-reduced in backward. The output
    is this rank's out/R features, or all of them, gathered in rank order along the last dim,
    with gather_output=True.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributed.tensor_parallel import ColumnParallelLinear
        >>> fc = ColumnParallelLinear(4, 6)   # no process group: all 6 rows here
        >>> fc(st.ones(2, 4)).shape, fc.weight.shape
        ((2, 6), (6, 4))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 gather_output: bool = True, group: Group | None = None, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.gather_output = bool(gather_output)
        self.out_features_per_rank = self._build(in_features, out_features, bias, group,
                                                 "out_features", device, dtype)

    @classmethod
    def from_linear(cls, linear: Linear, group: Group | None = None,
                    gather_output: bool = True) -> ColumnParallelLinear:
        """This rank's rows of a full nn.Linear (weight and bias copied, not shared).

        Example:
            >>> from singa_tensor import nn
            >>> from singa_tensor.distributed.tensor_parallel import ColumnParallelLinear
            >>> full = nn.Linear(3, 4)
            >>> bool((ColumnParallelLinear.from_linear(full).weight == full.weight).all())
            True
        """
        _check_from(f"{cls.__name__}.from_linear", linear, Linear)
        w = linear.weight
        m = cls(linear.in_features, linear.out_features, linear.bias is not None, gather_output,
                group, device=w.device, dtype=w.dtype)
        rows = slice(m.tp_rank * m.out_features_per_rank,
                     (m.tp_rank + 1) * m.out_features_per_rank)
        with no_grad():
            m.weight.copy_(w[rows])
            if m.bias is not None:
                m.bias.copy_(linear.bias[rows])
        return m

    def forward(self, input: Tensor) -> Tensor:
        _check_last_dim(type(self).__name__, input, self.in_features, "in_features")
        if self.tp_size == 1:
            return F.linear(input, self.weight, self.bias)
        out = F.linear(_CopyToGroup.apply(input, self.group), self.weight, self.bias)
        if self.gather_output:
            out = _GatherFromGroup.apply(out, self.group, self.tp_rank, self.tp_size)
        return out

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, gather_output={self.gather_output}, "
                f"rank={self.tp_rank}/{self.tp_size}")


class RowParallelLinear(_ParallelLinear):
    """nn.Linear with the weight split by input columns over the ranks of group: rank r holds
    columns [r*in/R, (r+1)*in/R) of weight (in_features must divide evenly) and the whole bias.

    The input is split along its last dim here (its gradient all-gathered in backward), or is
    already this rank's in/R features with input_is_parallel=True (the output of a
    ColumnParallelLinear with gather_output=False). The partial products are all-reduced, then
    the bias is added once; the output is the full one on every rank.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributed.tensor_parallel import RowParallelLinear
        >>> fc = RowParallelLinear(4, 6)   # no process group: all 4 columns here
        >>> fc(st.ones(2, 4)).shape, fc.weight.shape
        ((2, 6), (6, 4))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 input_is_parallel: bool = False, group: Group | None = None, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_is_parallel = bool(input_is_parallel)
        self.in_features_per_rank = self._build(in_features, out_features, bias, group,
                                                "in_features", device, dtype)

    @classmethod
    def from_linear(cls, linear: Linear, group: Group | None = None,
                    input_is_parallel: bool = False) -> RowParallelLinear:
        """This rank's columns of a full nn.Linear's weight, and its whole bias (copied).

        Example:
            >>> from singa_tensor import nn
            >>> from singa_tensor.distributed.tensor_parallel import RowParallelLinear
            >>> full = nn.Linear(3, 4)
            >>> bool((RowParallelLinear.from_linear(full).weight == full.weight).all())
            True
        """
        _check_from(f"{cls.__name__}.from_linear", linear, Linear)
        w = linear.weight
        m = cls(linear.in_features, linear.out_features, linear.bias is not None,
                input_is_parallel, group, device=w.device, dtype=w.dtype)
        n = m.in_features_per_rank
        with no_grad():
            m.weight.copy_(w.narrow(1, m.tp_rank * n, n))
            if m.bias is not None:
                m.bias.copy_(linear.bias)
        return m

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        if self.input_is_parallel:
            _check_last_dim(name, input, self.in_features_per_rank,
                            "in_features / group size, as input_is_parallel=True")
        else:
            _check_last_dim(name, input, self.in_features, "in_features")
        if self.tp_size == 1:
            return F.linear(input, self.weight, self.bias)
        if not self.input_is_parallel:
            input = _SplitToGroup.apply(input, self.group, self.tp_rank, self.tp_size)
        out = _ReduceFromGroup.apply(F.linear(input, self.weight), self.group)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, input_is_parallel={self.input_is_parallel}, "
                f"rank={self.tp_rank}/{self.tp_size}")


class VocabParallelEmbedding(Module):
    """nn.Embedding with the table split by rows over the ranks of group: rank r holds ids
    [r*n/R, (r+1)*n/R) (num_embeddings must divide evenly). Each rank looks up the ids it holds
    (zeros for the others), then the results are all-reduced: the output is the full lookup on
    every rank. Initialised N(0, 1) like nn.Embedding.

    padding_idx (a global id, negative counting from the end) is nn.Embedding's: the rank
    holding that row starts it at zero and it receives no gradient. max_norm,
    scale_grad_by_freq and sparse, which nn.Embedding does not take either, raise
    NotImplementedError unless left at their defaults.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributed.tensor_parallel import VocabParallelEmbedding
        >>> emb = VocabParallelEmbedding(10, 3, padding_idx=0)
        >>> emb(st.tensor([[1, 9]])).shape, emb.weight[0].tolist()
        ((1, 2, 3), [0.0, 0.0, 0.0])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 group: Group | None = None, device=None, dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        for arg, value, default in (("max_norm", max_norm, None),
                                    ("scale_grad_by_freq", scale_grad_by_freq, False),
                                    ("sparse", sparse, False)):
            if value != default:
                raise NotImplementedError(f"{name}: {arg}={value!r} is not supported (only "
                                          f"{arg}={default!r}, as nn.Embedding here)")
        self.num_embeddings = _positive_int(name, "num_embeddings", num_embeddings)
        self.embedding_dim = _positive_int(name, "embedding_dim", embedding_dim)
        self.padding_idx = F._padding_index(name, padding_idx, num_embeddings)
        self.norm_type = norm_type
        self.group, self.tp_rank, self.tp_size = _shard_of(name, group)
        self.num_embeddings_per_rank = _per_rank(name, "num_embeddings", num_embeddings,
                                                 self.tp_size)
        self.vocab_start = self.tp_rank * self.num_embeddings_per_rank
        self.weight = Parameter(creation.empty(self.num_embeddings_per_rank, embedding_dim,
                                               dtype=dtype, device=device))
        self.reset_parameters()

    @property
    def local_padding_idx(self) -> int | None:
        """padding_idx as a row of this rank's shard; None when another rank holds it."""
        p = self.padding_idx
        if p is None or not self.vocab_start <= p < self.vocab_start + \
                self.num_embeddings_per_rank:
            return None
        return p - self.vocab_start

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        pad = self.local_padding_idx
        if pad is not None:
            with no_grad():
                self.weight[pad].fill_(0)

    @classmethod
    def from_embedding(cls, embedding: Embedding,
                       group: Group | None = None) -> VocabParallelEmbedding:
        """This rank's rows of a full nn.Embedding's table (copied), and its padding_idx.

        Example:
            >>> from singa_tensor import nn
            >>> from singa_tensor.distributed.tensor_parallel import VocabParallelEmbedding
            >>> full = nn.Embedding(6, 2, padding_idx=5)
            >>> m = VocabParallelEmbedding.from_embedding(full)
            >>> m.weight.shape, m.padding_idx
            ((6, 2), 5)
        """
        op = f"{cls.__name__}.from_embedding"
        _check_from(op, embedding, Embedding)
        w = embedding.weight
        m = cls(embedding.num_embeddings, embedding.embedding_dim, embedding.padding_idx,
                group=group, device=w.device, dtype=w.dtype)
        with no_grad():
            m.weight.copy_(w.narrow(0, m.vocab_start, m.num_embeddings_per_rank))
        return m

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor of ids, got {type(input).__name__}")
        if self.tp_size == 1:
            return F.embedding(input, self.weight, self.padding_idx)
        _check_ids(name, input, self.num_embeddings, "num_embeddings")
        end = self.vocab_start + self.num_embeddings_per_rank
        outside = (input < self.vocab_start) | (input >= end)
        local = (input - self.vocab_start).masked_fill(outside, 0)
        out = F.embedding(local, self.weight, self.local_padding_idx)
        out = out * (~outside).unsqueeze(-1).to(out.dtype)
        return _ReduceFromGroup.apply(out, self.group)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return (f"{self.num_embeddings}, {self.embedding_dim}{pad}, "
                f"rank={self.tp_rank}/{self.tp_size}")


def _check_ids(op: str, ids: Tensor, n: int, what: str, ignore_index: int | None = None) -> None:
    if ids.dtype.is_floating_point or ids.dtype.name == "bool":
        raise TypeError(f"{op}: expected an integer index tensor, got {ids.dtype.name}")
    if ids.numel():
        if ignore_index is not None:
            ids = ids.masked_fill(ids == ignore_index, 0)  # 0 is in range: it hides nothing
        lo, hi = int(ids.min().item()), int(ids.max().item())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            extra = "" if ignore_index is None else f", nor ignore_index={ignore_index}"
            raise IndexError(f"{op}: index {bad} is out of range for {what}={n}{extra}")


def vocab_parallel_cross_entropy(logits_local: Tensor, target: Tensor,
                                 group: Group | None = None, reduction: str = "mean",
                                 ignore_index: int = -100,
                                 label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy over logits whose vocabulary (last) dim is split over the ranks of group,
    rank r holding classes [r*V/R, (r+1)*V/R) (as a ColumnParallelLinear with
    gather_output=False makes them); target holds global class ids, shape logits.shape[:-1].

    All-reduces of one number per row (the max, the sum of exponentials, the target's logit,
    and with label_smoothing the sum of the logits) replace gathering the logits. Equal to
    F.cross_entropy on the full logits reshaped to (N, V), with F.cross_entropy's meaning of
    the arguments: targets equal to ignore_index count nothing (zero loss with "none"; "mean"
    divides by the number of the others), label_smoothing mixes the target with the uniform
    distribution over the V classes; reduction "mean", "sum" or "none" (per-row losses,
    target's shape).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> from singa_tensor.distributed.tensor_parallel import vocab_parallel_cross_entropy
        >>> logits, target = st.randn(4, 10), st.tensor([1, -100, 9, 3])
        >>> a = vocab_parallel_cross_entropy(logits, target, label_smoothing=0.1)
        >>> b = F.cross_entropy(logits, target, label_smoothing=0.1)
        >>> abs(a.item() - b.item()) < 1e-6
        True
    """
    name = "vocab_parallel_cross_entropy"
    if not isinstance(logits_local, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{name}: logits_local and target must be Tensors, got "
                        f"{type(logits_local).__name__} and {type(target).__name__}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"{name}: ignore_index must be an int, got {ignore_index!r}")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) or \
            not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    if not logits_local.dtype.is_floating_point or logits_local.ndim == 0:
        raise ValueError(f"{name}: logits_local must be a floating tensor of shape (..., V/R), "
                         f"got {logits_local.dtype.name} of shape {tuple(logits_local.shape)}")
    if tuple(target.shape) != tuple(logits_local.shape[:-1]):
        raise ValueError(f"{name}: target of shape {tuple(target.shape)} must have the shape "
                         f"of logits_local without its last dim, "
                         f"{tuple(logits_local.shape[:-1])}")
    group, rank, size = _shard_of(name, group)
    per = logits_local.shape[-1]
    eps = float(label_smoothing)
    if size == 1:
        loss = F.cross_entropy(logits_local.reshape(-1, per), target.reshape(-1),
                               ignore_index=ignore_index, reduction=reduction,
                               label_smoothing=eps)
        return loss.reshape(tuple(target.shape)) if reduction == "none" else loss
    vocab = per * size
    _check_ids(name, target, vocab, "the vocabulary size (V = last dim x group size)",
               ignore_index)
    with no_grad():
        top = logits_local.detach().amax(-1).contiguous()
        all_reduce(top, ReduceOp.MAX, group=group)
    # the max only keeps exp() in range: the loss does not depend on it, so it needs no gradient
    shifted = logits_local - top.unsqueeze(-1)
    log_z = _ReduceFromGroup.apply(shifted.exp().sum(-1), group).log()
    start = rank * per
    ignored = target == ignore_index
    outside = (target < start) | (target >= start + per) | ignored
    local = (target - start).masked_fill(outside, 0)
    mine = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1) * (~outside).to(shifted.dtype)
    picked = _ReduceFromGroup.apply(mine, group)
    if eps:
        # (1 - eps) (log_z - x_t) + eps * mean over the V classes of (log_z - x_j)
        every = _ReduceFromGroup.apply(shifted.sum(-1), group)
        loss = log_z - picked * (1.0 - eps) - every * (eps / vocab)
    else:
        loss = log_z - picked
    n_ignored = int(ignored.sum().item())
    if n_ignored:
        loss = loss.masked_fill(ignored, 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    # the mean over the targets that count (0/0 = nan when none does, as F.cross_entropy)
    return loss.sum() / float(loss.numel() - n_ignored)


# ---- the batch of a group, for tensor-parallel layers after data-parallel ones ---------------


class _GatherBatch(Function):
    """All-gather along dim 0 in rank order; the gradient is this rank's rows times the group
    size (see all_gather_batch)."""

    @staticmethod
    def forward(ctx, x, group, rank, size):
        ctx.args = (rank, size, x.shape[0])
        x = x.contiguous()
        parts = [creation.empty_like(x) for _ in range(size)]
        all_gather(parts, x, group=group)
        return cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad):
        rank, size, n = ctx.args
        return grad.narrow(0, rank * n, n) * float(size), None, None, None


def all_gather_batch(input: Tensor, group: Group | None = None) -> Tensor:
    """The group's whole batch: the inputs of its ranks (same shape on each) joined along dim 0
    in rank order. It is what tensor-parallel layers take after data-parallel ones in SINGA's
    hybrid partitioning: each rank runs the convolutional trunk on its own samples, and the
    ranks of a group then run the sharded classifier together on all of theirs.

    Backward gives each rank its rows of the gradient times the group size: that is the sum
    over the group's ranks of their gradients (the all-gather's adjoint, a reduce-scatter),
    which are equal because what follows is replicated on the group, so no communication is
    needed. With the layers before it averaged over all ranks (DistributedDataParallel), their
    gradient is then that of the mean loss over every rank's samples. Costs this rank's
    input bytes sent to each of the other size - 1 ranks in forward.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributed.tensor_parallel import all_gather_batch
        >>> all_gather_batch(st.ones(2, 3)).shape   # no process group: the input itself
        (2, 3)
    """
    name = "all_gather_batch"
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
    if input.ndim == 0:
        raise ValueError(f"{name}: input must have a batch dimension, got a 0-d tensor")
    group, rank, size = _shard_of(name, group)
    if size == 1:
        return input
    return _GatherBatch.apply(input, group, rank, size)


# ---- random streams: the same on every rank, or one per rank of a group -----------------------

MODEL_PARALLEL_RNG = "model-parallel-rng"
# far from small seeds, so that the per-rank streams do not reuse a seed given to manual_seed
_MODEL_PARALLEL_OFFSET = 0x7A3C_51E9


class RNGStatesTracker:
    """Named random streams beside the default one. Inside `with tracker.fork(name):` the
    default generator (the one dropout, rand and init draw from) continues the named stream;
    on leaving, the named stream keeps where it got to and the default stream resumes exactly
    where it was, as if the draws inside had not happened.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributed.tensor_parallel import RNGStatesTracker
        >>> t = RNGStatesTracker(); t.add("mine", 7)
        >>> _ = st.manual_seed(0); a = st.rand(2); b = st.rand(2)
        >>> _ = st.manual_seed(0); a2 = st.rand(2)
        >>> with t.fork("mine"):
        ...     c = st.rand(2)
        >>> st.rand(2).tolist() == b.tolist() and a2.tolist() == a.tolist()
        True
    """

    def __init__(self) -> None:
        self._states: dict = {}
        self._seeds: set = set()
        self._forked: set = set()

    def reset(self) -> None:
        """Forget every named stream."""
        self._states.clear()
        self._seeds.clear()

    def get_states(self) -> dict:
        """{name: (seed, offset)} of every named stream (for checkpoints)."""
        return dict(self._states)

    def set_states(self, states: dict) -> None:
        """Replace the named streams by those of get_states()."""
        if not isinstance(states, dict):
            raise TypeError(f"RNGStatesTracker.set_states: expected the dict of get_states(), "
                            f"got {type(states).__name__}")
        new = {}
        for k, v in states.items():
            try:
                seed, offset = (int(x) for x in v)
            except (TypeError, ValueError):
                raise ValueError(f"RNGStatesTracker.set_states: the state of {k!r} must be a "
                                 f"(seed, offset) pair, got {v!r}") from None
            new[k] = (seed, offset)
        self._states = new
        self._seeds = {s for s, _ in new.values()}

    def add(self, name: str, seed: int) -> None:
        """A new stream called name, starting from seed (both unused so far)."""
        op = "RNGStatesTracker.add"
        if not isinstance(name, str):
            raise TypeError(f"{op}: name must be a str, got {type(name).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"{op}: seed must be an int, got {type(seed).__name__}")
        if name in self._states:
            raise ValueError(f"{op}: a stream named {name!r} exists already")
        if seed in self._seeds:
            raise ValueError(f"{op}: seed {seed} is already used by another stream")
        self._seeds.add(seed)
        self._states[name] = _random.Generator().manual_seed(seed).get_state()

    @contextlib.contextmanager
    def fork(self, name: str = MODEL_PARALLEL_RNG):
        """Draw from the stream called name inside the block (see the class)."""
        if name not in self._states:
            raise RuntimeError(f"RNGStatesTracker.fork: no stream named {name!r}; call "
                               f"model_parallel_seed(seed) (which adds {MODEL_PARALLEL_RNG!r}) "
                               f"or add(name, seed) first")
        if name in self._forked:
            raise RuntimeError(f"RNGStatesTracker.fork: already inside fork({name!r}); a nested "
                               f"fork of the same stream would repeat its numbers")
        saved = _random.get_rng_state()
        _random.set_rng_state(self._states[name])
        self._forked.add(name)
        try:
            yield
        finally:
            self._forked.discard(name)
            self._states[name] = _random.get_rng_state()
            _random.set_rng_state(saved)


_TRACKER = RNGStatesTracker()


def get_rng_state_tracker() -> RNGStatesTracker:
    """The process's RNGStatesTracker, which model_parallel_seed sets up.

    Example:
        >>> from singa_tensor.distributed.tensor_parallel import get_rng_state_tracker
        >>> get_rng_state_tracker() is get_rng_state_tracker()
        True
    """
    return _TRACKER


def model_parallel_seed(seed: int, group: Group | None = None) -> None:
    """Seed the random streams for tensor parallelism: the default generator gets seed on every
    rank (dropout on replicated activations, initialisation: the same on all ranks), and the
    tracker's MODEL_PARALLEL_RNG stream gets a seed of its own on each rank of group (the
    world by default), so dropout on sharded activations inside
    `with get_rng_state_tracker().fork():` draws different numbers on each shard.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> from singa_tensor.distributed.tensor_parallel import (
        ...     get_rng_state_tracker, model_parallel_seed)
        >>> model_parallel_seed(1234)
        >>> with get_rng_state_tracker().fork():
        ...     y = F.dropout(st.ones(4, 8), 0.5)   # this rank's own mask
        >>> y.shape
        (4, 8)
    """
    name = "model_parallel_seed"
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{name}: seed must be an int, got {type(seed).__name__}")
    _, rank, _ = _shard_of(name, group)
    _random.manual_seed(seed)
    _TRACKER.reset()
    _TRACKER.add(MODEL_PARALLEL_RNG, seed + _MODEL_PARALLEL_OFFSET + rank)


__all__ = ["MODEL_PARALLEL_RNG", "ColumnParallelLinear", "RNGStatesTracker", "RowParallelLinear",
           "VocabParallelEmbedding", "all_gather_batch", "get_rng_state_tracker",
           "model_parallel_seed", "vocab_parallel_cross_entropy"]
