"""torch.distributed's all-to-all, the single-tensor all-gather and reduce-scatter, batched
point-to-point and the monitored barrier. Like the other collectives they check that the
ranks agree on the call and wait no longer than the process group's timeout."""

from __future__ import annotations

import time

import numpy as np

from ..tensor import Tensor
from . import _communicate, _group, irecv, isend
from ._base import DistributedError, Group, ReduceOp, Work, completed

# The tag of monitored_barrier's messages on the process group's communicator (the largest
# tag every MPI allows); user point-to-point traffic should not use it.
MONITOR_TAG = 32767


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes: list | None = None,
                      input_split_sizes: list | None = None, group: Group | None = None,
                      async_op: bool = False) -> Work | None:
    """Split input along dim 0 into input_split_sizes[j] rows for rank j, and fill output
    with the rows every rank j sent, in rank order (output_split_sizes[j] from rank j).
    Without split sizes, dim 0 is split evenly. With the agreement check on, split sizes that
    do not match between ranks raise DistributedError on every rank.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = st.zeros(3); dist.all_to_all_single(out, st.tensor([1.0, 2.0, 3.0]))
        >>> out.tolist()
        [1.0, 2.0, 3.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    return _communicate("all_to_all_single", (output, input),
                        lambda ts, a: g.comm.all_to_all_single(
                            ts[0], ts[1], output_split_sizes, input_split_sizes, a), async_op)


def all_to_all(output_tensor_list: list, input_tensor_list: list, group: Group | None = None,
               async_op: bool = False) -> Work | None:
    """Send input_tensor_list[j] to rank j and receive rank j's tensor for this rank into
    output_tensor_list[j]; the sizes may differ per pair, the dtype may not.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = [st.zeros(2)]; dist.all_to_all(out, [st.ones(2)]); out[0].tolist()
        [1.0, 1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    return _communicate("all_to_all", (output_tensor_list, input_tensor_list),
                        lambda ts, a: g.comm.all_to_all(ts[0], ts[1], a), async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor,
                           group: Group | None = None, async_op: bool = False) -> Work | None:
    """output_tensor = the ranks' input_tensor concatenated along dim 0 (shape
    ``(world_size * d0, ...)``), or stacked (shape ``(world_size, *input.shape)``).

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = st.zeros(2); dist.all_gather_into_tensor(out, st.ones(2)); out.tolist()
        [1.0, 1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    return _communicate("all_gather_into_tensor", (output_tensor, input_tensor),
                        lambda ts, a: g.comm.all_gather_into_tensor(ts[0], ts[1], a), async_op)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM,
                          group: Group | None = None, async_op: bool = False) -> Work | None:
    """output = the rank-th of world_size equal blocks of input along dim 0, combined over
    the ranks (input shaped ``(world_size * d0, ...)`` or ``(world_size, *output.shape)``).

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = st.zeros(2); dist.reduce_scatter_tensor(out, st.ones(2)); out.tolist()
        [1.0, 1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    return _communicate("reduce_scatter_tensor", (output, input),
                        lambda ts, a: g.comm.reduce_scatter_tensor(ts[0], ts[1], op, a),
                        async_op)


class P2POp:
    """One send or receive for batch_isend_irecv: op is dist.isend or dist.irecv, peer a
    world rank.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> op = dist.P2POp(dist.isend, st.ones(2), peer=1)
        >>> op.peer, op.tag
        (1, 0)
    """

    __slots__ = ("op", "tensor", "peer", "group", "tag")

    def __init__(self, op, tensor: Tensor, peer: int, group: Group | None = None,
                 tag: int = 0):
        if op is not isend and op is not irecv:
            raise ValueError(f"P2POp: op must be dist.isend or dist.irecv, got {op!r}")
        if not isinstance(tensor, Tensor):
            raise TypeError(f"P2POp: tensor must be a Tensor, got {type(tensor).__name__}")
        if not isinstance(peer, int) or isinstance(peer, bool):
            raise TypeError(f"P2POp: peer must be an int rank, got {peer!r}")
        if group is not None and not isinstance(group, Group):
            raise TypeError(f"P2POp: group must be a dist.Group from new_group(), got "
                            f"{type(group).__name__}")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, int(tag)

    def __repr__(self) -> str:
        return (f"P2POp({self.op.__name__}, peer={self.peer}, shape={tuple(self.tensor.shape)}, "
                f"tag={self.tag})")


def batch_isend_irecv(p2p_op_list: list) -> list:
    """Start every send and receive of p2p_op_list together; a Work for each, in order. All
    ops use one group; every op is checked before any starts. On NCCL the device ones are one
    NCCL group, so ranks may list sends and receives in any order.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> r, n = dist.get_rank(), dist.get_world_size()  # doctest: +SKIP
        >>> got = st.zeros(2)
        >>> works = dist.batch_isend_irecv([  # doctest: +SKIP
        ...     dist.P2POp(dist.isend, st.ones(2), (r + 1) % n),
        ...     dist.P2POp(dist.irecv, got, (r - 1) % n)])
        >>> for w in works: w.wait()  # doctest: +SKIP
    """
    name = "batch_isend_irecv"
    if not isinstance(p2p_op_list, (list, tuple)) or not p2p_op_list or \
            not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError(f"{name}: expected a non-empty list of dist.P2POp, got "
                         f"{p2p_op_list!r}")
    groups = {id(p.group) for p in p2p_op_list}
    if len(groups) != 1:
        raise ValueError(f"{name}: all ops must use the same group")
    g = _group(p2p_op_list[0].group)
    if g.comm is None:
        raise ValueError(f"{name}: this rank is not a member of {g}")
    ops = []
    for i, p in enumerate(p2p_op_list):
        kind = "send" if p.op is isend else "recv"
        peer = g.group_rank(p.peer, "peer", f"{name}: op {i} ({kind})")
        if peer == g.rank:
            raise ValueError(f"{name}: op {i} ({kind}) has peer={p.peer}, this rank; a rank "
                             f"cannot message itself")
        ops.append((kind, p.tensor, peer, p.tag))
    kinds = [(kind, peer, tag) for kind, _, peer, tag in ops]

    def start(tensors, async_op):
        works = g.comm.batch_p2p([(k, t, peer, tag) for (k, peer, tag), t in
                                  zip(kinds, tensors)])
        if not async_op:  # recorded: the whole batch completes as one call
            for w in works:
                w.wait()
        return works

    works = _communicate(name, ([t for _, t, _, _ in ops],), lambda ts, a: start(ts[0], a),
                         True)
    return works if isinstance(works, list) else [completed(name) for _ in ops]


def monitored_barrier(group: Group | None = None, timeout=None,
                      wait_all_ranks: bool = False) -> None:
    """A barrier that names who is missing: rank 0 of the group waits up to timeout seconds
    (or a timedelta; default: the process group's timeout) for every other rank, then tells
    them whether all arrived. If not, every rank that got there raises DistributedError
    naming the first late rank (every late rank with wait_all_ranks=True); a late rank hears
    the verdict when it arrives. The others wait up to twice timeout for rank 0 (which may
    arrive late itself) before naming it. Its messages use tag 32767 of the process group's
    communicator.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.monitored_barrier(timeout=10)
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return
    if timeout is None:
        seconds = g.comm.timeout
    else:
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            raise TypeError(f"monitored_barrier: timeout must be seconds or a timedelta, got "
                            f"{timeout!r}") from None
        if not seconds > 0:
            raise ValueError(f"monitored_barrier: timeout must be positive, got {seconds}")
    _communicate("monitored_barrier", (),
                 lambda ts, a: _monitored(g.comm, seconds, bool(wait_all_ranks), g.ranks), False)


def _monitored(comm, timeout: float, wait_all_ranks: bool, ranks) -> None:
    """barrier() in which rank 0 names the ranks (world ranks from `ranks`) that did not
    arrive within timeout; every rank that got there raises the same DistributedError."""
    if comm.size == 1:
        return
    name = "monitored_barrier"
    reply = np.zeros(comm.size, np.int64)  # 1 marks a rank that did not arrive
    if comm.rank != 0:
        sent = comm._isend(name, np.ones(1, np.int64), 0, MONITOR_TAG)
        # rank 0 may arrive up to timeout after this rank and then wait timeout itself
        try:
            comm._irecv(name, reply, 0, MONITOR_TAG).wait(2 * timeout)
            sent.wait(timeout)
        except DistributedError:
            raise DistributedError(
                f"{name}: rank {ranks[0]} did not confirm within {2 * timeout:.1f} s that "
                f"every rank arrived (it may have died or be stuck)") from None
    else:
        pending = {j: comm._irecv(name, np.zeros(1, np.int64), j, MONITOR_TAG)
                   for j in range(1, comm.size)}
        deadline = time.monotonic() + timeout
        while pending:
            pending = {j: w for j, w in pending.items() if not w.is_completed()}
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(1e-4)
        missing = sorted(pending)
        for w in pending.values():
            w._expired()  # a late rank's message still lands in this request's buffer
        reply[missing if wait_all_ranks else missing[:1]] = 1
        for j in range(1, comm.size):
            w = comm._isend(name, reply, j, MONITOR_TAG)
            if j in pending:
                w._expired()  # a late rank receives the verdict when it arrives
            else:
                w.wait(timeout)
    if reply.any():
        late = [ranks[j] for j in np.flatnonzero(reply)]
        who = f"rank {late[0]}" if len(late) == 1 else \
            "ranks " + ", ".join(str(x) for x in late)
        raise DistributedError(f"{name}: {who} did not arrive within {timeout:.1f} s")
