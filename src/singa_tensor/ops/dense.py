"""The two parameter ops of dense layers, linear and embedding.

Each is traced as one op so that ONNX export writes the node a reader expects (Gemm with
transB=1 or MatMul + Add, Gather on the weight) rather than the reshapes around it, which would
bake the traced batch size into the graph. For float32/float64/bfloat16/float16 tensors on one
device, linear runs as one fused op (`_linear_fused`): the bias is the product's starting value
and the weight is read transposed in place, so forward is one copy and one GEMM, and backward is
two GEMMs and one row sum, with no transposes, reshapes or broadcast sums in the graph. The
16-bit dtypes stay 16-bit throughout (output and gradients), each GEMM accumulating in float32
and rounding once (the bias is added before that rounding). nn.functional
re-exports them; they are not st.* names (PyTorch has none either).
"""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import OpSpec, apply, contiguous, copy_into, kernel, ptr, register, traced
from .conv_onednn import _launch, _planner
from .elementwise import add, where
from .index import index_select
from .layout import reshape, t, transpose
from .linalg import addmm, matmul
from .reduce import sum as _sum


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
    if _fusable(input, weight, bias):
        return apply(LinearFused, input, weight, bias)
    if bias is not None:
        if input.ndim == 2:
            return addmm(bias, input, t(weight))
        return add(matmul(input, t(weight)), bias)
    return matmul(input, t(weight))


_FUSED_DTYPES = (_dt.float32, _dt.float64, _dt.bfloat16, _dt.float16)
_HALF = (_dt.bfloat16, _dt.float16)


def _fusable(x: Tensor, w: Tensor, b: Tensor | None) -> bool:
    """Whether linear runs as the fused op: one float dtype, one device, and no empty dimension
    (an empty product is left to the composition, which needs no special cases)."""
    d = x.dtype
    return (d in _FUSED_DTYPES and w.dtype is d and x._device == w._device
            and (b is None or (b.dtype is d and b._device == x._device))
            and x.numel() > 0 and w.numel() > 0)


def _bias_plan(x: Tensor, b: Tensor, m: int, n: int, k: int, tb: int, ldb: int):
    """The backend's plan for x @ op(w) + b with the bias added by the product (the CPU's
    oneDNN, float32), or None: the bias is then copied into the output and the GEMM adds to
    it."""
    if x.dtype is not _dt.float32 or b._be is not x._be:
        return None
    find = _planner(x, "linear_plan")
    return find(m, n, k, tb, ldb) if find is not None else None


def _weight_operand(w: Tensor) -> tuple:
    """(transposed?, leading dim, w or a contiguous copy) for reading w (N, K) as the GEMM's
    right operand of x @ w.T: a contiguous weight is read transposed; the transpose of a
    contiguous (K, N) matrix is read as it lies."""
    n, k = w._shape
    if w._contig:
        return 1, max(k, 1), w
    if w._strides == (1, n):
        return 0, max(n, 1), w
    return 1, max(k, 1), contiguous(w)


@register
class LinearFused(OpSpec):
    """x @ w.T + b over x's last dim (x of any rank >= 1, w (N, K), b (N,) or None), with its
    own backward: dx = g @ w, dw = g^T @ x, db = the row sum of g."""

    name = "_linear_fused"
    onnx = None

    @staticmethod
    def forward(ctx, x, w, b):
        n, k = w._shape  # the public function sends no empty operand here
        m = x.numel() // k
        xc = contiguous(x)
        out = Tensor._empty(x._shape[:-1] + (n,), x.dtype, x._device, x._be)
        ctx.save_for_backward(x, w)
        ctx.has_bias = b is not None
        tb, ldb, wc = _weight_operand(w)
        plan = _bias_plan(x, b, m, n, k, tb, ldb) if b is not None else None
        if plan is not None:  # the backend adds the bias in the product's epilogue
            bc = contiguous(b)
            _launch(x, plan.run_bias, "onednn_linear_f32")(ptr(xc), ptr(wc), ptr(bc), ptr(out))
            return out
        beta = 0.0
        if b is not None:  # each row starts as the bias; the product adds to it
            copy_into(b._view((m, n), (0, b._strides[0]), b._offset), out._view((m, n), (n, 1), 0))
            beta = 1.0
        kernel(x, "gemm")(0, tb, m, n, k, 1.0, ptr(xc), k, ptr(wc), ldb, beta, ptr(out), n,
                          1, 0, 0, 0)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = (tuple(ctx.needs_input_grad) + (False,) * 3)[:3]
        n, k = w._shape
        if _ag._mode.enabled:  # create_graph: a composition, differentiable again
            g2, x2 = reshape(g, -1, n), reshape(x, -1, k)
            return (matmul(g, w) if need_x else None,
                    matmul(transpose(g2, 0, 1), x2) if need_w else None,
                    _sum(g2, 0) if need_b and ctx.has_bias else None)
        m = g.numel() // n
        gc = contiguous(g)
        gx = gw = gb = None
        if need_x:  # g (m, n) @ w (n, k): w as it lies is the untransposed operand
            gx = Tensor._empty(x._shape, x.dtype, x._device, x._be)
            ta, lda, wc = _weight_operand(w)
            kernel(gc, "gemm")(0, 1 - ta, m, k, n, 1.0, ptr(gc), n, ptr(wc), lda, 0.0, ptr(gx),
                               k, 1, 0, 0, 0)
        if need_w:  # g^T (n, m) @ x (m, k)
            gw = Tensor._empty((n, k), w.dtype, w._device, w._be)
            xc = contiguous(x)
            kernel(gc, "gemm")(1, 0, n, k, m, 1.0, ptr(gc), n, ptr(xc), k, 0.0, ptr(gw), k,
                               1, 0, 0, 0)
        if need_b and ctx.has_bias and g.dtype in _HALF:
            gb = _sum(reshape(gc, m, n), 0)  # the reduction's own float32 accumulation
        elif need_b and ctx.has_bias:
            gb = Tensor._empty((n,), g.dtype, g._device, g._be)
            kernel(gc, "sum")(ptr(gc), ptr(gb), 1, m, n)
        return gx, gw, gb

    @staticmethod
    def reference(x, w, b=None):
        return _linear_reference(x, w, b)

    @staticmethod
    def samples():
        wt = np.ascontiguousarray(_rand(4, 5, seed=3).T)
        return [((_rand(3, 4), _rand(5, 4, seed=1), _rand(5)), {}),
                ((_rand(2, 3, 4), _rand(5, 4, seed=1), None), {}),
                ((_rand(2, 3, 4), wt, _rand(5)), {}),
                ((_rand(4), _rand(2, 4, seed=2), _rand(2)), {})]

    @classmethod
    def onnx_export(cls, b, args, attrs, outs):
        x, w, bias = (tuple(args) + (None,) * 3)[:3]
        return _linear_onnx(Linear, b, {"input": x, "weight": w, "bias": bias}, attrs, outs)


def _linear_fused(x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    """The fused op itself (linear checks arguments and falls back where it does not apply)."""
    return apply(LinearFused, x, w, b)


LinearFused.fn = staticmethod(_linear_fused)


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
    if not x.dtype.is_floating_point or w.dtype is not x.dtype or (
            bias is not None and bias.dtype is not x.dtype):
        return NotImplemented  # the MatMul and Add it runs
    if x.ndim != 2:  # N-d input: x @ w^T, then the bias broadcast over the rows
        (wt,) = b.node("Transpose", [b.value(w)], perm=[1, 0])
        if bias is None:
            b.node("MatMul", [b.value(x), wt], outputs=outs)
        else:
            (y,) = b.node("MatMul", [b.value(x), wt])
            b.node("Add", [y, b.value(bias)], outputs=outs)
        return None
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
    try:
        rows = index_select(weight, 0, reshape(input, -1))
    except IndexError:
        raise IndexError(_embedding_range_message(input, weight.shape[0])) from None
    out = reshape(rows, *input.shape, weight.shape[1])
    if padding_idx is not None and out.requires_grad:
        # same values, but the padding rows come from a detached copy: no gradient reaches them
        pad = (input == padding_idx).unsqueeze(-1)
        out = where(pad, out.detach(), out)
    return out


def _embedding_range_message(input: Tensor, num: int) -> str:
    flat = input.detach().reshape(-1).cpu().numpy()
    bad = flat[(flat < 0) | (flat >= num)]
    return (f"embedding: index {int(bad[0]) if bad.size else '?'} is out of bounds for "
            f"num_embeddings={num} (indices must be in [0, {num - 1}])")


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
