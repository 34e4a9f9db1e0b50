"""Variable-length batches for the recurrent layers: PackedSequence and the functions that pack
and pad (PyTorch's torch.nn.utils.rnn).

A packed batch stores time step after time step, each holding only the sequences still running
(longest first), so the layers never compute on padding. Packing and unpacking are each one
index op whose gradient flows back to the padded tensor.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor.nn.utils_rnn import pack_padded_sequence, pad_packed_sequence
    >>> x = st.tensor([[1.0, 4.0], [2.0, 0.0], [3.0, 0.0]])   # (steps, batch), lengths 3 and 1
    >>> p = pack_padded_sequence(x, [3, 1])
    >>> p.data.tolist(), p.batch_sizes.tolist()
    ([1.0, 4.0, 2.0, 3.0], [2, 1, 1])
    >>> pad_packed_sequence(p)[0].tolist() == x.tolist()
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .. import creation
from .. import dtype as _dt
from .. import ops as _ops
from ..tensor import Tensor

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence"]


class PackedSequence(NamedTuple):
    """A packed batch: data (sum of lengths, *features) holds step after step, batch_sizes[t]
    (int64, on the CPU) the number of sequences still running at step t, and sorted_indices /
    unsorted_indices (or None) the permutation that sorted the batch by decreasing length and
    its inverse. Accepted by nn.RNN, nn.LSTM and nn.GRU.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils_rnn import pack_padded_sequence
        >>> p = pack_padded_sequence(st.ones(3, 2, 4), [1, 3], enforce_sorted=False)
        >>> p.data.shape, p.batch_sizes.tolist(), p.sorted_indices.tolist()
        ((4, 4), [2, 1, 1], [1, 0])
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None


def _lengths(op: str, lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1 or lengths.dtype.is_floating_point:
            raise ValueError(f"{op}: lengths must be a 1-D integer tensor, got shape "
                             f"{lengths.shape} and dtype {lengths.dtype.name}")
        values = lengths.tolist()
    elif isinstance(lengths, (list, tuple, np.ndarray)):
        values = list(np.asarray(lengths).reshape(-1).tolist())
    else:
        raise TypeError(f"{op}: lengths must be a list or a 1-D tensor, got "
                        f"{type(lengths).__name__}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{op}: lengths must be integers, got {v!r}")
    return np.asarray(values, dtype=np.int64)


def _positions(order: np.ndarray, batch_sizes: np.ndarray, steps: int,
               batch_first: bool) -> np.ndarray:
    """Row of each packed element in the flattened padded tensor: step t, sorted slot b is
    original sequence order[b], at t * batch + order[b] (or order[b] * steps + t)."""
    batch = len(order)
    rows = []
    for t, n in enumerate(batch_sizes):
        seqs = order[:n]
        rows.append(seqs * steps + t if batch_first else t * batch + seqs)
    return np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (steps, batch, *) (or (batch, steps, *) with batch_first) whose
    sequence b has lengths[b] valid steps. With enforce_sorted, lengths must be decreasing;
    otherwise the batch is sorted here and the permutation kept in the result.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils_rnn import pack_padded_sequence
        >>> x = st.arange(6.0).reshape(2, 3)          # batch_first: 2 sequences of 3 steps
        >>> pack_padded_sequence(x, [3, 2], batch_first=True).data.tolist()
        [0.0, 3.0, 1.0, 4.0, 2.0]
    """
    op = "pack_padded_sequence"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions (steps and batch), got "
                         f"shape {input.shape}")
    lens = _lengths(op, lengths)
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    if len(lens) != batch:
        raise ValueError(f"{op}: expected {batch} lengths (the batch size of input of shape "
                         f"{input.shape}), got {len(lens)}")
    if (lens <= 0).any():
        raise ValueError(f"{op}: length of all samples has to be greater than 0, but found an "
                         f"element in 'lengths' that is <= 0: {lens.tolist()}")
    if lens.max() > steps:
        raise ValueError(f"{op}: a length ({int(lens.max())}) exceeds the input's "
                         f"{steps} time steps (input shape {input.shape})")
    if enforce_sorted:
        if (np.diff(lens) > 0).any():
            raise ValueError(f"{op}: `lengths` array must be sorted in decreasing order when "
                             f"`enforce_sorted` is True, got {lens.tolist()}. You can pass "
                             "`enforce_sorted=False` to sidestep this requirement")
        order = np.arange(batch)
        sorted_idx = unsorted_idx = None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_idx = creation.tensor(order, dtype=_dt.int64, device=input.device)
        unsorted_idx = creation.tensor(np.argsort(order), dtype=_dt.int64, device=input.device)
    sorted_lens = lens[order]
    batch_sizes = (sorted_lens[None, :] > np.arange(int(sorted_lens[0]))[:, None]).sum(1)
    rows = _positions(order, batch_sizes, steps, batch_first)
    flat = input.reshape(steps * batch, *input.shape[2:])
    index = creation.tensor(rows, dtype=_dt.int64, device=input.device)
    data = flat.index_select(0, index)
    return PackedSequence(data, creation.tensor(batch_sizes, dtype=_dt.int64), sorted_idx,
                          unsorted_idx)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The inverse of pack_padded_sequence: (padded (steps, batch, *) or (batch, steps, *),
    lengths) in the batch's original order; steps is total_length if given.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils_rnn import pack_padded_sequence, pad_packed_sequence
        >>> p = pack_padded_sequence(st.ones(3, 2), [1, 3], enforce_sorted=False)
        >>> out, lengths = pad_packed_sequence(p, batch_first=True, padding_value=-1.0)
        >>> out.tolist(), lengths.tolist()
        ([[1.0, -1.0, -1.0], [1.0, 1.0, 1.0]], [1, 3])
    """
    op = "pad_packed_sequence"
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{op}: expected a PackedSequence, got {type(sequence).__name__}")
    data, batch_sizes, sorted_idx, _ = sequence
    bs = np.asarray(batch_sizes.tolist(), dtype=np.int64)
    steps, batch = len(bs), int(bs[0])
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"{op}: expected total_length to be at least the length of the "
                             f"longest sequence ({steps}), got {total_length}")
        steps = int(total_length)
    order = np.arange(batch) if sorted_idx is None else np.asarray(sorted_idx.tolist())
    rows = _positions(order, bs, steps, batch_first)
    index = creation.tensor(rows, dtype=_dt.int64, device=data.device)
    rest = data.shape[1:]
    flat = creation.zeros(steps * batch, *rest, dtype=data.dtype, device=data.device)
    flat = flat.index_add(0, index, data)
    if padding_value != 0:
        mask = np.zeros(steps * batch, dtype=bool)
        mask[rows] = True
        keep = creation.tensor(mask.reshape((-1,) + (1,) * len(rest)), device=data.device)
        flat = _ops.where(keep, flat, float(padding_value))
    shape = (batch, steps) if batch_first else (steps, batch)
    lens = np.zeros(batch, dtype=np.int64)
    lens[order] = (bs[None, :] > np.arange(batch)[:, None]).sum(1)
    return flat.reshape(*shape, *rest), creation.tensor(lens, dtype=_dt.int64)


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack tensors of shapes (L_i, *) into (max L, batch, *) (or (batch, max L, *)), padding
    the shorter ones with padding_value on padding_side ("right" or "left").

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils_rnn import pad_sequence
        >>> pad_sequence([st.ones(2), st.ones(1)], batch_first=True).tolist()
        [[1.0, 1.0], [1.0, 0.0]]
    """
    op = "pad_sequence"
    if isinstance(sequences, Tensor) or not isinstance(sequences, (list, tuple)) \
            or not sequences:
        raise TypeError(f"{op}: expected a non-empty list of Tensors, got "
                        f"{type(sequences).__name__}")
    if padding_side not in ("right", "left"):
        raise ValueError(f"{op}: padding_side must be 'right' or 'left', got {padding_side!r}")
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(s).__name__} at position {i}")
        if s.ndim == 0 or s.shape[1:] != sequences[0].shape[1:]:
            raise ValueError(f"{op}: sequences must be at least 1-D with equal trailing "
                             f"dimensions; got shapes {sequences[0].shape} and {s.shape} "
                             f"(position {i})")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        gap = longest - s.shape[0]
        if gap:
            fill = creation.full((gap, *s.shape[1:]), padding_value, dtype=s.dtype,
                                 device=s.device)
            s = _ops.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return _ops.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) tensors (decreasing lengths unless enforce_sorted=False).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils_rnn import pack_sequence
        >>> pack_sequence([st.tensor([1.0, 2.0]), st.tensor([3.0])]).data.tolist()
        [1.0, 3.0, 2.0]
    """
    lengths = [s.shape[0] if isinstance(s, Tensor) and s.ndim else 0 for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)
