"""ONNX import handlers for signal processing, detection, training and a few small ops.

Window functions, MelWeightMatrix, DFT and STFT; SwiGLU; NonMaxSuppression; the
ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum); MatMulInteger, BitCast,
TfIdfVectorizer; and the ai.onnx.ml Binarizer and ArrayFeatureExtractor.

The DFT is a pair of matmuls against cosine and sine matrices built in numpy, so gradients flow
to the signal; it runs in float64 because values that are zero in exact arithmetic must come out
far below ONNX's absolute tolerance. Ops whose outputs are integer or depend only on integer
metadata (windows, mel matrix, NMS indices, n-gram counts) are computed in numpy.
"""

from __future__ import annotations

import math

import numpy as np

import singa_tensor as st

from ..tensor import Tensor
from ._graph import ints
from ._handlers import handler
from .ops_math import _const, _dtype, _like, _need

_TRAINING = "ai.onnx.preview.training"
_ML = "ai.onnx.ml"


def _np_type(node, code: int):
    """The numpy type of an ONNX element type, after checking that we can hold it."""
    from onnx import helper

    _dtype(node, code)
    return helper.tensor_dtype_to_np_dtype(code)


def _scalar_int(node, t, what: str) -> int:
    v = ints(t)
    if len(v) != 1:
        raise node.fail(f"{what} must have one element, got shape {tuple(t.shape)}")
    return v[0]


def _numpy(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy())


# ---- window functions and mel matrix -------------------------------------------------------------


def _window(cosines):
    """A generalized cosine window: sum_k a_k cos(2 pi k n / N)."""

    def run(node, inputs, attrs):
        _need(node, inputs, 1)
        size = _scalar_int(node, inputs[0], "size")
        if size < 0:
            raise node.fail(f"size must be non-negative, got {size}")
        periodic = attrs.get("periodic", 1)
        n = np.arange(size, dtype=np.float64)
        denom = size if periodic else size - 1
        y = np.zeros(size)
        for k, a in enumerate(cosines):
            y = y + a * np.cos(2 * math.pi * k * n / max(denom, 1))
        if size == 1:  # a one-point window is 1 (a symmetric one would divide by N - 1 == 0)
            y = np.ones(1)
        return _const(node, y.astype(_np_type(node, attrs.get("output_datatype", 1))))

    return run


handler("HannWindow")(_window((0.5, -0.5)))
handler("HammingWindow")(_window((25 / 46, -21 / 46)))
handler("BlackmanWindow")(_window((0.42, -0.5, 0.08)))


@handler("MelWeightMatrix")
def mel_weight_matrix(node, inputs, attrs):
    _need(node, inputs, 5)
    n_mel, dft_len, rate = (_scalar_int(node, inputs[i], w) for i, w in
                            enumerate(("num_mel_bins", "dft_length", "sample_rate")))
    if n_mel <= 0 or dft_len <= 0 or rate <= 0:
        raise node.fail(f"num_mel_bins, dft_length and sample_rate must be positive, got "
                        f"{n_mel}, {dft_len}, {rate}")
    # the edges keep their ONNX element type: bin boundaries are floor divisions, and computing
    # them in another precision can move a boundary by one bin
    lo, hi = (_numpy(inputs[i]).reshape(-1)[0] for i in (3, 4))
    n_bins = dft_len // 2 + 1
    mel_lo = 2595 * np.log1p(lo / 700) / np.log(10)
    mel_hi = 2595 * np.log1p(hi / 700) / np.log(10)
    step = (mel_hi - mel_lo) / (n_mel + 2)
    hz = 700 * np.expm1((np.arange(n_mel + 2) * step + mel_lo) / 2595 * np.log(10))
    edges = (((dft_len + 1) * hz) // rate).astype(np.int64)
    if edges.min() < 0 or edges.max() >= n_bins + 1:
        raise node.fail(f"the mel band edges {edges.tolist()} fall outside the {n_bins} "
                        "spectrogram bins (check lower/upper_edge_hertz against sample_rate)")
    out = np.zeros((n_bins + 1, n_mel))  # one spare row: a right edge may equal n_bins
    for i in range(n_mel):
        left, center, right = edges[i:i + 3]
        if center == left:
            out[center, i] = 1
        else:
            j = np.arange(left, center + 1)
            out[j, i] = (j - left) / (center - left)
        if right > center:
            j = np.arange(center, right)
            out[j, i] = (right - j) / (right - center)
    return _const(node, out[:n_bins].astype(_np_type(node, attrs.get("output_datatype", 1))))


# ---- DFT and STFT --------------------------------------------------------------------------------


def _angles(rows: int, cols: int, n: int) -> np.ndarray:
    # reducing t*k modulo n first keeps the angle exact, so sin(pi) is 0 rather than 1e-16 * k
    t = np.arange(rows)[:, None]
    k = np.arange(cols)[None, :]
    return 2 * math.pi * ((t * k) % n) / n


def _dft_last(re: Tensor, im: Tensor | None, n: int, inverse: bool, onesided: bool):
    """DFT of length n over the last dim of float64 re (+ i im): (real, imag or None)."""
    m = re.shape[-1]
    dev = re.device

    def mat(a):
        return st.tensor(a, dtype=st.float64, device=dev)

    if inverse and onesided:
        # a one-sided spectrum of a real signal: bins 1..ceil(n/2)-1 stand for two conjugates
        bins = min(m, n // 2 + 1)
        ang = _angles(bins, n, n)
        c = np.full((bins, 1), 2.0)
        c[0] = 1.0
        if n % 2 == 0 and bins > n // 2:
            c[n // 2] = 1.0
        y = st.matmul(re[..., :bins], mat(c * np.cos(ang) / n))
        if im is not None:
            y = y - st.matmul(im[..., :bins], mat(c * np.sin(ang) / n))
        return y, None
    rows = min(m, n)  # samples past n are cropped, missing ones are zeros
    k = n // 2 + 1 if onesided and not inverse else n
    ang = _angles(rows, k, n)
    scale = 1.0 / n if inverse else 1.0
    cos, sin = mat(np.cos(ang) * scale), mat(np.sin(ang) * scale)
    sign = 1.0 if inverse else -1.0  # e^{+i} for the inverse, e^{-i} for the forward transform
    re, im = re[..., :rows], im[..., :rows] if im is not None else None
    y_re = st.matmul(re, cos)
    y_im = st.matmul(re, sin) * sign
    if im is not None:
        y_re = y_re - st.matmul(im, sin) * sign
        y_im = y_im + st.matmul(im, cos)
    return y_re, y_im


def _dft(node, x: Tensor, axis: int, n: int | None, inverse: bool, onesided: bool) -> Tensor:
    r = x.ndim
    if r < 2 or x.shape[-1] not in (1, 2):
        raise node.fail(f"input must end in a dim of 1 (real) or 2 (complex), got shape "
                        f"{tuple(x.shape)}")
    if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
        raise node.fail(f"axis {axis} is out of range for a rank-{r} input (the last dim holds "
                        "the real and imaginary parts)")
    axis %= r
    m = x.shape[axis]
    if n is None:
        n = 2 * (m - 1) if inverse and onesided else m
    if n <= 0:
        raise node.fail(f"dft_length must be positive, got {n}")
    xd = _like(x, st.float64)
    re = st.movedim(xd[..., 0], axis, -1)
    im = st.movedim(xd[..., 1], axis, -1) if x.shape[-1] == 2 else None
    y_re, y_im = _dft_last(re, im, n, inverse, onesided)
    parts = [y_re] if y_im is None else [y_re, y_im]
    y = st.movedim(st.stack(parts, dim=-1), -2, axis)
    return _like(y, x.dtype)


@handler("DFT")
def dft(node, inputs, attrs):
    _need(node, inputs, 1, 3)
    x = inputs[0]
    n = _scalar_int(node, inputs[1], "dft_length") if len(inputs) > 1 and inputs[1] is not None \
        else None
    if node.opset >= 20:
        if "axis" in attrs:
            raise node.fail("from opset 20 the axis is an input, not an attribute")
        axis = _scalar_int(node, inputs[2], "axis") if len(inputs) > 2 and inputs[2] is not None \
            else -2
    else:
        if len(inputs) > 2:
            raise node.fail(f"before opset 20 the axis is an attribute; got {len(inputs)} inputs")
        axis = attrs.get("axis", 1)
    return _dft(node, x, axis, n, bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0)))


@handler("STFT")
def stft(node, inputs, attrs):
    _need(node, inputs, 2, 4)
    x, step_t = inputs[0], inputs[1]
    window = inputs[2] if len(inputs) > 2 else None
    length_t = inputs[3] if len(inputs) > 3 else None
    if x.ndim != 3 or x.shape[-1] not in (1, 2):
        raise node.fail(f"signal must be [batch, length, 1 or 2], got shape {tuple(x.shape)}")
    step = _scalar_int(node, step_t, "frame_step")
    if window is not None and window.ndim != 1:
        raise node.fail(f"window must be 1-D, got shape {tuple(window.shape)}")
    if length_t is not None:
        frame = _scalar_int(node, length_t, "frame_length")
    else:
        frame = window.shape[0] if window is not None else x.shape[1]
    width = window.shape[0] if window is not None else frame
    sig_len = x.shape[1]
    if step <= 0 or frame <= 0 or frame > sig_len:
        raise node.fail(f"frame_step {step} and frame_length {frame} must be positive with "
                        f"frame_length <= signal length {sig_len}")
    n_frames = 1 + (sig_len - frame) // step
    idx = (np.arange(n_frames)[:, None] * step + np.arange(width)[None, :]).reshape(-1)
    if idx.max() >= sig_len:  # a window longer than the frame reads zeros past the end
        x = st.cat([x, st.zeros(x.shape[0], int(idx.max()) + 1 - sig_len, x.shape[2],
                                dtype=x.dtype, device=x.device)], dim=1)
    frames = st.index_select(x, 1, node.const(idx.astype(np.int64)))
    frames = frames.reshape(x.shape[0], n_frames, width, x.shape[2])
    if window is not None:
        frames = frames * _like(window, x.dtype).reshape(width, 1)
    return _dft(node, frames, 2, frame, False, bool(attrs.get("onesided", 1)))


# ---- SwiGLU --------------------------------------------------------------------------------------


@handler("SwiGLU")
def swiglu(node, inputs, attrs):
    _need(node, inputs, 2)
    a, b = inputs
    if tuple(a.shape) != tuple(b.shape):
        raise node.fail(f"A and B must have the same shape (no broadcasting), got "
                        f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype is not b.dtype:
        raise node.fail(f"A and B must have the same type, got {a.dtype} and {b.dtype}")
    alpha = float(attrs.get("alpha", 1.0))
    half = a.dtype in (st.float16, st.bfloat16)
    af, bf = (_like(a, st.float32), _like(b, st.float32)) if half else (a, b)
    return _like(af * st.sigmoid(af * alpha) * bf, a.dtype)


# ---- NonMaxSuppression ---------------------------------------------------------------------------


def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """[..., 4] boxes as [y_min, x_min, y_max, x_max]."""
    if center:
        cx, cy, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], -1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], -1)


def _overlaps(box: np.ndarray, others: np.ndarray, thr: float) -> np.ndarray:
    """Whether box's IoU with each of others exceeds thr (degenerate boxes never overlap)."""
    ih = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    iw = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.where((ih > 0) & (iw > 0), ih * iw, 0.0)
    a1 = (box[2] - box[0]) * (box[3] - box[1])
    a2 = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = a1 + a2 - inter
    ok = (inter > 0) & (a1 > 0) & (a2 > 0) & (union > 0)
    return ok & (inter > thr * np.where(ok, union, 1.0))


@handler("NonMaxSuppression")
def non_max_suppression(node, inputs, attrs):
    # selected indices are integers with no gradient: numpy computes them
    _need(node, inputs, 2, 5)
    boxes, scores = _numpy(inputs[0]), _numpy(inputs[1])
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
            or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise node.fail(f"boxes must be [batch, boxes, 4] and scores [batch, classes, boxes], "
                        f"got {boxes.shape} and {scores.shape}")
    opt = [inputs[i] if len(inputs) > i and inputs[i] is not None and inputs[i].numel() else None
           for i in (2, 3, 4)]
    limit = max(_scalar_int(node, opt[0], "max_output_boxes_per_class"), 0) if opt[0] is not None \
        else 0
    iou_thr = float(_numpy(opt[1]).reshape(-1)[0]) if opt[1] is not None else 0.0
    score_thr = float(_numpy(opt[2]).reshape(-1)[0]) if opt[2] is not None else None
    center = attrs.get("center_point_box", 0)
    if center not in (0, 1):
        raise node.fail(f"center_point_box must be 0 or 1, got {center}")
    corners = _corners(boxes.astype(np.float64), bool(center))
    picked = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            # a stable sort of -score: highest score first, ties keep the lower box index first
            order = np.argsort(-s, kind="stable")
            if score_thr is not None:
                order = order[s[order] > score_thr]
            kept: list = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not kept or not _overlaps(corners[b, i], corners[b, kept], iou_thr).any():
                    kept.append(int(i))
                    picked.append((b, c, int(i)))
    return node.const(np.asarray(picked, dtype=np.int64).reshape(-1, 3))


# ---- training ops (ai.onnx.preview.training) -----------------------------------------------------


def _groups(node, inputs, per: int) -> tuple:
    """R, T and the per-tensor input groups X..., G..., (V...,) (H...,)."""
    n = (len(inputs) - 2) // per
    if len(inputs) < 2 + per or (len(inputs) - 2) % per or any(v is None for v in inputs):
        raise node.fail(f"expected R, T and {per} groups of equally many tensors, got "
                        f"{len(inputs)} inputs")
    r, t = inputs[0], _scalar_int(node, inputs[1], "T")
    groups = [inputs[2 + k * n: 2 + (k + 1) * n] for k in range(per)]
    for k in range(per):
        for i in range(n):
            if tuple(groups[k][i].shape) != tuple(groups[0][i].shape):
                raise node.fail(f"tensor group {k} entry {i} has shape "
                                f"{tuple(groups[k][i].shape)}, X has {tuple(groups[0][i].shape)}")
    return r, t, groups


@handler(f"{_TRAINING}::Adagrad")
def adagrad(node, inputs, attrs):
    r, t, (xs, gs, hs) = _groups(node, inputs, 3)
    decay = float(attrs.get("decay_factor", 0.0))
    eps = float(attrs.get("epsilon", 1e-6))
    lam = float(attrs.get("norm_coefficient", 0.0))
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        rate = _like(r, x.dtype) / (1 + t * decay)
        g = g + x * lam
        h = h + g * g
        new_x.append(x - rate * g / (st.sqrt(h) + eps))
        new_h.append(h)
    return tuple(new_x + new_h)


@handler(f"{_TRAINING}::Adam")
def adam(node, inputs, attrs):
    r, t, (xs, gs, vs, hs) = _groups(node, inputs, 4)
    alpha = float(attrs.get("alpha", 0.9))
    beta = float(attrs.get("beta", 0.999))
    eps = float(attrs.get("epsilon", 1e-6))
    lam = float(attrs.get("norm_coefficient", 0.0))
    lam_post = float(attrs.get("norm_coefficient_post", 0.0))
    # bias correction only once steps have been taken (T counts them)
    corr = math.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else 1.0
    out_x, out_v, out_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g = g + x * lam
        v = v * alpha + g * (1 - alpha)
        h = h * beta + g * g * (1 - beta)
        x_new = x - _like(r, x.dtype) * corr * (v / (st.sqrt(h) + eps))
        out_x.append(x_new * (1 - lam_post))
        out_v.append(v)
        out_h.append(h)
    return tuple(out_x + out_v + out_h)


@handler(f"{_TRAINING}::Momentum")
def momentum(node, inputs, attrs):
    r, t, (xs, gs, vs) = _groups(node, inputs, 3)
    missing = [k for k in ("alpha", "beta", "mode", "norm_coefficient") if k not in attrs]
    if missing:
        raise node.fail(f"attributes {missing} are required")
    mode = attrs["mode"]
    if mode not in ("standard", "nesterov"):
        raise node.fail(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    alpha, lam = float(attrs["alpha"]), float(attrs["norm_coefficient"])
    beta = float(attrs["beta"]) if t > 0 else 1.0  # the first step takes the whole gradient
    out_x, out_v = [], []
    for x, g, v in zip(xs, gs, vs):
        rate = _like(r, x.dtype)
        g = g + x * lam
        v = v * alpha + g * beta
        step = v if mode == "standard" else g + v * alpha
        out_x.append(x - rate * step)
        out_v.append(v)
    return tuple(out_x + out_v)


# ---- integer ops ---------------------------------------------------------------------------------


@handler("MatMulInteger")
def matmul_integer(node, inputs, attrs):
    _need(node, inputs, 2, 4)
    a, b = inputs[0], inputs[1]
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        raise node.fail(f"A and B must be integer tensors, got {a.dtype} and {b.dtype}")
    a, b = _like(a, st.int64), _like(b, st.int64)
    za = inputs[2] if len(inputs) > 2 else None
    zb = inputs[3] if len(inputs) > 3 else None
    if za is not None:
        # a vector zero point of A is per row (one per M), so it lines up with dim -2
        za = _like(za, st.int64)
        a = a - (za.reshape(-1, 1) if za.ndim == 1 and a.ndim >= 2 else za)
    if zb is not None:
        b = b - _like(zb, st.int64)
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
        raise node.fail(f"shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied")
    return _like(st.matmul(a, b), st.int32)


_INT_WIDTH = {2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 12: 32, 13: 64}
_BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@handler("BitCast")
def bitcast(node, inputs, attrs):
    # a reinterpretation of bits has no gradient; integer types we widen to int64 carry their
    # value, whose low bits are the original pattern whatever the original signedness
    _need(node, inputs, 1)
    if "to" not in attrs:
        raise node.fail("attribute 'to' is required")
    to = attrs["to"]
    target = np.dtype(_np_type(node, to))
    x = inputs[0]
    a = _numpy(x)
    width = target.itemsize * 8
    if x.dtype.is_floating_point:
        if a.dtype.itemsize != target.itemsize:
            raise node.fail(f"{x.dtype} ({a.dtype.itemsize * 8} bits) cannot be bit-cast to "
                            f"{target} ({width} bits)")
        bits = a.view(_BITS[width])
    else:
        mask = (1 << width) - 1 if width < 64 else -1
        bits = (a.astype(np.int64) & mask).astype(np.uint64).astype(_BITS[width])
    return _const(node, bits.view(target))


@handler("TfIdfVectorizer")
def tfidf_vectorizer(node, inputs, attrs):
    # n-gram counts of integer tokens: integer work with no gradient, done in numpy
    _need(node, inputs, 1)
    x = inputs[0]
    if x.dtype.is_floating_point:
        raise node.fail(f"input must hold integer tokens, got {x.dtype}")
    if "pool_strings" in attrs:
        raise node.fail("string pools are not supported")
    need = ("mode", "min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts",
            "ngram_indexes", "pool_int64s")
    missing = [k for k in need if k not in attrs]
    if missing:
        raise node.fail(f"attributes {missing} are required")
    mode = attrs["mode"]
    if mode not in ("TF", "IDF", "TFIDF"):
        raise node.fail(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    lo, hi, skip = attrs["min_gram_length"], attrs["max_gram_length"], attrs["max_skip_count"]
    starts, where, pool = list(attrs["ngram_counts"]), list(attrs["ngram_indexes"]), \
        list(attrs["pool_int64s"])
    if not 1 <= lo <= hi or skip < 0:
        raise node.fail(f"need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, "
                        f"got {lo}, {hi}, {skip}")
    grams: dict = {}
    gram_id = 0
    for size, start in enumerate(starts, 1):
        end = starts[size] if size < len(starts) else len(pool)
        for p in range(start, end - size + 1, size):
            if lo <= size <= hi:
                if gram_id >= len(where):
                    raise node.fail(f"ngram_indexes has {len(where)} entries, fewer than the "
                                    "n-grams in the pool")
                grams[tuple(pool[p:p + size])] = where[gram_id]
            gram_id += 1
    width = max(where) + 1 if where else 0
    a = _numpy(x)
    if a.ndim > 2:
        raise node.fail(f"input must be [C] or [B, C], got shape {a.shape}")
    rows = a.reshape(-1, a.shape[-1] if a.ndim else 1)
    counts = np.zeros((rows.shape[0], width))
    for r, row in enumerate(rows.tolist()):
        for size in range(lo, hi + 1):
            # unigrams do not depend on the skip distance: count them once
            for d in range(1, 2 if size == 1 else skip + 2):
                for s in range(len(row) - (size - 1) * d):
                    j = grams.get(tuple(row[s:s + (size - 1) * d + 1:d]))
                    if j is not None:
                        counts[r, j] += 1
    w = np.asarray(attrs.get("weights", np.ones(width)), dtype=np.float64)
    if len(w) < width:
        raise node.fail(f"weights has {len(w)} entries, the output has {width}")
    if mode == "IDF":
        counts = (counts > 0) * w[:width]
    elif mode == "TFIDF":
        counts = counts * w[:width]
    return _const(node, counts.reshape((width,) if a.ndim < 2 else (-1, width))
                  .astype(np.float32))


# ---- ai.onnx.ml ----------------------------------------------------------------------------------


@handler(f"{_ML}::Binarizer")
def binarizer(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    return _like(st.gt(x, float(attrs.get("threshold", 0.0))), x.dtype)


@handler(f"{_ML}::ArrayFeatureExtractor")
def array_feature_extractor(node, inputs, attrs):
    _need(node, inputs, 2)
    x, idx = inputs
    if idx.dtype.is_floating_point:
        raise node.fail(f"indices must be integers, got {idx.dtype}")
    flat = ints(idx)
    size = x.shape[-1] if x.ndim else 0
    bad = [i for i in flat if not 0 <= i < size]
    if bad:
        raise node.fail(f"index {bad[0]} is out of range for a last dim of size {size}")
    y = st.index_select(x, x.ndim - 1, node.const(np.asarray(flat, dtype=np.int64)))
    # a 1-D input gives one row, as onnxruntime does
    return y.reshape(1, len(flat)) if x.ndim == 1 else y


# ---- LinearAttention -----------------------------------------------------------------------------


def _heads(x: Tensor, h: int) -> Tensor:
    """(B, T, H*D) -> (B, H, T, D)."""
    b, t, hd = x.shape
    return x.reshape(b, t, h, hd // h).permute(0, 2, 1, 3)


@handler("LinearAttention")
def linear_attention(node, inputs, attrs):
    _need(node, inputs, 3, 6)
    q, k, v = inputs[:3]
    past, decay, beta = (inputs[i] if len(inputs) > i else None for i in (3, 4, 5))
    rule = attrs.get("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise node.fail(f"update_rule must be linear, gated, delta or gated_delta, got {rule!r}")
    hq, hkv = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if hq is None or hkv is None or hq <= 0 or hkv <= 0 or hq % hkv:
        raise node.fail(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise node.fail(f"update_rule {rule!r} needs decay {'given' if gated else 'omitted'} and "
                        f"beta {'given' if delta else 'omitted'}")
    if any(x.ndim != 3 for x in (q, k, v)) or q.shape[-1] % hq or k.shape[-1] % hkv \
            or v.shape[-1] % hkv or k.shape[-1] // hkv != q.shape[-1] // hq \
            or not (q.shape[:2] == k.shape[:2] == v.shape[:2]):
        raise node.fail(f"query, key and value must be (B, T, heads*D) with matching B, T and "
                        f"key size, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    b, t, _ = q.shape
    dk, dv, group = q.shape[-1] // hq, v.shape[-1] // hkv, hq // hkv
    # the recurrence accumulates in at least float32, as the ONNX reference does
    work = st.float32 if q.dtype in (st.float16, st.bfloat16) else q.dtype
    q4, k4, v4 = (_like(_heads(x, h), work) for x, h in ((q, hq), (k, hkv), (v, hkv)))
    if gated:
        if decay.ndim != 3 or decay.shape[-1] not in (hkv, hkv * dk):
            raise node.fail(f"decay must be (B, T, {hkv}) or (B, T, {hkv * dk}), got "
                            f"{tuple(decay.shape)}")
        g4 = st.exp(_like(_heads(decay, hkv), work))  # (B, Hkv, T, 1 or dk)
    if delta:
        if beta.ndim != 3 or beta.shape[-1] not in (hkv, 1):
            raise node.fail(f"beta must be (B, T, {hkv}) or (B, T, 1), got {tuple(beta.shape)}")
        beta4 = _like(_heads(beta, beta.shape[-1]), work)  # (B, Hkv or 1, T, 1)
    if past is not None:
        if tuple(past.shape) != (b, hkv, dk, dv):
            raise node.fail(f"past_state must be {(b, hkv, dk, dv)}, got {tuple(past.shape)}")
        state = _like(past, work)
    else:
        state = st.zeros(b, hkv, dk, dv, dtype=work, device=q.device)
    scale = attrs.get("scale", 0.0) or 1.0 / math.sqrt(dk)
    outs = []
    for i in range(t):
        k_t, v_t = k4[:, :, i:i + 1, :], v4[:, :, i:i + 1, :]  # (B, Hkv, 1, D)
        if gated:
            state = state * g4[:, :, i, :].unsqueeze(-1)
        if delta:
            v_t = beta4[:, :, i:i + 1, :] * (v_t - st.matmul(k_t, state))
        state = state + st.matmul(k_t.transpose(-1, -2), v_t)
        # query heads h*group .. h*group+group-1 read kv head h
        q_t = q4[:, :, i, :].reshape(b, hkv, group, dk)
        outs.append(st.matmul(q_t, state).reshape(b, hq, dv) * scale)
    out = st.stack(outs, dim=1).reshape(b, t, hq * dv)
    return _like(out, q.dtype), _like(state, past.dtype if past is not None else q.dtype)
