"""The two parameter ops of dense layers, linear and embedding, as composite ops.

Both are short compositions (a product plus a bias; a row lookup), but each is traced as one
op so that ONNX export writes the single node a reader expects (Gemm with transB=1, Gather on
the weight) rather than the reshapes around it, which would bake the traced batch size into
the graph. nn.functional re-exports them; they are not st.* names (PyTorch has none either).
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._registry import OpSpec, register, traced
from .elementwise import add, where
from .index import index_select
from .layout import reshape, t
from .linalg import addmm, matmul


def _tensor(op: str, x, name: str = "input") -> Tensor:
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


# ---- linear ------------------------------------------------------------------------------------


@traced("linear")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias, with weight of shape (out_features, in_features).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.linear(st.ones(2, 3), st.ones(4, 3), st.zeros(4)).tolist()[0]
        [3.0, 3.0, 3.0, 3.0]
    """
    _tensor("linear", input)
    _tensor("linear", weight, "weight")
    if input.dtype is not weight.dtype and not (input.dtype.is_floating_point
                                                and weight.dtype.is_floating_point):
        # matmul would promote an integer input to the weight's type; PyTorch refuses it
        raise RuntimeError(f"linear: mat1 and mat2 must have the same dtype, but got "
                           f"{input.dtype.name} (input) and {weight.dtype.name} (weight)")
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                         f"{tuple(weight.shape)}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear: input of shape {tuple(input.shape)} does not match weight of shape "
            f"{tuple(weight.shape)}: the last input dimension must be in_features="
            f"{weight.shape[1]}"
        )
    if bias is not None:
        _tensor("linear", bias, "bias")
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"linear: bias must have shape ({weight.shape[0]},), got "
                             f"{tuple(bias.shape)}")
        if input.ndim == 2:
            return addmm(bias, input, t(weight))
        return add(matmul(input, t(weight)), bias)
    return matmul(input, t(weight))


def _linear_reference(input, weight, bias=None):
    y = np.matmul(input, weight.T)
    return y if bias is None else y + bias


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape)


@register
class Linear(OpSpec):
    name = "linear"
    onnx = "Gemm"
    composite = True
    fn = staticmethod(linear)
    reference = staticmethod(_linear_reference)

    @staticmethod
    def samples():
        return [((_rand(3, 4), _rand(5, 4, seed=1), _rand(5)), {}),
                ((_rand(2, 3, 4), _rand(5, 4, seed=1)), {}),
                ((_rand(2, 3, 4), _rand(5, 4, seed=1), _rand(5)), {}),
                ((_rand(3, 4), _rand(5, 4, seed=2)), {})]


def _linear_onnx(cls, b, args, attrs, outs):
    x, w, bias = args["input"], args["weight"], args["bias"]
    if x.ndim != 2 or not x.dtype.is_floating_point or w.dtype is not x.dtype or (
            bias is not None and bias.dtype is not x.dtype):
        return NotImplemented  # N-d input: the MatMul and Add it runs
    ins = [b.value(x), b.value(w)] + ([b.value(bias)] if bias is not None else [])
    b.node("Gemm", ins, outputs=outs, transB=1)


Linear.onnx_export = classmethod(_linear_onnx)


# ---- embedding ---------------------------------------------------------------------------------


def padding_index(op: str, padding_idx, num: int) -> int | None:
    """padding_idx checked against num rows and made non-negative (None stays None)."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, int):
        raise TypeError(f"{op}: padding_idx must be an int or None, got "
                        f"{type(padding_idx).__name__}")
    if not -num <= padding_idx < num:
        raise ValueError(f"{op}: padding_idx must be within num_embeddings={num}, got "
                         f"{padding_idx}")
    return padding_idx % num


@traced("embedding")
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of weight picked by the integer indices in input: shape input.shape + (dim,).
    Entries equal to padding_idx pass no gradient to weight.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> w = st.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> F.embedding(st.tensor([[2, 1]]), w).tolist()
        [[[3.0, 4.0], [1.0, 2.0]]]
    """
    _tensor("embedding", input)
    _tensor("embedding", weight, "weight")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got "
                         f"shape {tuple(weight.shape)}")
    if input.dtype.is_floating_point or input.dtype.name == "bool":
        raise TypeError(f"embedding: expected an integer index tensor, got {input.dtype.name}")
    padding_idx = padding_index("embedding", padding_idx, weight.shape[0])
    out = reshape(index_select(weight, 0, reshape(input, -1)), *input.shape, weight.shape[1])
    if padding_idx is not None and out.requires_grad:
        # same values, but the padding rows come from a detached copy: no gradient reaches them
        pad = (input == padding_idx).unsqueeze(-1)
        out = where(pad, out.detach(), out)
    return out


def _embedding_reference(input, weight, padding_idx=None):
    return weight[input]


@register
class Embedding(OpSpec):
    name = "embedding"
    onnx = "Gather"
    composite = True
    fn = staticmethod(embedding)
    reference = staticmethod(_embedding_reference)

    @staticmethod
    def samples():
        idx = np.array([[0, 3, 1], [4, 4, 2]], dtype=np.int64)
        return [((idx, _rand(5, 3)), {}), ((idx[0], _rand(5, 2)), {"padding_idx": 4}),
                ((np.array(2, dtype=np.int64), _rand(3, 4)), {})]


def _embedding_onnx(cls, b, args, attrs, outs):
    # one Gather of whole rows: the output follows any batch and sequence length at run time
    b.node("Gather", [b.value(args["weight"]), b.value(args["input"])], outputs=outs, axis=0)


Embedding.onnx_export = classmethod(_embedding_onnx)

__all__: list[str] = []
