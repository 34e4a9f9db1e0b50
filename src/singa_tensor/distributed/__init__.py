"""Multi-process training: torch.distributed's collectives over MPI (CPU, any tensor) or NCCL
(CUDA tensors), with timeouts instead of hangs and a check that the ranks agree on what they
call.

Start the ranks with the launcher (`python -m singa_tensor.distributed.run -n 4 train.py`) or
`mpiexec`; under a plain `python` the same script runs as a world of one process.

Example:
    >>> import singa_tensor as st, singa_tensor.distributed as dist
    >>> dist.init_process_group()
    >>> dist.get_rank(), dist.get_world_size()
    (0, 1)
    >>> t = st.tensor([1.0, 2.0])
    >>> dist.all_reduce(t, op=dist.ReduceOp.SUM)
    >>> t.tolist()
    [1.0, 2.0]
    >>> dist.destroy_process_group()
"""

from __future__ import annotations

import os

from .. import _execution
from ..tensor import Tensor
from ._base import Communicator, DistributedError, Group, ReduceOp, Work, completed

_DEFAULT_TIMEOUT = 300.0


class _State:
    world: Group | None = None
    groups: list = []
    local_rank = 0


_state = _State()


def _world() -> Group:
    g = _state.world
    if g is None:
        raise RuntimeError("singa_tensor.distributed: the process group is not initialized; "
                           "call dist.init_process_group() first")
    return g


def _group(group) -> Group:
    world = _world()
    if group is None:
        return world
    if not isinstance(group, Group):
        raise TypeError(f"group must be a dist.Group from new_group(), got "
                        f"{type(group).__name__}")
    return group


def _communicate(name: str, args: tuple, fn, async_op: bool):
    """fn(args, async_op): the collective on the communicator, args its tensors (and lists
    of tensors). Under graph capture the execution context runs it to completion and records
    it, so that a replay communicates again on the replay's buffers; an async_op then gets a
    Work that is already complete."""
    ex = _execution.current() if _execution.running_count else None
    if ex is None:
        return fn(args, async_op)
    ex.collective(name, args, lambda ts: fn(ts, False))
    return completed(name) if async_op else None


def _on_host(name: str, why: str) -> None:
    """Tell a running capture that communication decided on the host is about to run."""
    ex = _execution.current() if _execution.running_count else None
    if ex is not None:
        ex.host_communication(name, why)


def _timeout(timeout) -> float:
    if timeout is None:
        env = os.environ.get("SINGA_DIST_TIMEOUT")
        if env is None:
            return _DEFAULT_TIMEOUT
        try:
            timeout = float(env)
        except ValueError:
            raise ValueError(f"SINGA_DIST_TIMEOUT must be a number of seconds, got "
                             f"{env!r}") from None
    if hasattr(timeout, "total_seconds"):  # a datetime.timedelta, as torch takes
        timeout = timeout.total_seconds()
    timeout = float(timeout)
    if not timeout > 0:
        raise ValueError(f"init_process_group: timeout must be a positive number of seconds, "
                         f"got {timeout}")
    return timeout


def _nccl_usable() -> bool:
    try:
        from .. import cuda

        if not cuda.is_available():
            return False
        from cupy.cuda import nccl  # noqa: F401
    except Exception:
        return False
    return True


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: float | None = None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None,
                       device_id=None) -> None:
    """Join the world of ranks started by mpiexec (a world of one under a plain `python`).

    backend: "mpi", "nccl" (CUDA tensors over NCCL, everything else over MPI) or "auto"/None
    (NCCL when a GPU and NCCL are present). timeout: seconds (or a timedelta) any wait may take
    before it raises DistributedError (default: $SINGA_DIST_TIMEOUT, else 300). Set
    SINGA_DIST_CHECK=0 to narrow the per-collective check that all ranks pass the same shape and
    dtype to a check of the payload's size in bytes.

    PyTorch's other arguments are accepted where MPI can honour them: init_method None or
    "env://", world_size and rank when they equal what MPI reports (RuntimeError otherwise),
    group_name (ignored), device_id (the GPU of the nccl backend). MPI finds the ranks itself,
    so "tcp://", "file://", a store or pg_options raise ValueError. A second positional
    number is taken as the timeout, as before init_method existed.

    Under torchrun (RANK and WORLD_SIZE set, WORLD_SIZE > 1) MPI sees a world of one: that
    raises RuntimeError rather than running every process alone; start the ranks with mpiexec
    or `python -m singa_tensor.distributed.run -n N script.py`.

    An exception that escapes on one rank ends every rank (MPI Abort after the traceback).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(backend="mpi", timeout=60)
        >>> dist.is_initialized()
        True
        >>> dist.destroy_process_group()
    """
    name = "init_process_group"
    if _state.world is not None:
        raise RuntimeError("init_process_group: the process group is already initialized; "
                           "call destroy_process_group() first")
    if init_method is not None and not isinstance(init_method, str):
        # the signature before init_method: init_process_group(backend, timeout)
        if timeout is not None:
            raise TypeError(f"{name}: init_method must be a str, got "
                            f"{type(init_method).__name__}")
        init_method, timeout = None, init_method
    backend = "auto" if backend is None else backend
    if isinstance(backend, str):
        backend = backend.lower()
    if backend not in ("auto", "mpi", "nccl"):
        raise ValueError(f"init_process_group: backend must be 'auto', 'mpi' or 'nccl', got "
                         f"{backend!r}")
    _unsupported(init_method, store, pg_options)
    seconds = _timeout(timeout)
    check = os.environ.get("SINGA_DIST_CHECK", "1") != "0"
    from . import _mpi

    MPI = _mpi.load()
    world = MPI.COMM_WORLD
    _check_launch(world.Get_size(), world.Get_rank(), init_method, world_size, rank)
    device_index = _device_index(device_id)
    if backend == "auto":
        backend = "nccl" if _nccl_usable() else "mpi"
    _state.local_rank = _local_rank(world)
    comm_mpi = world.Dup()  # our traffic never matches the user's own MPI messages
    if backend == "nccl":
        from ._nccl import NcclCommunicator

        comm = NcclCommunicator(comm_mpi, seconds, check, _state.local_rank, device_index)
    else:
        comm = _mpi.MpiCommunicator(comm_mpi, seconds, check)
    _state.world = Group(range(comm.size), comm.rank, comm)
    _state.groups = []
    _mpi.install_excepthook()


_LAUNCH = ("start the ranks with mpiexec -n N or python -m singa_tensor.distributed.run -n N "
           "script.py")


def _unsupported(init_method, store, pg_options) -> None:
    name = "init_process_group"
    if init_method is not None and init_method != "env://":
        raise ValueError(f"{name}: init_method={init_method!r} is not supported: the ranks find "
                         f"each other through MPI, not a URL; pass init_method=None or "
                         f"'env://' and {_LAUNCH}")
    if store is not None:
        raise ValueError(f"{name}: store= is not supported: MPI connects the ranks itself "
                         f"(no key-value store); {_LAUNCH}")
    if pg_options is not None:
        raise ValueError(f"{name}: pg_options= is not supported by the MPI and NCCL backends "
                         f"here")


def _env_int(var: str):
    v = os.environ.get(var)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise RuntimeError(f"init_process_group: ${var}={v!r} is not an integer") from None


def _check_launch(mpi_size: int, mpi_rank: int, init_method, world_size, rank) -> None:
    """Refuse a world that is not the one the caller or its launcher asked for."""
    name = "init_process_group"
    env_size, env_rank = _env_int("WORLD_SIZE"), _env_int("RANK")
    if env_size is not None and env_rank is not None and env_size > 1 and mpi_size == 1:
        raise RuntimeError(
            f"{name}: RANK={env_rank} and WORLD_SIZE={env_size} are set (torchrun or a similar "
            f"launcher), but MPI started this process alone, so every process would train by "
            f"itself; {_LAUNCH} (it sets the ranks up through MPI)")
    if init_method == "env://":
        for var, got, mpi in (("WORLD_SIZE", env_size, mpi_size), ("RANK", env_rank, mpi_rank)):
            if got is not None and got != mpi:
                raise RuntimeError(f"{name}: init_method='env://' has ${var}={got}, but MPI "
                                   f"reports {mpi}; {_LAUNCH}")
    for what, given, mpi in (("world_size", world_size, mpi_size), ("rank", rank, mpi_rank)):
        if not isinstance(given, int) or isinstance(given, bool):
            raise TypeError(f"{name}: {what} must be an int, got {type(given).__name__}")
        if given != -1 and given != mpi:
            raise RuntimeError(f"{name}: {what}={given}, but MPI reports {mpi} (the ranks "
                               f"come from MPI; {_LAUNCH})")


def _device_index(device_id) -> int | None:
    """The GPU index device_id names (an int, "cuda:N" or a device); None for None."""
    if device_id is None:
        return None
    from ..backend.device import Device

    try:
        dev = Device(device_id)
    except (TypeError, ValueError) as e:
        raise ValueError(f"init_process_group: device_id {device_id!r} is not a device ({e})") \
            from None
    if dev.type != "cuda":
        raise ValueError(f"init_process_group: device_id must be a CUDA device (it picks the "
                         f"GPU of the nccl backend), got {device_id!r}")
    return dev.index


def _local_rank(world) -> int:
    for var in ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK",
                "SLURM_LOCALID"):
        v = os.environ.get(var)
        if v is not None and v.isdigit():
            return int(v)
    if world.Get_size() == 1:
        return 0
    from . import _mpi

    node = world.Split_type(_mpi.load().COMM_TYPE_SHARED, key=world.Get_rank())
    try:
        return node.Get_rank()
    finally:
        node.Free()


def is_initialized() -> bool:
    """True between init_process_group() and destroy_process_group().

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.is_initialized()
        False
    """
    return _state.world is not None


def destroy_process_group() -> None:
    """Leave the process group (MPI itself stays up until the process exits).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.destroy_process_group(); dist.is_initialized()
        False
    """
    world = _state.world
    if world is None:
        return
    from . import _mpi

    for g in getattr(_state, "groups", []):
        if g.comm is not None:
            g.comm.free()
    world.comm.free()
    _state.world = None
    _state.groups = []
    _mpi.remove_excepthook()


def get_rank(group: Group | None = None) -> int:
    """This process's rank in the world (or in group; -1 when not a member).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.get_rank()
        0
        >>> dist.destroy_process_group()
    """
    return _group(group).rank


def get_world_size(group: Group | None = None) -> int:
    """How many ranks the world (or group) has.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.get_world_size()
        1
        >>> dist.destroy_process_group()
    """
    return _group(group).size


def get_local_rank() -> int:
    """This process's rank among the ranks on the same machine (picks its GPU).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.get_local_rank()
        0
        >>> dist.destroy_process_group()
    """
    _world()
    return _state.local_rank


def get_communicator(group: Group | None = None) -> Communicator | None:
    """The backend object of the world (or group): buffer-level calls (`allreduce_array`,
    `isend_array`, `irecv_array`), `bytes_sent`, `timeout`, `check` and `mpi` (the mpi4py
    communicator). None on a group this process is not a member of.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> dist.get_communicator().size
        1
        >>> dist.destroy_process_group()
    """
    return _group(group).comm


def new_group(ranks) -> Group:
    """A group of the given world ranks. Every rank of the world must call it (with the same
    ranks); the others get a Group with rank -1.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.new_group([0]).size
        1
        >>> dist.destroy_process_group()
    """
    world = _world()
    _on_host("new_group", "it sets up a communicator, once; make groups before the step")
    try:
        ranks = sorted({int(r) for r in ranks})
    except (TypeError, ValueError):
        raise TypeError(f"new_group: ranks must be a list of ints, got {ranks!r}") from None
    if not ranks or ranks[0] < 0 or ranks[-1] >= world.size:
        raise ValueError(f"new_group: ranks {ranks} must be a non-empty subset of "
                         f"0..{world.size - 1}")
    wc = world.comm
    wc.agree("new_group", f"ranks {ranks}")
    mpi = wc.mpi
    sub = mpi.Create(mpi.Get_group().Incl(ranks))
    comm = None
    if world.rank in ranks:
        comm = type(wc).for_group(wc, sub) if hasattr(type(wc), "for_group") else \
            type(wc)(sub, wc.timeout, wc.check)
    g = Group(ranks, ranks.index(world.rank) if comm is not None else -1, comm)
    _state.groups.append(g)
    return g


def get_backend(group: Group | None = None) -> str:
    """"mpi" or "nccl": the backend of the world (or of group, which must include this rank).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(backend="mpi"); dist.get_backend()
        'mpi'
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        raise ValueError(f"get_backend: this rank is not a member of {g}")
    return g.comm.backend


def get_process_group_ranks(group: Group | None) -> list:
    """The world ranks of group (of the world for None), in group-rank order.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.get_process_group_ranks(dist.new_group([0]))
        [0]
        >>> dist.destroy_process_group()
    """
    return list(_group(group).ranks)


def is_mpi_available() -> bool:
    """True when mpi4py is installed (MPI itself starts only at init_process_group).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> isinstance(dist.is_mpi_available(), bool)
        True
    """
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


def is_nccl_available() -> bool:
    """True when the nccl backend can run here: a CUDA device and CuPy's NCCL bindings.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> isinstance(dist.is_nccl_available(), bool)
        True
    """
    return _nccl_usable()


def is_available() -> bool:
    """True when init_process_group can work here (it needs MPI, is_mpi_available()).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.is_available()
        True
    """
    return is_mpi_available()


def barrier(group: Group | None = None) -> None:
    """Wait until every rank of the world (or group) got here.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group(); dist.barrier(); dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is not None:
        _communicate("barrier", (), lambda ts, a: g.comm.barrier(), False)


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Group | None = None,
               async_op: bool = False) -> Work | None:
    """Combine tensor over the ranks, in place on every rank.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> t = st.tensor([1, 2])
        >>> dist.all_reduce(t, op=dist.ReduceOp.MAX); t.tolist()
        [1, 2]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    return _communicate("all_reduce", (tensor,),
                        lambda ts, a: g.comm.all_reduce(ts[0], op, a), async_op)


def broadcast(tensor: Tensor, src: int, group: Group | None = None,
              async_op: bool = False) -> Work | None:
    """Copy tensor from world rank src to every rank of the group.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> t = st.zeros(2); dist.broadcast(t, src=0); t.tolist()
        [0.0, 0.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    root = g.group_rank(src, "src", "broadcast")
    return _communicate("broadcast", (tensor,),
                        lambda ts, a: g.comm.broadcast(ts[0], root, a), async_op)


def reduce(tensor: Tensor, dst: int, op: ReduceOp = ReduceOp.SUM, group: Group | None = None,
           async_op: bool = False) -> Work | None:
    """Combine tensor over the ranks into world rank dst's tensor (others keep theirs).

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> t = st.ones(2); dist.reduce(t, dst=0); t.tolist()
        [1.0, 1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    root = g.group_rank(dst, "dst", "reduce")
    return _communicate("reduce", (tensor,),
                        lambda ts, a: g.comm.reduce(ts[0], root, op, a), async_op)


def all_gather(tensor_list: list, tensor: Tensor, group: Group | None = None,
               async_op: bool = False) -> Work | None:
    """tensor_list[r] = rank r's tensor, on every rank.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = [st.zeros(2)]; dist.all_gather(out, st.ones(2)); out[0].tolist()
        [1.0, 1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    return _communicate("all_gather", (tensor_list, tensor),
                        lambda ts, a: g.comm.all_gather(ts[0], ts[1], a), async_op)


def reduce_scatter(output: Tensor, input_list: list, op: ReduceOp = ReduceOp.SUM,
                   group: Group | None = None, async_op: bool = False) -> Work | None:
    """output = input_list[rank] combined over the ranks.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = st.zeros(2); dist.reduce_scatter(out, [st.ones(2)]); out.tolist()
        [1.0, 1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    return _communicate("reduce_scatter", (output, input_list),
                        lambda ts, a: g.comm.reduce_scatter(ts[0], ts[1], op, a), async_op)


def gather(tensor: Tensor, gather_list: list | None = None, dst: int = 0,
           group: Group | None = None, async_op: bool = False) -> Work | None:
    """gather_list[r] = rank r's tensor, on world rank dst only.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = [st.zeros(1)]; dist.gather(st.ones(1), out, dst=0); out[0].tolist()
        [1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    root = g.group_rank(dst, "dst", "gather")
    return _communicate("gather", (tensor, gather_list),
                        lambda ts, a: g.comm.gather(ts[0], ts[1], root, a), async_op)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int = 0,
            group: Group | None = None, async_op: bool = False) -> Work | None:
    """tensor = scatter_list[rank] of world rank src.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> t = st.zeros(1); dist.scatter(t, [st.ones(1)], src=0); t.tolist()
        [1.0]
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        return None
    root = g.group_rank(src, "src", "scatter")
    return _communicate("scatter", (tensor, scatter_list),
                        lambda ts, a: g.comm.scatter(ts[0], ts[1], root, a), async_op)


def isend(tensor: Tensor, dst: int, group: Group | None = None, tag: int = 0) -> Work:
    """Start sending tensor to world rank dst; do not change it before Work.wait().

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> if dist.get_rank() == 0:  # doctest: +SKIP
        ...     dist.isend(st.ones(2), dst=1).wait()
    """
    g = _group(group)
    _on_host("isend", "a send left running inside the step could not be replayed in its "
                      "place; use dist.send (blocking) or dist.batch_isend_irecv")
    return g.comm.isend(tensor, g.group_rank(dst, "dst", "send"), tag)


def irecv(tensor: Tensor, src: int | None = None, group: Group | None = None,
          tag: int = 0) -> Work:
    """Start receiving into tensor from world rank src (None: any); Work.source is the
    sender's rank in the group after wait().

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> t = st.zeros(2)
        >>> if dist.get_rank() == 1:  # doctest: +SKIP
        ...     dist.irecv(t, src=0).wait()
    """
    g = _group(group)
    _on_host("irecv", "a receive left running inside the step could not be replayed in its "
                      "place; use dist.recv (blocking, with src) or dist.batch_isend_irecv")
    src = None if src is None else g.group_rank(src, "src", "recv")
    return g.comm.irecv(tensor, src, tag)


def send(tensor: Tensor, dst: int, group: Group | None = None, tag: int = 0) -> None:
    """Send tensor to world rank dst and wait until it left.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> if dist.get_rank() == 0:  # doctest: +SKIP
        ...     dist.send(st.ones(2), dst=1)
    """
    g = _group(group)
    peer = g.group_rank(dst, "dst", "send")
    _communicate("send", (tensor,), lambda ts, a: g.comm.isend(ts[0], peer, tag).wait(), False)


def recv(tensor: Tensor, src: int | None = None, group: Group | None = None,
         tag: int = 0) -> int:
    """Receive into tensor from world rank src (None: any rank); the sender's world rank.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> t = st.zeros(2)
        >>> if dist.get_rank() == 1:  # doctest: +SKIP
        ...     dist.recv(t, src=0)
        0
    """
    g = _group(group)
    if src is None:
        _on_host("recv", "with src=None the sender is found on the host, and a replay "
                         "could not return it; pass src")
        w = irecv(tensor, src, group, tag)
        w.wait()
        return g.ranks[w.source]
    peer = g.group_rank(src, "src", "recv")
    _communicate("recv", (tensor,), lambda ts, a: g.comm.irecv(ts[0], peer, tag).wait(), False)
    return g.ranks[peer]


# these build on the collectives above
from ._more_collectives import (  # noqa: E402
    P2POp,
    all_gather_into_tensor,
    all_to_all,
    all_to_all_single,
    batch_isend_irecv,
    monitored_barrier,
    reduce_scatter_tensor,
)
from ._object_collectives import (  # noqa: E402
    all_gather_object,
    broadcast_object_list,
    gather_object,
    scatter_object_list,
)
from .parameter_server import ParameterServer  # noqa: E402

__all__ = [
    "Communicator", "DistributedError", "Group", "P2POp", "ParameterServer", "ReduceOp", "Work",
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
    "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast", "broadcast_object_list",
    "destroy_process_group", "gather", "gather_object", "get_backend", "get_communicator",
    "get_local_rank", "get_process_group_ranks", "get_rank", "get_world_size",
    "init_process_group", "irecv", "is_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "isend", "monitored_barrier", "new_group", "recv", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list", "send",
]


def __getattr__(name: str):
    # `dist.optim`, `dist.fsdp` as in torch.distributed: the sharded optimizer, the sharded
    # wrapper, the tensor-parallel layers and the pipeline schedules sit above the optimizers
    # and nn, so their modules are imported on first use, not with this package
    if name in ("optim", "tensor_parallel", "fsdp", "pipelining"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
