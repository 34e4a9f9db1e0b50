"""Sharded optimizer state: `ZeroRedundancyOptimizer` (PyTorch's `torch.distributed.optim` name
and contract, ZeRO stage 1).

Every rank keeps the whole model, but each parameter is owned by one rank of the process group
and only its owner keeps optimizer state for it (momentum buffers, Adam's moments), so a rank
holds about 1/R of the state of the unsharded optimizer. A step updates the local shard, then
every parameter is broadcast from its owner so that all replicas agree again.

The partition is PyTorch's greedy rule: group by group, the parameters are taken in order of
decreasing size (number of elements; equal sizes keep their given order) and each goes to the
rank whose parameters hold the fewest elements so far (the lowest such rank on a tie). The
totals carry over from one group to the next, so adding a group never moves a parameter that
was already placed.

The broadcast after a step sends, per owner rank and dtype, its parameters packed into flat
buckets of at most 25 MiB (a larger parameter goes on its own, from its own memory), so a small
model costs one message per rank. With `parameters_as_bucket_view=True` the parameters become
views into one flat buffer per owner rank and dtype, which is broadcast as it is (no packing).
"""

from __future__ import annotations

import inspect
import io
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import creation, serialization
from ..autograd import no_grad
from ..dtype import int32, int64
from ..ops.shape import cat
from ..optim.dist_opt import _dist
from ..optim.optimizer import Optimizer
from ..tensor import Tensor

_NAME = "ZeroRedundancyOptimizer"
BUCKET_BYTES = 25 * 1024 * 1024


def partition_parameters(param_groups: list, world_size: int) -> list:
    """Per rank, per parameter group, the parameters that rank owns (PyTorch's greedy rule:
    largest first, each to the rank with the fewest elements so far).

    Example:
        >>> import singa_tensor as st
        >>> a, b, c = st.zeros(10), st.zeros(6), st.zeros(5)
        >>> parts = partition_parameters([{"params": [c, a, b]}], 2)
        >>> [[p.numel() for p in part[0]] for part in parts]
        [[10], [6, 5]]
    """
    totals = [0] * world_size
    out: list = [[] for _ in range(world_size)]
    for group in param_groups:
        mine: list = [[] for _ in range(world_size)]
        # sorted() is stable: parameters of equal size keep the order they were given in
        for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
            r = totals.index(min(totals))
            mine[r].append(p)
            totals[r] += p.numel()
        for r in range(world_size):
            out[r].append(mine[r])
    return out


def state_bytes(optimizer: Optimizer) -> int:
    """Bytes of the tensors in an optimizer's per-parameter state (momentum buffers, moments).

    Example:
        >>> import singa_tensor as st
        >>> w = st.ones(4, requires_grad=True)
        >>> opt = st.optim.Adam([w]); w.sum().backward(); opt.step()
        >>> state_bytes(opt)   # exp_avg and exp_avg_sq, 4 float32 each
        32
    """
    def size(v) -> int:
        if isinstance(v, Tensor):
            return v.numel() * v.dtype.itemsize
        if isinstance(v, (list, tuple)):
            return sum(size(x) for x in v)
        if isinstance(v, dict):
            return sum(size(x) for x in v.values())
        return 0

    return sum(size(s) for s in optimizer.state.values())


class _Bucket:
    """Parameters of one owner rank broadcast as one message: `view` is the flat buffer they
    are views of (bucket view), else they are packed on the owner (several) or sent from their
    own memory (one)."""

    __slots__ = ("owner", "params", "view")

    def __init__(self, owner: int, params: list, view: Tensor | None = None):
        self.owner, self.params, self.view = owner, params, view

    @property
    def nbytes(self) -> int:
        return sum(p.numel() for p in self.params) * self.params[0].dtype.itemsize


def _check_kwargs(optimizer_class: type, defaults: dict) -> None:
    """Name the keyword arguments optimizer_class does not take, before building it."""
    sig = inspect.signature(optimizer_class.__init__)  # follows the master_weights wrapper
    params = list(sig.parameters.values())[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    names = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                   inspect.Parameter.KEYWORD_ONLY)}
    names.discard("params")
    names.add("master_weights")  # every Optimizer subclass takes it
    unknown = sorted(set(defaults) - names)
    if unknown:
        raise TypeError(f"{_NAME}: {optimizer_class.__name__} takes no argument "
                        f"{', '.join(repr(k) for k in unknown)} (it takes "
                        f"{', '.join(sorted(names))})")


def _encode(obj) -> tuple[int, Tensor]:
    """A state dict as the bytes `st.save` writes (no pickle): their count, and the bytes
    padded to whole int32 words in an int32 tensor (the collectives' smallest integer type)."""
    f = io.BytesIO()
    serialization.save(obj, f)
    raw = f.getvalue()
    words = np.frombuffer(raw + bytes(-len(raw) % 4), dtype=np.int32).copy()
    return len(raw), creation.tensor(words, dtype=int32)


def _decode(nbytes: int, t: Tensor, device) -> Any:
    raw = t.numpy().tobytes()[:nbytes]
    return serialization.load(io.BytesIO(raw), map_location=str(device))


class ZeroRedundancyOptimizer(Optimizer):
    """Wrap `optimizer_class` so that each rank of `process_group` (the world by default) keeps
    optimizer state only for its shard of `params`; PyTorch's ZeRO stage 1.

    `params` are all of the model's parameters (tensors or param groups), the same on every
    rank. `optimizer_class` is any `singa_tensor.optim` optimizer (SGD, Adam, AdamW, ...) and
    `**defaults` are its keyword arguments (`lr`, `momentum`, ...); each rank builds it over
    its shard only, as `.optim`. `param_groups` are the groups of all parameters, with every
    hyper-parameter: change them here (a scheduler does), and `step` hands the values to
    `.optim`. `step(closure)` steps the local shard, then broadcasts every parameter from its
    owner. Use it under `nn.parallel.DistributedDataParallel` (which averages the gradients)
    exactly like the unsharded optimizer; the parameters come out the same.

    Checkpoints: every rank calls `consolidate_state_dict(to)`; rank `to` (a rank of the
    process group) then gets, from `state_dict()`, the state dict of the unsharded
    optimizer_class over all the parameters. `load_state_dict` takes such a dict (from this
    class or from the unsharded optimizer) on every rank and keeps its shard's part.

    The partition and the buckets of the broadcast are described in this module's docstring.
    `parameters_as_bucket_view=True` makes the parameters views into one flat buffer per owner
    rank and dtype (assigning a parameter's `.data` afterwards undoes that for it).
    `overlap_with_ddp=True` (running the step inside DDP's communication hook) is not
    implemented and raises, and so is there no `join_hook` (uneven inputs under `Join`).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn, optim
        >>> from singa_tensor.distributed.optim import ZeroRedundancyOptimizer
        >>> net = nn.Linear(3, 1)
        >>> opt = ZeroRedundancyOptimizer(net.parameters(), optim.SGD, lr=0.1, momentum=0.9)
        >>> net(st.ones(2, 3)).sum().backward(); opt.step()   # a world of one without mpiexec
        >>> type(opt.optim).__name__, opt.param_groups[0]["momentum"]
        ('SGD', 0.9)
        >>> import singa_tensor.distributed as dist; dist.destroy_process_group()
    """

    def __init__(self, params: Iterable, optimizer_class: type,
                 process_group=None, parameters_as_bucket_view: bool = False,
                 overlap_with_ddp: bool = False, **defaults: Any) -> None:
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"{_NAME}: optimizer_class must be an optimizer class "
                            f"(optim.SGD, optim.Adam, ...), got {optimizer_class!r}")
        if issubclass(optimizer_class, ZeroRedundancyOptimizer):
            raise TypeError(f"{_NAME}: optimizer_class cannot be {_NAME} itself")
        for flag, value in (("parameters_as_bucket_view", parameters_as_bucket_view),
                            ("overlap_with_ddp", overlap_with_ddp)):
            if not isinstance(value, bool):
                raise TypeError(f"{_NAME}: {flag} must be a bool, got {type(value).__name__}")
        if overlap_with_ddp:
            raise NotImplementedError(
                f"{_NAME}: overlap_with_ddp=True (stepping inside DDP's communication hook) is "
                "not implemented; pass overlap_with_ddp=False and call step() after backward")
        _check_kwargs(optimizer_class, defaults)
        dist = _dist()
        self._initialized = False
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        if self.rank < 0:
            raise ValueError(f"{_NAME}: this rank is not a member of process_group "
                             f"{process_group}")
        self._ranks = list(process_group.ranks) if process_group is not None else \
            list(range(self.world_size))
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self.overlap_with_ddp = overlap_with_ddp
        super().__init__(params, defaults)
        self._partition = partition_parameters(self.param_groups, self.world_size)
        self.optim = optimizer_class(self._local_groups(), **defaults)
        # the groups of all parameters show every hyper-parameter of optimizer_class, so that
        # state_dict() loads into the unsharded optimizer
        self._sync_groups(self.optim.param_groups, self.param_groups)
        self._all_state_dicts: list | None = None
        self.last_bytes_sent = 0
        self._build_buckets()
        self._initialized = True

    # ---- the partition ---------------------------------------------------------------------
    def _local_groups(self, start: int = 0) -> list:
        groups = []
        for g, mine in zip(self.param_groups[start:], self._partition[self.rank][start:]):
            local = {k: v for k, v in g.items() if k != "params"}
            local["params"] = list(mine)
            groups.append(local)
        return groups

    @staticmethod
    def _sync_groups(src: list, dst: list) -> None:
        for s, d in zip(src, dst):
            for k, v in s.items():
                if k != "params":
                    d[k] = v

    def _build_buckets(self) -> None:
        buckets: list[_Bucket] = []
        for owner, groups in enumerate(self._partition):
            by_kind: dict = {}
            for p in (p for g in groups for p in g):
                by_kind.setdefault((p.dtype, str(p.device)), []).append(p)
            for params in by_kind.values():
                if self.parameters_as_bucket_view:
                    buckets.append(_Bucket(owner, params, self._as_views(params)))
                    continue
                cur: list = []
                size = 0
                for p in params:
                    nbytes = p.numel() * p.dtype.itemsize
                    if cur and size + nbytes > BUCKET_BYTES:
                        buckets.append(_Bucket(owner, cur))
                        cur, size = [], 0
                    cur.append(p)
                    size += nbytes
                if cur:
                    buckets.append(_Bucket(owner, cur))
        self._buckets = buckets

    @staticmethod
    def _as_views(params: list) -> Tensor:
        with no_grad():
            flat = cat([p.detach().reshape(-1) for p in params])
            off = 0
            for p in params:
                n = p.numel()
                p.data = flat[off:off + n].view(p.shape)
                off += n
        return flat

    @property
    def num_broadcasts(self) -> int:
        """Messages one step broadcasts (one per bucket; 0 in a world of one)."""
        return len(self._buckets) if self.world_size > 1 else 0

    def local_state_bytes(self) -> int:
        """Bytes of optimizer state this rank holds (about 1/world_size of the unsharded
        optimizer's `state_bytes`)."""
        return state_bytes(self.optim)

    # ---- parameter groups ------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group (PyTorch's semantics): its parameters are partitioned as the others
        were, and this rank's share of it becomes a new group of `.optim`."""
        super().add_param_group(param_group)
        if not self._initialized:  # the groups given to __init__ are partitioned there
            return
        self._partition = partition_parameters(self.param_groups, self.world_size)
        (local,) = self._local_groups(len(self.param_groups) - 1)
        self.optim.add_param_group(local)
        self._sync_groups(self.optim.param_groups[-1:], self.param_groups[-1:])
        self._build_buckets()
        self._all_state_dicts = None

    # ---- the step --------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None):
        """Step this rank's shard with `.optim` (evaluating `closure` if given, on every rank),
        then broadcast every parameter from its owner. Returns the closure's loss."""
        self._sync_groups(self.param_groups, self.optim.param_groups)
        loss = self.optim.step(closure)
        self._sync_groups(self.optim.param_groups, self.param_groups)
        self._broadcast_params()
        self._all_state_dicts = None  # a consolidated state would be stale now
        return loss

    def _broadcast_params(self) -> None:
        self.last_bytes_sent = 0
        if self.world_size == 1:
            return
        dist = _dist()
        pending = []
        with no_grad():
            for b in self._buckets:
                mine = b.owner == self.rank
                if b.view is not None:
                    buf = b.view
                elif len(b.params) == 1:
                    buf = b.params[0].detach()
                elif mine:
                    buf = cat([p.detach().reshape(-1) for p in b.params])
                else:
                    p0 = b.params[0]
                    buf = creation.empty((sum(p.numel() for p in b.params),), dtype=p0.dtype,
                                         device=p0.device)
                if mine:
                    self.last_bytes_sent += b.nbytes
                work = dist.broadcast(buf, self._ranks[b.owner], group=self.process_group,
                                      async_op=True)
                pending.append((b, buf, work))
            for b, buf, work in pending:
                if work is not None:
                    work.wait()
                if b.view is None and len(b.params) > 1 and b.owner != self.rank:
                    off = 0
                    for p in b.params:
                        n = p.numel()
                        p.copy_(buf[off:off + n].view(p.shape))
                        off += n

    # ---- checkpoints -----------------------------------------------------------------------
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's shard of the state on rank `to` of the process group; every
        rank must call it. Afterwards `state_dict()` works on that rank (until the next step).

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> from singa_tensor.distributed.optim import ZeroRedundancyOptimizer
            >>> opt = ZeroRedundancyOptimizer([st.zeros(2, requires_grad=True)], optim.SGD)
            >>> opt.consolidate_state_dict(to=0); opt.state_dict()["param_groups"][0]["params"]
            [0]
            >>> import singa_tensor.distributed as dist; dist.destroy_process_group()
        """
        if isinstance(to, bool) or not isinstance(to, (int, np.integer)) \
                or not 0 <= to < self.world_size:
            raise ValueError(f"{_NAME}.consolidate_state_dict: to must be a rank of the process "
                             f"group (0..{self.world_size - 1}), got {to!r}")
        to = int(to)
        dist = _dist()
        if self.world_size > 1:
            comm = dist.get_communicator(self.process_group)
            comm.agree(f"{_NAME}.consolidate_state_dict", f"to {to}")
        local = self.optim.state_dict()
        if self.rank != to:
            self._all_state_dicts = None
        else:
            self._all_state_dicts = [None] * self.world_size
            self._all_state_dicts[to] = local
        dst = self._ranks[to]
        device = self.param_groups[0]["params"][0].device if self.param_groups and \
            self.param_groups[0]["params"] else "cpu"
        for r in range(self.world_size):
            if r == to:
                continue
            if self.rank == r:
                nbytes, payload = _encode(local)
                dist.send(creation.tensor([nbytes], dtype=int64), dst, group=self.process_group)
                dist.send(payload, dst, group=self.process_group)
            elif self.rank == to:
                n = creation.zeros(1, dtype=int64)
                dist.recv(n, self._ranks[r], group=self.process_group)
                nbytes = int(n.item())
                payload = creation.empty((-(-nbytes // 4),), dtype=int32)
                dist.recv(payload, self._ranks[r], group=self.process_group)
                self._all_state_dicts[r] = _decode(nbytes, payload, device)

    def state_dict(self) -> dict:
        """The unsharded optimizer's state dict over all parameters (PyTorch's layout: state by
        the parameter's index over all groups), on the rank that last called
        `consolidate_state_dict(to)`; RuntimeError elsewhere or before it."""
        if self._all_state_dicts is None:
            raise RuntimeError(
                f"{_NAME}.state_dict: the optimizer state has not been consolidated on this "
                "rank; call consolidate_state_dict(to=...) on all ranks first (after the last "
                "step), then state_dict() on rank `to`")
        sd = super().state_dict()  # the groups of all parameters; this object holds no state
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups
                                                for p in g["params"])}
        for r, local in enumerate(self._all_state_dicts):
            for lg, mine in zip(local["param_groups"], self._partition[r]):
                for li, p in zip(lg["params"], mine):
                    entry = local["state"].get(li, local["state"].get(str(li)))
                    if entry is not None:
                        sd["state"][index[id(p)]] = entry
        sd["state"] = dict(sorted(sd["state"].items()))
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state dict of this class or of the unsharded optimizer_class (same groups,
        same parameters in the same order); each rank keeps its shard's state."""
        name = f"{_NAME}.load_state_dict"
        if (not isinstance(state_dict, dict) or "state" not in state_dict
                or "param_groups" not in state_dict):
            raise ValueError(f"{name}: expected a dict with 'state' and 'param_groups' entries")
        saved = list(state_dict["param_groups"])
        if len(saved) != len(self.param_groups):
            raise ValueError(f"{name}: loaded state dict has {len(saved)} parameter groups, the "
                             f"optimizer has {len(self.param_groups)}")
        by_index: dict[int, Tensor] = {}
        for i, (g, s) in enumerate(zip(self.param_groups, saved)):
            if len(s["params"]) != len(g["params"]):
                raise ValueError(f"{name}: loaded parameter group {i} has {len(s['params'])} "
                                 f"parameters, the optimizer's has {len(g['params'])}")
            for idx, p in zip(s["params"], g["params"]):
                by_index[int(idx)] = p
        local_index = {id(p): i for i, p in enumerate(p for g in self._partition[self.rank]
                                                      for p in g)}
        local_state = {}
        for key, entries in state_dict["state"].items():
            p = by_index.get(int(key))
            if p is None:
                raise ValueError(f"{name}: state refers to parameter {int(key)}, which no "
                                 "parameter group holds")
            if id(p) in local_index:
                local_state[local_index[id(p)]] = entries
        local_groups = []
        for s, mine in zip(saved, self._partition[self.rank]):
            lg = {k: v for k, v in s.items() if k != "params"}
            lg["params"] = [local_index[id(p)] for p in mine]
            local_groups.append(lg)
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
        for g, lg in zip(self.param_groups, self.optim.param_groups):
            params = g["params"]
            g.clear()
            g.update({k: v for k, v in lg.items() if k != "params"})
            g["params"] = params
        self._all_state_dicts = None

    def __repr__(self) -> str:
        return (f"{_NAME}(optim={type(self.optim).__name__}, rank={self.rank}, "
                f"world_size={self.world_size}, local_params="
                f"{sum(len(g) for g in self._partition[self.rank])})")


# master_weights belongs to optimizer_class (the local optimizer keeps the float32 copies of
# its own shard), so this class's __init__ takes it in **defaults instead of through the
# wrapper Optimizer puts around every subclass's __init__
ZeroRedundancyOptimizer.__init__ = ZeroRedundancyOptimizer.__init__.__wrapped__

__all__ = ["ZeroRedundancyOptimizer", "partition_parameters", "state_bytes"]
