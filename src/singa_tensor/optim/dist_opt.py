"""Data-parallel training in SINGA's style: `DistOpt` wraps an optimizer and averages gradients
across the ranks of a process group before each update.

Communication overlaps backward: every parameter gets a post-accumulate gradient hook, so the
moment the last gradient of a bucket (a run of parameters of at most `threshold` bytes) is
final, that bucket's all-reduce starts asynchronously while backward goes on with the earlier
layers. Buckets are launched strictly in bucket order, so every rank issues its collectives in
the same sequence even if a gradient were to become ready in another order. `BucketReducer`
holds that logic and is shared with `nn.parallel.DistributedDataParallel`.

Four update modes, all returning (and storing in `last_bytes_sent`) the bytes this rank put
into collectives this step, i.e. the payload of its buffers, which does not depend on the
backend's algorithm:

- `backward_and_update`: exact gradient averaging (all-reduce, divide by world size).
- `backward_and_update_half`: the same with float16 on the wire (half the bytes); gradients are
  optionally clipped and pre-divided by the world size before the cast so the float16 sum
  cannot overflow.
- `backward_and_sparse_update`: per parameter, only the top `spars` fraction (topK=True) or the
  entries with abs(g) > spars (topK=False) travel, as (index, value) pairs gathered from every rank
  and summed; with `corr` the entries left out are kept and added to the next step's gradient
  (error feedback), so nothing is lost, only delayed.
- `backward_and_partial_update`: every rank updates with its local gradient; then one
  round-robin slice of the parameters (about `threshold` bytes) is averaged across ranks per
  step, which bounds how far the replicas drift apart at a fraction of the traffic.

In graph mode (`st.compile`) the two dense modes record their all-reduces, which run again on
every replay (synchronously, in bucket order); the sparse and partial modes decide on the
host what travels and raise GraphError while recording.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _execution, creation
from ..autograd import no_grad
from ..dtype import float16, float32, int32, int64
from ..ops.shape import cat
from ..tensor import Tensor
from .optimizer import Optimizer

DEFAULT_BUCKET_BYTES = 2 * 1024 * 1024  # SINGA's default fusion threshold


def _dist():
    # imported lazily: the communicator package sits above optim and may import from it
    import singa_tensor.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group()
    return dist


def _on_host(what: str, why: str) -> None:
    """Tell a running capture (graph mode) that this update decides on the host."""
    ex = _execution.current() if _execution.running_count else None
    if ex is not None:
        ex.host_communication(what, f"{why}; in a compiled step use backward_and_update or "
                                    f"backward_and_update_half, or run this update without "
                                    f"compile")


def _group_root(group) -> int:
    """The world rank of the group's rank 0 (the broadcast source)."""
    if group is None:
        return 0
    ranks = getattr(group, "ranks", None)
    return int(ranks[0]) if ranks else 0


def _check_bytes(op: str, name: str, value) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{op}: {name} must be a positive number of bytes, got {value!r}")
    return int(value)


def broadcast_tensors(tensors: Sequence[Tensor], group=None) -> None:
    """Overwrite every tensor in place with the group root's values (one collective per tensor,
    in the given order, which every rank must share)."""
    dist = _dist()
    if dist.get_world_size(group) == 1:
        return
    src = _group_root(group)
    with no_grad():
        for t in tensors:
            dist.broadcast(t.detach(), src, group=group)


def plan_buckets(params: Sequence[Tensor], threshold: int, itemsize: int | None = None) -> list:
    """Split parameter indices into buckets of at most `threshold` bytes (a larger parameter is
    a bucket of its own), last parameter first since backward produces those gradients first.
    Unless `itemsize` gives the one wire dtype's size, a bucket never mixes dtypes, so it
    packs into one buffer.

    Example:
        >>> import singa_tensor as st
        >>> ps = [st.zeros(4), st.zeros(4), st.zeros(100)]
        >>> plan_buckets(ps, threshold=32)
        [[2], [1, 0]]
    """
    buckets: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i in reversed(range(len(params))):
        p = params[i]
        nbytes = p.numel() * (itemsize or p.dtype.itemsize)
        mixed = itemsize is None and cur and params[cur[-1]].dtype is not p.dtype
        if cur and (size + nbytes > threshold or mixed):
            buckets.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += nbytes
    if cur:
        buckets.append(cur)
    return buckets


class BucketReducer:
    """Start `launch(bucket_index)` for each bucket as soon as all of its parameters reported
    `ready`, in bucket order; `flush` launches whatever is left (parameters that got no
    gradient this backward), so every rank always issues every collective."""

    def __init__(self, params: Sequence[Tensor], buckets: list, launch: Callable[[int], Any]):
        self.params, self.buckets, self._launch = list(params), buckets, launch
        self._where = {id(params[i]): b for b, bucket in enumerate(buckets) for i in bucket}
        self.reset()

    def reset(self) -> None:
        self._missing = [len(b) for b in self.buckets]
        self._next = 0
        self.pending: list = []
        self.seen = 0

    def ready(self, p: Tensor) -> None:
        b = self._where.get(id(p))
        if b is None:
            return
        self.seen += 1
        self._missing[b] -= 1
        while self._next < len(self.buckets) and self._missing[self._next] == 0:
            self.pending.append(self._launch(self._next))
            self._next += 1

    def flush(self) -> None:
        while self._next < len(self.buckets):
            self.pending.append(self._launch(self._next))
            self._next += 1

    @property
    def complete(self) -> bool:
        """Every parameter has reported."""
        return self.seen == len(self._where)


def pack(params: Sequence[Tensor], indices: Sequence[int], dtype=None) -> Tensor:
    """The gradients of params[indices] flattened into one fresh buffer (zeros where a
    parameter has no gradient, so that every rank sends the same layout)."""
    parts = []
    for i in indices:
        p = params[i]
        g = p.grad if p.grad is not None else creation.zeros(p.shape, dtype=p.dtype,
                                                             device=p.device)
        g = g.detach().reshape(-1)
        parts.append(g if dtype is None or g.dtype is dtype else g.to(dtype))
    # cat always copies, so the in-place collective never writes into a .grad
    return cat(parts)


def unpack_grads(params: Sequence[Tensor], indices: Sequence[int], flat: Tensor) -> None:
    """Write the segments of flat back into the parameters' gradients."""
    off = 0
    for i in indices:
        p = params[i]
        n = p.numel()
        seg = flat[off:off + n].reshape(p.shape)
        if seg.dtype is not p.dtype:
            seg = seg.to(p.dtype)
        if p.grad is None or p.grad.shape != p.shape:
            p.grad = seg.clone()
        else:
            p.grad.copy_(seg)
        off += n


# the SGD settings a momentum-corrected sparse update applies itself (DistOpt._sgd_momentum)
_SGD_LOCAL = ("momentum", "dampening", "weight_decay", "nesterov")


class DistOpt:
    """Wrap `optimizer` for data-parallel training over `group` (the world by default).

    Parameters are broadcast from the group's first rank when DistOpt is created, so every
    replica starts equal. Each `backward_and_*` call clears the gradients first (as SINGA's
    backward does), runs backward with the gradients communicated in buckets of at most
    `threshold` bytes, then steps the wrapped optimizer. Other attributes (`param_groups`,
    `state_dict`, `zero_grad`, ...) are the wrapped optimizer's.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> w = st.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = optim.DistOpt(optim.SGD([w], lr=0.5))   # a world of one without mpiexec
        >>> nbytes = opt.backward_and_update((w * w).sum())
        >>> w.tolist(), nbytes   # nothing to send in a world of one
        ([0.0, 0.0], 0)
    """

    def __init__(self, optimizer: Optimizer, group=None,
                 bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"DistOpt: expected an optimizer (optim.SGD, optim.Adam, ...), got "
                            f"{type(optimizer).__name__}")
        self.bucket_bytes = _check_bytes("DistOpt", "bucket_bytes", bucket_bytes)
        dist = _dist()
        self.optimizer, self.group = optimizer, group
        self.world_size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        if not self.params:
            raise ValueError("DistOpt: the optimizer has no parameters that require grad")
        self.last_bytes_sent = 0
        self._plans: dict = {}
        self._residuals: dict[int, Tensor] = {}
        # sparse mode under SGD momentum: each parameter's local momentum (see _sgd_momentum)
        self._momenta: dict[int, Tensor] = {}
        self._partial = 0
        broadcast_tensors(self.params, group)

    def __getattr__(self, name: str):
        # only reached for names DistOpt lacks: the wrapped optimizer's API shows through
        if name == "optimizer":
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    # ---- the shared machinery -------------------------------------------------------------
    def _threshold(self, op: str, threshold) -> int:
        return self.bucket_bytes if threshold is None else _check_bytes(op, "threshold",
                                                                        threshold)

    def _plan(self, threshold: int, itemsize: int | None) -> list:
        key = (threshold, itemsize)
        if key not in self._plans:
            self._plans[key] = plan_buckets(self.params, threshold, itemsize)
        return self._plans[key]

    def _check_loss(self, op: str, loss) -> None:
        if not isinstance(loss, Tensor):
            raise TypeError(f"{op}: loss must be a Tensor, got {type(loss).__name__}")
        if loss.numel() != 1:
            raise ValueError(f"{op}: loss must be a scalar, got shape {tuple(loss.shape)}")

    def _reduce_found_inf(self, found: Tensor) -> Tensor:
        """GradScaler's inf/NaN flag, the maximum over the group: a step skipped on one rank is
        skipped on all, so the replicas stay equal."""
        if self.world_size == 1:
            return found
        dist = _dist()
        flag = found.clone()
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        return flag

    def _step(self, scaler) -> None:
        if scaler is None:
            self.optimizer.step()
        else:
            scaler.step(self)

    def _overlapped_backward(self, loss: Tensor, buckets: list, launch, finish,
                             scaler=None) -> int:
        """Backward with launch(b) started from the gradient hooks, then finish(pending)."""
        self.optimizer.zero_grad(set_to_none=True)
        self._sent = 0
        reducer = BucketReducer(self.params, buckets, launch)
        handles = [p.register_post_accumulate_grad_hook(reducer.ready) for p in self.params]
        try:
            loss.backward()
        finally:
            for h in handles:
                h()
        reducer.flush()
        with no_grad():
            finish(reducer.pending)
        self._step(scaler)
        self.last_bytes_sent = self._sent
        return self._sent

    def _dense_launch(self, buckets: list, wire_dtype=None, clip: float | None = None):
        dist = _dist()

        def launch(b: int):
            with no_grad():
                # a half-precision bucket may mix parameter dtypes: gather them as float32
                buf = pack(self.params, buckets[b], None if wire_dtype is None else float32)
                if wire_dtype is not None:
                    if clip is not None:
                        buf = buf.clamp(-clip, clip)
                    # divide before the cast: a float16 sum of raw gradients can overflow
                    buf = (buf / self.world_size).to(wire_dtype)
            self._sent += buf.numel() * buf.dtype.itemsize
            work = dist.all_reduce(buf, group=self.group, async_op=True)
            return b, buf, work

        def finish(pending) -> None:
            for b, buf, work in pending:
                if work is not None:
                    work.wait()
                if wire_dtype is None:
                    buf = buf / self.world_size
                unpack_grads(self.params, buckets[b], buf)

        return launch, finish

    # ---- the four modes ---------------------------------------------------------------------
    def backward_and_update(self, loss: Tensor, threshold: int | None = None,
                            scaler=None) -> int:
        """Backward, average the gradients across ranks (bucketed, overlapped with backward),
        then step the optimizer. Returns the bytes sent. With `scaler` (an `amp.GradScaler`),
        the loss is scaled before backward and the step goes through `scaler.step`, skipped on
        every rank when any rank's gradients hold an inf or NaN; call `scaler.update()` after.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> w = st.ones(3, requires_grad=True)
            >>> opt = optim.DistOpt(optim.SGD([w], lr=0.1))
            >>> opt.backward_and_update((2 * w).sum(), threshold=1024)  # a world of one
            0
            >>> [round(v, 4) for v in w.tolist()]
            [0.8, 0.8, 0.8]
        """
        self._check_loss("backward_and_update", loss)
        buckets = self._plan(self._threshold("backward_and_update", threshold), None)
        if scaler is not None:
            loss = scaler.scale(loss)
        if self.world_size == 1:  # the average of one gradient is itself: nothing to pack
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self._step(scaler)
            self.last_bytes_sent = 0
            return 0
        return self._overlapped_backward(loss, buckets, *self._dense_launch(buckets),
                                         scaler=scaler)

    def backward_and_update_half(self, loss: Tensor, threshold: int | None = None,
                                 clipping: bool = False, clip_value: float = 100.0,
                                 scaler=None) -> int:
        """`backward_and_update` with float16 on the wire (half the bytes); with `clipping`,
        gradients are first clamped to [-clip_value, clip_value]. `scaler` as in
        `backward_and_update`.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> w = st.ones(3, requires_grad=True)
            >>> opt = optim.DistOpt(optim.SGD([w], lr=0.1))
            >>> opt.backward_and_update_half((2 * w).sum())
            6
        """
        op = "backward_and_update_half"
        self._check_loss(op, loss)
        if clipping and (not isinstance(clip_value, (int, float)) or isinstance(clip_value, bool)
                         or not clip_value > 0 or math.isinf(clip_value)):
            raise ValueError(f"{op}: clip_value must be a positive finite number, got "
                             f"{clip_value!r}")
        buckets = self._plan(self._threshold(op, threshold), float16.itemsize)
        launch, finish = self._dense_launch(buckets, float16,
                                            float(clip_value) if clipping else None)
        if scaler is not None:
            loss = scaler.scale(loss)
        return self._overlapped_backward(loss, buckets, launch, finish, scaler=scaler)

    def backward_and_sparse_update(self, loss: Tensor, threshold: int | None = None,
                                   spars: float = 0.05, topK: bool = False,  # noqa: N803
                                   corr: bool = True) -> int:
        """Send only part of each gradient: with topK the largest `spars` fraction of each
        parameter's entries (0 < spars <= 1), otherwise the entries with abs(g) > spars. Every
        rank's (index, value) pairs are gathered and summed, divided by the world size, and
        applied. With `corr`, what was not sent is added to the next step's gradient.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> w = st.tensor([1.0, 5.0, 2.0, 0.0], requires_grad=True)
            >>> opt = optim.DistOpt(optim.SGD([w], lr=1.0))
            >>> nbytes = opt.backward_and_sparse_update((w * w).sum() / 2, spars=0.25, topK=True)
            >>> w.tolist(), nbytes       # one float32 value and one int32 index
            ([1.0, 0.0, 2.0, 0.0], 8)
        """
        op = "backward_and_sparse_update"
        self._check_loss(op, loss)
        if not isinstance(spars, (int, float)) or isinstance(spars, bool) or math.isnan(spars):
            raise TypeError(f"{op}: spars must be a number, got {spars!r}")
        if topK and not 0 < spars <= 1:
            raise ValueError(f"{op}: with topK=True spars is the fraction of entries to send "
                             f"and must be in (0, 1], got {spars}")
        if not topK and spars < 0:
            raise ValueError(f"{op}: with topK=False spars is an absolute threshold and must be "
                             f">= 0, got {spars}")
        _on_host(f"DistOpt.{op}", "which entries travel, how many, and the residuals kept "
                                  "for later steps are decided on the host every step, and a "
                                  "replay would repeat the recorded choice")
        buckets = self._plan(self._threshold(op, threshold), None)
        groups = self._sgd_momentum() if corr else None
        launch = self._sparse_launch(buckets, float(spars), bool(topK), bool(corr), groups)
        finish = self._sparse_finish(buckets)
        if groups is None:
            return self._overlapped_backward(loss, buckets, launch, finish)
        # the momentum is in what was sent: the wrapped SGD steps without it (and without its
        # weight decay, added before the momentum)
        saved = [{k: g[k] for k in _SGD_LOCAL} for g in self.optimizer.param_groups]
        for g in self.optimizer.param_groups:
            g.update(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False)
        try:
            return self._overlapped_backward(loss, buckets, launch, finish)
        finally:
            for g, kept in zip(self.optimizer.param_groups, saved):
                g.update(kept)

    def _sgd_momentum(self) -> list | None:
        """For SGD with momentum, each parameter's (momentum, dampening, nesterov, weight
        decay), else None. Sparse updates then follow Deep Gradient Compression (Lin et al.,
        2018): each rank keeps a local momentum u += g and accumulates v += u; the largest
        entries of v are sent and zeroed in both v and u (momentum factor masking), and SGD
        applies the average without momentum. Error feedback through a plain SGD momentum
        would apply the momentum to entries that are sent late, many times over, and diverge."""
        from .sgd import SGD

        if not isinstance(self.optimizer, SGD):
            return None
        groups = [(g["momentum"], g["dampening"], g["nesterov"], g["weight_decay"])
                  for g in self.optimizer.param_groups for p in g["params"] if p.requires_grad]
        return groups if any(m > 0 for m, *_ in groups) else None

    def _select(self, flat: Tensor, spars: float, top_k: bool) -> Tensor:
        """Indices (int64) of the entries of flat to send."""
        from ..ops import nonzero, topk

        if top_k:  # on the gradient's device; ties go to the lower index
            return topk(flat.abs(), max(1, int(spars * flat.numel()))).indices

        return nonzero(flat.abs() > spars).reshape(-1)

    def _accumulate(self, i: int, flat: Tensor, hyper: tuple) -> Tensor:
        """v += u (u = momentum * u + (1 - dampening) * g, weight decay in g): the gradient
        mass parameter i has to send, with its momentum (see _sgd_momentum)."""
        momentum, dampening, nesterov, weight_decay = hyper
        if weight_decay:
            flat = flat + weight_decay * self.params[i].detach().reshape(-1)
        u = self._momenta.get(i)
        u = flat if u is None else u * momentum + flat * (1.0 - dampening)
        self._momenta[i] = u
        step = flat + momentum * u if nesterov else u
        v = self._residuals.get(i)
        return step if v is None else v + step

    def _sparse_launch(self, buckets: list, spars: float, top_k: bool, corr: bool,
                       groups: list | None = None):
        dist = _dist()

        def launch(b: int):
            vals, idxs, off = [], [], 0
            with no_grad():
                for i in buckets[b]:
                    p = self.params[i]
                    g = p.grad if p.grad is not None else creation.zeros(
                        p.shape, dtype=p.dtype, device=p.device)
                    flat = g.detach().reshape(-1)
                    if groups is not None:
                        flat = self._accumulate(i, flat, groups[i])
                    elif corr and i in self._residuals:
                        flat = flat + self._residuals[i]
                    sel = self._select(flat, spars, top_k)
                    vals.append(flat.index_select(0, sel))
                    idxs.append(sel + off)
                    if corr:
                        rest = flat.clone()
                        rest[sel] = 0.0
                        self._residuals[i] = rest
                    if groups is not None:  # the sent entries' momentum goes with them
                        u = self._momenta[i].clone()
                        u[sel] = 0.0
                        self._momenta[i] = u
                    off += p.numel()
                values = cat(vals)
                # int32 indices halve the index bytes; a bucket never holds 2**31 entries
                indices = cat(idxs).to(int32) if off < 2**31 else cat(idxs)
                count = values.numel()
                if top_k:
                    width = count  # the same on every rank: k depends only on the shapes
                else:
                    counts = [creation.zeros(1, dtype=int64) for _ in range(self.world_size)]
                    dist.all_gather(counts, creation.tensor([count], dtype=int64),
                                    group=self.group)
                    self._sent += 8
                    width = max(int(c.item()) for c in counts)
                    if width > count:
                        # zero values at index 0: harmless in the sum
                        values = cat([values, creation.zeros(width - count, dtype=values.dtype,
                                                             device=values.device)])
                        indices = cat([indices, creation.zeros(width - count,
                                                               dtype=indices.dtype,
                                                               device=indices.device)])
            if width == 0:
                return b, off, None, None, []
            got_v = [creation.empty(width, dtype=values.dtype, device=values.device)
                     for _ in range(self.world_size)]
            got_i = [creation.empty(width, dtype=indices.dtype, device=indices.device)
                     for _ in range(self.world_size)]
            works = [dist.all_gather(got_v, values, group=self.group, async_op=True),
                     dist.all_gather(got_i, indices, group=self.group, async_op=True)]
            self._sent += values.numel() * values.dtype.itemsize
            self._sent += indices.numel() * indices.dtype.itemsize
            return b, off, got_v, got_i, works

        return launch

    def _sparse_finish(self, buckets: list):
        def finish(pending) -> None:
            for b, n, got_v, got_i, works in pending:
                for w in works:
                    if w is not None:
                        w.wait()
                p0 = self.params[buckets[b][0]]
                dense = creation.zeros(n, dtype=p0.dtype, device=p0.device)
                for v, i in zip(got_v or [], got_i or []):
                    dense.index_add_(0, i.to(int64), v)
                unpack_grads(self.params, buckets[b], dense / self.world_size)

        return finish

    def backward_and_partial_update(self, loss: Tensor, threshold: int | None = None) -> int:
        """Backward and a local optimizer step, then average one round-robin slice of the
        parameters (about `threshold` bytes; the next slice on the next call) across ranks.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> w = st.ones(2, requires_grad=True)
            >>> opt = optim.DistOpt(optim.SGD([w], lr=0.5))
            >>> opt.backward_and_partial_update((w * w).sum())
            8
        """
        op = "backward_and_partial_update"
        self._check_loss(op, loss)
        _on_host(f"DistOpt.{op}", "which slice of the parameters is averaged moves on by "
                                  "one on the host every step, and a replay would average the "
                                  "recorded slice every time")
        slices = self._plan(self._threshold(op, threshold), None)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        chosen = slices[self._partial % len(slices)]
        self._partial += 1
        dist = _dist()
        with no_grad():
            buf = cat([self.params[i].detach().reshape(-1) for i in chosen])
            dist.all_reduce(buf, group=self.group)
            buf = buf / self.world_size
            off = 0
            for i in chosen:
                p = self.params[i]
                p.copy_(buf[off:off + p.numel()].reshape(p.shape))
                off += p.numel()
        self.last_bytes_sent = buf.numel() * buf.dtype.itemsize
        return self.last_bytes_sent

    def __call__(self, loss: Tensor, threshold: int | None = None) -> int:
        """SINGA's spelling of backward_and_update: `opt(loss)` runs backward, averages the
        gradients over the ranks and steps; returns the bytes sent.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import optim
            >>> w = st.ones(2, requires_grad=True)
            >>> opt = optim.DistOpt(optim.SGD([w], lr=0.5))   # a world of one
            >>> opt((w * w).sum())
            0
            >>> w.tolist()
            [0.0, 0.0]
        """
        return self.backward_and_update(loss, threshold)

    # ---- optimizer passthrough that must not be shadowed by __getattr__'s lookup order -------
    def step(self, closure=None):
        """Step the wrapped optimizer with the gradients as they are (no communication)."""
        return self.optimizer.step(closure) if closure is not None else self.optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        """The wrapped optimizer's state, plus the sparse residuals and the partial cursor.

        The residuals of backward_and_sparse_update are this rank's own (the gradient mass it
        has not sent yet), so a run that uses it saves one checkpoint per rank (for example
        `st.save(opt.state_dict(), f"ckpt.{rank}")`); loading another rank's residuals
        raises."""
        return {"optimizer": self.optimizer.state_dict(), "partial": self._partial,
                "residuals": {i: r.clone() for i, r in self._residuals.items()},
                "momenta": {i: u.clone() for i, u in self._momenta.items()},
                "rank": self.rank}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or "optimizer" not in state:
            raise ValueError("DistOpt.load_state_dict: expected a dict from DistOpt.state_dict() "
                             "(with an 'optimizer' entry)")
        saved_by = state.get("rank", self.rank)
        if (state.get("residuals") or state.get("momenta")) and saved_by != self.rank:
            raise ValueError(f"DistOpt.load_state_dict: the sparse residuals in this state are "
                             f"rank {saved_by}'s, but this is rank {self.rank}; each rank keeps "
                             f"its own, so save one checkpoint per rank and load its own on each")
        self.optimizer.load_state_dict(state["optimizer"])
        self._partial = int(state.get("partial", 0))
        self._residuals = {int(i): r.clone() for i, r in state.get("residuals", {}).items()}
        self._momenta = {int(i): u.clone() for i, u in state.get("momenta", {}).items()}
