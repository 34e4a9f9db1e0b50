"""IterableDataset (in process and sharded over workers), ChainDataset, WeightedRandomSampler,
and the DataLoader options PyTorch scripts pass (pin_memory, persistent_workers, ...)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.utils import data as D


class Range(D.IterableDataset):
    """Module-level (spawned workers import it): start..end-1, split between workers."""

    def __init__(self, start: int, end: int, shard: bool = True):
        self.start, self.end, self.shard = start, end, shard

    def __iter__(self):
        info = D.get_worker_info()
        lo, hi = self.start, self.end
        if info is not None and self.shard:
            per = math.ceil((self.end - self.start) / info.num_workers)
            lo = self.start + info.id * per
            hi = min(lo + per, self.end)
        return iter(range(lo, hi))

    def __len__(self):
        return self.end - self.start


class Stream(D.IterableDataset):
    """No __len__; yields (array, label) pairs."""

    def __iter__(self):
        for i in range(3):
            yield np.full(2, i, dtype=np.float32), i


class BrokenStream(D.IterableDataset):
    def __iter__(self):
        yield 1
        raise KeyError("stream broke")


def _tag_worker(worker_id):
    D.get_worker_info().dataset.tag = worker_id


class Tagged(Range):
    tag = -1

    def __iter__(self):
        for v in super().__iter__():
            yield (v, self.tag)


def _batches(loader):
    return [b.tolist() if isinstance(b, st.Tensor) else b for b in loader]


# ---- IterableDataset in the main process ------------------------------------------------------


def test_iterable_dataset_batches_and_len():
    loader = D.DataLoader(Range(0, 7), batch_size=3)
    assert _batches(loader) == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(loader) == 3
    loader = D.DataLoader(Range(0, 7), batch_size=3, drop_last=True)
    assert _batches(loader) == [[0, 1, 2], [3, 4, 5]] and len(loader) == 2
    assert list(D.DataLoader(Range(0, 3), batch_size=None)) == [0, 1, 2]
    assert _batches(D.DataLoader(Range(0, 4), batch_size=2)) == [[0, 1], [2, 3]]  # twice
    assert _batches(D.DataLoader(Range(0, 4), batch_size=2)) == [[0, 1], [2, 3]]


def test_iterable_dataset_collates_structures_and_custom_collate():
    x, y = next(iter(D.DataLoader(Stream(), batch_size=2)))
    np.testing.assert_array_equal(x.numpy(), [[0, 0], [1, 1]])
    assert y.tolist() == [0, 1]
    loader = D.DataLoader(Stream(), batch_size=2, collate_fn=lambda b: [s[1] for s in b])
    assert list(loader) == [[0, 1], [2]]
    with pytest.raises(TypeError, match="has no len"):
        len(D.DataLoader(Stream(), batch_size=2))


@pytest.mark.parametrize("kw, name", [(dict(shuffle=True), "shuffle"),
                                      (dict(sampler=[0, 1]), "sampler"),
                                      (dict(batch_sampler=[[0]], batch_size=1), "batch_sampler")])
def test_iterable_dataset_refuses_samplers(kw, name):
    with pytest.raises(ValueError, match=f"IterableDataset, expected unspecified {name} option"):
        D.DataLoader(Range(0, 3), **kw)


def test_iterable_dataset_cannot_be_indexed_and_chains():
    with pytest.raises(TypeError, match="Range is an IterableDataset: it cannot be indexed"):
        Range(0, 3)[0]
    chain = Range(0, 2) + Range(5, 7)
    assert isinstance(chain, D.ChainDataset) and isinstance(chain, D.Dataset)
    assert list(chain) == [0, 1, 5, 6] and len(chain) == 4
    assert _batches(D.DataLoader(chain, batch_size=3)) == [[0, 1, 5], [6]]
    with pytest.raises(TypeError, match="ChainDataset: only supports IterableDataset, got list"):
        D.ChainDataset([Range(0, 1), [1, 2]])


def test_iterable_error_surfaces():
    with pytest.raises(KeyError, match="stream broke"):
        list(D.DataLoader(BrokenStream(), batch_size=1))


# ---- IterableDataset with workers -------------------------------------------------------------


def test_iterable_dataset_sharded_over_workers_round_robin():
    loader = D.DataLoader(Range(0, 7), batch_size=2, num_workers=2)
    # worker 0 has 0..3, worker 1 has 4..6; batches alternate until one runs out
    assert _batches(loader) == [[0, 1], [4, 5], [2, 3], [6]]
    loader = D.DataLoader(Range(0, 7), batch_size=2, num_workers=3, drop_last=True,
                          persistent_workers=True, prefetch_factor=1, pin_memory=True)
    # shards [0,1,2], [3,4,5], [6]: each worker drops its own short last batch
    assert _batches(loader) == [[0, 1], [3, 4]]


def test_iterable_dataset_without_sharding_repeats_per_worker_and_init_fn_runs():
    got = list(D.DataLoader(Tagged(0, 3, shard=False), batch_size=None, num_workers=2,
                            worker_init_fn=_tag_worker))
    assert got == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]


def test_iterable_dataset_worker_error_surfaces():
    with pytest.raises(KeyError, match="stream broke"):
        list(D.DataLoader(BrokenStream(), batch_size=1, num_workers=2))


# ---- WeightedRandomSampler --------------------------------------------------------------------


def test_weighted_sampler_frequencies_and_reproducibility():
    w = [1.0, 2.0, 0.0, 5.0]
    s = D.WeightedRandomSampler(w, 40000, generator=st.Generator().manual_seed(3))
    draws = list(s)
    assert len(s) == 40000 and len(draws) == 40000
    freq = np.bincount(draws, minlength=4) / len(draws)
    np.testing.assert_allclose(freq, np.array(w) / sum(w), atol=0.01)
    assert freq[2] == 0
    a = list(D.WeightedRandomSampler(w, 10, generator=st.Generator().manual_seed(7)))
    b = list(D.WeightedRandomSampler(w, 10, generator=st.Generator().manual_seed(7)))
    assert a == b


def test_weighted_sampler_without_replacement():
    w = st.tensor([1.0, 0.0, 3.0, 2.0])
    for seed in range(20):
        s = list(D.WeightedRandomSampler(w, 3, replacement=False,
                                         generator=st.Generator().manual_seed(seed)))
        assert sorted(s) == [0, 2, 3]
    # the first pick follows the weights
    first = [list(D.WeightedRandomSampler([1.0, 3.0], 1, replacement=False,
                                          generator=st.Generator().manual_seed(i)))[0]
             for i in range(2000)]
    assert abs(np.mean(first) - 0.75) < 0.04


def test_weighted_sampler_in_a_loader():
    ds = D.TensorDataset(st.arange(4))
    loader = D.DataLoader(ds, batch_size=5,
                          sampler=D.WeightedRandomSampler([0, 0, 1, 0], 5))
    (batch,), = list(loader)
    assert batch.tolist() == [2] * 5


@pytest.mark.parametrize("args, kw, err, msg", [
    (([1.0], 0), {}, ValueError, "num_samples should be a positive integer"),
    (([1.0], 2), dict(replacement=1), ValueError, "replacement should be a boolean"),
    (([[1.0, 2.0]], 2), {}, ValueError, r"weights should be a 1d sequence .* shape \(1, 2\)"),
    (([1.0, -1.0], 2), {}, ValueError, "weights must be finite, non-negative"),
    (([0.0, 0.0], 2), {}, ValueError, "not all zero"),
    (([1.0, 0.0], 2), dict(replacement=False), ValueError, "cannot draw 2 samples without"),
    (([1.0], 1), dict(generator=3), TypeError, "generator must be a st.Generator"),
    ((["a"], 1), {}, TypeError, "weights must be a sequence of numbers"),
])
def test_weighted_sampler_errors(args, kw, err, msg):
    with pytest.raises(err, match=msg):
        D.WeightedRandomSampler(*args, **kw)


# ---- DataLoader options -----------------------------------------------------------------------


def test_loader_accepts_pytorch_options():
    ds = D.TensorDataset(st.arange(5).float())
    loader = D.DataLoader(ds, batch_size=2, pin_memory=True, drop_last=True,
                          collate_fn=lambda b: [s[0].item() for s in b], pin_memory_device="")
    assert list(loader) == [[0.0, 1.0], [2.0, 3.0]]
    assert loader.pin_memory is True and loader.persistent_workers is False
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        D.DataLoader(ds, persistent_workers=True)
