"""Datasets, samplers and the DataLoader (PyTorch names and semantics).

Worker processes (num_workers > 0) use the "spawn" start method by default, which is safe with
the OpenMP threads of the CPU kernels (a forked child of a threaded process can deadlock).
Workers only fetch samples: what they send back travels as numpy arrays (tensors are turned
into arrays for the trip and rebuilt by the parent), and the parent applies `collate_fn`, so a
lambda works as collate_fn even under spawn. Batches come back in sampler order whatever the
number of workers.

Each worker sends its batches on a pipe of its own that only it can write to, framed by a
length header; the parent reads them with bounded waits (`select`), so a worker that dies
mid-message is seen at once (end of file) and `timeout` bounds every wait, including one for
the rest of a message that was started.
"""

from __future__ import annotations

import builtins
import itertools
import math
import multiprocessing as mp
import os
import queue
import random as _pyrandom
import select
import struct
import time
import traceback
import weakref
from collections.abc import Mapping, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Callable, Iterator

import numpy as np

import singa_tensor as st
from singa_tensor import random as _random
from singa_tensor.tensor import Tensor

# ---- datasets ----------------------------------------------------------------------------------


class Dataset:
    """A map-style dataset: subclasses define `__getitem__(i)` and `__len__()`.

    Example:
        >>> class Squares(Dataset):
        ...     def __len__(self): return 4
        ...     def __getitem__(self, i): return i * i
        >>> [Squares()[i] for i in range(4)]
        [0, 1, 4, 9]
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the i-th rows of the given tensors (all with the same first dimension).

    Example:
        >>> import singa_tensor as st
        >>> ds = TensorDataset(st.arange(6).reshape(3, 2), st.tensor([0, 1, 0]))
        >>> len(ds), [t.tolist() for t in ds[1]]
        (3, [[2, 3], 1])
    """

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} must be a Tensor, got "
                                f"{type(t).__name__}")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: argument {i} is a 0-d tensor; every tensor "
                                 f"needs a first (sample) dimension")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) != 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors: first dimensions "
                             f"are {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def _batch(self, indices: list) -> list:
        """What default_collate makes of [self[i] for i in indices], in one gather per tensor."""
        idx = st.tensor(indices, dtype=st.int64, device=self.tensors[0].device)
        return [t.index_select(0, idx) for t in self.tensors]


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets: Sequence[Dataset]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"ConcatDataset: index {index} out of range for length {n}")
        index %= n
        k = next(i for i, c in enumerate(self.cumulative_sizes) if index < c)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][index - start]


class Subset(Dataset):
    """The samples of dataset at the given indices.

    Example:
        >>> Subset([10, 11, 12, 13], [3, 0])[0]
        13
    """

    def __init__(self, dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset, lengths: Sequence, generator=None) -> list:
    """Split dataset into non-overlapping random subsets of the given lengths (or fractions
    summing to 1; leftover samples go one each to the first subsets).

    Example:
        >>> import singa_tensor as st
        >>> a, b = random_split(range(10), [0.7, 0.3], generator=st.Generator().manual_seed(0))
        >>> len(a), len(b), sorted(list(a) + list(b)) == list(range(10))
        (7, 3, True)
    """
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1):
        for x in lengths:
            if not 0 <= x <= 1:
                raise ValueError(f"random_split: fraction {x} is not between 0 and 1")
        counts = [int(math.floor(n * x)) for x in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0
               for x in lengths):
        raise ValueError(f"random_split: lengths must be non-negative ints or fractions summing "
                         f"to 1, got {lengths}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal "
                         f"the length of the input dataset ({n})")
    perm = st.randperm(n, generator=generator).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out


# ---- samplers ----------------------------------------------------------------------------------


class Sampler:
    """Yields dataset indices (or, for a batch sampler, lists of them)."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _check_generator(op: str, generator):
    if generator is not None and not isinstance(generator, _random.Generator):
        raise TypeError(f"{op}: generator must be a st.Generator, got "
                        f"{type(generator).__name__}")


class RandomSampler(Sampler):
    """A random permutation of the indices each epoch (or num_samples draws with replacement);
    a seeded `st.Generator` makes the order reproducible.

    Example:
        >>> import singa_tensor as st
        >>> a = list(RandomSampler(range(5), generator=st.Generator().manual_seed(3)))
        >>> b = list(RandomSampler(range(5), generator=st.Generator().manual_seed(3)))
        >>> a == b and sorted(a) == [0, 1, 2, 3, 4]
        True
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement must be a bool, got {replacement!r}")
        _check_generator("RandomSampler", generator)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples should be a positive integer, got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, k = len(self.data_source), self.num_samples
        if self.replacement:
            yield from st.randint(0, n, (k,), generator=self.generator).tolist()
            return
        for _ in range(k // n):
            yield from st.randperm(n, generator=self.generator).tolist()
        if k % n:
            yield from st.randperm(n, generator=self.generator).tolist()[:k % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator=None):
        _check_generator("SubsetRandomSampler", generator)
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in st.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


def _world_default(value, what: str, getter: str) -> int:
    """num_replicas / rank default to the process group's, which must then be initialized."""
    if value is not None:
        return value
    import singa_tensor.distributed as dist

    if not dist.is_initialized():
        raise RuntimeError(f"DistributedSampler: {what} not given and the default process group "
                           "is not initialized (call dist.init_process_group() first)")
    return getattr(dist, getter)()


class DistributedSampler(Sampler):
    """This rank's share of the dataset's indices, for data-parallel training (PyTorch's rules).

    Each epoch the indices 0..N-1 (shuffled with seed + epoch when `shuffle`, so every rank
    draws the same permutation) are cut to a multiple of num_replicas: with drop_last the tail
    is dropped, otherwise the list is padded by repeating it from the start. Rank r then takes
    every num_replicas-th index from position r. Call `set_epoch(e)` before each epoch so
    that the shuffle changes.

    Example:
        >>> s = DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False)
        >>> list(s), len(s)
        ([1, 3, 0], 3)
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        num_replicas = _world_default(num_replicas, "num_replicas", "get_world_size")
        rank = _world_default(rank, "rank", "get_rank")
        for name, v in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"DistributedSampler: {name} must be an int, got {v!r}")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be positive, got "
                             f"{num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in the "
                             f"interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use seed + epoch for the next shuffle (every rank must pass the same epoch)."""
        self.epoch = int(epoch)

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = _random.Generator().manual_seed(self.seed + self.epoch)
            indices = st.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        elif len(indices) < self.total_size:
            pad = self.total_size - len(indices)
            indices += (indices * math.ceil(pad / len(indices)))[:pad]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples


def _check_batch_size(op: str, batch_size) -> None:
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) \
            or batch_size <= 0:
        raise ValueError(f"{op}: batch_size should be a positive integer, got {batch_size!r}")


class BatchSampler(Sampler):
    """Group the indices of another sampler into lists of batch_size.

    Example:
        >>> list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False))
        [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        _check_batch_size("BatchSampler", batch_size)
        if not isinstance(drop_last, bool):
            raise TypeError(f"BatchSampler: drop_last should be a bool, got {drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self):
        it = iter(self.sampler)
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---- collation ---------------------------------------------------------------------------------

_NUMERIC_KINDS = "biuf"


def default_collate(batch: list):
    """Stack a list of samples into a batch: tensors with st.stack, numpy arrays and numbers
    into tensors (floats as float64, ints as int64), dicts, tuples and lists element-wise
    (recursively); strings stay a list.

    Example:
        >>> import numpy as np, singa_tensor as st
        >>> b = default_collate([(np.zeros(2), 1), (np.ones(2), 0)])
        >>> b[0].shape, b[1].tolist()
        ((2, 2), [1, 0])
    """
    if not isinstance(batch, (list, tuple)) or not batch:
        raise ValueError("default_collate: expects a non-empty list of samples")
    elem = batch[0]
    if isinstance(elem, Tensor):
        _all_same_type(batch, Tensor, "tensors")
        try:
            return st.stack(list(batch))
        except ValueError as e:
            raise ValueError(f"default_collate: cannot stack the samples' tensors ({e})") from None
    if isinstance(elem, np.ndarray):
        _all_same_type(batch, np.ndarray, "numpy arrays")
        if elem.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"default_collate: numpy arrays of dtype {elem.dtype} cannot become "
                            f"tensors")
        shapes = {a.shape for a in batch}
        if len(shapes) > 1:
            raise ValueError(f"default_collate: numpy arrays of different shapes {sorted(shapes)}"
                             f" cannot be stacked")
        return st.from_numpy(np.stack(batch))
    if isinstance(elem, (np.number, np.bool_)):
        return st.tensor(np.array(batch))
    if isinstance(elem, bool):
        return st.tensor(batch, dtype=st.bool)
    if isinstance(elem, int):
        return st.tensor(batch, dtype=st.int64)
    if isinstance(elem, float):
        return st.tensor(batch, dtype=st.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        keys = list(elem)
        if any(set(d) != set(keys) for d in batch if isinstance(d, Mapping)) or \
                not all(isinstance(d, Mapping) for d in batch):
            raise ValueError("default_collate: every dict in the batch must have the same keys")
        out = {k: default_collate([d[k] for d in batch]) for k in keys}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, Sequence):
        if any(len(s) != len(elem) for s in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of "
                               "equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
            return type(elem)(*columns)
        return columns  # tuples become lists, as in PyTorch
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem).__name__}")


def _all_same_type(batch, cls, what: str) -> None:
    for b in batch:
        if not isinstance(b, cls):
            raise TypeError(f"default_collate: expected all {what}, found a "
                            f"{type(b).__name__} among them")


def default_convert(data):
    """Without batching: numpy arrays become tensors, containers are converted recursively."""
    if isinstance(data, np.ndarray) and data.dtype.kind in _NUMERIC_KINDS:
        return st.from_numpy(data)
    if isinstance(data, (np.number, np.bool_)):
        return st.tensor(data)
    if isinstance(data, Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(v) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(v) for v in data)
    return data


# ---- tensors across processes ------------------------------------------------------------------


def _rebuild_tensor(array: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    t = st.from_numpy(array)
    if dtype_name == "bfloat16":
        t = t.to(st.bfloat16)
    return t.requires_grad_() if requires_grad else t


def _reduce_tensor(t: Tensor):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError("cannot send a non-leaf tensor that requires grad to another "
                           "process; detach() it first")
    a = t.detach().cpu()
    arr = a.float().numpy() if a.dtype is st.bfloat16 else a.numpy()
    # (ascontiguousarray would turn a 0-d array into a 1-d one)
    arr = arr if arr.flags.c_contiguous else arr.copy()
    return _rebuild_tensor, (arr, a.dtype.name, t.requires_grad)


# Tensors refuse plain pickling (checkpoints go through st.save); between our own processes
# they travel as numpy arrays and are rebuilt on arrival.
ForkingPickler.register(Tensor, _reduce_tensor)


# ---- workers -----------------------------------------------------------------------------------


class WorkerInfo:
    """What a worker process knows about itself (see get_worker_info)."""

    def __init__(self, id: int, num_workers: int, seed: int, dataset):  # noqa: A002
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker: its id, the number of workers, its seed and its copy of the
    dataset. In the main process: None."""
    return _worker_info


class _WorkerError:
    """An exception from a worker, carried back as text and re-raised by the parent."""

    def __init__(self, exc: BaseException, where: str):
        self.type_name = type(exc).__name__
        self.message = (f"Caught {self.type_name} in {where}.\nOriginal traceback:\n"
                        + "".join(traceback.format_exception(exc)))

    def reraise(self):
        cls = getattr(builtins, self.type_name, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                raise cls(self.message)
            except TypeError:
                pass
        raise RuntimeError(self.message)


_HEADER = struct.Struct("<Q")


def _send_message(fd: int, msg) -> None:
    """One framed message (8-byte length, then the pickled msg) on a pipe's write end."""
    payload = ForkingPickler.dumps(msg)
    view = memoryview(_HEADER.pack(len(payload)) + bytes(payload))
    while view:
        view = view[os.write(fd, view):]


class _Reader:
    """The parent's end of one worker's pipe: reads whatever is available without blocking
    and hands out whole messages."""

    def __init__(self, conn, worker):
        self.conn, self.fd, self.worker = conn, conn.fileno(), worker
        self.head = bytearray()
        self.body: bytearray | None = None
        self.filled = 0
        self.eof = False

    def pump(self, out: list) -> None:
        """Read once (the fd is readable); append complete messages to out."""
        if self.body is None:
            chunk = os.read(self.fd, _HEADER.size - len(self.head))
            if not chunk:
                self.eof = True
                return
            self.head += chunk
            if len(self.head) == _HEADER.size:
                self.body = bytearray(_HEADER.unpack(self.head)[0])
                self.filled = 0
        else:
            got = os.readv(self.fd, [memoryview(self.body)[self.filled:]]) \
                if self.filled < len(self.body) else 0
            if got == 0 and self.filled < len(self.body):
                self.eof = True
                return
            self.filled += got
        if self.body is not None and self.filled == len(self.body):
            out.append(ForkingPickler.loads(self.body))
            self.head, self.body = bytearray(), None

    @property
    def mid_message(self) -> bool:
        return bool(self.head) or self.body is not None


def _worker_loop(dataset, index_q, result_conn, worker_id: int, num_workers: int, seed: int,
                 init_fn, batched: bool, iterable: tuple | None = None) -> None:
    global _worker_info
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    st.set_num_threads(1)  # the parallelism is the workers; more threads would oversubscribe
    st.manual_seed(seed)
    _pyrandom.seed(seed)
    parent = os.getppid()
    init_error = None
    if init_fn is not None:
        try:
            init_fn(worker_id)
        except Exception as e:  # noqa: BLE001 - reported to the parent with its traceback
            init_error = _WorkerError(e, f"DataLoader worker {worker_id} (worker_init_fn)")
    fetcher = None  # an iterable dataset's iterator starts after worker_init_fn
    while True:
        try:
            job = index_q.get(timeout=5.0)
        except queue.Empty:
            if os.getppid() != parent:  # the parent died without shutting us down
                return
            continue
        if job is None:
            return
        n, indices = job
        try:
            if init_error is not None:
                raise RuntimeError(init_error.message)
            if iterable is not None:
                if fetcher is None:
                    fetcher = IterableFetcher(dataset, *iterable)
                data = fetcher.fetch()
            else:
                data = [dataset[i] for i in indices] if batched else dataset[indices]
            msg = (n, bytes(ForkingPickler.dumps(data)), None)
        except StopIteration:
            msg = (n, None, WorkerExhausted())
        except Exception as e:  # noqa: BLE001 - reported to the parent with its traceback
            msg = (n, None, _WorkerError(e, f"DataLoader worker {worker_id} on batch {n}"))
        try:
            _send_message(result_conn.fileno(), msg)
        except (BrokenPipeError, OSError):  # the parent stopped reading: shut down
            return


def _shutdown(workers: list, index_queues: list, readers: list) -> None:
    for q in index_queues:
        try:
            q.put(None)
        except (OSError, ValueError):
            pass
    # closing the read ends first ends a worker blocked writing a batch nobody will read
    for r in readers:
        r.conn.close()
    for w in workers:
        w.join(timeout=5.0)
        if w.is_alive():
            w.terminate()
            w.join(timeout=1.0)
    for q in index_queues:
        q.cancel_join_thread()
        q.close()


class _MultiProcessIter:
    def __init__(self, loader: DataLoader, batches: Iterator, base_seed: int):
        self._loader = loader
        self._batches = batches
        self._collate = loader.collate_fn
        self._timeout = loader.timeout
        n = loader.num_workers
        iterable = ((loader.batch_size, loader.drop_last) if loader._iterable else None)
        self._active = [True] * n  # workers whose iterable dataset has not run out
        self._job_worker: dict = {}
        self._next_worker = 0
        ctx = mp.get_context(loader.multiprocessing_context or "spawn")
        self._index_queues, self._workers, self._readers = [], [], []
        self._messages: list = []
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._index_queues,
                                           self._readers)
        for wid in range(n):
            iq = ctx.Queue()
            # one pipe per worker; the parent closes its write end once the worker started,
            # so the worker holds the only one (forked later workers never inherit it)
            read_end, write_end = ctx.Pipe(duplex=False)
            w = ctx.Process(target=_worker_loop, daemon=True,
                            args=(loader.dataset, iq, write_end, wid, n,
                                  (base_seed + wid) % (1 << 63), loader.worker_init_fn,
                                  loader.batch_size is not None, iterable))
            try:
                w.start()
            except Exception as e:
                read_end.close()
                write_end.close()
                self._finalizer()
                raise RuntimeError(
                    f"DataLoader: could not start worker processes ({type(e).__name__}: {e}). "
                    f"With num_workers > 0 the dataset and worker_init_fn are sent to the "
                    f"workers, so they must be picklable (module-level classes and functions)"
                ) from e
            write_end.close()
            self._index_queues.append(iq)
            self._workers.append(w)
            self._readers.append(_Reader(read_end, w))
        self._sent = 0
        self._received = 0
        self._buffer: dict = {}
        for _ in range(loader.prefetch_factor * n):
            if not self._put():
                break

    def _put(self) -> bool:
        if self._batches is None:  # an iterable dataset: ask the next worker still running
            n = len(self._workers)
            for k in range(n):
                wid = (self._next_worker + k) % n
                if self._active[wid]:
                    break
            else:
                return False
            self._next_worker = (wid + 1) % n
            self._job_worker[self._sent] = wid
            self._index_queues[wid].put((self._sent, None))
            self._sent += 1
            return True
        try:
            indices = next(self._batches)
        except StopIteration:
            return False
        self._index_queues[self._sent % len(self._workers)].put((self._sent, indices))
        self._sent += 1
        return True

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            if self._received == self._sent:
                self._finalizer()
                raise StopIteration
            while self._received not in self._buffer:
                n, data, err = self._get()
                self._buffer[n] = (data, err)
            data, err = self._buffer.pop(self._received)
            wid = self._job_worker.pop(self._received, None)
            self._received += 1
            if not isinstance(err, WorkerExhausted):
                break
            self._active[wid] = False
            self._put()
        if err is not None:
            self._finalizer()
            err.reraise()
        self._put()
        return self._collate(ForkingPickler.loads(data))

    def _get(self):
        start = time.monotonic()
        while not self._messages:
            live = [r for r in self._readers if not r.eof]
            wait = 1.0
            if self._timeout:
                wait = min(wait, max(0.0, start + self._timeout - time.monotonic()))
            ready = select.select([r.fd for r in live], [], [], wait)[0] if live else []
            if not live:
                time.sleep(wait)
            by_fd = {r.fd: r for r in live}
            for fd in ready:
                r = by_fd[fd]
                r.pump(self._messages)
                if r.eof:
                    self._dead(r.worker, r.mid_message)
            if self._messages:
                break
            for w in self._workers:
                if not w.is_alive():
                    self._dead(w, False)
            if self._timeout and time.monotonic() - start >= self._timeout:
                self._finalizer()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
        return self._messages.pop(0)

    def _dead(self, w, mid_message: bool) -> None:
        w.join(timeout=1.0)
        self._finalizer()
        during = " while sending a batch" if mid_message else ""
        raise RuntimeError(f"DataLoader worker (pid {w.pid}) exited unexpectedly{during} "
                           f"with exit code {w.exitcode}")


# ---- the loader --------------------------------------------------------------------------------


class DataLoader:
    """Iterate over a dataset in (optionally shuffled) batches.

    batch_size=None turns batching off (each sample is converted, not collated). shuffle=True
    draws a new permutation each epoch from `generator` (or the default generator, which
    `st.manual_seed` seeds). With num_workers > 0, samples are fetched by that many worker
    processes (see the module docstring); the batches and their order are the same as with
    num_workers=0. A worker that dies raises RuntimeError ("DataLoader worker (pid N) exited
    unexpectedly") at the next batch, even in the middle of sending one; `timeout` (seconds,
    0 for none) bounds each wait for a batch, including the rest of one being sent.

    Example:
        >>> import singa_tensor as st
        >>> ds = TensorDataset(st.arange(10).float(), st.arange(10))
        >>> loader = DataLoader(ds, batch_size=4, drop_last=True)
        >>> len(loader), [y.tolist() for _, y in loader]
        (2, [[0, 1, 2, 3], [4, 5, 6, 7]])
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler: Sampler | None = None,
                 num_workers: int = 0, collate_fn: Callable | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable | None = None,
                 multiprocessing_context: str | None = None, generator=None,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = ""):
        op = "DataLoader"
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"{op}: with an IterableDataset, expected unspecified "
                                     f"{name} option, but got {name}={value!r}")
        elif not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise TypeError(f"{op}: dataset must define __getitem__ and __len__, got "
                            f"{type(dataset).__name__}")
        if batch_size is not None:
            _check_batch_size(op, batch_size)
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"{op}: num_workers should be a non-negative integer, got "
                             f"{num_workers!r}")
        if not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"{op}: timeout should be a non-negative number, got {timeout!r}")
        if prefetch_factor is not None and num_workers == 0:
            raise ValueError(f"{op}: prefetch_factor needs num_workers > 0")
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int)
                                            or prefetch_factor <= 0):
            raise ValueError(f"{op}: prefetch_factor should be a positive integer, got "
                             f"{prefetch_factor!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"{op}: collate_fn must be callable, got {type(collate_fn).__name__}")
        if persistent_workers and num_workers == 0:
            raise ValueError(f"{op}: persistent_workers option needs num_workers > 0")
        _check_generator(op, generator)
        if sampler is not None and shuffle:
            raise ValueError(f"{op}: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(f"{op}: batch_sampler option is mutually exclusive with "
                                 f"batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError(f"{op}: batch_size=None option disables auto-batching and is "
                             f"mutually exclusive with drop_last")
        if sampler is None and not iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.pin_memory = pin_memory  # accepted for PyTorch scripts; CPU tensors need nothing
        self.pin_memory_device = pin_memory_device
        # accepted; the workers are started afresh each epoch whatever it says
        self.persistent_workers = bool(persistent_workers)
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = 2 if prefetch_factor is None else prefetch_factor
        self._iterable = iterable
        self._auto_collation = batch_sampler is not None or (iterable and batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._epochs = 0

    def _index_source(self) -> Iterator | None:
        if self._iterable:
            return None
        return iter(self.batch_sampler if self._auto_collation else self.sampler)

    def _worker_base_seed(self) -> int:
        # derived, not drawn, so that using workers leaves the shuffle stream unchanged
        gen = self.generator if self.generator is not None else _random.default_generator
        return (gen.initial_seed() * 6364136223846793005 + self._epochs * 1442695040888963407
                + 1) % (1 << 63)

    def __iter__(self) -> Iterator:
        self._epochs += 1
        if self.num_workers > 0:
            return _MultiProcessIter(self, self._index_source(), self._worker_base_seed())
        return self._single_process()

    def _single_process(self):
        ds, collate = self.dataset, self.collate_fn
        if self._iterable:
            fetcher = IterableFetcher(ds, self.batch_size, self.drop_last)
            while True:
                try:
                    data = fetcher.fetch()
                except StopIteration:
                    return
                yield collate(data)
        fast = isinstance(ds, TensorDataset) and collate is default_collate
        for idx in self._index_source():
            if not self._auto_collation:
                yield collate(ds[idx])
            elif fast:
                yield ds._batch(list(idx))
            else:
                yield collate([ds[i] for i in idx])

    def __len__(self) -> int:
        if self._iterable:  # the dataset's own length, when it has one, in batches
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)


# the iterable datasets build on Dataset above; DataLoader reads them at call time
from .data_iterable import (  # noqa: E402
    ChainDataset,
    IterableDataset,
    IterableFetcher,
    WeightedRandomSampler,
    WorkerExhausted,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "IterableDataset",
    "WeightedRandomSampler", "Dataset", "DistributedSampler",
    "RandomSampler", "Sampler",
    "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset", "WorkerInfo",
    "default_collate", "default_convert", "get_worker_info", "random_split",
]

from .data_stack import StackDataset  # noqa: E402

__all__ += ["StackDataset"]
