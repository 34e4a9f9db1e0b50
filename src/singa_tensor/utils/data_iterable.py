"""Iterable-style datasets (IterableDataset, ChainDataset), WeightedRandomSampler, and the
fetching of an iterable dataset's batches that the DataLoader uses, in the main process and in
workers. All of these are importable from `singa_tensor.utils.data`.

With num_workers > 0 every worker iterates its own copy of an IterableDataset; a dataset that
should not repeat its samples once per worker shards itself with `get_worker_info()`. The
loader asks the workers for batches in turn (worker 0, 1, ..., 0, ...) and leaves out a worker
once its iterator is exhausted, as PyTorch does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

import singa_tensor as st
from singa_tensor.tensor import Tensor

from .data import Dataset, Sampler, _check_generator

__all__ = ["ChainDataset", "IterableDataset", "WeightedRandomSampler"]


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define `__iter__` (and optionally `__len__`).
    `a + b` chains two of them.

    Example:
        >>> from singa_tensor.utils.data import DataLoader
        >>> class Count(IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(5))
        >>> [b.tolist() for b in DataLoader(Count(), batch_size=2)]
        [[0, 1], [2, 3], [4]]
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: it cannot be indexed, "
                        f"iterate over it instead")

    def __add__(self, other) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several iterable datasets one after another, chained lazily.

    Example:
        >>> class Upto(IterableDataset):
        ...     def __init__(self, n): self.n = n
        ...     def __iter__(self): return iter(range(self.n))
        ...     def __len__(self): return self.n
        >>> chain = ChainDataset([Upto(2), Upto(3)])
        >>> list(chain), len(chain)
        ([0, 1, 0, 1, 2], 5)
    """

    def __init__(self, datasets: Iterable[IterableDataset]):
        self.datasets = list(datasets)
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset: only supports IterableDataset, got "
                                f"{type(d).__name__}")

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn from [0, len(weights)) with probability proportional to
    weights (which need not sum to 1); with replacement=False each index comes at most once.
    A seeded `st.Generator` makes the draw reproducible.

    Example:
        >>> import singa_tensor as st
        >>> s = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 6,
        ...                           generator=st.Generator().manual_seed(0))
        >>> sorted(set(s)), len(s)
        ([1, 3], 6)
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator=None) -> None:
        op = "WeightedRandomSampler"
        if not isinstance(num_samples, (int, np.integer)) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError(f"{op}: num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples!r}")
        if not isinstance(replacement, bool):
            raise ValueError(f"{op}: replacement should be a boolean value, but got "
                             f"replacement={replacement!r}")
        _check_generator(op, generator)
        w = weights.detach().cpu().numpy() if isinstance(weights, Tensor) else weights
        try:
            w = np.asarray(w, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{op}: weights must be a sequence of numbers, got "
                            f"{type(weights).__name__}") from None
        if w.ndim != 1:
            raise ValueError(f"{op}: weights should be a 1d sequence but given weights have "
                             f"shape {tuple(w.shape)}")
        if w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"{op}: weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError(f"{op}: cannot draw {num_samples} samples without replacement "
                             f"from {np.count_nonzero(w)} non-zero weights")
        self.weights = st.tensor(w)
        self._w = w
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        k, w = self.num_samples, self._w
        u = st.rand(k if self.replacement else len(w), dtype=st.float64,
                    generator=self.generator).numpy()
        if self.replacement:  # inverse of the cumulative distribution
            cdf = np.cumsum(w)
            idx = np.searchsorted(cdf, u * cdf[-1], side="right")
            return iter(np.minimum(idx, len(w) - 1).tolist())
        # weighted sampling without replacement: the k smallest of -log(u)/w
        with np.errstate(divide="ignore"):
            keys = -np.log1p(-u) / w
        return iter(np.argsort(keys, kind="stable")[:k].tolist())

    def __len__(self) -> int:
        return self.num_samples


class WorkerExhausted:
    """What a worker sends back once its copy of an iterable dataset has run out."""


class IterableFetcher:
    """The next batch (a list of samples) or, without batching, the next sample of an
    iterable dataset; StopIteration once it has run out (a short last batch counts as run out
    with drop_last)."""

    def __init__(self, dataset, batch_size: int | None, drop_last: bool) -> None:
        self._it = iter(dataset)
        self._batch_size = batch_size
        self._drop_last = drop_last
        self._ended = False

    def fetch(self):
        if self._ended:
            raise StopIteration
        if self._batch_size is None:
            try:
                return next(self._it)
            except StopIteration:
                self._ended = True
                raise
        batch = list(itertools.islice(self._it, self._batch_size))
        if not batch or (self._drop_last and len(batch) < self._batch_size):
            self._ended = True
            raise StopIteration
        return batch
