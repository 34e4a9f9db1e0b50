"""Data parallelism for modules: `DistributedDataParallel` (PyTorch's name and contract).

Each rank holds a replica; construction broadcasts parameters and buffers from the group's
first rank, and during backward the gradients are averaged across ranks in buckets whose
all-reduce starts (asynchronously) from the parameters' post-accumulate gradient hooks, so
communication overlaps the rest of backward. The hook of the last parameter to become ready
waits for every bucket and writes the averaged gradients back, so when `backward()` returns
`.grad` already holds the average and any optimizer can step.

Parameters that take no part in a forward never get a gradient hook; pass
`find_unused_parameters=True` (the graph is then searched after each forward, and those
parameters count as ready with a zero gradient), or call `finish()` after backward.

`state_dict()` and `load_state_dict()` are the wrapped module's: keys carry no `module.` prefix,
so a checkpoint saved from a DDP model loads into the plain model and back (a checkpoint whose
keys all start with `module.`, as PyTorch's DDP writes them, loads too).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict

from ..autograd import is_grad_enabled, no_grad
from ..backend.device import Device
from ..optim.dist_opt import (
    BucketReducer,
    _check_bytes,
    _dist,
    broadcast_tensors,
    pack,
    plan_buckets,
    unpack_grads,
)
from ..tensor import Tensor
from .module import Module

DEFAULT_DDP_BUCKET_BYTES = 25 * 1024 * 1024  # PyTorch's bucket_cap_mb default


class DistributedDataParallel(Module):
    """Average gradients of `module` across the ranks of `process_group` (the world by default).

    PyTorch's arguments, with PyTorch's meaning:

    - `device_ids`, `output_device`: the single-device form only. They may be None or name the
      device the module's parameters are on (`[0]` or `["cuda:0"]` for a module on cuda:0,
      `["cpu"]` for a CPU module); any other device raises ValueError.
    - `dim`: the dimension PyTorch scatters inputs along over several `device_ids`; with one
      device per process nothing is scattered, so it is checked to be an int and kept.
    - `process_group`: the group of ranks (`group=` is this class's older spelling).
    - `bucket_cap_mb`: the bucket size in MiB (default 25, PyTorch's; `bucket_bytes=` gives it
      in bytes instead).
    - `gradient_as_bucket_view`, `static_graph`, `check_reduction`: accepted as hints (bools)
      and kept as attributes; they change nothing here: the averaged gradients are always
      copied into `.grad`, and the buckets are the same every iteration anyway.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> net = nn.Linear(3, 1)
        >>> ddp = nn.parallel.DistributedDataParallel(net)   # a world of one without mpiexec
        >>> ddp(st.ones(2, 3)).sum().backward()
        >>> net.weight.grad.tolist(), list(ddp.state_dict())
        ([[2.0, 2.0, 2.0]], ['weight', 'bias'])
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, *, bucket_bytes: int | None = None,
                 group=None) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module, got "
                            f"{type(module).__name__}")
        for flag, value in (("check_reduction", check_reduction),
                            ("gradient_as_bucket_view", gradient_as_bucket_view),
                            ("static_graph", static_graph)):
            if not isinstance(value, bool):
                raise TypeError(f"DistributedDataParallel: {flag} must be a bool, got "
                                f"{type(value).__name__}")
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"DistributedDataParallel: dim must be an int, got "
                            f"{type(dim).__name__}")
        if group is not None and process_group is not None and group is not process_group:
            raise ValueError("DistributedDataParallel: got both process_group and group (the "
                             "same argument); pass process_group only")
        group = process_group if process_group is not None else group
        bucket_bytes = _bucket_bytes(bucket_cap_mb, bucket_bytes)
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError(f"DistributedDataParallel: {type(module).__name__} has no "
                             "parameters that require grad, so there is nothing to average")
        _check_devices(params, device_ids, output_device)
        super().__init__()
        self.module = module
        dist = _dist()
        # plain attributes (not registered): they are not part of the module's state
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "world_size", dist.get_world_size(group))
        object.__setattr__(self, "broadcast_buffers", bool(broadcast_buffers))
        object.__setattr__(self, "find_unused_parameters", bool(find_unused_parameters))
        object.__setattr__(self, "dim", dim)
        object.__setattr__(self, "gradient_as_bucket_view", gradient_as_bucket_view)
        object.__setattr__(self, "static_graph", static_graph)
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_sync", True)
        broadcast_tensors(params + list(module.buffers()), group)
        buckets = plan_buckets(params, bucket_bytes)
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_reducer", BucketReducer(params, buckets, self._launch))
        object.__setattr__(self, "_running", False)
        object.__setattr__(self, "_backward_seen", False)
        object.__setattr__(self, "last_bytes_sent", 0)
        for p in params:
            p.register_post_accumulate_grad_hook(self._on_grad_ready)

    # ---- forward ---------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        if self._running and not self._backward_seen:
            # a second forward before any backward (find_unused_parameters marks): start over
            self._reducer.reset()
            object.__setattr__(self, "_running", False)
        if self._running:
            raise RuntimeError(
                "DistributedDataParallel: the previous backward did not give every parameter a "
                "gradient, so its all-reduce never completed. Pass find_unused_parameters=True "
                "if some parameters are unused in forward, or call finish() after backward")
        if self._sync and self.broadcast_buffers and self.world_size > 1:
            bufs = list(self.module.buffers())
            if bufs:
                broadcast_tensors(bufs, self.group)
        out = self.module(*args, **kwargs)
        if self._sync and self.find_unused_parameters and self.training and is_grad_enabled():
            self._mark_unused(out)
        return out

    def _mark_unused(self, out) -> None:
        """Count parameters the output's graph cannot reach as ready now (their gradient is
        zero on this rank), so the buckets holding them still complete."""
        reached, stack, seen = set(), [], set()
        for t in _tensors_in(out):
            if t._node is not None:
                stack.append(t._node)
            elif t.requires_grad:
                reached.add(id(t))
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            leaf = getattr(node, "leaf", None)
            if leaf is not None:
                reached.add(id(leaf))
            for e in getattr(node, "next", ()):
                if e is not None:
                    stack.append(e[0])
        unused = [p for p in self._params if id(p) not in reached]
        if unused:
            self._start()
            for p in unused:
                self._reducer.ready(p)

    # ---- the gradient path -----------------------------------------------------------------
    def _launch(self, b: int):
        with no_grad():
            buf = pack(self._params, self._buckets[b])
        object.__setattr__(self, "last_bytes_sent",
                           self.last_bytes_sent + buf.numel() * buf.dtype.itemsize)
        work = _dist().all_reduce(buf, group=self.group, async_op=True)
        return b, buf, work

    def _start(self) -> None:
        if not self._running:
            object.__setattr__(self, "_running", True)
            object.__setattr__(self, "_backward_seen", False)
            object.__setattr__(self, "last_bytes_sent", 0)

    def _on_grad_ready(self, p: Tensor) -> None:
        if not self._sync:
            return
        self._start()
        object.__setattr__(self, "_backward_seen", True)
        self._reducer.ready(p)
        if self._reducer.complete:
            self.finish()

    def finish(self) -> None:
        """Complete the gradient averaging of the current backward: launch any bucket still
        waiting for a gradient (missing gradients count as zero), wait for all, and write the
        averages into `.grad`. Runs by itself when the last parameter's gradient is ready."""
        if not self._running:
            return
        reducer = self._reducer
        reducer.flush()
        try:
            with no_grad():
                for b, buf, work in reducer.pending:
                    if work is not None:
                        work.wait()
                    unpack_grads(self._params, self._buckets[b], buf / self.world_size)
        finally:
            reducer.reset()
            object.__setattr__(self, "_running", False)

    @contextlib.contextmanager
    def no_sync(self):
        """Within this block backward only accumulates local gradients (for gradient
        accumulation); the first backward after it averages the accumulated sum."""
        prev = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", prev)

    # ---- state: the wrapped module's, without a prefix -------------------------------------
    def state_dict(self, destination=None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict:
        """The wrapped module's state dict (no `module.` prefix on the keys)."""
        return self.module.state_dict(destination, prefix, keep_vars)

    def _expected_state(self, prefix: str = "", out: dict | None = None) -> dict:
        return self.module._expected_state(prefix, out)

    def load_state_dict(self, state_dict, strict: bool = True):
        """Load into the wrapped module; keys that all start with `module.` are accepted too."""
        if hasattr(state_dict, "keys"):
            keys = list(state_dict.keys())
            if keys and all(isinstance(k, str) and k.startswith("module.") for k in keys):
                state_dict = OrderedDict((k[len("module."):], state_dict[k]) for k in keys)
        return self.module.load_state_dict(state_dict, strict)

    def extra_repr(self) -> str:
        return f"world_size={self.world_size}, buckets={len(self._buckets)}"


def _bucket_bytes(bucket_cap_mb, bucket_bytes) -> int:
    """Bytes per bucket from PyTorch's bucket_cap_mb (MiB) or this class's bucket_bytes."""
    name = "DistributedDataParallel"
    if bucket_cap_mb is not None and bucket_bytes is not None:
        raise ValueError(f"{name}: got both bucket_cap_mb and bucket_bytes; pass one")
    if bucket_cap_mb is None:
        return DEFAULT_DDP_BUCKET_BYTES if bucket_bytes is None else \
            _check_bytes(name, "bucket_bytes", bucket_bytes)
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) \
            or not bucket_cap_mb > 0 or bucket_cap_mb == float("inf"):
        raise ValueError(f"{name}: bucket_cap_mb must be a positive number of MiB, got "
                         f"{bucket_cap_mb!r}")
    return max(1, int(bucket_cap_mb * 1024 * 1024))


def _check_devices(params, device_ids, output_device) -> None:
    """PyTorch's single-device form: device_ids (one device) and output_device may only name the
    device the module's parameters are on (an int is a CUDA device, as in PyTorch)."""
    name = "DistributedDataParallel"
    devices = {p.device for p in params}
    for what, given in (("device_ids", device_ids), ("output_device", output_device)):
        if given is None:
            continue
        if what == "device_ids":
            if isinstance(given, (str, int, Device)) or not hasattr(given, "__len__") \
                    or len(given) != 1:
                raise ValueError(f"{name}: device_ids must be None or a list of one device "
                                 f"(the module's), got {given!r}")
            (given,) = given
        try:
            dev = Device(given)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name}: {what} {given!r} is not a device: {e}") from None
        if len(devices) != 1 or dev not in devices:
            raise ValueError(f"{name}: {what} names {dev}, but the module's parameters are on "
                             f"{', '.join(sorted(str(d) for d in devices))}; move the module "
                             "there first (module.to(device)) or leave it as None")


def _tensors_in(out):
    if isinstance(out, Tensor):
        yield out
    elif isinstance(out, (list, tuple)):
        for o in out:
            yield from _tensors_in(o)
    elif isinstance(out, dict):
        for o in out.values():
            yield from _tensors_in(o)


__all__ = ["DistributedDataParallel"]
