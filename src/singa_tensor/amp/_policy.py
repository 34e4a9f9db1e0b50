"""Which ops autocast changes, and how: PyTorch's per-op lists for CPU and CUDA, by the names of
this package's ops (the op registry's spec names, which `apply` sees, and the loss functions).

- "lower": floating inputs (other than float64) are cast to the region's low dtype. These are
  the ops whose time is matrix products: every product reduces to the `matmul` spec or one of
  the fused layers below, so einsum, tensordot, bilinear and the RNN cells follow, as in PyTorch,
  where their decompositions reach the lowered `mm`/`bmm`.
- "float32": float16/bfloat16 inputs are cast to float32 (ops that lose accuracy in 16 bits).
- "promote": inputs are cast to the widest floating dtype among them (ops that need one dtype).
"""

from __future__ import annotations

LOWER, FLOAT32, PROMOTE = "lower", "float32", "promote"

# the ops that carry matrix products and convolutions, on both device types: the specs every
# product runs (so a product inside any composite is lowered), and the composites PyTorch's
# lists name as wholes (so their other inputs, such as addmm's added matrix, are cast too).
# Specs whose kernels are float32/float64 only (the recurrent loops and cells, fused attention)
# are not listed: their public functions run 16-bit inputs through float32 themselves, and a
# listed composite's body (attention's) runs without further casts.
_PRODUCTS = (
    "matmul", "_linear_fused", "_planned_conv2d",
    "linear", "mm", "bmm", "addmm", "baddbmm", "addbmm", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
    "scaled_dot_product_attention",
)
# CUDA lowers a few more (matrix-vector products, einsum, chained products)
_CUDA_PRODUCTS = _PRODUCTS + ("addmv", "addr", "mv", "einsum", "chain_matmul",
                              "linalg_multi_dot")

# losses and the other functions whose results PyTorch computes in float32 on both devices
LOSSES = (
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "nll_loss", "cross_entropy", "kl_div",
    "poisson_nll_loss", "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
    "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "ctc_loss",
)

_CPU_FLOAT32 = ("_softmax_cross_entropy", "prod", "cumprod", "cdist", "trace")

# CUDA also keeps transcendental pointwise ops, norms, softmax and sums in float32
_CUDA_FLOAT32 = _CPU_FLOAT32 + (
    "exp", "log", "log10", "log2", "log1p", "expm1", "reciprocal", "rsqrt", "sinh", "cosh",
    "tan", "acos", "asin", "erfinv", "pow", "pow_scalar", "softplus", "_layer_norm",
    "layer_norm", "_group_norm", "group_norm", "softmax", "log_softmax", "sum", "cumsum",
    "logsumexp", "norm", "linalg_vector_norm", "renorm", "cosine_similarity", "dist", "pdist",
)

_PROMOTE = ("cat", "stack", "addcmul", "addcdiv", "scatter_add", "index_put", "index_copy",
            "atan2", "cross")

CPU = {**{n: PROMOTE for n in _PROMOTE}, **{n: FLOAT32 for n in _CPU_FLOAT32},
       **{n: LOWER for n in _PRODUCTS}}
CUDA = {**{n: PROMOTE for n in _PROMOTE}, **{n: FLOAT32 for n in _CUDA_FLOAT32},
        **{n: LOWER for n in _CUDA_PRODUCTS}}

BY_DEVICE = {"cpu": CPU, "cuda": CUDA}


def policy(device_type: str, name: str) -> str | None:
    """The cast rule autocast applies to op `name` on `device_type` (None: runs unchanged).

    Example:
        >>> from singa_tensor.amp._policy import policy
        >>> policy("cpu", "matmul"), policy("cpu", "cross_entropy"), policy("cpu", "add")
        ('lower', 'float32', None)
    """
    table = BY_DEVICE.get(device_type)
    if table is None:
        return None
    if name in LOSSES:
        return FLOAT32
    return table.get(name)
