"""Matrix products: matmul (the one primitive, one batched GEMM kernel call) and the ops built
on it: mm, bmm, mv, dot, outer, addmm and einsum.

Operands reach the kernel without a copy whenever BLAS can read them in place: a matrix whose
rows or whose columns are contiguous (a transposed view is passed as a transpose flag), with
batch dimensions that collapse to one stride (a broadcast operand has stride 0).

bfloat16 and float16 products stay in their dtype: the backend's st_gemm_bf16/f16 (oneDNN or
cuBLAS where they compute natively, else the operands widened for sgemm) accumulates in float32
and rounds each result once, and gradients come out in the same dtype.
"""

from __future__ import annotations

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import (
    REGISTRY,
    OpSpec,
    apply,
    broadcast_shapes,
    check_same_device,
    copy_into,
    kernel,
    ptr,
    register,
    tensor_method,
    traced,
)
from .elementwise import add, mul
from .layout import cast, expand, make_contiguous, permute, reshape, sum_to, transpose
from .reduce import sum as _sum

# ---- operand checks ----------------------------------------------------------------------------


def _check_operands(op: str, a, b) -> tuple:
    """Validate two matrix-product operands and bring them to one kernel dtype (the promoted
    one: float16 with bfloat16 is float32). float16 and bfloat16 products run in their own
    dtype, accumulated in float32 and rounded once."""
    for x, name in ((a, "first"), (b, "second")):
        if x.__class__ is not Tensor:
            raise TypeError(f"{op}: the {name} argument must be a Tensor, got {type(x).__name__}")
    for x in (a, b):
        if x.dtype is _dt.bool_:
            raise TypeError(f"{op}: not supported for dtype bool (shapes {a.shape} and "
                            f"{b.shape}); cast to an integer or float dtype first")
    check_same_device(op, a, b)
    d = a.dtype if a.dtype is b.dtype else _dt.promote(a.dtype, b.dtype)
    if a.dtype is not d:
        a = cast(a, d)
    if b.dtype is not d:
        b = cast(b, d)
    return a, b


def _mismatch(op: str, sa: tuple, sb: tuple, ka: int, kb: int):
    raise ValueError(f"{op}: shapes {sa} and {sb} cannot be multiplied (contracted dimensions "
                     f"have sizes {ka} and {kb})")


# ---- kernel operands ---------------------------------------------------------------------------


def _blas_layout(rows: int, cols: int, sr: int, sc: int):
    """(transpose flag, leading dimension) under which BLAS reads a rows x cols matrix with
    element strides (sr, sc) in place, or None when it cannot. A size-1 dimension's stride is
    meaningless, so it never disqualifies a layout."""
    if (cols == 1 or sc == 1) and (rows == 1 or sr >= max(cols, 1)):
        return 0, (sr if rows > 1 else max(cols, 1))
    if (rows == 1 or sr == 1) and (cols == 1 or sc >= max(rows, 1)):
        return 1, (sc if cols > 1 else max(rows, 1))
    return None


def _batch_stride(shape: tuple, strides: tuple, out_batch: tuple):
    """The single stride between consecutive matrices of an operand whose batch dims (shape,
    strides) are broadcast to out_batch, or None when they do not collapse to one stride."""
    off = len(out_batch) - len(shape)
    stride = expect = None
    for i in range(len(out_batch) - 1, -1, -1):
        n = out_batch[i]
        if n == 1:
            continue
        j = i - off
        s = 0 if j < 0 or shape[j] == 1 else strides[j]
        if stride is None:
            stride = s
        elif s != expect:
            return None
        expect = s * n
    return 0 if stride is None else stride


def _gemm_operand(x: Tensor, out_batch: tuple):
    """(trans, ld, batch stride, tensor) for the kernel; copies only when the layout forces it."""
    rows, cols = x._shape[-2], x._shape[-1]
    layout = _blas_layout(rows, cols, x._strides[-2], x._strides[-1])
    if layout is not None:
        s = _batch_stride(x._shape[:-2], x._strides[:-2], out_batch)
        if s is not None:
            return layout[0], layout[1], s, x
    full = Tensor._empty(out_batch + (rows, cols), x.dtype, x._device, x._be)
    copy_into(x, full)
    return 0, max(cols, 1), rows * cols, full


# ---- matmul ------------------------------------------------------------------------------------


@register
class Matmul(OpSpec):
    """a (..., m, k) @ b (..., k, n) with numpy broadcasting of the batch dims (both >= 2-d;
    the public function turns 1-d operands into matrices)."""

    name = "matmul"
    onnx = "MatMul"
    dtypes = ("float32", "float64", "int32", "int64")

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        m, k, n = a._shape[-2], a._shape[-1], b._shape[-1]
        ba, bb = a._shape[:-2], b._shape[:-2]
        batch_shape = ba if ba == bb else broadcast_shapes(ba, bb, op="matmul")
        out = Tensor._empty(batch_shape + (m, n), a.dtype, a._device, a._be)
        batch = 1
        for s in batch_shape:
            batch *= s
        if batch == 0 or m == 0 or n == 0:
            return out
        ta, lda, sa, a = _gemm_operand(a, batch_shape)
        tb, ldb, sb, b = _gemm_operand(b, batch_shape)
        rows = m
        if batch > 1 and sb == 0 and not ta and sa == m * lda:
            # the same right matrix for every batch entry and evenly spaced left rows: one
            # big product instead of many small ones (the common x @ W of a linear layer)
            rows, batch = m * batch, 1
        kernel(a, "gemm")(ta, tb, rows, n, k, 1.0, ptr(a), lda, ptr(b), ldb, 0.0, ptr(out), n,
                          batch, sa, sb, m * n)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad[:2]
        ga = gb = None
        if need_a and need_b and _blas_layout(*g._shape[-2:], *g._strides[-2:]) is None:
            g = make_contiguous(g)  # e.g. the expanded gradient of a sum: copy it once, not twice
        if need_a:
            ga = sum_to(matmul(g, transpose(b, -2, -1)), a._shape)
        if need_b:
            if b.ndim == 2 and a.ndim >= 2 and g.ndim >= 2:
                # a weight (shared over any batch dims): fold the batch into the rows, one
                # product, no sum afterwards. A transposed weight (x @ W.t(), as in linear)
                # gets its gradient in W's own layout, so the leaf receives contiguous memory
                k, n = a._shape[-1], g._shape[-1]
                a2, g2 = reshape(a, -1, k), reshape(g, -1, n)
                if b._strides == (1, b._shape[0]) and b._shape[0] > 1:
                    gb = transpose(matmul(transpose(g2, 0, 1), a2), 0, 1)
                else:
                    gb = matmul(transpose(a2, 0, 1), g2)
            else:
                gb = sum_to(matmul(transpose(a, -2, -1), g), b._shape)
        return ga, gb

    @staticmethod
    def reference(a, b):
        return np.matmul(a, b)

    @staticmethod
    def samples():
        r = np.random.default_rng(10)
        n = r.standard_normal
        return [
            ((n((3, 4)), n((4, 5))), {}),
            ((n((4,)), n((4,))), {}),
            ((n((4,)), n((4, 3))), {}),
            ((n((3, 4)), n((4,))), {}),
            ((n((2, 3, 4)), n((2, 4, 5))), {}),
            ((n((2, 1, 3, 4)), n((3, 4, 2))), {}),
            ((n((2, 3, 4)), n((4, 2))), {}),
            ((n((4,)), n((2, 4, 3))), {}),
            ((n((2, 3, 4)), n((4,))), {}),
            ((n((3, 1)), n((1, 2))), {}),
        ]


@tensor_method("matmul", "__matmul__", reflected="__rmatmul__")
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy/PyTorch rules: 1-d @ 1-d is a dot product; a 1-d first
    operand gets a leading 1 (removed afterwards), a 1-d second operand a trailing 1; batch
    dimensions broadcast.

    Example:
        >>> import singa_tensor as st
        >>> st.matmul(st.ones(2, 3), st.ones(3, 4)).shape
        (2, 4)
        >>> st.matmul(st.ones(5, 2, 3), st.ones(3)).shape
        (5, 2)
    """
    a, b = _check_operands("matmul", a, b)
    sa, sb = a._shape, b._shape
    if not sa or not sb:
        raise ValueError(f"matmul: both arguments need to be at least 1-D, but they are "
                         f"{len(sa)}-D and {len(sb)}-D (shapes {sa} and {sb})")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        _mismatch("matmul", sa, sb, ka, kb)
    if len(sa) > 2 and len(sb) > 2 and sa[:-2] != sb[:-2]:
        try:
            broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            raise ValueError(f"matmul: batch dimensions {sa[:-2]} and {sb[:-2]} of shapes {sa} "
                             f"and {sb} cannot be broadcast together") from None
    a2 = reshape(a, 1, ka) if len(sa) == 1 else a
    b2 = reshape(b, kb, 1) if len(sb) == 1 else b
    out = apply(Matmul, a2, b2)
    if len(sa) == 1 or len(sb) == 1:
        shape = out._shape
        if len(sa) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(sb) == 1:
            shape = shape[:-1]
        out = reshape(out, *shape)
    return out


Matmul.fn = staticmethod(matmul)


@tensor_method()
def mm(a: Tensor, b: Tensor) -> Tensor:
    """Product of two matrices (no broadcasting).

    Example:
        >>> import singa_tensor as st
        >>> st.mm(st.eye(2), st.tensor([[1.0, 2.0], [3.0, 4.0]])).tolist()
        [[1.0, 2.0], [3.0, 4.0]]
    """
    _expect_dims("mm", (a, b), (2, 2), "2-D matrices")
    if a.shape[1] != b.shape[0]:
        _mismatch("mm", a.shape, b.shape, a.shape[1], b.shape[0])
    return matmul(a, b)


@tensor_method()
def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched product of (B, n, m) and (B, m, p) tensors (no broadcasting).

    Example:
        >>> import singa_tensor as st
        >>> st.bmm(st.ones(4, 2, 3), st.ones(4, 3, 5)).shape
        (4, 2, 5)
    """
    _expect_dims("bmm", (a, b), (3, 3), "3-D tensors")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"bmm: batch sizes differ: shapes {a.shape} and {b.shape}")
    if a.shape[2] != b.shape[1]:
        _mismatch("bmm", a.shape, b.shape, a.shape[2], b.shape[1])
    return matmul(a, b)


@tensor_method()
def mv(a: Tensor, v: Tensor) -> Tensor:
    """Matrix-vector product.

    Example:
        >>> import singa_tensor as st
        >>> st.mv(st.tensor([[1.0, 2.0], [3.0, 4.0]]), st.tensor([1.0, 1.0])).tolist()
        [3.0, 7.0]
    """
    _expect_dims("mv", (a, v), (2, 1), "a 2-D matrix and a 1-D vector")
    if a.shape[1] != v.shape[0]:
        _mismatch("mv", a.shape, v.shape, a.shape[1], v.shape[0])
    return matmul(a, v)


@tensor_method()
def dot(a: Tensor, b: Tensor) -> Tensor:
    """Inner product of two 1-D tensors of the same length (a 0-d result).

    Example:
        >>> import singa_tensor as st
        >>> st.dot(st.tensor([1.0, 2.0]), st.tensor([3.0, 4.0])).item()
        11.0
    """
    _expect_dims("dot", (a, b), (1, 1), "1-D tensors")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"dot: 1-D tensors of different lengths: shapes {a.shape} and "
                         f"{b.shape} (contracted dimensions have sizes {a.shape[0]} and "
                         f"{b.shape[0]})")
    return matmul(a, b)


@tensor_method()
def outer(a: Tensor, b: Tensor) -> Tensor:
    """Outer product of two 1-D tensors: out[i, j] = a[i] * b[j].

    Example:
        >>> import singa_tensor as st
        >>> st.outer(st.tensor([1.0, 2.0]), st.tensor([1.0, 10.0])).tolist()
        [[1.0, 10.0], [2.0, 20.0]]
    """
    _expect_dims("outer", (a, b), (1, 1), "1-D tensors")
    _check_operands("outer", a, b)
    return mul(reshape(a, a.shape[0], 1), reshape(b, 1, b.shape[0]))


@tensor_method()
@traced("addmm")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0,
          alpha: float = 1.0) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2), input broadcast to the product's shape (ONNX Gemm).
    With beta == 0, input is ignored (NaNs in it do not propagate).

    Example:
        >>> import singa_tensor as st
        >>> st.addmm(st.ones(2), st.eye(2), st.eye(2), alpha=2.0).tolist()
        [[3.0, 1.0], [1.0, 3.0]]
    """
    prod = out = mm(mat1, mat2)
    if alpha != 1:
        out = mul(out, alpha)
    if beta == 0:
        return result_dtype(out, prod, prod)
    if input.__class__ is not Tensor:
        raise TypeError(f"addmm: input must be a Tensor, got {type(input).__name__}")
    if broadcast_shapes(input.shape, out.shape, op="addmm") != out.shape:
        raise ValueError(f"addmm: input of shape {input.shape} does not broadcast to the "
                         f"product's shape {out.shape}")
    return result_dtype(add(out, input if beta == 1 else mul(input, beta)), prod, input)


def result_dtype(out: Tensor, product: Tensor, input: Tensor) -> Tensor:
    """out (beta * input + alpha * product, composed) in the dtype the fused op has: the
    promotion of input's and product's dtypes, so bfloat16 operands give bfloat16 even where the
    elementwise steps computed in float32."""
    want = product.dtype if product.dtype is input.dtype else _dt.promote(product.dtype,
                                                                          input.dtype)
    return out if out.dtype is want else cast(out, want)


def _expect_dims(op: str, tensors: tuple, ndims: tuple, what: str) -> None:
    for x in tensors:
        if x.__class__ is not Tensor:
            raise TypeError(f"{op}: expected Tensors, got {type(x).__name__}")
    if tuple(x.ndim for x in tensors) != ndims:
        raise ValueError(f"{op}: expected {what}, got shapes "
                         f"{' and '.join(str(x.shape) for x in tensors)}")


def _composite(name: str, fn, reference, samples, onnx=None, dtypes=("float32", "float64")):
    class Spec(OpSpec):
        pass

    Spec.__name__ = Spec.__qualname__ = name.title()
    Spec.name = name
    Spec.onnx = onnx
    Spec.composite = True
    Spec.dtypes = dtypes
    Spec.fn = staticmethod(fn)
    Spec.reference = staticmethod(reference)
    Spec.samples = staticmethod(samples)
    register(Spec)
    return Spec


def _rand(*shape, seed=11):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape)


_INT = ("float32", "float64", "int32", "int64")
_composite("mm", mm, np.matmul, lambda: [((_rand(3, 4), _rand(4, 2)), {})], dtypes=_INT)
_composite("bmm", bmm, np.matmul, lambda: [((_rand(2, 3, 4), _rand(2, 4, 5)), {})], dtypes=_INT)
_composite("mv", mv, np.matmul, lambda: [((_rand(3, 4), _rand(4)), {})], dtypes=_INT)
_composite("dot", dot, np.dot, lambda: [((_rand(5), _rand(5, seed=3)), {})], dtypes=_INT)
_composite("outer", outer, np.outer, lambda: [((_rand(3), _rand(4, seed=4)), {})], dtypes=_INT)
_composite(
    "addmm", addmm,
    lambda input, mat1, mat2, beta=1.0, alpha=1.0: beta * input + alpha * (mat1 @ mat2),
    lambda: [((_rand(3), _rand(2, 4), _rand(4, 3)), {"beta": 0.5, "alpha": 2.0}),
             ((_rand(2, 3), _rand(2, 4), _rand(4, 3)), {})],
    onnx="Gemm",
)

# ---- diagonal of two dims (einsum's repeated subscripts) ---------------------------------------


@register
class EinsumDiagonal(OpSpec):
    """x's diagonal over dims d1 < d2 of equal size, as a view: d2 is removed, d1 walks the
    diagonal (the layout einsum wants for a subscript repeated within one operand)."""

    name = "einsum_diagonal"
    onnx = None

    @staticmethod
    def forward(ctx, x, d1, d2):
        ctx.in_shape, ctx.d1, ctx.d2 = x._shape, d1, d2
        st = list(x._strides)
        st[d1] += st[d2]
        del st[d2]
        shape = x._shape[:d2] + x._shape[d2 + 1:]
        return x._view(shape, tuple(st), x._offset)

    @staticmethod
    def backward(ctx, g):
        from .. import creation

        shape, d1, d2 = ctx.in_shape, ctx.d1, ctx.d2
        n = shape[d1]
        spread = expand(reshape(g, *(g._shape[:d2] + (1,) + g._shape[d2:])), *shape)
        mask_shape = [1] * len(shape)
        mask_shape[d1] = mask_shape[d2] = n
        mask = reshape(creation.eye(n, dtype=g.dtype, device=g.device), *mask_shape)
        return (mul(spread, mask),)

    @staticmethod
    def reference(x, d1, d2):
        return np.moveaxis(np.diagonal(x, axis1=d1, axis2=d2), -1, d1)

    @staticmethod
    def samples():
        return [((_rand(3, 3),), {"d1": 0, "d2": 1}), ((_rand(3, 2, 4, 3),), {"d1": 0, "d2": 3})]


def _diagonal(x: Tensor, d1: int, d2: int) -> Tensor:
    """The diagonal over dims d1 and d2 (equal sizes), as a view moved to the last dim; used by
    einsum for a label repeated within one operand.

    Example:
        >>> import singa_tensor as st
        >>> st.ops.linalg._diagonal(st.eye(3), 0, 1).tolist()
        [1.0, 1.0, 1.0]
    """
    if x._shape[d1] != x._shape[d2]:
        raise ValueError(f"einsum_diagonal: dims {d1} and {d2} of shape {x._shape} differ")
    return apply(EinsumDiagonal, x, d1, d2)


EinsumDiagonal.fn = staticmethod(_diagonal)

# ---- einsum ------------------------------------------------------------------------------------


def _parse_term(op: str, term: str, equation: str) -> list:
    """Subscripts of one operand: letters, and "..." as the token None."""
    out, i = [], 0
    while i < len(term):
        c = term[i]
        if term.startswith("...", i):
            if None in out:
                raise ValueError(f"{op}: more than one '...' in subscripts {term!r} of "
                                 f"equation {equation!r}")
            out.append(None)
            i += 3
            continue
        if not (c.isascii() and c.isalpha()):
            raise ValueError(f"{op}: invalid subscript {c!r} in equation {equation!r} (use "
                             "letters a-z, A-Z and '...')")
        out.append(c)
        i += 1
    return out


def _einsum_labels(equation: str, shapes: list) -> tuple:
    """Per-operand label lists, the output labels and each label's size. Letters label
    themselves; the dims an ellipsis covers get integer labels counted from the right (1 is
    the last), so that they broadcast like numpy's."""
    op = "einsum"
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise ValueError(f"{op}: equation {equation!r} must have at most one '->'")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"{op}: equation {equation!r} has subscripts for {len(terms)} "
                         f"operand(s) but {len(shapes)} tensor(s) were given")
    labels, sizes, n_ell = [], {}, 0
    for idx, (term, shape) in enumerate(zip(terms, shapes)):
        toks = _parse_term(op, term, equation)
        n_named = len(toks) - (None in toks)
        if (None in toks and n_named > len(shape)) or (None not in toks and
                                                        n_named != len(shape)):
            raise ValueError(f"{op}: subscripts {term!r} of operand {idx} do not match its "
                             f"shape {tuple(shape)} (equation {equation!r})")
        e = len(shape) - n_named
        labs = []
        for t in toks:
            if t is None:
                labs.extend(range(e, 0, -1))
                n_ell = max(n_ell, e)
            else:
                labs.append(t)
        for lab in set(labs):
            rep = {size for lb, size in zip(labs, shape) if lb == lab}
            if len(rep) > 1:
                raise ValueError(f"{op}: subscript {lab!r} is repeated in operand {idx} over "
                                 f"dims of different sizes, shape {tuple(shape)} (equation "
                                 f"{equation!r}); a repeated subscript takes a diagonal")
        for lab, size in zip(labs, shape):
            old = sizes.get(lab)
            if old is None or old == 1:
                sizes[lab] = size
            elif size != 1 and size != old:
                name = repr(lab) if isinstance(lab, str) else "'...'"
                raise ValueError(f"{op}: subscript {name} has size {old} in one operand but "
                                 f"{size} in operand {idx} (equation {equation!r}, shapes "
                                 f"{', '.join(str(tuple(s)) for s in shapes)})")
        labels.append(labs)
    ell = list(range(n_ell, 0, -1))
    if "->" not in eq:
        counts: dict = {}
        for labs in labels:
            for lab in labs:
                if isinstance(lab, str):
                    counts[lab] = counts.get(lab, 0) + 1
        return labels, ell + sorted(c for c, k in counts.items() if k == 1), sizes
    out, rhs_toks = [], _parse_term(op, rhs, equation)
    for t in rhs_toks:
        if t is None:
            out.extend(ell)
            continue
        if t in out:
            raise ValueError(f"{op}: output subscript {t!r} appears more than once in "
                             f"{equation!r}")
        if t not in sizes:
            raise ValueError(f"{op}: output subscript {t!r} does not appear in the inputs of "
                             f"{equation!r}")
        out.append(t)
    if n_ell and None not in rhs_toks:
        raise ValueError(f"{op}: the inputs of {equation!r} use '...' so the output must too")
    return labels, out, sizes


def _arrange(x: Tensor, labs: list, order: list, other: dict) -> Tensor:
    """x permuted to the label order, with size-1 dims of labels shared with the other operand
    expanded to that operand's size (other: label -> size there)."""
    x = permute(x, *[labs.index(lab) for lab in order])
    target = tuple(max(n, other.get(lab, 1)) for lab, n in zip(order, x._shape))
    return expand(x, *target) if target != x._shape else x


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _contract(x: Tensor, lx: list, y: Tensor, ly: list, keep: set) -> tuple:
    """Contract two labelled operands over the labels they share that are not kept; shared
    kept labels become batch dims of one matmul, or of one broadcast multiply when nothing is
    summed."""
    sx, sy = set(lx), set(ly)
    drop = tuple(i for i, lab in enumerate(lx) if lab not in sy and lab not in keep)
    if drop:  # labels used by no later step (einsum pre-sums most of these)
        x, lx = _sum(x, drop), [lab for i, lab in enumerate(lx) if i not in drop]
    batch = [lab for lab in lx if lab in sy and lab in keep]
    contr = [lab for lab in lx if lab in sy and lab not in keep]
    xonly = [lab for lab in lx if lab not in sy]
    yonly = [lab for lab in ly if lab not in sx]
    xs, ys = dict(zip(lx, x._shape)), dict(zip(ly, y._shape))
    x = _arrange(x, lx, batch + xonly + contr, ys)
    y = _arrange(y, ly, batch + contr + yonly, xs)
    nb = len(batch)
    if not contr:
        x = reshape(x, *(x._shape + (1,) * len(yonly)))
        y = reshape(y, *(y._shape[:nb] + (1,) * len(xonly) + y._shape[nb:]))
        return mul(x, y), batch + xonly + yonly
    bshape = x._shape[:nb]
    mshape, nshape = x._shape[nb:nb + len(xonly)], y._shape[nb + len(contr):]
    bsz, k = _prod(bshape), _prod(x._shape[nb + len(xonly):])
    r = matmul(reshape(x, bsz, _prod(mshape), k), reshape(y, bsz, k, _prod(nshape)))
    return reshape(r, *(bshape + mshape + nshape)), batch + xonly + yonly


@traced("einsum")
def einsum(equation: str, *operands: Tensor) -> Tensor:
    """Einstein summation, as numpy.einsum: explicit ("ij,jk->ik") and implicit ("ij,jk")
    output, "..." for broadcast dims, and a subscript repeated within one operand for its
    diagonal ("ii->i", trace "ii"). Operands are contracted left to right, each step one
    batched matmul (or a broadcast multiply when nothing is summed).

    Example:
        >>> import singa_tensor as st
        >>> st.einsum("ij,jk->ik", st.ones(2, 3), st.ones(3, 4)).shape
        (2, 4)
        >>> st.einsum("ii", st.eye(3)).item()
        3.0
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a str, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    for i, x in enumerate(operands):
        if x.__class__ is not Tensor:
            raise TypeError(f"einsum: operand {i} must be a Tensor, got {type(x).__name__}")
        if x.dtype is _dt.bool_:
            raise TypeError(f"einsum: not supported for dtype bool (operand {i}, shape "
                            f"{x.shape})")
    check_same_device("einsum", *operands)
    result_dtype = operands[0].dtype
    for x in operands[1:]:
        result_dtype = _dt.promote(result_dtype, x.dtype)
    labels, out_labels, _ = _einsum_labels(equation, [x.shape for x in operands])

    ops = []
    for x, labs in zip(operands, labels):
        labs = list(labs)
        while len(set(labs)) < len(labs):
            i = next(i for i, lab in enumerate(labs) if labs.count(lab) > 1)
            j = labs.index(labs[i], i + 1)
            x = _diagonal(x, i, j)
            del labs[j]
        ops.append([x, labs])

    # labels in one operand only and not in the output are summed before any product
    for i, (x, labs) in enumerate(ops):
        elsewhere = set(out_labels).union(*(set(o[1]) for j, o in enumerate(ops) if j != i))
        lone = tuple(d for d, lab in enumerate(labs) if lab not in elsewhere)
        if lone:
            ops[i] = [_sum(x, lone), [lab for lab in labs if lab in elsewhere]]

    x, lx = ops[0]
    for i in range(1, len(ops)):
        keep = set(out_labels).union(*(set(o[1]) for o in ops[i + 1:]))
        x, lx = _contract(x, lx, ops[i][0], ops[i][1], keep)
    order = [lx.index(lab) for lab in out_labels]
    if order != list(range(len(order))):
        x = permute(x, *order)
    # sums widen int32; numpy keeps the dtype (a float product keeps the dtype it ran in, which
    # autocast may have lowered)
    if x.dtype is not result_dtype and not result_dtype.is_floating_point:
        return cast(x, result_dtype)
    return x


def _einsum_samples():
    eqs = [
        ("ij,jk->ik", (3, 4), (4, 2)),
        ("bij,bjk->bik", (2, 3, 4), (2, 4, 2)),
        ("i,i->", (4,), (4,)),
        ("i,j->ij", (3,), (2,)),
        ("ij->ji", (2, 3)),
        ("ij->", (2, 3)),
        ("ii->i", (3, 3)),
        ("ii", (3, 3)),
        ("bhqd,bhkd->bhqk", (1, 2, 3, 2), (1, 2, 4, 2)),
        ("...ij,...jk->...ik", (2, 3, 2), (2, 4)),
        ("ij,ij->ij", (2, 3), (2, 3)),
        ("ijk->kji", (2, 3, 4)),
        ("ij,jk,kl->il", (2, 3), (3, 2), (2, 2)),
    ]
    out = []
    for eq, *shapes in eqs:
        out.append(((eq,) + tuple(_rand(*s, seed=i) for i, s in enumerate(shapes)), {}))
    return out


@register
class Einsum(OpSpec):
    name = "einsum"
    onnx = "Einsum"
    composite = True
    dtypes = _INT

    @staticmethod
    def reference(equation, *operands):
        return np.einsum(equation, *operands)

    samples = staticmethod(_einsum_samples)


Einsum.fn = staticmethod(einsum)

# ---- diagonal, trace ----------------------------------------------------------------------------


def _diagonal_view(op: str, x: Tensor, offset: int, dim1: int, dim2: int):
    """(shape, strides, storage offset) of x's diagonal: the other dims, then the diagonal."""
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    nd = x.ndim
    if nd < 2:
        raise ValueError(f"{op}: needs a tensor of at least 2 dims, got shape {x.shape}")
    for d in (dim1, dim2):
        if isinstance(d, bool) or not isinstance(d, int) or not -nd <= d < nd:
            raise IndexError(f"{op}: dim {d!r} is out of range for {nd} dims")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"{op}: offset must be an int, got {offset!r}")
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise ValueError(f"{op}: dim1 and dim2 are the same dim ({d1})")
    n1, n2 = x._shape[d1], x._shape[d2]
    s1, s2 = x._strides[d1], x._strides[d2]
    start = x._offset
    if offset >= 0:
        length = max(0, min(n1, n2 - offset))
        start += offset * s2 if length else 0
    else:
        length = max(0, min(n1 + offset, n2))
        start += -offset * s1 if length else 0
    rest = [d for d in range(nd) if d not in (d1, d2)]
    shape = tuple(x._shape[d] for d in rest) + (length,)
    strides = tuple(x._strides[d] for d in rest) + (s1 + s2,)
    return shape, strides, start


@register
class Diagonal(OpSpec):
    name = "diagonal"
    onnx = None

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.in_shape, ctx.args = x._shape, (offset, dim1, dim2)
        return x._view(*_diagonal_view("diagonal", x, offset, dim1, dim2))

    @staticmethod
    def backward(ctx, g):
        return (apply(DiagonalBackward, g, ctx.in_shape, *ctx.args),)

    @staticmethod
    def reference(x, offset=0, dim1=0, dim2=1):
        return np.diagonal(x, offset, dim1, dim2).copy()

    @staticmethod
    def samples():
        r = np.random.default_rng(12)
        x, y = r.standard_normal((4, 5)), r.standard_normal((2, 3, 4))
        return [((x,), {}), ((x,), {"offset": 2}), ((x,), {"offset": -1}),
                ((y,), {"dim1": 1, "dim2": 2}), ((y,), {"offset": 1, "dim1": 2, "dim2": 0})]


@register
class DiagonalBackward(OpSpec):
    name = "diagonal_backward"
    onnx = None

    @staticmethod
    def forward(ctx, g, in_shape, offset, dim1, dim2):
        ctx.args = (offset, dim1, dim2)
        from ..creation import zeros

        out = zeros(in_shape, dtype=g.dtype, device=g.device)
        if g.numel():
            copy_into(g, out._view(*_diagonal_view("diagonal", out, offset, dim1, dim2)))
        return out

    @staticmethod
    def backward(ctx, gg):
        return (apply(Diagonal, gg, *ctx.args),)

    @staticmethod
    def reference(g, in_shape, offset=0, dim1=0, dim2=1):
        out = np.zeros(in_shape, dtype=g.dtype)
        view = np.diagonal(out, offset, dim1, dim2)
        view.setflags(write=True)
        view[...] = g
        return out

    @staticmethod
    def samples():
        g = np.random.default_rng(13).standard_normal((3,))
        return [((g,), {"in_shape": (4, 5), "offset": 2}),
                ((g.reshape(1, 3),), {"in_shape": (3, 1, 4), "dim1": 0, "dim2": 2})]


@tensor_method()
def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of x over dims dim1 and dim2, as a view: `offset` > 0 above the main
    diagonal, < 0 below. The result has x's other dims, then the diagonal.

    Example:
        >>> import singa_tensor as st
        >>> x = st.arange(9.0).reshape(3, 3)
        >>> st.diagonal(x).tolist(), x.diagonal(1).tolist()
        ([0.0, 4.0, 8.0], [1.0, 5.0])
    """
    _diagonal_view("diagonal", x, offset, dim1, dim2)  # validate before recording
    return apply(Diagonal, x, offset, dim1, dim2)


def diagonal_backward(g: Tensor, in_shape, offset: int = 0, dim1: int = 0,
                      dim2: int = 1) -> Tensor:
    """Zeros of in_shape with g written on the diagonal (the adjoint of diagonal)."""
    return apply(DiagonalBackward, g, tuple(in_shape), offset, dim1, dim2)


Diagonal.fn = staticmethod(diagonal)
DiagonalBackward.fn = staticmethod(diagonal_backward)


@tensor_method()
def trace(x: Tensor) -> Tensor:
    """The sum of the main diagonal of a 2-D tensor.

    Example:
        >>> import singa_tensor as st
        >>> st.trace(st.arange(9.0).reshape(3, 3)).item()
        12.0
    """
    if x.__class__ is not Tensor:
        raise TypeError(f"trace: input must be a Tensor, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"trace: expected a 2-D tensor, got shape {x.shape}")
    return _sum(diagonal(x))


__all__ = ["addmm", "bmm", "diagonal", "dot", "einsum", "matmul", "mm", "mv", "outer", "trace"]


# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _addmm_onnx(cls, b, args, attrs, outs):
    c, a, m = args["input"], args["mat1"], args["mat2"]
    if not (a.dtype.is_floating_point and a.dtype is m.dtype):
        return NotImplemented
    beta, alpha = float(args["beta"]), float(args["alpha"])
    ins = [b.value(a), b.value(m)]
    if beta != 0:
        if c.dtype is not a.dtype:
            return NotImplemented
        ins.append(b.value(c))
    b.node("Gemm", ins, outputs=outs, alpha=alpha, beta=beta if beta != 0 else None)


def _einsum_onnx(cls, b, args, attrs, outs):
    ops = args["operands"]
    if b.opset < 12 or any(t.dtype is not ops[0].dtype for t in ops):
        return NotImplemented  # Einsum is opset 12: before it, the products it runs
    eq = args["equation"].replace(" ", "")
    subs = eq.split("->")[0].split(",")
    ell = {t.ndim - len(sub.replace("...", "")) for t, sub in zip(ops, subs) if "..." in sub}
    if len(ell) > 1:
        return NotImplemented  # ONNX wants every "..." to stand for as many dims
    b.node("Einsum", [b.value(t) for t in ops], outputs=outs, equation=eq)


REGISTRY["addmm"].onnx_export = classmethod(_addmm_onnx)
REGISTRY["einsum"].onnx_export = classmethod(_einsum_onnx)
