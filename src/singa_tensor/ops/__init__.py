"""All ops, gathered from their family modules, and the Tensor methods they declare.

Each family module defines its ops and declares, next to each public function, the Tensor
methods it provides (`_registry.tensor_method` / `bind_method`); importing the families and
calling `bind_methods` once puts them all on Tensor. There is no list of methods here.
"""

from __future__ import annotations

from . import (
    activation,
    aliases,
    attention,
    attention_fused,
    conv,
    conv3d,
    dense,
    elementwise,
    fused_updates,
    index,
    inplace,
    layout,
    linalg,
    linalg_compose,
    linalg_decomp,
    linalg_more,
    loss,
    masks,
    matrix_more,
    more_index,
    more_nn,
    more_sampling,
    more_scatter,
    more_shape,
    norm,
    numeric,
    numeric_special,
    padding,
    pointwise_more,
    pooling,
    rearrange,
    reduce,
    reduce_ext,
    reduce_more,
    rnn,
    rnn_traced,
    shape,
    sort,
    subscript,
)

# the declaration helpers, re-exported for op authors: singa_tensor.ops.unary_op ...
from ._registry import (  # noqa: F401
    METHODS,
    REGISTRY,
    OpSpec,
    apply,
    bind_method,
    bind_methods,
    composite,
    register,
    tensor_method,
)
from .elementwise import binary_op, unary_op  # noqa: F401
from .inplace import copy_, fill_, zero_

# the families whose __all__ make up the public functions (st.exp, st.linear ...), in the
# order their names are looked up
_FAMILIES = [elementwise, layout, reduce, shape, masks, padding, index, subscript, conv, norm,
             linalg, reduce_ext, loss, fused_updates, attention, attention_fused, rnn, rnn_traced,
             dense, sort, activation, pooling, rearrange, more_shape, more_index, more_scatter,
             linalg_decomp, linalg_compose, more_nn, more_sampling, pointwise_more,
             matrix_more, reduce_more, conv3d, linalg_more, aliases, numeric, numeric_special]
for _mod in reversed(_FAMILIES):
    globals().update({_k: getattr(_mod, _k) for _k in getattr(_mod, "__all__", ())})

bind_methods(inplace.inplace_method)

# what `from singa_tensor.ops import *` (and so the top-level package) takes; the declaration
# helpers (unary_op, binary_op, composite, tensor_method, bind_method) stay in singa_tensor.ops
__all__ = ["REGISTRY", "OpSpec", "apply", "register", "copy_", "fill_", "zero_"]
