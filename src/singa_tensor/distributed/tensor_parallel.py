"""Tensor (intra-layer) model parallelism in the style of Megatron-LM: one layer's weight is split
over the ranks of a process group, each rank computes with its shard, and collectives joined
into the autograd graph put the pieces together.

- `ColumnParallelLinear` splits the weight by output rows: its input is replicated, its output
  is sharded along the last dim (or all-gathered with `gather_output=True`).
- `RowParallelLinear` splits the weight by input columns: its input is sharded along the last
  dim (split here unless `input_is_parallel=True`), the partial products are all-reduced.
- `VocabParallelEmbedding` splits the table by rows; `vocab_parallel_cross_entropy` takes the
  loss over logits whose vocabulary dim is sharded, without gathering them.

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

import math

from .. import creation
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

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributed.tensor_parallel import VocabParallelEmbedding
        >>> emb = VocabParallelEmbedding(10, 3)
        >>> emb(st.tensor([[1, 9]])).shape
        (1, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, group: Group | None = None,
                 device=None, dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        self.num_embeddings = _positive_int(name, "num_embeddings", num_embeddings)
        self.embedding_dim = _positive_int(name, "embedding_dim", embedding_dim)
        self.group, self.tp_rank, self.tp_size = _shard_of(name, group)
        self.num_embeddings_per_rank = _per_rank(name, "num_embeddings", num_embeddings,
                                                 self.tp_size)
        self.vocab_start = self.tp_rank * self.num_embeddings_per_rank
        self.weight = Parameter(creation.empty(self.num_embeddings_per_rank, embedding_dim,
                                               dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)

    @classmethod
    def from_embedding(cls, embedding: Embedding,
                       group: Group | None = None) -> VocabParallelEmbedding:
        """This rank's rows of a full nn.Embedding's table (copied); no padding_idx.

        Example:
            >>> from singa_tensor import nn
            >>> from singa_tensor.distributed.tensor_parallel import VocabParallelEmbedding
            >>> full = nn.Embedding(6, 2)
            >>> VocabParallelEmbedding.from_embedding(full).weight.shape
            (6, 2)
        """
        op = f"{cls.__name__}.from_embedding"
        _check_from(op, embedding, Embedding)
        if embedding.padding_idx is not None:
            raise ValueError(f"{op}: padding_idx={embedding.padding_idx} is not supported")
        w = embedding.weight
        m = cls(embedding.num_embeddings, embedding.embedding_dim, group, device=w.device,
                dtype=w.dtype)
        with no_grad():
            m.weight.copy_(w.narrow(0, m.vocab_start, m.num_embeddings_per_rank))
        return m

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor of ids, got {type(input).__name__}")
        if self.tp_size == 1:
            return F.embedding(input, self.weight)
        _check_ids(name, input, self.num_embeddings, "num_embeddings")
        end = self.vocab_start + self.num_embeddings_per_rank
        outside = (input < self.vocab_start) | (input >= end)
        local = (input - self.vocab_start).masked_fill(outside, 0)
        out = F.embedding(local, self.weight)
        out = out * (~outside).unsqueeze(-1).to(out.dtype)
        return _ReduceFromGroup.apply(out, self.group)

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}, "
                f"rank={self.tp_rank}/{self.tp_size}")


def _check_ids(op: str, ids: Tensor, n: int, what: str) -> None:
    if ids.dtype.is_floating_point or ids.dtype.name == "bool":
        raise TypeError(f"{op}: expected an integer index tensor, got {ids.dtype.name}")
    if ids.numel():
        lo, hi = int(ids.min().item()), int(ids.max().item())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{op}: index {bad} is out of range for {what}={n}")


def vocab_parallel_cross_entropy(logits_local: Tensor, target: Tensor,
                                 group: Group | None = None,
                                 reduction: str = "mean") -> Tensor:
    """Cross entropy over logits whose vocabulary (last) dim is split over the ranks of group,
    rank r holding classes [r*V/R, (r+1)*V/R) (as a ColumnParallelLinear with
    gather_output=False makes them); target holds global class ids, shape logits.shape[:-1].

    Three all-reduces of one number per row (the max, the sum of exponentials, the target's
    logit) replace gathering the logits. Equal to F.cross_entropy on the full logits (reshaped
    to (N, V)); reduction "mean", "sum" or "none" (per-row losses, target's shape).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> from singa_tensor.distributed.tensor_parallel import vocab_parallel_cross_entropy
        >>> logits, target = st.randn(4, 10), st.tensor([1, 0, 9, 3])
        >>> a = vocab_parallel_cross_entropy(logits, target)
        >>> abs(a.item() - F.cross_entropy(logits, target).item()) < 1e-6
        True
    """
    name = "vocab_parallel_cross_entropy"
    if not isinstance(logits_local, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{name}: logits_local and target must be Tensors, got "
                        f"{type(logits_local).__name__} and {type(target).__name__}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    if not logits_local.dtype.is_floating_point or logits_local.ndim == 0:
        raise ValueError(f"{name}: logits_local must be a floating tensor of shape (..., V/R), "
                         f"got {logits_local.dtype.name} of shape {tuple(logits_local.shape)}")
    if tuple(target.shape) != tuple(logits_local.shape[:-1]):
        raise ValueError(f"{name}: target of shape {tuple(target.shape)} must have the shape "
                         f"of logits_local without its last dim, "
                         f"{tuple(logits_local.shape[:-1])}")
    group, rank, size = _shard_of(name, group)
    per = logits_local.shape[-1]
    if size == 1:
        loss = F.cross_entropy(logits_local.reshape(-1, per), target.reshape(-1),
                               reduction=reduction)
        return loss.reshape(tuple(target.shape)) if reduction == "none" else loss
    _check_ids(name, target, per * size, "the vocabulary size (V = last dim x group size)")
    with no_grad():
        top = logits_local.detach().amax(-1).contiguous()
        all_reduce(top, ReduceOp.MAX, group=group)
    # the max only keeps exp() in range: the loss does not depend on it, so it needs no gradient
    shifted = logits_local - top.unsqueeze(-1)
    sum_exp = _ReduceFromGroup.apply(shifted.exp().sum(-1), group)
    start = rank * per
    outside = (target < start) | (target >= start + per)
    local = (target - start).masked_fill(outside, 0)
    mine = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1) * (~outside).to(shifted.dtype)
    loss = sum_exp.log() - _ReduceFromGroup.apply(mine, group)
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


__all__ = ["ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy"]
