"""The MPI backend (mpi4py): every collective is a nonblocking MPI call (Iallreduce, Ibcast, ...)
whose Work polls the request, so that a missing peer becomes a DistributedError after the
timeout instead of a hang. Tensors on a host backend are passed without a copy; others are
staged through host memory.

float16 and bfloat16 travel as 2-byte elements and are reduced by user-defined MPI operations,
so half precision halves the bytes on the wire (DistOpt's half-precision update relies on it).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor
from . import _progress
from ._base import (
    Communicator,
    DistributedError,
    ReduceOp,
    Work,
    _describe,
    _polls_done,
    stage_view,
)

_MPI = None


def load():
    """The mpi4py MPI module (initializing MPI; a world of one process without mpiexec)."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise ImportError(
                f"singa_tensor.distributed needs mpi4py and an MPI library: "
                f'pip install "singa_tensor[mpi]" (or pip install mpi4py mpich) ({e})'
            ) from None
        _MPI = MPI
    return _MPI


# Requests that timed out are kept with their buffers: MPI may still write into them, so
# letting the buffers be freed could corrupt memory before the job is aborted.
_orphans: list = []

class _MpiWork(Work):
    """A Work polling mpi4py request(s); on timeout the requests and buffers are kept.

    `local`: the operation runs Python code inside MPI (the float16/bfloat16 reductions), so
    only the thread that started it may progress it; any other may be handed to the progress
    thread (`_hand_off`), which then polls it alone."""

    __slots__ = ("_reqs", "_ticket", "local")

    def __init__(self, name: str, reqs, timeout: float, keep, poll=None, local: bool = False):
        if poll is None:
            poll = (lambda: _MPI.Request.Testall(reqs)) if isinstance(reqs, list) else reqs.Test
        super().__init__(name, poll, timeout, keep=keep)
        self._reqs = reqs
        self._ticket = None
        self.local = local

    def _expired(self) -> None:
        # MPI may still write into the buffers: they stay alive until the job ends
        _orphans.append((self._reqs, self._keep))

    def _hand_off(self, engine) -> None:
        reqs, keep = self._reqs, self._keep
        self._ticket = engine.submit(self._poll, keep, self._timeout,
                                     on_drop=lambda: _orphans.append((reqs, keep)))
        self._poll = self._ticket.event.is_set

    def _check_ticket(self) -> None:
        error = self._ticket.error
        if error is not None:
            self._ticket = None
            self._done = True
            raise error

    def is_completed(self) -> bool:
        if self._ticket is not None and not self._done and self._ticket.event.is_set():
            self._check_ticket()
        return super().is_completed()

    def wait(self, timeout: float | None = None) -> bool:
        ticket = self._ticket
        if ticket is None or self._done:
            return super().wait(timeout)
        limit = self._timeout if timeout is None else float(timeout)
        # the progress thread polls; this thread sleeps (holding no GIL) until it is done
        if not ticket.event.wait(limit):
            ticket.cancelled = True
            self._expired()
            raise self._timeout_error(limit)
        self._check_ticket()
        self._complete()
        return True


def _work(name: str, reqs, timeout: float, keep, local: bool = False) -> Work:
    return _MpiWork(name, reqs, timeout, keep, local=local)


def _python_op(dtype) -> bool:
    """Whether MPI reduces this dtype with a Python callback (float16, bfloat16)."""
    return dtype is _dt.float16 or dtype is _dt.bfloat16


def _wait(name: str, req, timeout: float, keep) -> None:
    """Block until one request completes (DistributedError after timeout)."""
    if not req.Test() and not _polls_done(req.Test):
        _MpiWork(name, req, timeout, keep).wait()


def _bf16_to_f32(a: np.ndarray) -> np.ndarray:
    return (a.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(a: np.ndarray, out: np.ndarray) -> None:
    bits = a.view(np.uint32)
    bits = bits + (((bits >> 16) & 1) + 0x7FFF)  # round to nearest even
    np.right_shift(bits, 16, out=bits)
    out[...] = bits.astype(np.uint16)


_UFUNC = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
          ReduceOp.MAX: np.maximum, ReduceOp.MIN: np.minimum}


def _half_op(op: ReduceOp, bf16: bool):
    """A commutative MPI operation combining 2-byte float16/bfloat16 elements."""
    uf = _UFUNC[op]
    if bf16:
        def combine(inbuf, inoutbuf, datatype):
            a = np.frombuffer(inbuf, np.uint16)
            b = np.frombuffer(inoutbuf, np.uint16)
            _f32_to_bf16(uf(_bf16_to_f32(b), _bf16_to_f32(a)), b)
    else:
        from ..creation import from_numpy
        from ..dtype import float16

        def combine(inbuf, inoutbuf, datatype):
            # widen, combine in float32 (exact for two float16 operands) and round once: the
            # correctly rounded float16 result. The conversions are our vectorised casts;
            # numpy's float16 arithmetic and MPICH's MPI_FLOAT16_T are 8x slower here
            b = np.frombuffer(inoutbuf, np.float16)
            a32 = from_numpy(np.frombuffer(inbuf, np.float16)).float().numpy()
            b32 = from_numpy(b).float().numpy()
            uf(b32, a32, out=b32)
            b[...] = from_numpy(b32).to(float16).numpy()
    return _MPI.Op.Create(combine, commute=True)


def _excepthook_wrapper(previous):
    def hook(tp, value, tb):
        previous(tp, value, tb)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            # the other ranks would otherwise wait for this one until their timeout
            if _MPI is not None and _MPI.COMM_WORLD.Get_size() > 1:
                # mpiexec forwards our output asynchronously and Abort kills the job at once:
                # a moment first, so that the traceback reaches the user
                time.sleep(0.5)
                _MPI.COMM_WORLD.Abort(1)
    hook.singa_previous = previous
    return hook


def install_excepthook() -> None:
    if getattr(sys.excepthook, "singa_previous", None) is None:
        sys.excepthook = _excepthook_wrapper(sys.excepthook)


def remove_excepthook() -> None:
    previous = getattr(sys.excepthook, "singa_previous", None)
    if previous is not None:
        sys.excepthook = previous


def _raw_view(t: Tensor) -> np.ndarray:
    """The tensor's elements in a host storage as stored (bool as uint8, bfloat16 as uint16)."""
    arr = t._storage.array
    item = arr.itemsize
    base = arr[t._offset:]
    if t._contig:
        return base[:t.numel()].reshape(t._shape)
    return np.lib.stride_tricks.as_strided(base, shape=t._shape,
                                           strides=tuple(s * item for s in t._strides))


def _host_tensor(arr: np.ndarray, dtype) -> Tensor:
    from .. import backend

    cpu = backend.get(backend.CPU)
    flat = np.ascontiguousarray(arr).reshape(-1)
    return Tensor._make(cpu.from_numpy(flat, dtype), tuple(arr.shape), None, 0, dtype,
                        backend.CPU, cpu)


class MpiCommunicator(Communicator):
    """Collectives over an mpi4py communicator (`comm.mpi`).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(backend="mpi")
        >>> dist.get_communicator().backend
        'mpi'
        >>> dist.destroy_process_group()
    """

    backend = "mpi"

    def __init__(self, mpi_comm, timeout: float, check: bool = True):
        super().__init__(mpi_comm.Get_rank(), mpi_comm.Get_size(), timeout, check)
        self.mpi = mpi_comm
        MPI = load()
        self._types = {
            "bool": MPI.UINT8_T, "int32": MPI.INT32_T, "int64": MPI.INT64_T,
            "float32": MPI.FLOAT, "float64": MPI.DOUBLE, "float16": MPI.UINT16_T,
            "bfloat16": MPI.UINT16_T,
        }
        self._ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX,
                     ReduceOp.MIN: MPI.MIN, ReduceOp.PRODUCT: MPI.PROD}
        # logical or / and on bytes that hold 0 or 1
        self._bool_ops = {ReduceOp.SUM: MPI.MAX, ReduceOp.MAX: MPI.MAX,
                          ReduceOp.MIN: MPI.MIN, ReduceOp.PRODUCT: MPI.MIN}
        self._half_ops: dict = {}
        # The agreement check: one persistent all-reduce (MPI 4), which costs about half of
        # a nonblocking one per call; a plain Iallreduce where the library lacks them
        self._mine = np.zeros(2, np.int64)
        self._pair = np.zeros(2, np.int64)
        try:
            self._check_req = mpi_comm.Allreduce_init([self._mine, MPI.INT64_T],
                                                      [self._pair, MPI.INT64_T], MPI.MAX)
        except (AttributeError, NotImplementedError, MPI.Exception):
            self._check_req = None
        self._plans: dict = {}
        # async operations are progressed by a thread while the caller computes (the thread
        # may call MPI only under MPI_THREAD_MULTIPLE)
        self._progress = self.size > 1 and _progress.enabled_by_env() \
            and MPI.Query_thread() == MPI.THREAD_MULTIPLE

    # ---- the blocking all-reduce of a host tensor ---------------------------------------------
    def all_reduce(self, tensor: Tensor, op=ReduceOp.SUM, async_op: bool = False):
        # The call a training loop makes every step, with as little Python as possible: a
        # poll of MPI is cheap, but each line run between polls delays the peer too. The
        # checks and arguments are worked out once per (shape, dtype, op, backend) into a
        # plan; every other case goes through Communicator.all_reduce.
        if async_op or op.__class__ is not ReduceOp or not isinstance(tensor, Tensor) \
                or not tensor._contig:
            return super().all_reduce(tensor, op, async_op)
        plan = self._plans.get((tensor._shape, tensor.dtype, op, tensor._be))
        if plan is None:
            if self.size == 1 or not hasattr(tensor._be, "view_numpy"):
                return super().all_reduce(tensor, op, async_op)
            plan = self._plan(tensor, op)
        h, mtype, mop, n, sent = plan
        storage = tensor._storage
        arr = storage.array
        off = tensor._offset
        buf = arr if off == 0 and arr.shape[0] == n else arr[off:off + n]
        if self.check:
            # the agreement check must finish first: MPI can abort the job on a data
            # all-reduce whose ranks disagree on the element size
            if not self._agree_hash(h, "all_reduce"):
                self._disagree("all_reduce", f"{_describe(tensor)} op {op.name}")
            req = self.mpi.Iallreduce(_MPI.IN_PLACE, [buf, mtype], mop)
        else:
            # SINGA_DIST_CHECK=0 keeps the size check, in flight with the data: one round
            # trip of latency overlapped, and a partial reduce is never returned as a result
            req = self.mpi.Iallreduce(_MPI.IN_PLACE, [buf, mtype], mop)
            if not self._agree_hash(sent_bytes := n * tensor.dtype.itemsize, "all_reduce"):
                raise DistributedError(
                    f"all_reduce: the ranks passed tensors of different sizes (this rank "
                    f"({self.rank}) has {_describe(tensor)}, {sent_bytes} bytes); with "
                    "SINGA_DIST_CHECK=0 this is found after the data was sent, so the process "
                    "group cannot be used after it")
        _wait("all_reduce", req, self.timeout, buf)
        if op is ReduceOp.AVG:
            self._average(buf, tensor.dtype)
        storage.version += 1
        self.bytes_sent += sent
        return None

    def _plan(self, t: Tensor, op: ReduceOp):
        name = "all_reduce"
        self._reducible(name, t.dtype, op)
        h = self._key_digest(name, (name, t._shape, t.dtype, op),
                             lambda: f"{_describe(t)} op {op.name}")
        n = t.numel()
        sent = 2 * (self.size - 1) * n * t.dtype.itemsize // self.size
        plan = (h, self._types[t.dtype.name], self._mpi_op(op, t.dtype), n, sent)
        if len(self._plans) > 1024:
            self._plans.clear()
        self._plans[(t._shape, t.dtype, op, t._be)] = plan
        return plan

    def _finish(self, work: Work, write_back, async_op: bool):
        if async_op and self._progress and work.__class__ is _MpiWork and not work.local \
                and not work._done:
            work._hand_off(_progress.engine())
        return super()._finish(work, write_back, async_op)

    # ---- staging -----------------------------------------------------------------------------
    def _stage(self, t: Tensor, write: bool):
        if hasattr(t._be, "view_numpy"):
            return stage_view(t, _raw_view(t), np.ascontiguousarray, write)
        host = t.detach().cpu()
        buf = np.ascontiguousarray(_raw_view(host))
        return buf, ((lambda: self._store(t, buf)) if write else None)

    def _store(self, t: Tensor, buf) -> None:
        if hasattr(t._be, "view_numpy"):
            _raw_view(t)[...] = buf
            t._storage.version += 1
            return
        from ..autograd import no_grad

        with no_grad():
            t.copy_(_host_tensor(buf, t.dtype))

    def _empty(self, like, shape: tuple):
        return np.empty(shape, like.dtype)

    # ---- wire --------------------------------------------------------------------------------
    def _spec(self, buf, dtype=None):
        if dtype is None:
            dtype = _dt.from_numpy_dtype(buf.dtype) if buf.dtype != np.uint16 else _dt.bfloat16
        return [buf, self._types[dtype.name]]

    def _mpi_op(self, op: ReduceOp, dtype):
        if dtype is _dt.bool_:
            return self._bool_ops[op]
        if dtype is _dt.float16 or dtype is _dt.bfloat16:
            key = (op, dtype.name)
            mop = self._half_ops.get(key)
            if mop is None:
                mop = self._half_ops[key] = _half_op(op, dtype is _dt.bfloat16)
            return mop
        return self._ops[op]

    def _average(self, buf, dtype):
        if dtype is _dt.bfloat16:
            _f32_to_bf16(_bf16_to_f32(buf) / np.float32(self.size), buf)
        else:
            buf /= buf.dtype.type(self.size)

    def _agree_hash(self, h: int, name: str) -> bool:
        mine, pair = self._mine, self._pair
        # max of h and max of -h (minus the min of h) in one round trip
        mine[0] = h
        mine[1] = -h
        req = self._check_req
        if req is None:
            req = self.mpi.Iallreduce([mine, _MPI.INT64_T], [pair, _MPI.INT64_T], _MPI.MAX)
        else:
            req.Start()
        try:
            _wait(name, req, self.timeout, (mine, pair))
        except DistributedError:
            # the persistent request is still active (and now kept in _orphans); later
            # checks start new ones
            self._check_req = None
            self._mine, self._pair = mine.copy(), pair.copy()
            raise
        return pair[0] == h and pair[1] == -h

    def _allgather_text(self, text: str) -> list:
        return self.mpi.allgather(text)

    def _allreduce(self, name, buf, op, dtype) -> Work:
        w = _work(name, self.mpi.Iallreduce(_MPI.IN_PLACE, [buf, self._types[dtype.name]],
                                            self._mpi_op(op, dtype)), self.timeout, buf,
                  _python_op(dtype))
        if op is ReduceOp.AVG:
            w.then(lambda: self._average(buf, dtype))
        return w

    def _bcast(self, name, buf, root) -> Work:
        return _work(name, self.mpi.Ibcast(self._bytes(buf), root), self.timeout, buf)

    @staticmethod
    def _bytes(buf):
        return [buf, _MPI.BYTE] if buf.dtype.itemsize == 1 else \
            [buf.view(np.uint8).reshape(-1) if buf.ndim else buf.reshape(1).view(np.uint8),
             _MPI.BYTE]

    def _reduce(self, name, buf, op, root, dtype) -> Work:
        mtype, mop = self._types[dtype.name], self._mpi_op(op, dtype)
        if self.rank == root:
            req = self.mpi.Ireduce(_MPI.IN_PLACE, [buf, mtype], mop, root)
        else:
            req = self.mpi.Ireduce([buf, mtype], None, mop, root)
        w = _work(name, req, self.timeout, buf, _python_op(dtype))
        if op is ReduceOp.AVG and self.rank == root:
            w.then(lambda: self._average(buf, dtype))
        return w

    def _allgather(self, name, send, recv) -> Work:
        return _work(name, self.mpi.Iallgather(self._bytes(send), self._bytes(recv)),
                     self.timeout, (send, recv))

    def _reduce_scatter(self, name, send, recv, op, dtype) -> Work:
        mtype = self._types[dtype.name]
        w = _work(name, self.mpi.Ireduce_scatter_block([send, mtype], [recv, mtype],
                                                       self._mpi_op(op, dtype)),
                  self.timeout, (send, recv), _python_op(dtype))
        if op is ReduceOp.AVG:
            w.then(lambda: self._average(recv, dtype))
        return w

    def _gather(self, name, send, recv, root) -> Work:
        rspec = self._bytes(recv) if recv is not None else None
        return _work(name, self.mpi.Igather(self._bytes(send), rspec, root), self.timeout,
                     (send, recv))

    def _scatter(self, name, send, recv, root) -> Work:
        sspec = self._bytes(send) if send is not None else None
        return _work(name, self.mpi.Iscatter(sspec, self._bytes(recv), root), self.timeout,
                     (send, recv))

    def _isend(self, name, buf, dst, tag) -> Work:
        return _work(name, self.mpi.Isend(self._bytes(buf), dst, tag), self.timeout, buf)

    def _irecv(self, name, buf, src, tag) -> Work:
        status = _MPI.Status()
        req = self.mpi.Irecv(self._bytes(buf), _MPI.ANY_SOURCE if src is None else src, tag)
        expected = buf.nbytes

        def poll():
            return req.Test(status)

        w = _MpiWork(name, req, self.timeout, buf, poll)

        def check():
            got = status.Get_count(_MPI.BYTE)
            if got != expected:
                raise DistributedError(f"recv: expected {expected} bytes, rank "
                                       f"{status.Get_source()} sent {got}")
            w.source = status.Get_source()
        w.then(check)
        return w

    def _ibarrier(self) -> Work:
        return _work("barrier", self.mpi.Ibarrier(), self.timeout, None)

    def _alltoallv(self, name, send, send_counts, recv, recv_counts) -> Work:
        # as bytes, so every dtype takes one path; MPI counts are C ints (runs under 2 GiB)
        item = send.dtype.itemsize

        def layout(counts):
            sizes = [int(c) * item for c in counts]
            return sizes, [sum(sizes[:j]) for j in range(len(sizes))]
        sbuf, rbuf = send.reshape(-1).view(np.uint8), recv.reshape(-1).view(np.uint8)
        req = self.mpi.Ialltoallv([sbuf, layout(send_counts), _MPI.BYTE],
                                  [rbuf, layout(recv_counts), _MPI.BYTE])
        return _work(name, req, self.timeout, (send, recv))

    def free(self) -> None:
        for mop in self._half_ops.values():
            mop.Free()
        self._half_ops.clear()
        if self._check_req is not None:
            self._check_req.Free()
            self._check_req = None
        if self.mpi != _MPI.COMM_WORLD and self.mpi != _MPI.COMM_NULL:
            self.mpi.Free()
