"""The NCCL backend: collectives on CUDA tensors run on the GPU through `cupy.cuda.nccl`; CPU
tensors and everything host-side (the agreement check, text exchange) go over MPI, which also
carries NCCL's unique id from rank 0 to the others at start.

NCCL calls are enqueued on a stream of the communicator's own, after the work queued so far on
the current stream, and return at once; a Work records a CUDA event after them and polls it,
so a peer that never arrives still ends in a DistributedError (after which the NCCL
communicator is aborted) instead of a hang.

CuPy is imported only when this backend is chosen: machines without a GPU never load it.
"""

from __future__ import annotations

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor
from ._base import ReduceOp, Work, stage_view
from ._mpi import MpiCommunicator


def _load():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:
        raise ImportError(
            f"the nccl backend needs CuPy with NCCL: pip install 'singa_tensor[gpu]' ({e})"
        ) from None
    return cupy, nccl


class NcclCommunicator(MpiCommunicator):
    """MPI communicator whose collectives on CUDA tensors go through NCCL.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(backend="nccl")  # doctest: +SKIP
        >>> dist.get_communicator().backend  # doctest: +SKIP
        'nccl'
    """

    backend = "nccl"

    def __init__(self, mpi_comm, timeout: float, check: bool = True, local_rank: int = 0,
                 device_index: int | None = None):
        super().__init__(mpi_comm, timeout, check)
        cupy, nccl = _load()
        self._cupy, self._nccl = cupy, nccl
        if device_index is None:
            device_index = local_rank % cupy.cuda.runtime.getDeviceCount()
        self.device_index = device_index
        cupy.cuda.Device(device_index).use()
        uid = nccl.get_unique_id() if self.rank == 0 else None
        uid = mpi_comm.bcast(uid, root=0)
        self.nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        self._stream = None  # the stream collectives run on, made at the first one
        self._dtypes = {
            "bool": nccl.NCCL_UINT8, "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64,
            "float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
            "float64": nccl.NCCL_FLOAT64,
            "bfloat16": getattr(nccl, "NCCL_BFLOAT16", None),
        }
        self._nops = {ReduceOp.SUM: nccl.NCCL_SUM, ReduceOp.PRODUCT: nccl.NCCL_PROD,
                      ReduceOp.MAX: nccl.NCCL_MAX, ReduceOp.MIN: nccl.NCCL_MIN,
                      ReduceOp.AVG: getattr(nccl, "NCCL_AVG", None)}
        self._bool_nops = {ReduceOp.SUM: nccl.NCCL_MAX, ReduceOp.MAX: nccl.NCCL_MAX,
                           ReduceOp.MIN: nccl.NCCL_MIN, ReduceOp.PRODUCT: nccl.NCCL_MIN}

    @classmethod
    def for_group(cls, parent: NcclCommunicator, mpi_comm) -> NcclCommunicator:
        return cls(mpi_comm, parent.timeout, parent.check, device_index=parent.device_index)

    # ---- staging: device tensors stay on the device -----------------------------------------
    def _on_gpu(self, buf) -> bool:
        return isinstance(buf, self._cupy.ndarray)

    def _raw_device(self, t: Tensor):
        """A CuPy array over t's storage with the raw element type (bfloat16 as uint16)."""
        cupy = self._cupy
        s = t._storage
        item = t.dtype.itemsize
        mem = cupy.cuda.UnownedMemory(int(self._cupy_address(s.ptr)), s.nbytes, s,
                                      t.device.index or 0)
        return cupy.ndarray(t._shape, dtype=t.dtype.storage,
                            memptr=cupy.cuda.MemoryPointer(mem, t._offset * item),
                            strides=tuple(x * item for x in t._strides))

    @staticmethod
    def _cupy_address(ptr) -> int:
        from ..backend.cuda import _address

        return _address(ptr)

    def _stage(self, t: Tensor, write: bool):
        if t.device.type != "cuda":
            return super()._stage(t, write)
        return stage_view(t, self._raw_device(t), self._cupy.ascontiguousarray, write)

    def _store(self, t: Tensor, buf) -> None:
        if t.device.type == "cuda" and self._on_gpu(buf):
            self._raw_device(t)[...] = buf
            t._storage.version += 1
        elif self._on_gpu(buf):
            super()._store(t, self._cupy.asnumpy(buf))
        else:
            super()._store(t, buf)

    def _empty(self, like, shape: tuple):
        if self._on_gpu(like):
            return self._cupy.empty(shape, like.dtype)
        return super()._empty(like, shape)

    # ---- wire --------------------------------------------------------------------------------
    def _launch(self, name: str, enqueue, keep, after=None) -> Work:
        """Enqueue NCCL calls on the communicator's own stream, after what the current stream
        has queued so far (the kernels writing the tensors sent); a Work that polls an event
        after them. On a stream of its own a collective runs beside the kernels queued after
        it (FSDP's prefetched gathers, DDP's buckets) instead of between them; the buffers
        stay referenced until the event shows it done, so no kernel reuses them earlier."""
        cupy = self._cupy
        current = cupy.cuda.get_current_stream()
        stream = self._stream
        if stream is None:
            stream = self._stream = cupy.cuda.Stream(non_blocking=True)
        ready = cupy.cuda.Event(block=False, disable_timing=True)
        ready.record(current)
        stream.wait_event(ready)
        with stream:  # CuPy copies made while enqueueing go on that stream too
            enqueue(stream.ptr)
        event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record(stream)
        w = Work(name, lambda: event.done, self.timeout, on_timeout=self.nccl.abort, keep=keep)
        if after is not None:
            w.then(after)
        return w

    def _dtype(self, name: str, dtype):
        code = self._dtypes[dtype.name]
        if code is None:
            raise TypeError(f"{name}: this NCCL has no {dtype.name}; convert the tensor to "
                            f"float32")
        return code

    def _nop(self, name: str, op: ReduceOp, dtype):
        if dtype is _dt.bool_:
            return self._bool_nops[op]
        code = self._nops[op]
        if code is None:
            raise TypeError(f"{name}: this NCCL has no ReduceOp.AVG (NCCL < 2.10); use SUM")
        return code

    def _allreduce(self, name, buf, op, dtype) -> Work:
        if not self._on_gpu(buf):
            return super()._allreduce(name, buf, op, dtype)
        t, o, p = self._dtype(name, dtype), self._nop(name, op, dtype), buf.data.ptr
        return self._launch(name, lambda s: self.nccl.allReduce(p, p, buf.size, t, o, s), buf)

    def _bcast(self, name, buf, root) -> Work:
        if not self._on_gpu(buf):
            return super()._bcast(name, buf, root)
        p = buf.data.ptr
        return self._launch(name, lambda s: self.nccl.broadcast(p, p, buf.nbytes,
                                                                self._nccl.NCCL_UINT8, root, s),
                            buf)

    def _reduce(self, name, buf, op, root, dtype) -> Work:
        if not self._on_gpu(buf):
            return super()._reduce(name, buf, op, root, dtype)
        t, o, p = self._dtype(name, dtype), self._nop(name, op, dtype), buf.data.ptr
        if self.rank == root:
            return self._launch(name, lambda s: self.nccl.reduce(p, p, buf.size, t, o, root, s),
                                buf)
        # the non-root ranks keep their tensor: NCCL writes the result only at the root, but
        # in-place on a non-root still needs a buffer it may scribble in
        scratch = self._cupy.empty_like(buf)
        return self._launch(name, lambda s: self.nccl.reduce(p, scratch.data.ptr, buf.size, t,
                                                             o, root, s), (buf, scratch))

    def _allgather(self, name, send, recv) -> Work:
        if not self._on_gpu(send):
            return super()._allgather(name, send, recv)
        return self._launch(name, lambda s: self.nccl.allGather(
            send.data.ptr, recv.data.ptr, send.nbytes, self._nccl.NCCL_UINT8, s), (send, recv))

    def _reduce_scatter(self, name, send, recv, op, dtype) -> Work:
        if not self._on_gpu(send):
            return super()._reduce_scatter(name, send, recv, op, dtype)
        t, o = self._dtype(name, dtype), self._nop(name, op, dtype)
        return self._launch(name, lambda s: self.nccl.reduceScatter(
            send.data.ptr, recv.data.ptr, recv.size, t, o, s), (send, recv))

    def _grouped_p2p(self, calls) -> None:
        nccl = self._nccl
        nccl.groupStart()
        try:
            for fn in calls:
                fn()
        finally:
            nccl.groupEnd()

    def _gather(self, name, send, recv, root) -> Work:
        if not self._on_gpu(send):
            return super()._gather(name, send, recv, root)
        u8, n = self._nccl.NCCL_UINT8, send.nbytes

        def enqueue(s):
            calls = [lambda: self.nccl.send(send.data.ptr, n, u8, root, s)]
            if self.rank == root:
                calls = [(lambda r=r: self.nccl.recv(recv[r].data.ptr, n, u8, r, s))
                         for r in range(self.size) if r != root]
                recv[root] = send
            self._grouped_p2p(calls)
        return self._launch(name, enqueue, (send, recv))

    def _scatter(self, name, send, recv, root) -> Work:
        if not self._on_gpu(recv):
            if send is not None and self._on_gpu(send):
                send = self._cupy.asnumpy(send)
            return super()._scatter(name, send, recv, root)
        u8, n = self._nccl.NCCL_UINT8, recv.nbytes

        def enqueue(s):
            calls = [lambda: self.nccl.recv(recv.data.ptr, n, u8, root, s)]
            if self.rank == root:
                calls = [(lambda r=r: self.nccl.send(send[r].data.ptr, n, u8, r, s))
                         for r in range(self.size) if r != root]
                recv[...] = send[root]
            self._grouped_p2p(calls)
        return self._launch(name, enqueue, (send, recv))

    def _isend(self, name, buf, dst, tag) -> Work:
        if not self._on_gpu(buf):
            return super()._isend(name, buf, dst, tag)
        # NCCL has no tags: device messages between a pair of ranks arrive in call order
        return self._launch(name, lambda s: self.nccl.send(buf.data.ptr, buf.nbytes,
                                                           self._nccl.NCCL_UINT8, dst, s), buf)

    def _irecv(self, name, buf, src, tag) -> Work:
        if not self._on_gpu(buf):
            return super()._irecv(name, buf, src, tag)
        if src is None:
            raise ValueError(f"{name}: NCCL cannot receive from any rank; pass src")
        w = self._launch(name, lambda s: self.nccl.recv(buf.data.ptr, buf.nbytes,
                                                        self._nccl.NCCL_UINT8, src, s), buf)
        w.source = src
        return w

    def _alltoallv(self, name, send, send_counts, recv, recv_counts) -> Work:
        if not self._on_gpu(send):
            return super()._alltoallv(name, send, send_counts, recv, recv_counts)
        u8, item = self._nccl.NCCL_UINT8, send.itemsize
        sat = [sum(send_counts[:j]) for j in range(self.size)]
        rat = [sum(recv_counts[:j]) for j in range(self.size)]

        def enqueue(s):
            me = self.rank
            recv[rat[me]:rat[me] + recv_counts[me]] = send[sat[me]:sat[me] + send_counts[me]]
            calls = []
            for j in range(self.size):
                if j == me:
                    continue
                if send_counts[j]:
                    calls.append(lambda j=j: self.nccl.send(send.data.ptr + sat[j] * item,
                                                            send_counts[j] * item, u8, j, s))
                if recv_counts[j]:
                    calls.append(lambda j=j: self.nccl.recv(recv.data.ptr + rat[j] * item,
                                                            recv_counts[j] * item, u8, j, s))
            self._grouped_p2p(calls)
        return self._launch(name, enqueue, (send, recv))

    def batch_p2p(self, ops: list) -> list:
        # the device sends and receives form one NCCL group (in separate calls, two ranks
        # that both send first would wait for each other); host ones go over MPI
        works: list = [None] * len(ops)
        device = [i for i, op in enumerate(ops) if op[1].device.type == "cuda"]
        for i, op in enumerate(ops):
            if i not in device:
                works[i] = super().batch_p2p([op])[0]
        if not device:
            return works
        staged = []
        for i in device:
            kind, t, peer, _ = ops[i]
            buf, back = self._stage(self._tensor(t, kind), kind == "recv")
            staged.append((kind, buf, self._peer(peer, kind, "peer"), back))
        u8 = self._nccl.NCCL_UINT8

        def enqueue(s):
            self._grouped_p2p([
                (lambda b=b, p=p: self.nccl.send(b.data.ptr, b.nbytes, u8, p, s)) if k == "send"
                else (lambda b=b, p=p: self.nccl.recv(b.data.ptr, b.nbytes, u8, p, s))
                for k, b, p, _ in staged])
            self.bytes_sent += sum(b.nbytes for k, b, _, _ in staged if k == "send")
        w = self._launch("batch_isend_irecv", enqueue, [b for _, b, _, _ in staged])
        for _, _, _, back in staged:
            if back is not None:
                w.then(back)
        for i in device:
            works[i] = w
        return works

    def allreduce_array(self, array, op=ReduceOp.SUM, async_op: bool = False):
        """All-reduce a host (numpy) or device (CuPy) array in place."""
        if not self._on_gpu(array):
            return super().allreduce_array(array, op, async_op)
        name = "all_reduce"
        from ._base import as_reduce_op

        op = as_reduce_op(op, name)
        dtype = _dt.from_numpy_dtype(np.dtype(array.dtype))
        self._reducible(name, dtype, op)
        self.agree(name, f"shape {array.shape} dtype {dtype.name} op {op.name}")
        buf = array.view(np.uint8) if dtype is _dt.bool_ else array
        work = self._allreduce(name, buf, op, dtype)
        self.bytes_sent += 2 * (self.size - 1) * array.nbytes // self.size
        return work if async_op else work.wait() and None

    def free(self) -> None:
        try:
            self.nccl.destroy()
        finally:
            super().free()
