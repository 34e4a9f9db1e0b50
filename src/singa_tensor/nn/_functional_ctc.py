"""Connectionist temporal classification loss (Graves et al., 2006) over Tensor ops.

The forward variables alpha are computed in log space, one time step per iteration, on the
label sequence extended with blanks (blank, l1, blank, l2, ..., blank); every step is made of
registered ops (gather, cat, where, exp, log), so the gradient (the beta recursion) comes from
autograd. Log 0 is a large finite negative number rather than -inf, so no 0 * inf ever
reaches a gradient; a loss that stays near it is an impossible alignment, reported as inf (or
0 with zero_infinity, whose gradient is then zero too).
"""

from __future__ import annotations

import singa_tensor as st
from singa_tensor.tensor import Tensor

from ._functional_losses import _check_float, _check_reduction

_NEG = -1e30
_IMPOSSIBLE = 1e29


def _lengths(op: str, name: str, v, n: int) -> list[int]:
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point or v.dtype is st.bool:
            raise TypeError(f"{op}: {name} must be an integer tensor, got {v.dtype.name}")
        v = v.reshape(-1).tolist()
    elif isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    elif isinstance(v, (list, tuple)):
        v = list(v)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise TypeError(f"{op}: {name} must hold ints, got {v!r}")
    else:
        raise TypeError(f"{op}: {name} must be a tensor or a sequence of ints, got "
                        f"{type(v).__name__}")
    if len(v) != n:
        raise ValueError(f"{op}: {name} must have {n} entries (the batch size), got {len(v)}")
    if any(x < 0 for x in v):
        raise ValueError(f"{op}: {name} must be non-negative, got {v}")
    return v


def _target_rows(op: str, targets, target_lengths: list[int], batched: bool) -> list[list[int]]:
    if not isinstance(targets, Tensor):
        raise TypeError(f"{op}: targets must be a Tensor, got {type(targets).__name__}")
    if targets.dtype.is_floating_point or targets.dtype is st.bool:
        raise TypeError(f"{op}: targets must be an integer tensor, got {targets.dtype.name}")
    if batched and targets.ndim == 2:
        if targets.shape[0] != len(target_lengths):
            raise ValueError(f"{op}: targets of shape {tuple(targets.shape)} must have one row "
                             f"per sample ({len(target_lengths)})")
        width = targets.shape[1]
        if any(tl > width for tl in target_lengths):
            raise ValueError(f"{op}: target_lengths {target_lengths} exceed the targets' "
                             f"length {width}")
        rows = targets.tolist()
        return [row[:tl] for row, tl in zip(rows, target_lengths)]
    if targets.ndim != 1:
        raise ValueError(f"{op}: targets must be (N, S) padded or 1-D concatenated, got shape "
                         f"{tuple(targets.shape)}")
    flat = targets.tolist()
    if not batched:
        if target_lengths[0] > len(flat):
            raise ValueError(f"{op}: target_length {target_lengths[0]} exceeds the targets' "
                             f"length {len(flat)}")
        return [flat[:target_lengths[0]]]
    if sum(target_lengths) != len(flat):
        raise ValueError(f"{op}: concatenated targets have {len(flat)} labels but "
                         f"target_lengths sum to {sum(target_lengths)}")
    out, at = [], 0
    for tl in target_lengths:
        out.append(flat[at:at + tl])
        at += tl
    return out


def _logsumexp3(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    # the shift is a constant: its gradient terms cancel exactly, so detaching it is exact
    m = st.maximum(st.maximum(a, b), c).detach()
    return m + ((a - m).exp() + (b - m).exp() + (c - m).exp()).log()


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss: -log of the total probability of all
    alignments of the input to the target (repeats merged, blanks removed).

    log_probs is (T, N, C) (or (T, C) unbatched) log-softmax output; targets is (N, S) padded
    or the targets of all samples concatenated; input_lengths and target_lengths hold one
    length per sample. "mean" divides each loss by its target length, then averages.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> lp = st.log_softmax(st.zeros(2, 1, 3), dim=2)
        >>> round(F.ctc_loss(lp, st.tensor([[1]]), [2], [1], reduction="sum").item(), 4)
        1.0986
    """
    op = "ctc_loss"
    _check_reduction(op, reduction)
    _check_float(op, "log_probs", log_probs)
    if log_probs.dtype not in (st.float32, st.float64):
        raise TypeError(f"{op}: log_probs must be float32 or float64, got "
                        f"{log_probs.dtype.name}")
    if log_probs.ndim not in (2, 3):
        raise ValueError(f"{op}: log_probs must be (T, N, C) or (T, C), got shape "
                         f"{tuple(log_probs.shape)}")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    t_max, n, c = lp.shape
    if isinstance(blank, bool) or not isinstance(blank, int) or not 0 <= blank < c:
        raise ValueError(f"{op}: blank must be an int in [0, {c}), got {blank!r}")
    in_len = _lengths(op, "input_lengths", input_lengths, n)
    tgt_len = _lengths(op, "target_lengths", target_lengths, n)
    if any(x > t_max for x in in_len):
        raise ValueError(f"{op}: input_lengths {in_len} exceed the input's length {t_max}")
    rows = _target_rows(op, targets, tgt_len, batched)
    for row in rows:
        for label in row:
            if not 0 <= label < c or label == blank:
                raise IndexError(f"{op}: target label {label} must be in [0, {c}) and differ "
                                 f"from blank={blank}")
    width = 2 * max(tgt_len, default=0) + 1
    ext, skip = [], []
    for row in rows:
        e = [blank] * width
        e[1:2 * len(row):2] = row
        ext.append(e)
        skip.append([s >= 2 and e[s] != blank and e[s] != e[s - 2] for s in range(width)])
    dev = lp.device
    idx = st.tensor(ext, dtype=st.int64, device=dev)
    lpe = st.gather(lp, 2, idx.unsqueeze(0).expand(t_max, n, width))  # (T, N, width)
    can_skip = st.tensor(skip, device=dev)
    start = st.tensor([[s == 0 or (s == 1 and tl > 0) for s in range(width)] for tl in tgt_len],
                      device=dev)
    alpha = st.where(start, lpe[0], _NEG)
    pad1 = st.full((n, 1), _NEG, dtype=lp.dtype, device=dev)
    pad2 = st.full((n, 2), _NEG, dtype=lp.dtype, device=dev)
    for t in range(1, max(in_len, default=0)):
        prev1 = st.cat([pad1, alpha[:, :-1]], 1)
        prev2 = st.where(can_skip, st.cat([pad2, alpha[:, :-2]], 1)[:, :width], _NEG)
        step = lpe[t] + _logsumexp3(alpha, prev1, prev2)
        running = st.tensor([[t < il] for il in in_len], device=dev)
        alpha = st.where(running, step, alpha)
    last = st.tensor([[2 * tl] for tl in tgt_len], dtype=st.int64, device=dev)
    before = st.tensor([[max(2 * tl - 1, 0)] for tl in tgt_len], dtype=st.int64, device=dev)
    has_before = st.tensor([[tl > 0] for tl in tgt_len], device=dev)
    a_last = st.gather(alpha, 1, last)
    a_before = st.where(has_before, st.gather(alpha, 1, before), _NEG)
    m = st.maximum(a_last, a_before).detach()
    ll = (m + ((a_last - m).exp() + (a_before - m).exp()).log()).reshape(n)
    if any(il == 0 for il in in_len):  # no frames: only the empty target is possible
        empty = st.tensor([il == 0 for il in in_len], device=dev)
        none = st.tensor([0.0 if tl == 0 else _NEG for tl in tgt_len], dtype=lp.dtype,
                         device=dev)
        ll = st.where(empty, none, ll)
    loss = -ll
    loss = st.where(loss > _IMPOSSIBLE, 0.0 if zero_infinity else float("inf"), loss)
    if reduction == "mean":
        denom = st.tensor([max(tl, 1) for tl in tgt_len], dtype=lp.dtype, device=dev)
        return (loss / denom).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.reshape(())
