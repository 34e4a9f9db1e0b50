"""Datasets, samplers, collation and the DataLoader (in-process and with worker processes)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.utils import data as D


class ArrayDataset(D.Dataset):
    """Module-level (so spawned workers can import it): numpy samples with a dict inside."""

    def __init__(self, n: int):
        self.x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        info = D.get_worker_info()
        return {"x": self.x[i], "label": int(i) % 3, "t": st.tensor([float(i)]).bfloat16(),
                "worker": -1 if info is None else info.id, "rand": st.rand(1)}


class FailingDataset(ArrayDataset):
    def __getitem__(self, i):
        if i == 5:
            raise KeyError(f"sample {i} is missing")
        return super().__getitem__(i)


def _labels(loader):
    return [b[1].tolist() for b in loader]


# ---- datasets ----------------------------------------------------------------------------------


def test_tensor_dataset_and_errors():
    x, y = st.arange(12).reshape(4, 3), st.tensor([1, 0, 1, 1])
    ds = D.TensorDataset(x, y)
    assert len(ds) == 4
    a, b = ds[2]
    assert a.tolist() == [6, 7, 8] and b.item() == 1
    with pytest.raises(ValueError, match=r"size mismatch between tensors: first dimensions "
                                         r"are \[4, 3\]"):
        D.TensorDataset(x, st.zeros(3))
    with pytest.raises(TypeError, match=r"argument 1 must be a Tensor, got ndarray"):
        D.TensorDataset(x, np.zeros(4))
    with pytest.raises(ValueError, match=r"0-d tensor"):
        D.TensorDataset(st.tensor(1.0))


def test_tensor_dataset_travels_to_worker_processes():
    # what spawn does with the dataset: tensors cross as numpy arrays and come back as tensors
    from multiprocessing.reduction import ForkingPickler

    w = st.tensor([1.5, -2.0], requires_grad=True)
    ds = D.TensorDataset(st.arange(3).bfloat16(), st.tensor([True, False, True]), st.ones(3, 2))
    back = ForkingPickler.loads(ForkingPickler.dumps((ds, w, st.tensor(7))))
    assert [t.dtype for t in back[0].tensors] == [st.bfloat16, st.bool, st.float32]
    assert back[0].tensors[0].float().tolist() == [0.0, 1.0, 2.0]
    assert back[0].tensors[1].tolist() == [True, False, True]
    assert back[1].requires_grad and back[1].tolist() == [1.5, -2.0]
    assert back[2].shape == () and back[2].item() == 7
    with pytest.raises(RuntimeError, match=r"non-leaf tensor that requires grad"):
        ForkingPickler.dumps(w * 2)


def test_subset_concat_and_random_split():
    base = list(range(10, 20))
    sub = D.Subset(base, [9, 0, 4])
    assert [sub[i] for i in range(len(sub))] == [19, 10, 14]
    cat = D.Subset(base, [0, 1]) + D.Subset(base, [5])
    assert len(cat) == 3 and [cat[i] for i in range(3)] == [10, 11, 15] and cat[-1] == 15
    with pytest.raises(IndexError, match=r"index 3 out of range for length 3"):
        cat[3]
    g = st.Generator().manual_seed(11)
    parts = D.random_split(base, [3, 7], generator=g)
    again = D.random_split(base, [3, 7], generator=st.Generator().manual_seed(11))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == base
    assert list(parts[0]) == list(again[0])
    # fractions: floor(2.5), floor(2.5), 5 sum to 9; the one left over goes to the first
    assert [len(p) for p in D.random_split(base, [0.25, 0.25, 0.5])] == [3, 2, 5]
    with pytest.raises(ValueError, match=r"sum of input lengths \(9\) does not equal the length "
                                         r"of the input dataset \(10\)"):
        D.random_split(base, [4, 5])


# ---- samplers ----------------------------------------------------------------------------------


def test_samplers():
    assert list(D.SequentialSampler(range(4))) == [0, 1, 2, 3]
    g1, g2 = st.Generator().manual_seed(4), st.Generator().manual_seed(4)
    r1 = D.RandomSampler(range(6), generator=g1)
    e1, e2 = list(r1), list(r1)
    assert sorted(e1) == list(range(6)) and e1 != e2  # a new permutation each epoch
    r2 = D.RandomSampler(range(6), generator=g2)
    assert [list(r2), list(r2)] == [e1, e2]
    with_repl = list(D.RandomSampler(range(3), replacement=True, num_samples=50,
                                     generator=g1))
    assert len(with_repl) == 50 and set(with_repl) <= {0, 1, 2}
    longer = list(D.RandomSampler(range(3), num_samples=7, generator=g1))
    assert len(longer) == 7 and sorted(longer[:6]) == [0, 0, 1, 1, 2, 2]
    sub = list(D.SubsetRandomSampler([5, 7, 9], generator=g1))
    assert sorted(sub) == [5, 7, 9]
    bs = D.BatchSampler(D.SequentialSampler(range(7)), 3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    bs = D.BatchSampler(D.SequentialSampler(range(7)), 3, drop_last=True)
    assert list(bs) == [[0, 1, 2], [3, 4, 5]] and len(bs) == 2
    with pytest.raises(ValueError, match=r"BatchSampler: batch_size should be a positive "
                                         r"integer, got 0"):
        D.BatchSampler(D.SequentialSampler(range(3)), 0, False)
    with pytest.raises(ValueError, match=r"num_samples should be a positive integer, got "
                                         r"num_samples=0"):
        D.RandomSampler([])
    with pytest.raises(TypeError, match=r"generator must be a st.Generator"):
        D.RandomSampler(range(3), generator=np.random.default_rng(0))


# ---- collation ---------------------------------------------------------------------------------


def test_default_collate_types():
    Point = collections.namedtuple("Point", "x y")
    batch = [
        {"img": np.full((2, 2), i, dtype=np.float32), "t": st.tensor([i, i + 1]),
         "f": i * 0.5, "n": i, "b": i % 2 == 0, "name": f"s{i}", "p": Point(i, -i),
         "pair": (np.int32(i), [i, 2 * i])}
        for i in range(3)
    ]
    out = D.default_collate(batch)
    assert out["img"].dtype is st.float32 and out["img"].shape == (3, 2, 2)
    assert out["img"].numpy()[:, 0, 0].tolist() == [0, 1, 2]
    assert out["t"].tolist() == [[0, 1], [1, 2], [2, 3]]
    assert out["f"].dtype is st.float64 and out["f"].tolist() == [0.0, 0.5, 1.0]
    assert out["n"].dtype is st.int64 and out["n"].tolist() == [0, 1, 2]
    assert out["b"].dtype is st.bool and out["b"].tolist() == [True, False, True]
    assert out["name"] == ["s0", "s1", "s2"]
    assert isinstance(out["p"], Point) and out["p"].y.tolist() == [0, -1, -2]
    assert isinstance(out["pair"], list) and out["pair"][0].dtype is st.int32
    assert [c.tolist() for c in out["pair"][1]] == [[0, 1, 2], [0, 2, 4]]


def test_default_collate_errors():
    with pytest.raises(ValueError, match=r"default_collate: cannot stack .*\(2,\) at entry 0 "
                                         r"and \(3,\)"):
        D.default_collate([st.zeros(2), st.zeros(3)])
    with pytest.raises(RuntimeError, match=r"each element in list of batch should be of equal"):
        D.default_collate([(1, 2), (1,)])
    with pytest.raises(TypeError, match=r"found object"):
        D.default_collate([object(), object()])
    with pytest.raises(TypeError, match=r"expected all tensors, found a int"):
        D.default_collate([st.zeros(2), 3])
    with pytest.raises(ValueError, match=r"same keys"):
        D.default_collate([{"a": 1}, {"b": 2}])
    with pytest.raises(TypeError, match=r"numpy arrays of dtype <U1 cannot become tensors"):
        D.default_collate([np.array(["a"]), np.array(["b"])])


# ---- loader ------------------------------------------------------------------------------------


def test_loader_batches_len_and_drop_last():
    ds = D.TensorDataset(st.arange(10).float().reshape(10, 1), st.arange(10))
    loader = D.DataLoader(ds, batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].shape == (4, 1) and batches[0][0].dtype is st.float32
    assert len(D.DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert _labels(D.DataLoader(ds, batch_size=4, drop_last=True)) == [[0, 1, 2, 3],
                                                                        [4, 5, 6, 7]]
    # a generic collate_fn sees the per-sample tuples; same values as the gather fast path
    slow = list(D.DataLoader(ds, batch_size=4, collate_fn=lambda b: D.default_collate(b)))
    assert [b[1].tolist() for b in slow] == [b[1].tolist() for b in batches]
    one = list(D.DataLoader(ds, batch_size=None))
    assert len(one) == 10 and one[3][1].item() == 3 and one[3][0].shape == (1,)


def test_shuffle_is_reproducible_with_a_seeded_generator():
    ds = D.TensorDataset(st.arange(20))

    def epochs(seed):
        loader = D.DataLoader(ds, batch_size=5, shuffle=True,
                              generator=st.Generator().manual_seed(seed))
        return [[b[0].tolist() for b in loader] for _ in range(2)]

    a, b, c = epochs(1), epochs(1), epochs(2)
    assert a == b and a != c and a[0] != a[1]
    assert sorted(sum(a[0], [])) == list(range(20))
    st.manual_seed(3)
    d = [b[0].tolist() for b in D.DataLoader(ds, batch_size=5, shuffle=True)]
    st.manual_seed(3)
    assert d == [b[0].tolist() for b in D.DataLoader(ds, batch_size=5, shuffle=True)]


def test_custom_sampler_and_batch_sampler():
    ds = D.TensorDataset(st.arange(6))
    assert _flat(D.DataLoader(ds, batch_size=2, sampler=[5, 3, 1])) == [[5, 3], [1]]
    bl = D.DataLoader(ds, batch_sampler=[[0, 5], [2]])
    assert _flat(bl) == [[0, 5], [2]] and len(bl) == 2


def _flat(loader):
    return [b[0].tolist() for b in loader]


def test_loader_argument_errors():
    ds = D.TensorDataset(st.arange(6))
    cases = [
        (dict(batch_size=0), ValueError, r"DataLoader: batch_size should be a positive integer"),
        (dict(batch_size=2.5), ValueError, r"batch_size should be a positive integer, got 2.5"),
        (dict(num_workers=-1), ValueError, r"num_workers should be a non-negative integer"),
        (dict(shuffle=True, sampler=[0, 1]), ValueError, r"sampler option is mutually "
                                                         r"exclusive with shuffle"),
        (dict(batch_sampler=[[0]], batch_size=3), ValueError, r"batch_sampler option is "
                                                              r"mutually exclusive"),
        (dict(batch_size=None, drop_last=True), ValueError, r"mutually exclusive with "
                                                            r"drop_last"),
        (dict(collate_fn=3), TypeError, r"collate_fn must be callable"),
        (dict(generator=5), TypeError, r"generator must be a st.Generator"),
        (dict(prefetch_factor=2), ValueError, r"prefetch_factor needs num_workers > 0"),
        (dict(timeout=-1), ValueError, r"timeout should be a non-negative number"),
    ]
    for kw, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            D.DataLoader(ds, **kw)
    with pytest.raises(TypeError, match=r"dataset must define __getitem__ and __len__"):
        D.DataLoader(5)


# ---- worker processes (spawn) ------------------------------------------------------------------


def test_workers_match_single_process_order_and_values():
    ds = ArrayDataset(11)
    kw = dict(batch_size=3, shuffle=True)
    ref = list(D.DataLoader(ds, generator=st.Generator().manual_seed(9), **kw))
    got = list(D.DataLoader(ds, generator=st.Generator().manual_seed(9), num_workers=2, **kw))
    assert len(got) == len(ref) == 4
    for r, g in zip(ref, got):
        assert g["x"].dtype is st.float32 and g["t"].dtype is st.bfloat16
        np.testing.assert_array_equal(g["x"].numpy(), r["x"].numpy())
        assert g["label"].tolist() == r["label"].tolist()
        assert g["t"].float().tolist() == r["t"].float().tolist()
    # batches go round-robin to the workers; each worker has its own random stream
    assert [g["worker"].tolist() for g in got] == [[0] * 3, [1] * 3, [0] * 3, [1] * 2]
    assert got[0]["rand"][0].item() != got[1]["rand"][0].item()
    assert D.get_worker_info() is None


def test_worker_errors_are_reraised_with_the_worker_traceback():
    loader = D.DataLoader(FailingDataset(8), batch_size=2, num_workers=2,
                          collate_fn=lambda b: b)
    with pytest.raises(KeyError, match=r"Caught KeyError in DataLoader worker 0 on batch 2.*"
                                       r"sample 5 is missing"):
        list(loader)
