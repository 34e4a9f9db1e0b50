"""The communicator contract shared by every backend: ReduceOp, Work, Group, DistributedError and
the Communicator base class.

The base class holds everything that does not depend on the wire: argument checks, the
cross-rank agreement check, byte accounting and the tensor-level collectives. A backend
(`_mpi.py`, `_nccl.py`) supplies the buffer-level primitives (`_allreduce`, `_bcast`, ...), each
of which starts a nonblocking operation and returns a Work, and `_stage`/`_store`, which move a
tensor's values to and from the buffers those primitives understand.
"""

from __future__ import annotations

import enum
import hashlib
import os
import time
from typing import Callable

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor


class DistributedError(RuntimeError):
    """A collective could not complete: a timeout, a dead peer or ranks that disagree on the
    shape, dtype or kind of the operation they called.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> issubclass(dist.DistributedError, RuntimeError)
        True
    """


class ReduceOp(enum.Enum):
    """How all_reduce, reduce and reduce_scatter combine the ranks' values.

    AVG is SUM divided by the number of ranks (floating-point tensors only). On bool tensors
    SUM is a logical or and PRODUCT a logical and.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.ReduceOp.SUM.name
        'SUM'
    """

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


def as_reduce_op(op, name: str) -> ReduceOp:
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str) and op.upper() in ReduceOp.__members__:
        return ReduceOp[op.upper()]
    raise TypeError(f"{name}: op must be a dist.ReduceOp (SUM, AVG, MAX, MIN, PRODUCT), got {op!r}")


# A wait first spins as MPI's own blocking calls do (progress happens only inside our polls,
# and giving the core away, even with sched_yield, made 1 MB all-reduces 1.7x slower on a busy
# machine); then it yields the core to oversubscribed ranks; after a while the wait is for a
# slow peer, and polling gently costs less than the latency it adds.
_HOT_SECONDS = 0.05
_SPIN_SECONDS = 2.0
# Polls between two reads of the clock in a wait (a poll takes well under a microsecond).
FAST_POLLS = 64


def _polls_done(poll: Callable[[], bool]) -> bool:
    """True as soon as one of FAST_POLLS calls of poll() returns True."""
    for _ in range(FAST_POLLS):
        if poll():
            return True
    return False


class Work:
    """A handle on a started operation, as `async_op=True` returns it.

    `wait()` blocks until the operation finished (raising DistributedError once the timeout
    passes without it), then runs the completion steps (copying results into tensors, marking
    them modified). `is_completed()` asks without blocking.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> t = st.ones(3)
        >>> work = dist.all_reduce(t, async_op=True)
        >>> work.wait()
        True
        >>> t.tolist()  # one process: the sum over one rank
        [1.0, 1.0, 1.0]
        >>> dist.destroy_process_group()
    """

    __slots__ = ("op", "_poll", "_then", "_done", "_timeout", "_on_timeout", "source", "_keep")

    def __init__(self, op: str, poll: Callable[[], bool] | None, timeout: float,
                 on_timeout: Callable[[], None] | None = None, keep=None):
        self.op = op
        self._poll = poll  # None: already complete
        self._then: list = []
        self._done = False
        self._timeout = timeout
        self._on_timeout = on_timeout
        self._keep = keep  # buffers the operation reads or writes stay alive until it ends
        self.source = None  # recv: the rank the message came from

    def then(self, fn: Callable[[], None]) -> Work:
        """Run fn once the operation completed (immediately when it already has)."""
        if self._done:
            fn()
        else:
            self._then.append(fn)
        return self

    def _expired(self) -> None:
        """Called once the wait gave up, before it raises (a backend keeps its buffers)."""
        if self._on_timeout is not None:
            self._on_timeout()

    def _timeout_error(self, limit: float) -> DistributedError:
        return DistributedError(
            f"{self.op}: no reply from the other ranks within {limit:.1f} s (a rank may have "
            f"died, be stuck, or be calling a different operation); raise the limit with "
            f"init_process_group(timeout=...) or SINGA_DIST_TIMEOUT")

    def _complete(self) -> None:
        self._done = True
        self._keep = None
        steps, self._then = self._then, []
        for fn in steps:
            fn()

    def is_completed(self) -> bool:
        """True once the operation finished (completion steps done); never blocks."""
        if not self._done and (self._poll is None or self._poll()):
            self._complete()
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the operation finished; True. DistributedError after `timeout`
        seconds (default: the process group's timeout)."""
        if self._done:
            return True
        poll = self._poll
        if poll is not None and not poll():
            limit = self._timeout if timeout is None else float(timeout)
            start = time.monotonic()
            hot_until = start + _HOT_SECONDS
            spin_until = start + _SPIN_SECONDS
            deadline = start + limit
            yield_ = os.sched_yield
            clock = time.monotonic
            # polls come in tight batches: MPI moves a large message only inside them, and a
            # clock read after every poll made 4 MB all-reduces ~5% slower
            while not _polls_done(poll):
                now = clock()
                if now < hot_until:
                    continue
                if now > deadline:
                    self._expired()
                    raise self._timeout_error(limit)
                if now < spin_until:
                    yield_()
                else:
                    time.sleep(1e-4)
        self._complete()
        return True


def stage_view(t: Tensor, view, contiguous_copy, write: bool):
    """(buffer, write-back) for a backend's raw view of t: the view itself when t is
    contiguous (a write only bumps t's version), else a contiguous copy made by
    contiguous_copy that is written back into the view on completion."""
    if t._contig:
        if not write:
            return view, None
        storage = t._storage

        def bump():
            storage.version += 1
        return view, bump
    buf = contiguous_copy(view)
    if not write:
        return buf, None

    def back():
        view[...] = buf
        t._storage.version += 1
    return buf, back


def completed(op: str) -> Work:
    """A Work that is already done (a world of one rank, an empty tensor)."""
    w = Work(op, None, 0.0)
    w._done = True
    return w


class Group:
    """A set of ranks that run collectives among themselves (from `dist.new_group`).

    `ranks` are world ranks; `rank` is this process's rank inside the group, -1 when it is not
    a member (collectives on such a group do nothing on this process).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> g = dist.new_group([0])
        >>> g.ranks, g.rank, g.size
        ((0,), 0, 1)
        >>> dist.destroy_process_group()
    """

    __slots__ = ("ranks", "rank", "size", "comm")

    def __init__(self, ranks, rank: int, comm: Communicator | None):
        self.ranks = tuple(ranks)
        self.rank = rank
        self.size = len(self.ranks)
        self.comm = comm

    def __repr__(self) -> str:
        return f"Group(ranks={list(self.ranks)}, rank={self.rank})"

    def group_rank(self, world_rank: int, what: str, name: str) -> int:
        try:
            return self.ranks.index(int(world_rank))
        except ValueError:
            raise ValueError(f"{name}: {what}={world_rank} is not a rank of {self}") from None


def _digest(text: str) -> int:
    # Python's hash() of a str differs between processes, so the ranks hash the text with a
    # fixed function; 62 bits leave room to negate it in an int64.
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 2


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.dtype.itemsize


def _describe(t: Tensor) -> str:
    return f"shape {tuple(t.shape)} dtype {t.dtype.name}"


class Communicator:
    """One process's view of a set of ranks, with the collectives of torch.distributed on
    tensors and a few buffer-level calls for DistOpt and the parameter server.

    Attributes: `rank`, `size`, `timeout` (seconds a wait may take), `check` (compare the
    call's op, shape and dtype across ranks before each collective), `bytes_sent` (payload
    bytes this rank sent so far; ring algorithms are counted as such: all-reduce of n bytes
    over p ranks sends 2 (p - 1) / p * n).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> comm = dist.get_communicator()
        >>> comm.rank, comm.size, comm.bytes_sent
        (0, 1, 0)
        >>> dist.destroy_process_group()
    """

    backend = "base"

    def __init__(self, rank: int, size: int, timeout: float, check: bool = True):
        self.rank = rank
        self.size = size
        self.timeout = float(timeout)
        self.check = check
        self.bytes_sent = 0
        self._digests: dict = {}

    # ---- what a backend provides -------------------------------------------------------------
    def _stage(self, t: Tensor, write: bool):
        """(buffer holding t's values, fn that writes the buffer back into t or None)."""
        raise NotImplementedError

    def _store(self, t: Tensor, buf) -> None:
        """Write buf (t's shape, raw storage type) into t."""
        raise NotImplementedError

    def _empty(self, like, shape: tuple):
        raise NotImplementedError

    def _agree_hash(self, h: int, name: str) -> bool:
        """True when every rank passed the same h (one small all-reduce)."""
        raise NotImplementedError

    def _allgather_text(self, text: str) -> list:
        raise NotImplementedError

    def _allreduce(self, name, buf, op: ReduceOp, dtype) -> Work:
        raise NotImplementedError

    def _bcast(self, name, buf, root: int) -> Work:
        raise NotImplementedError

    def _reduce(self, name, buf, op: ReduceOp, root: int, dtype) -> Work:
        raise NotImplementedError

    def _allgather(self, name, send, recv) -> Work:
        raise NotImplementedError

    def _reduce_scatter(self, name, send, recv, op: ReduceOp, dtype) -> Work:
        raise NotImplementedError

    def _gather(self, name, send, recv, root: int) -> Work:
        raise NotImplementedError

    def _scatter(self, name, send, recv, root: int) -> Work:
        raise NotImplementedError

    def _isend(self, name, buf, dst: int, tag: int) -> Work:
        raise NotImplementedError

    def _irecv(self, name, buf, src: int | None, tag: int) -> Work:
        raise NotImplementedError

    def _ibarrier(self) -> Work:
        raise NotImplementedError

    def _alltoallv(self, name, send, send_counts, recv, recv_counts) -> Work:
        """Send send[the j-th run of send_counts[j] elements] to rank j, receiving rank j's
        run into recv at the j-th run of recv_counts (flat contiguous buffers, one dtype)."""
        raise NotImplementedError

    # ---- shared checks -----------------------------------------------------------------------
    def agree(self, name: str, desc: str, nbytes: int | None = None) -> None:
        """Raise DistributedError on every rank unless all ranks are calling `name` with the
        same `desc` (shape, dtype, root ...). Costs one 16-byte all-reduce. With the check off
        (SINGA_DIST_CHECK=0) the ranks still agree on `nbytes`, the payload size, when given:
        a collective over buffers of different sizes would reduce part of one silently."""
        if self.size == 1:
            return
        if not self.check:
            if nbytes is not None:
                self.agree_size(name, nbytes)
            return
        if self._agree_hash(_digest(f"{name}|{desc}"), name):
            return
        self._disagree(name, desc)

    def agree_key(self, name: str, key: tuple, describe: Callable[[], str],
                  nbytes: int | None = None) -> None:
        """agree(name, describe(), nbytes) for calls that repeat: the digest is remembered per
        key (a hashable summary of the arguments), so a repeated call only pays the
        all-reduce."""
        if self.size == 1:
            return
        if not self.check:
            if nbytes is not None:
                self.agree_size(name, nbytes)
            return
        if not self._agree_hash(self._key_digest(name, key, describe), name):
            self._disagree(name, describe())

    def agree_size(self, name: str, nbytes: int) -> None:
        """The check that stays on under SINGA_DIST_CHECK=0: every rank passes nbytes."""
        if not self._agree_hash(int(nbytes), name):
            self._disagree(name, f"a payload of {int(nbytes)} bytes")

    def _key_digest(self, name: str, key: tuple, describe: Callable[[], str]) -> int:
        h = self._digests.get(key)
        if h is None:
            if len(self._digests) > 4096:
                self._digests.clear()
            h = self._digests[key] = _digest(f"{name}|{describe()}")
        return h

    def _disagree(self, name: str, desc: str) -> None:
        # the error path only: every rank got here, so a blocking exchange is safe
        others = self._allgather_text(desc)
        listing = "; ".join(f"rank {r}: {d}" for r, d in enumerate(others))
        raise DistributedError(
            f"{name}: the ranks called it with different arguments; this rank ({self.rank}) has "
            f"{desc} ({listing})"
        )

    @staticmethod
    def _tensor(t, name: str, what: str = "tensor") -> Tensor:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
        return t

    @staticmethod
    def _reducible(name: str, dtype, op: ReduceOp) -> None:
        if op is ReduceOp.AVG and not dtype.is_floating_point:
            raise TypeError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got "
                            f"{dtype.name} (use SUM and divide)")

    def _root(self, root: int, name: str, what: str) -> int:
        if not isinstance(root, int) or not 0 <= root < self.size:
            raise ValueError(f"{name}: {what}={root!r} is out of range for {self.size} ranks")
        return root

    def _same_list(self, name: str, what: str, lst, t: Tensor) -> list:
        if not isinstance(lst, (list, tuple)) or len(lst) != self.size:
            got = len(lst) if isinstance(lst, (list, tuple)) else type(lst).__name__
            raise ValueError(f"{name}: {what} must be a list of {self.size} tensors (one per "
                             f"rank), got {got}")
        for i, x in enumerate(lst):
            self._tensor(x, name, f"{what}[{i}]")
            if x.shape != t.shape or x.dtype is not t.dtype:
                raise ValueError(f"{name}: {what}[{i}] has {_describe(x)}, expected "
                                 f"{_describe(t)}")
        return list(lst)

    def _nbytes(self, t: Tensor) -> int:
        return t.numel() * t.dtype.itemsize

    def _finish(self, work: Work, write_back, async_op: bool):
        if write_back is not None:
            work.then(write_back)
        if async_op:
            return work
        work.wait()
        return None

    # ---- collectives on tensors (ranks are ranks of this communicator) -----------------------
    def all_reduce(self, tensor: Tensor, op=ReduceOp.SUM, async_op: bool = False):
        name = "all_reduce"
        t = tensor if isinstance(tensor, Tensor) else self._tensor(tensor, name)
        if op.__class__ is not ReduceOp:
            op = as_reduce_op(op, name)
        if op is ReduceOp.AVG:
            self._reducible(name, t.dtype, op)
        if self.size == 1:
            return self._finish(completed(name), None, async_op)
        self.agree_key(name, (name, t._shape, t.dtype, op),
                       lambda: f"{_describe(t)} op {op.name}", _nbytes(t))
        buf, back = self._stage(t, True)
        self.bytes_sent += 2 * (self.size - 1) * self._nbytes(t) // self.size
        return self._finish(self._allreduce(name, buf, op, t.dtype), back, async_op)

    def broadcast(self, tensor: Tensor, src: int, async_op: bool = False):
        name = "broadcast"
        t = self._tensor(tensor, name)
        src = self._root(src, name, "src")
        self.agree(name, f"{_describe(t)} src {src}", _nbytes(t))
        if self.size == 1:
            return self._finish(completed(name), None, async_op)
        buf, back = self._stage(t, self.rank != src)
        work = self._bcast(name, buf, src)
        if self.rank == src:
            self.bytes_sent += (self.size - 1) * self._nbytes(t)
        return self._finish(work, back, async_op)

    def reduce(self, tensor: Tensor, dst: int, op=ReduceOp.SUM, async_op: bool = False):
        name = "reduce"
        t = self._tensor(tensor, name)
        op = as_reduce_op(op, name)
        self._reducible(name, t.dtype, op)
        dst = self._root(dst, name, "dst")
        self.agree(name, f"{_describe(t)} op {op.name} dst {dst}", _nbytes(t))
        if self.size == 1:
            return self._finish(completed(name), None, async_op)
        buf, back = self._stage(t, self.rank == dst)
        work = self._reduce(name, buf, op, dst, t.dtype)
        if self.rank != dst:
            self.bytes_sent += self._nbytes(t)
        return self._finish(work, back, async_op)

    def all_gather(self, tensor_list: list, tensor: Tensor, async_op: bool = False):
        name = "all_gather"
        t = self._tensor(tensor, name)
        outs = self._same_list(name, "tensor_list", tensor_list, t)
        self.agree(name, _describe(t), _nbytes(t))
        send, _ = self._stage(t, False)
        if self.size == 1:
            work = completed(name)
        else:
            recv = self._empty(send, (self.size,) + tuple(send.shape))
            work = self._allgather(name, send, recv)
            self.bytes_sent += (self.size - 1) * self._nbytes(t)
        return self._finish(work, self._scatter_into(outs, recv if self.size > 1 else None,
                                                     send), async_op)

    def _scatter_into(self, outs: list, recv, single):
        def back():
            for i, o in enumerate(outs):
                self._store(o, recv[i] if recv is not None else single)
        return back

    def reduce_scatter(self, output: Tensor, input_list: list, op=ReduceOp.SUM,
                       async_op: bool = False):
        name = "reduce_scatter"
        t = self._tensor(output, name, "output")
        ins = self._same_list(name, "input_list", input_list, t)
        op = as_reduce_op(op, name)
        self._reducible(name, t.dtype, op)
        self.agree(name, f"{_describe(t)} op {op.name}", _nbytes(t))
        if self.size == 1:
            return self._finish(completed(name), lambda: self._store(t, self._stage(ins[0],
                                                                                    False)[0]),
                                async_op)
        parts = [self._stage(x, False)[0] for x in ins]
        send = self._empty(parts[0], (self.size,) + tuple(parts[0].shape))
        for i, p in enumerate(parts):
            send[i] = p
        recv, back = self._stage(t, True)
        work = self._reduce_scatter(name, send, recv, op, t.dtype)
        self.bytes_sent += (self.size - 1) * self._nbytes(t)
        return self._finish(work, back, async_op)

    def gather(self, tensor: Tensor, gather_list: list | None = None, dst: int = 0,
               async_op: bool = False):
        name = "gather"
        t = self._tensor(tensor, name)
        dst = self._root(dst, name, "dst")
        mine = self.rank == dst
        if mine:
            outs = self._same_list(name, "gather_list", gather_list, t)
        elif gather_list:
            raise ValueError(f"{name}: gather_list is only given on the destination rank {dst}")
        self.agree(name, f"{_describe(t)} dst {dst}", _nbytes(t))
        send, _ = self._stage(t, False)
        if self.size == 1:
            return self._finish(completed(name), self._scatter_into(outs, None, send), async_op)
        recv = self._empty(send, (self.size,) + tuple(send.shape)) if mine else None
        work = self._gather(name, send, recv, dst)
        if not mine:
            self.bytes_sent += self._nbytes(t)
        return self._finish(work, self._scatter_into(outs, recv, None) if mine else None,
                            async_op)

    def scatter(self, tensor: Tensor, scatter_list: list | None = None, src: int = 0,
                async_op: bool = False):
        name = "scatter"
        t = self._tensor(tensor, name)
        src = self._root(src, name, "src")
        mine = self.rank == src
        if mine:
            ins = self._same_list(name, "scatter_list", scatter_list, t)
        elif scatter_list:
            raise ValueError(f"{name}: scatter_list is only given on the source rank {src}")
        self.agree(name, f"{_describe(t)} src {src}", _nbytes(t))
        if self.size == 1:
            return self._finish(completed(name), lambda: self._store(t, self._stage(ins[0],
                                                                                    False)[0]),
                                async_op)
        send = None
        if mine:
            parts = [self._stage(x, False)[0] for x in ins]
            send = self._empty(parts[0], (self.size,) + tuple(parts[0].shape))
            for i, p in enumerate(parts):
                send[i] = p
            self.bytes_sent += (self.size - 1) * self._nbytes(t)
        recv, back = self._stage(t, True)
        work = self._scatter(name, send, recv, src)
        return self._finish(work, back, async_op)

    def barrier(self) -> None:
        if self.size > 1:
            self._ibarrier().wait()

    # ---- the rest of torch.distributed's tensor collectives -----------------------------------
    def _splits(self, name: str, what: str, splits, dim0: int) -> list:
        if splits is None or (isinstance(splits, (list, tuple)) and len(splits) == 0):
            if dim0 % self.size:
                raise ValueError(f"{name}: {what} not given, so dim 0 ({dim0}) must divide "
                                 f"evenly among {self.size} ranks")
            return [dim0 // self.size] * self.size
        try:
            out = [int(x) for x in splits]
        except (TypeError, ValueError):
            raise TypeError(f"{name}: {what} must be a list of ints, got {splits!r}") from None
        if len(out) != self.size or min(out) < 0 or sum(out) != dim0:
            raise ValueError(f"{name}: {what} {out} must be {self.size} non-negative sizes "
                             f"(one per rank) that add up to dim 0 ({dim0})")
        return out

    def _exchange_counts(self, name: str, counts: list) -> list:
        """counts[j] goes to rank j; what every rank j sent this one."""
        send = np.asarray(counts, np.int64)
        recv = np.zeros(self.size, np.int64)
        ones = [1] * self.size
        self._alltoallv(name, send, ones, recv, ones).wait()
        return recv.tolist()

    def _check_splits(self, name: str, send: list, recv: list, unit: str) -> None:
        """With the check on: raise DistributedError on every rank unless what each rank
        expects from rank j is what rank j sends it (a small all-to-all and the agreement)."""
        if self.size == 1 or not self.check:
            return
        got = self._exchange_counts(name, send)
        problem = "; ".join(f"rank {self.rank} expects {recv[j]} {unit} from rank {j}, which "
                            f"sends {got[j]}" for j in range(self.size) if got[j] != recv[j])
        # 0 where this rank is content; distinct values elsewhere, so that any problem shows
        if self._agree_hash(self.rank + 1 if problem else 0, name):
            return
        found = "; ".join(p for p in self._allgather_text(problem) if p)
        raise DistributedError(f"{name}: the ranks' split sizes do not match: {found}")

    def all_to_all_single(self, output: Tensor, input: Tensor, output_split_sizes=None,
                          input_split_sizes=None, async_op: bool = False):
        name = "all_to_all_single"
        o = self._tensor(output, name, "output")
        i = self._tensor(input, name, "input")
        if o.dtype is not i.dtype or o.ndim == 0 or i.ndim == 0 or o.shape[1:] != i.shape[1:]:
            raise ValueError(f"{name}: output ({_describe(o)}) and input ({_describe(i)}) need "
                             f"one dtype, at least one dimension and the same sizes after "
                             f"dim 0")
        ins = self._splits(name, "input_split_sizes", input_split_sizes, i.shape[0])
        outs = self._splits(name, "output_split_sizes", output_split_sizes, o.shape[0])
        self.agree(name, f"dtype {i.dtype.name} rows of shape {tuple(i.shape[1:])}")
        if self.size == 1:
            if ins != outs:
                raise ValueError(f"{name}: output has {outs[0]} rows, input {ins[0]}")
            return self._finish(completed(name), lambda: self._store(o, self._stage(i, False)[0]),
                                async_op)
        self._check_splits(name, ins, outs, "rows")
        row = i.numel() // i.shape[0] if i.shape[0] else o.numel() // max(o.shape[0], 1)
        send, _ = self._stage(i, False)
        recv, back = self._stage(o, True)
        work = self._alltoallv(name, send.reshape(-1), [n * row for n in ins],
                               recv.reshape(-1), [n * row for n in outs])
        self.bytes_sent += (i.shape[0] - ins[self.rank]) * row * i.dtype.itemsize
        return self._finish(work, back, async_op)

    def all_to_all(self, output_tensor_list: list, input_tensor_list: list,
                   async_op: bool = False):
        name = "all_to_all"
        lists = []
        for what, lst in (("output_tensor_list", output_tensor_list),
                          ("input_tensor_list", input_tensor_list)):
            if not isinstance(lst, (list, tuple)) or len(lst) != self.size:
                got = len(lst) if isinstance(lst, (list, tuple)) else type(lst).__name__
                raise ValueError(f"{name}: {what} must be a list of {self.size} tensors (one "
                                 f"per rank), got {got}")
            lists.append([self._tensor(x, name, f"{what}[{j}]") for j, x in enumerate(lst)])
        outs, ins = lists
        first = ins[0]
        for j, x in enumerate(outs + ins):
            if x.dtype is not first.dtype or x.device != first.device:
                what = "output_tensor_list" if j < self.size else "input_tensor_list"
                raise ValueError(f"{name}: {what}[{j % self.size}] is {x.dtype.name} on "
                                 f"{x.device}, expected {first.dtype.name} on {first.device} "
                                 f"(one dtype and device for every tensor)")
        self.agree(name, f"dtype {first.dtype.name}")
        counts_in, counts_out = [x.numel() for x in ins], [x.numel() for x in outs]
        if self.size == 1:
            if counts_in != counts_out:
                raise ValueError(f"{name}: output_tensor_list[0] has {counts_out[0]} elements, "
                                 f"input_tensor_list[0] {counts_in[0]}")
            return self._finish(completed(name), lambda: self._store(
                outs[0], self._stage(ins[0], False)[0].reshape(outs[0].shape)), async_op)
        self._check_splits(name, counts_in, counts_out, "elements")
        parts = [self._stage(x, False)[0].reshape(-1) for x in ins]
        send = self._empty(parts[0], (sum(counts_in),))
        recv = self._empty(parts[0], (sum(counts_out),))
        at = 0
        for p in parts:
            send[at:at + p.size] = p
            at += p.size
        work = self._alltoallv(name, send, counts_in, recv, counts_out)
        self.bytes_sent += (sum(counts_in) - counts_in[self.rank]) * first.dtype.itemsize

        def back():
            at = 0
            for x, n in zip(outs, counts_out):
                self._store(x, recv[at:at + n].reshape(x.shape))
                at += n
        return self._finish(work, back, async_op)

    def _dim0_layout(self, name: str, big: Tensor, small: Tensor, big_what: str,
                     small_what: str) -> None:
        """big must be size copies of small, concatenated along dim 0 or stacked."""
        if big.dtype is not small.dtype:
            raise ValueError(f"{name}: {big_what} is {big.dtype.name}, {small_what} "
                             f"{small.dtype.name}; they need one dtype")
        s, n = tuple(small.shape), self.size
        shapes = [(n,) + s] + ([(n * s[0],) + s[1:]] if s else [])
        if tuple(big.shape) not in shapes:
            raise ValueError(f"{name}: {big_what} has shape {tuple(big.shape)}, expected "
                             f"{' or '.join(str(x) for x in reversed(shapes))} ({n} ranks' "
                             f"{small_what} of shape {s} along dim 0)")

    def all_gather_into_tensor(self, output_tensor: Tensor, input_tensor: Tensor,
                               async_op: bool = False):
        name = "all_gather_into_tensor"
        o = self._tensor(output_tensor, name, "output_tensor")
        i = self._tensor(input_tensor, name, "input_tensor")
        self._dim0_layout(name, o, i, "output_tensor", "input_tensor")
        self.agree(name, _describe(i), _nbytes(i))
        send, _ = self._stage(i, False)
        if self.size == 1:
            return self._finish(completed(name), lambda: self._store(o, send.reshape(o.shape)),
                                async_op)
        recv, back = self._stage(o, True)
        work = self._allgather(name, send, recv.reshape((self.size,) + tuple(send.shape)))
        self.bytes_sent += (self.size - 1) * self._nbytes(i)
        return self._finish(work, back, async_op)

    def reduce_scatter_tensor(self, output: Tensor, input: Tensor, op=ReduceOp.SUM,
                              async_op: bool = False):
        name = "reduce_scatter_tensor"
        o = self._tensor(output, name, "output")
        i = self._tensor(input, name, "input")
        op = as_reduce_op(op, name)
        self._dim0_layout(name, i, o, "input", "output")
        self._reducible(name, o.dtype, op)
        self.agree(name, f"{_describe(o)} op {op.name}", _nbytes(o))
        send, _ = self._stage(i, False)
        if self.size == 1:
            return self._finish(completed(name), lambda: self._store(o, send.reshape(o.shape)),
                                async_op)
        recv, back = self._stage(o, True)
        work = self._reduce_scatter(name, send.reshape((self.size,) + tuple(recv.shape)), recv,
                                    op, o.dtype)
        self.bytes_sent += (self.size - 1) * self._nbytes(o)
        return self._finish(work, back, async_op)

    # ---- point to point ----------------------------------------------------------------------
    def _peer(self, r, name: str, what: str) -> int:
        r = self._root(r, name, what)
        if r == self.rank:
            raise ValueError(f"{name}: {what}={r} is this rank; a rank cannot message itself")
        return r

    def isend(self, tensor: Tensor, dst: int, tag: int = 0) -> Work:
        name = "send"
        t = self._tensor(tensor, name)
        dst = self._peer(dst, name, "dst")
        buf, _ = self._stage(t, False)
        self.bytes_sent += self._nbytes(t)
        return self._isend(name, buf, dst, int(tag))

    def irecv(self, tensor: Tensor, src: int | None = None, tag: int = 0) -> Work:
        name = "recv"
        t = self._tensor(tensor, name)
        if src is not None:
            src = self._peer(src, name, "src")
        buf, back = self._stage(t, True)
        work = self._irecv(name, buf, src, int(tag))
        if back is not None:
            work.then(back)
        return work

    def batch_p2p(self, ops: list) -> list:
        """Start every ("send" | "recv", tensor, peer, tag) of ops; their Works in order."""
        return [self.isend(t, peer, tag) if kind == "send" else self.irecv(t, peer, tag)
                for kind, t, peer, tag in ops]

    # ---- buffers (numpy arrays for MPI), for DistOpt and the parameter server ----------------
    def allreduce_array(self, array, op=ReduceOp.SUM, async_op: bool = False):
        """All-reduce a contiguous host (numpy) array in place; a Work if async_op."""
        name = "all_reduce"
        if op.__class__ is not ReduceOp:
            op = as_reduce_op(op, name)
        dtype = _dt.from_numpy_dtype(array.dtype)
        self._reducible(name, dtype, op)
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise ValueError(f"{name}: the array must be C-contiguous and writeable")
        if self.size == 1:
            work = completed(name)
        else:
            buf = array.view(_dt.bool_.storage) if dtype is _dt.bool_ else array
            self.agree_key(name, (name, array.shape, dtype, op),
                           lambda: f"shape {array.shape} dtype {dtype.name} op {op.name}",
                           array.nbytes)
            work = self._allreduce(name, buf, op, dtype)
            self.bytes_sent += 2 * (self.size - 1) * array.nbytes // self.size
        return work if async_op else work.wait() and None

    def isend_array(self, array, dst: int, tag: int = 0) -> Work:
        """Start sending a contiguous host array to rank dst; wait() on the Work before
        changing the array."""
        dst = self._peer(dst, "send", "dst")
        self.bytes_sent += array.nbytes
        return self._isend("send", array, dst, int(tag))

    def irecv_array(self, array, src: int | None = None, tag: int = 0) -> Work:
        """Start receiving into a contiguous host array from src (None: any rank); after
        wait(), Work.source is the sender."""
        if src is not None:
            src = self._peer(src, "recv", "src")
        return self._irecv("recv", array, src, int(tag))

    def free(self) -> None:
        """Release the backend's resources (called by destroy_process_group)."""
