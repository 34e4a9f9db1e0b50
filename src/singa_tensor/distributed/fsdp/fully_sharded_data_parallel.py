"""`FullyShardedDataParallel`: parameters, gradients and optimizer state sharded over the ranks
(PyTorch's name and contract, with `use_orig_params=False`: the parameters of a unit are one
flat shard). The flat layout and the autograd Functions are in `_flat.py`."""

from __future__ import annotations

import contextlib
import enum
import math
import weakref
from collections import OrderedDict
from typing import Any, Callable

from ... import creation
from ...autograd import _accumulate_leaf as accumulate_leaf
from ...autograd import is_grad_enabled, no_grad, queue_callback
from ...backend.device import Device
from ...dtype import float32, float64
from ...nn import module_state as _state
from ...nn.module import Module, Parameter
from ...ops import norm
from ...tensor import Tensor
from . import _flat
from .wrap import recursive_wrap

_NAME = "FullyShardedDataParallel"


class ShardingStrategy(enum.Enum):
    """What each rank keeps: FULL_SHARD (parameters, gradients and optimizer state sharded;
    parameters gathered for forward and again for backward), SHARD_GRAD_OP (gradients and
    optimizer state sharded; the parameters gathered in forward stay until the unit's backward)
    and NO_SHARD (everything replicated, gradients all-reduced: DistributedDataParallel).

    Example:
        >>> ShardingStrategy.FULL_SHARD.name
        'FULL_SHARD'
    """

    FULL_SHARD = enum.auto()
    SHARD_GRAD_OP = enum.auto()
    NO_SHARD = enum.auto()


class BackwardPrefetch(enum.Enum):
    """When backward starts gathering the next unit's parameters: BACKWARD_PRE (as the current
    unit's backward begins) or BACKWARD_POST (once its gradients are ready, before they are
    reduce-scattered); None gathers each unit only when its backward begins.

    Example:
        >>> BackwardPrefetch.BACKWARD_PRE.name
        'BACKWARD_PRE'
    """

    BACKWARD_PRE = enum.auto()
    BACKWARD_POST = enum.auto()


class _Tree:
    """What the units of one wrapped model share during an iteration: the units in the order
    their forward began (this iteration and the last, for forward prefetch), the gathers in
    the order their forward ended (reversed, the order backward reaches them), and the
    gradient reductions still in flight in the current backward."""

    def __init__(self, root):
        self.root = root
        self.depth = 0
        self.forward_now: list = []
        self.forward_last: list = []
        self.post_forward: list = []
        self.reducing: list = []  # (unit, shard gradient, Work), in the order started
        self.queued = False

    def begin(self) -> None:
        self.forward_now = []
        self.post_forward = []
        if self.reducing:  # left by a backward that raised: complete them, keep nothing
            left, self.reducing, self.queued = self.reducing, [], False
            for _, _, work in left:
                work.wait()

    def defer(self, unit, shard: Tensor, work) -> bool:
        """Let the reduction of unit's gradient run on while backward goes on; its result is
        added to the shard's .grad when backward ends. False (nothing deferred) where backward
        cannot run a callback at its end (`autograd.grad`)."""
        if not self.queued:
            if not queue_callback(self.finish_gradients):
                return False
            self.queued = True
        self.reducing.append((unit, shard, work))
        return True

    def finish_gradients(self) -> None:
        """Wait for the reductions started in this backward and accumulate their averages into
        the shards' .grad (with the shards' hooks, as any leaf's gradient)."""
        reducing, self.reducing, self.queued = self.reducing, [], False
        with no_grad():
            for unit, shard, work in reducing:
                work.wait()
                accumulate_leaf(unit._flat, shard / unit.world_size, False)

    def end(self) -> None:
        self.forward_last = self.forward_now
        for unit in self.root._units():
            if unit._prefetched is not None:  # gathered ahead for a unit that did not run
                unit._prefetched[1].wait()
                unit._prefetched = None


def _dist():
    import singa_tensor.distributed as dist

    if not dist.is_initialized():
        raise RuntimeError(f"{_NAME}: the process group is not initialized; call "
                           "dist.init_process_group() first")
    return dist


def _same_group(a, b) -> bool:
    return a is b or (a is not None and b is not None and a.ranks == b.ranks)


class FullyShardedDataParallel(Module):
    """Shard `module`'s parameters over the ranks of `process_group` (the world by default).

    Each unit (this module, and every submodule `auto_wrap_policy` picks) flattens the
    parameters it owns (those not inside a nested unit) into one buffer padded to a multiple of
    the world size R; each rank keeps 1/R of it as the unit's `_flat_param`, and
    `parameters()` yields these local shards only, so an optimizer built on the wrapped model
    steps the shards. Build the optimizer after wrapping.

    A unit's forward all-gathers its full parameters just before it runs and frees them after;
    backward gathers them again (FULL_SHARD) and reduce-scatters the gradients, averaged over
    the ranks as DistributedDataParallel does, into the shard's `.grad`. SHARD_GRAD_OP keeps
    the gathered parameters from forward to the unit's backward; NO_SHARD replicates them and
    all-reduces the gradients. Between forward calls the wrapped modules' parameter attributes
    are empty (0-element) tensors; `summon_full_params()` shows the full ones.

    `auto_wrap_policy` takes PyTorch's forms: `wrap.ModuleWrapPolicy({cls, ...})`,
    `functools.partial(wrap.size_based_auto_wrap_policy, min_num_params=N)`,
    `functools.partial(wrap.transformer_auto_wrap_policy, transformer_layer_cls={...})` or any
    callable `(module, recurse, nonwrapped_numel) -> bool`. `forward_prefetch=True` starts the
    next unit's all-gather (in the order of the previous iteration) as a unit's forward begins;
    `backward_prefetch` does the same in backward. `sync_module_states=True` broadcasts the
    parameters and buffers from the group's first rank before sharding (otherwise every rank
    must build the same initial model). `device_id` may name the module's device;
    `limit_all_gathers` is accepted and changes nothing (at most one unit is gathered ahead).

    `state_dict()` is the full state dict with the unwrapped model's keys, on every rank;
    `load_state_dict()` takes one; `sharded_state_dict()` / `load_sharded_state_dict()` save and
    load the local shards. `cpu_offload`, `mixed_precision`, `param_init_fn`, `ignored_modules`
    and `use_orig_params=True` are not implemented and raise.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> from singa_tensor import nn
        >>> from singa_tensor.distributed.fsdp import FullyShardedDataParallel as FSDP
        >>> dist.init_process_group()               # a world of one without mpiexec
        >>> model = FSDP(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1)))
        >>> [tuple(p.shape) for p in model.parameters()]    # 3*4 + 4 + 4*1 + 1 elements
        [(21,)]
        >>> model(st.ones(2, 3)).sum().backward()
        >>> list(model.state_dict())
        ['0.weight', '0.bias', '1.weight', '1.bias']
        >>> dist.destroy_process_group()
    """

    def __init__(self, module: Module, process_group=None,
                 sharding_strategy: ShardingStrategy | None = None, cpu_offload=None,
                 auto_wrap_policy: Callable | None = None,
                 backward_prefetch: BackwardPrefetch | None = BackwardPrefetch.BACKWARD_PRE,
                 mixed_precision=None, ignored_modules=None, param_init_fn=None,
                 device_id=None, sync_module_states: bool = False,
                 forward_prefetch: bool = False, limit_all_gathers: bool = True,
                 use_orig_params: bool = False) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"{_NAME}: expected an nn.Module, got {type(module).__name__}")
        if isinstance(module, FullyShardedDataParallel):
            raise ValueError(f"{_NAME}: the module is already a {_NAME}; wrap the model once")
        if module.__dict__.get("_fsdp_param_names") is not None:
            raise ValueError(f"{_NAME}: {type(module).__name__} is already sharded by a {_NAME} "
                             "(its parameters were flattened); wrap the model once")
        sharding_strategy = ShardingStrategy.FULL_SHARD if sharding_strategy is None \
            else sharding_strategy
        if not isinstance(sharding_strategy, ShardingStrategy):
            raise TypeError(f"{_NAME}: sharding_strategy must be a ShardingStrategy, got "
                            f"{sharding_strategy!r}")
        if backward_prefetch is not None and not isinstance(backward_prefetch, BackwardPrefetch):
            raise TypeError(f"{_NAME}: backward_prefetch must be a BackwardPrefetch or None, "
                            f"got {backward_prefetch!r}")
        for what, value in (("sync_module_states", sync_module_states),
                            ("forward_prefetch", forward_prefetch),
                            ("limit_all_gathers", limit_all_gathers),
                            ("use_orig_params", use_orig_params)):
            if not isinstance(value, bool):
                raise TypeError(f"{_NAME}: {what} must be a bool, got {type(value).__name__}")
        for what, value in (("cpu_offload", cpu_offload), ("mixed_precision", mixed_precision),
                            ("param_init_fn", param_init_fn)):
            if value is not None:
                raise NotImplementedError(f"{_NAME}: {what} is not implemented; pass None")
        if ignored_modules:
            raise NotImplementedError(f"{_NAME}: ignored_modules is not implemented")
        if use_orig_params:
            raise NotImplementedError(f"{_NAME}: use_orig_params=True is not implemented; the "
                                      "parameters of a unit are one flat shard")
        if auto_wrap_policy is not None and not callable(auto_wrap_policy):
            raise TypeError(f"{_NAME}: auto_wrap_policy must be callable (a ModuleWrapPolicy "
                            f"or a function (module, recurse, nonwrapped_numel)), got "
                            f"{auto_wrap_policy!r}")
        dist = _dist()
        if process_group is not None and not isinstance(process_group, dist.Group):
            raise TypeError(f"{_NAME}: process_group must be a dist.Group from new_group() or "
                            f"None, got {type(process_group).__name__}")
        rank, size = dist.get_rank(process_group), dist.get_world_size(process_group)
        if rank < 0:
            raise ValueError(f"{_NAME}: this rank is not a member of process_group "
                             f"{process_group}")
        nested = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if nested and auto_wrap_policy is not None:
            raise ValueError(f"{_NAME}: auto_wrap_policy given, but the module already holds "
                             f"{len(nested)} {_NAME} unit(s); wrap by hand or by policy, not both")
        super().__init__()
        settings = dict(process_group=process_group, sharding_strategy=sharding_strategy,
                        backward_prefetch=backward_prefetch, device_id=device_id,
                        forward_prefetch=forward_prefetch, limit_all_gathers=limit_all_gathers)
        if sync_module_states:
            from ...optim.dist_opt import broadcast_tensors

            broadcast_tensors(list(module.parameters()) + list(module.buffers()), process_group)
        if auto_wrap_policy is not None:
            module, _ = recursive_wrap(module, auto_wrap_policy,
                                       lambda m: FullyShardedDataParallel(m, **settings),
                                       only_wrap_children=True)
            nested = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        for unit in nested:
            if not _same_group(unit.process_group, process_group):
                raise ValueError(f"{_NAME}: a nested unit uses process group "
                                 f"{unit.process_group}, this one {process_group}; the units of "
                                 "one model must shard over the same ranks")
            if all(unit._tree.root is not u for u in nested):
                raise ValueError(f"{_NAME}: a nested unit already belongs to another wrapped "
                                 "model")
        set_ = object.__setattr__
        self._fsdp_wrapped_module = module
        set_(self, "process_group", process_group)
        set_(self, "rank", rank)
        set_(self, "world_size", size)
        set_(self, "sharding_strategy", sharding_strategy)
        set_(self, "backward_prefetch", backward_prefetch)
        set_(self, "forward_prefetch", forward_prefetch)
        set_(self, "limit_all_gathers", limit_all_gathers)
        set_(self, "_sync", True)
        set_(self, "_unsharded_grad", None)
        set_(self, "_prefetched", None)
        tree = _Tree(self)
        set_(self, "_tree", tree)
        for unit in nested:
            for u in unit._units():
                set_(u, "_tree", tree)
        self._flatten(module, nested, device_id)

    # ---- construction ----------------------------------------------------------------------
    def _flatten(self, module: Module, nested: list, device_id) -> None:
        """Move the parameters this unit owns into its flat shard."""
        taken = {id(p) for u in nested for r in u._originals if (p := r()) is not None}
        infos: list = []
        by_id: dict = {}
        originals: list = []
        owned: list = []  # (module, names of its parameters this unit takes)
        stack = [module]
        seen = set()
        while stack:  # depth first, in the order named_modules() visits the modules
            m = stack.pop()
            if id(m) in seen or isinstance(m, FullyShardedDataParallel):
                continue
            seen.add(id(m))
            names = []
            for name, p in m._parameters.items():
                if p is None:
                    continue
                if id(p) in taken:
                    raise ValueError(f"{_NAME}: parameter {type(m).__name__}.{name} is shared "
                                     "with a nested unit; shared parameters must belong to "
                                     "one unit (wrap the modules that share it together)")
                info = by_id.get(id(p))
                if info is None:
                    info = by_id[id(p)] = _flat.ParamInfo([], tuple(p.shape), p.numel(), 0)
                    infos.append(info)
                    originals.append(p)
                info.owners.append((m, name))
                names.append(name)
            owned.append((m, names))
            stack.extend(reversed([c for c in m._modules.values() if c is not None]))
        self._check_params(originals, device_id)
        for m, names in owned:  # nothing is changed before every check passed
            for name in names:
                del m._parameters[name]
            m.__dict__["_fsdp_param_names"] = names
        object.__setattr__(self, "_infos", infos)
        object.__setattr__(self, "_originals", [])
        numel = sum(i.numel for i in infos)
        off = 0
        for i in infos:
            i.offset = off
            off += i.numel
        shard_strategy = self.sharding_strategy is not ShardingStrategy.NO_SHARD
        r = self.world_size if shard_strategy else 1
        padded = -(-numel // r) * r
        object.__setattr__(self, "_numel", numel)
        object.__setattr__(self, "_padded", padded)
        object.__setattr__(self, "_shard_numel", padded // r)
        comm = _dist().get_communicator(self.process_group)
        comm.agree(_NAME, f"a unit of {numel} elements in {len(infos)} parameters, "
                          f"{self.sharding_strategy.name}")
        if not infos:
            object.__setattr__(self, "_flat", None)
            return
        with no_grad():
            parts = [p.detach().reshape(-1) for p in originals]
            if padded > numel:
                parts.append(creation.zeros(padded - numel, dtype=originals[0].dtype,
                                            device=originals[0].device))
            full = _flat.cat(parts) if len(parts) > 1 else parts[0]
            start = self.rank * self._shard_numel if shard_strategy else 0
            shard = full.narrow(0, start, self._shard_numel).clone()
        self._flat_param = Parameter(shard, requires_grad=originals[0].requires_grad)
        object.__setattr__(self, "_flat", self._flat_param)
        self._clear_views()
        # the unit keeps only weak references to the originals (for the shared-parameter check
        # of an outer unit), not their memory
        object.__setattr__(self, "_originals", [weakref.ref(p) for p in originals])

    def _check_params(self, params: list, device_id) -> None:
        if not params:
            return
        kinds = {(p.dtype, p.device) for p in params}
        if len(kinds) > 1:
            listing = ", ".join(sorted(f"{d.name} on {dev}" for d, dev in kinds))
            raise ValueError(f"{_NAME}: the parameters of one unit must share a dtype and "
                             f"device, got {listing}; wrap the differing modules as their own "
                             "units")
        grads = {p.requires_grad for p in params}
        if len(grads) > 1:
            raise ValueError(f"{_NAME}: the parameters of one unit must all require grad or "
                             "all not; wrap the frozen modules as their own units")
        if device_id is not None:
            try:
                dev = Device(device_id)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{_NAME}: device_id {device_id!r} is not a device ({e})") \
                    from None
            if dev != params[0].device:
                raise ValueError(f"{_NAME}: device_id names {dev}, but the module's parameters "
                                 f"are on {params[0].device}; move the module there first")

    # ---- what the wrapper is ---------------------------------------------------------------
    @property
    def module(self) -> Module:
        """The wrapped module."""
        return self._modules["_fsdp_wrapped_module"]

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            inner = self.__dict__.get("_modules", {}).get("_fsdp_wrapped_module")
            if inner is None:
                raise
            return getattr(inner, name)

    def _units(self) -> list:
        return [m for m in self.modules() if isinstance(m, FullyShardedDataParallel)]

    @staticmethod
    def fsdp_modules(module: Module, root_only: bool = False) -> list:
        """The FullyShardedDataParallel units in module (only the outermost with root_only).

        Example:
            >>> from singa_tensor import nn
            >>> FullyShardedDataParallel.fsdp_modules(nn.Linear(2, 2))
            []
        """
        units = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        return [u for u in units if u._tree.root is u] if root_only else units

    def extra_repr(self) -> str:
        return (f"world_size={self.world_size}, sharding_strategy={self.sharding_strategy.name}, "
                f"flat_numel={self._numel}")

    # ---- gathering -------------------------------------------------------------------------
    @property
    def _sharded(self) -> bool:
        return self.sharding_strategy is not ShardingStrategy.NO_SHARD

    def _start_gather(self):
        buf = creation.empty(self._padded, dtype=self._flat.dtype, device=self._flat.device)
        work = _dist().all_gather_into_tensor(buf, self._flat.detach(),
                                              group=self.process_group, async_op=True)
        return buf, work

    def _new_handle(self) -> _flat.Gathered:
        h = _flat.Gathered(self)
        if not self._sharded:
            h.full, h.filled = self._flat.detach(), True
        elif self._prefetched is not None:
            h.pending, self._prefetched = self._prefetched, None
        return h

    def _fill(self, h: _flat.Gathered) -> None:
        if h.filled:
            return
        buf, work = h.pending if h.pending is not None else self._start_gather()
        h.pending = None
        work.wait()
        if h.full is None:
            h.full = buf
        else:
            _flat.move_storage(h.full._storage, buf._storage)
        h.filled = True

    def _free(self, h: _flat.Gathered) -> None:
        if not h.filled or not self._sharded:
            return
        empty = creation.empty(0, dtype=h.full.dtype, device=h.full.device)
        _flat.move_storage(h.full._storage, empty._storage)
        h.filled = False

    def _prefetch(self, h: _flat.Gathered | None) -> None:
        if h is not None and not h.filled and h.pending is None and h.unit._sharded:
            h.pending = h.unit._start_gather()

    def _set_views(self, tensors) -> None:
        for info, t in zip(self._infos, tensors):
            for m, name in info.owners:
                m.__dict__[name] = t

    def _clear_views(self) -> None:
        # at rest an attribute is an empty tensor: the module stays printable and `m.bias is
        # None` keeps its meaning, and any use of it fails on its shape
        if self._infos:
            empty = self.__dict__.get("_placeholder")
            if empty is None:
                empty = creation.empty(0, dtype=self._flat.dtype, device=self._flat.device)
                object.__setattr__(self, "_placeholder", empty)
            self._set_views([empty] * len(self._infos))

    # ---- forward and backward --------------------------------------------------------------
    def forward(self, *args, **kwargs):
        tree = self._tree
        outer = tree.depth == 0
        if outer:
            tree.begin()
        tree.depth += 1
        try:
            tree.forward_now.append(self)
            if self._flat is None:
                return self.module(*args, **kwargs)
            h = self._new_handle()
            self._fill(h)
            grad = is_grad_enabled() and self._flat.requires_grad
            if grad:
                params = _flat.Unshard.apply(self._flat, self, h)
            else:
                with no_grad():
                    params = _flat.views(self._infos, h.full)
            self._set_views(params)
            if self.forward_prefetch:
                self._prefetch_forward(tree)
            try:
                out = self.module(*args, **kwargs)
            finally:
                self._clear_views()
            if grad:
                h.post_index = len(tree.post_forward)
                tree.post_forward.append(h)
                out = self._hook_outputs(out, h)
                if self.sharding_strategy is ShardingStrategy.FULL_SHARD:
                    self._free(h)
            else:
                self._free(h)
            return out
        finally:
            tree.depth -= 1
            if outer:
                tree.end()

    def _prefetch_forward(self, tree: _Tree) -> None:
        last = tree.forward_last
        i = next((k for k, u in enumerate(last) if u is self), None)
        if i is None:
            return
        for unit in last[i + 1:]:
            if unit._flat is not None:
                if unit._sharded and unit._prefetched is None and unit not in tree.forward_now:
                    unit._prefetched = unit._start_gather()
                return

    def _hook_outputs(self, out, h: _flat.Gathered):
        found: list = []
        _collect(out, found)
        if not found:
            return out
        hooked = _flat.PreBackward.apply(self, h, *found)
        if not isinstance(hooked, tuple):
            hooked = (hooked,)
        return _replace(out, iter(hooked))

    def _pre_backward(self, h: _flat.Gathered) -> None:
        self._fill(h)
        if self.backward_prefetch is BackwardPrefetch.BACKWARD_PRE:
            self._prefetch(self._next_in_backward(h))

    def _next_in_backward(self, h: _flat.Gathered) -> _flat.Gathered | None:
        order = self._tree.post_forward
        i = h.post_index
        if 0 < i <= len(order) and order[i - 1] is not None and order[i] is h:
            return order[i - 1]
        return None

    def _post_backward(self, h: _flat.Gathered, grads) -> Tensor | None:
        if self.backward_prefetch is BackwardPrefetch.BACKWARD_POST:
            self._prefetch(self._next_in_backward(h))
        g = _flat.flat_grad(self._infos, grads, self._padded, self._flat)
        if self._unsharded_grad is not None:
            g = g + self._unsharded_grad
            object.__setattr__(self, "_unsharded_grad", None)
        if not self._sync:
            object.__setattr__(self, "_unsharded_grad", g)
            self._free(h)
            return None
        dist = _dist()
        # the reduction runs while backward goes on through the units before this one (the
        # progress thread of the MPI backend moves it); its result reaches .grad at the end
        if self._sharded:
            shard = creation.empty(self._shard_numel, dtype=g.dtype, device=g.device)
            work = dist.reduce_scatter_tensor(shard, g, group=self.process_group,
                                              async_op=True)
            self._free(h)
        else:
            shard = g
            work = dist.all_reduce(g, group=self.process_group, async_op=True)
        if self._tree.defer(self, shard, work):
            return None
        work.wait()
        return shard / self.world_size

    @contextlib.contextmanager
    def no_sync(self):
        """Within this block backward keeps each unit's full gradient locally (summed over the
        backward calls) and communicates nothing; the first backward after it reduce-scatters
        the sum into the shards' `.grad`. Costs one full-size gradient buffer per unit."""
        units = self._units()
        prev = [u._sync for u in units]
        for u in units:
            object.__setattr__(u, "_sync", False)
        try:
            yield
        finally:
            for u, p in zip(units, prev):
                object.__setattr__(u, "_sync", p)

    # ---- full parameters -------------------------------------------------------------------
    @contextlib.contextmanager
    def summon_full_params(self, recurse: bool = True, writeback: bool = True,
                           rank0_only: bool = False, offload_to_cpu: bool = False,
                           with_grads: bool = False):
        """Gather the full parameters of this unit (and of the nested ones with recurse) and
        show them as the wrapped modules' attributes (`model.module.fc.weight`) inside the
        block; with writeback, changes made to them are kept in the shards on exit. Every rank
        of the process group must enter it. `FullyShardedDataParallel.summon_full_params(model)`
        is the same call.

        Example:
            >>> import singa_tensor.distributed as dist
            >>> from singa_tensor import nn
            >>> from singa_tensor.distributed.fsdp import FullyShardedDataParallel as FSDP
            >>> dist.init_process_group()
            >>> model = FSDP(nn.Linear(2, 3))
            >>> with model.summon_full_params():
            ...     tuple(model.module.weight.shape)
            (3, 2)
            >>> dist.destroy_process_group()
        """
        if with_grads:
            raise NotImplementedError(f"{_NAME}.summon_full_params: with_grads=True is not "
                                      "implemented")
        if rank0_only and writeback:
            raise ValueError(f"{_NAME}.summon_full_params: rank0_only=True needs "
                             "writeback=False")
        if self._tree.depth:
            raise RuntimeError(f"{_NAME}.summon_full_params: cannot be used inside forward")
        units = [u for u in (self._units() if recurse else [self]) if u._flat is not None]
        handles = []
        try:
            with no_grad():
                for u in units:
                    h = u._new_handle()
                    handles.append(h)
                    u._fill(h)
                    u._set_views(_flat.views(u._infos, h.full))
            yield
        finally:
            with no_grad():
                for u, h in zip(units, handles):
                    if writeback and u._sharded and h.filled:
                        start = u.rank * u._shard_numel
                        u._flat.detach().copy_(h.full.narrow(0, start, u._shard_numel))
                    u._clear_views()
                    u._free(h)

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> Tensor:
        """Scale the shards' gradients so that the norm of the whole model's gradient (over
        every rank's shard) is at most max_norm; returns that norm, measured before clipping,
        on every rank. Call it on the root unit, on every rank.

        Example:
            >>> import singa_tensor as st, singa_tensor.distributed as dist
            >>> from singa_tensor import nn
            >>> from singa_tensor.distributed.fsdp import FullyShardedDataParallel as FSDP
            >>> dist.init_process_group()
            >>> model = FSDP(nn.Linear(2, 1, bias=False))
            >>> model(st.tensor([[3.0, 4.0]])).sum().backward()
            >>> model.clip_grad_norm_(1.0).item()
            5.0
            >>> dist.destroy_process_group()
        """
        name = f"{_NAME}.clip_grad_norm_"
        if self._tree.root is not self:
            raise RuntimeError(f"{name}: call it on the root unit (the outermost wrapper)")
        max_norm, p = float(max_norm), float(norm_type)
        if math.isnan(max_norm) or max_norm < 0:
            raise ValueError(f"{name}: max_norm must be a non-negative number, got {max_norm}")
        if not p > 0:
            raise ValueError(f"{name}: norm_type must be positive, got {p}")
        units = [u for u in self._units() if u._flat is not None and u._flat.grad is not None]
        dist = _dist()
        inf = p == math.inf
        # two parts: the sharded units' summed over every rank, the replicated ones' once
        parts = [0.0, 0.0]
        with no_grad():
            for u in units:
                v = float(norm(u._flat.grad.detach(), p).item())
                i = 0 if u._sharded else 1
                parts[i] = max(parts[i], v) if inf else parts[i] + v ** p
            shared = creation.tensor([parts[0]], dtype=float64)
            dist.all_reduce(shared, op=dist.ReduceOp.MAX if inf else dist.ReduceOp.SUM,
                            group=self.process_group)
            total = max(shared.item(), parts[1]) if inf else \
                (shared.item() + parts[1]) ** (1.0 / p)
            coef = max_norm / (total + 1e-6)
            if coef < 1.0:
                for u in units:
                    u._flat.grad.detach().mul_(coef)
        dtype = units[0]._flat.dtype if units else float32
        return creation.tensor(total, dtype=dtype)

    # ---- state dicts -----------------------------------------------------------------------
    def _full_targets(self, keep_vars: bool) -> OrderedDict:
        """Key of the unwrapped model -> its tensor, inside summon_full_params."""
        out: OrderedDict = OrderedDict()

        def walk(m: Module, prefix: str) -> None:
            if isinstance(m, FullyShardedDataParallel):
                walk(m.module, prefix)
                return
            for name in m.__dict__.get("_fsdp_param_names", ()):
                t = m.__dict__[name]
                out[prefix + name] = t if keep_vars else t.detach().clone()
            for name, t in m._own_state(keep_vars=True):
                out[prefix + name] = t if keep_vars else t.detach().clone()
            if _state.has_extra_state(m):
                out[prefix + _state.EXTRA_STATE_KEY] = m.get_extra_state()
            for name, child in m._modules.items():
                if child is not None:
                    walk(child, prefix + name + ".")

        walk(self, "")
        return out

    def state_dict(self, destination=None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict:
        """The full state dict, with the keys of the unwrapped model, on every rank (every rank
        must call it: it all-gathers each unit)."""
        if destination is None:
            destination = OrderedDict()
        with self.summon_full_params(writeback=False):
            for k, v in self._full_targets(keep_vars=False).items():
                destination[prefix + k] = v
        return destination

    def _expected_state(self, prefix: str = "", out: dict | None = None) -> dict:
        out = {} if out is None else out
        for k, v in self._full_targets(keep_vars=True).items():
            out[prefix + k] = v
        return out

    def load_state_dict(self, state_dict, strict: bool = True):
        """Load a full state dict (the unwrapped model's keys, as `state_dict()` returns) on
        every rank; each keeps its shard. Missing or unexpected keys raise with strict."""
        with self.summon_full_params(writeback=True):
            return Module.load_state_dict(self, state_dict, strict)

    def sharded_state_dict(self) -> OrderedDict:
        """This rank's shards (`<unit path>._flat_param`) and its buffers, as tensors it
        owns, plus `_fsdp_world_size`; load them with `load_sharded_state_dict` on the same
        number of ranks."""
        out: OrderedDict = OrderedDict()

        def walk(m: Module, prefix: str) -> None:
            for name, t in m._own_state(keep_vars=True):
                out[prefix + name] = t.detach().clone()
            for name, child in m._modules.items():
                if child is not None:
                    walk(child, prefix + name + ".")

        walk(self, "")
        out["_fsdp_world_size"] = creation.tensor(self.world_size)
        return out

    def load_sharded_state_dict(self, state_dict) -> None:
        """Load what `sharded_state_dict()` saved on this rank (the same model, wrapped the same
        way on the same number of ranks)."""
        name = f"{_NAME}.load_sharded_state_dict"
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"{name}: expected a mapping, got {type(state_dict).__name__}")
        mine = self.sharded_state_dict()
        saved_ws = state_dict.get("_fsdp_world_size")
        if saved_ws is not None and int(saved_ws.item()) != self.world_size:
            raise ValueError(f"{name}: the state dict was saved on {int(saved_ws.item())} ranks, "
                             f"this model is sharded over {self.world_size}")
        missing = [k for k in mine if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in mine]
        if missing or unexpected:
            raise RuntimeError(f"{name}: missing key(s) {missing}, unexpected key(s) "
                               f"{unexpected}")
        targets: dict = {}

        def walk(m: Module, prefix: str) -> None:
            for k, t in m._own_state(keep_vars=True):
                targets[prefix + k] = t
            for k, child in m._modules.items():
                if child is not None:
                    walk(child, prefix + k + ".")

        walk(self, "")
        for k, t in targets.items():
            v = state_dict[k]
            if not isinstance(v, Tensor) or tuple(v.shape) != tuple(t.shape):
                got = tuple(v.shape) if isinstance(v, Tensor) else type(v).__name__
                raise ValueError(f"{name}: {k} is {got}, this rank's shard is {tuple(t.shape)}")
        with no_grad():
            for k, t in targets.items():
                t.detach().copy_(state_dict[k])


def _collect(out: Any, found: list) -> None:
    if isinstance(out, Tensor):
        if out.requires_grad:
            found.append(out)
    elif isinstance(out, (list, tuple)):
        for o in out:
            _collect(o, found)
    elif isinstance(out, dict):
        for o in out.values():
            _collect(o, found)


def _replace(out: Any, it):
    if isinstance(out, Tensor):
        return next(it) if out.requires_grad else out
    if isinstance(out, (list, tuple)):
        items = [_replace(o, it) for o in out]
        if hasattr(out, "_fields"):  # a namedtuple
            return type(out)(*items)
        return type(out)(items)
    if isinstance(out, dict):
        return type(out)((k, _replace(v, it)) for k, v in out.items())
    return out


FSDP = FullyShardedDataParallel
