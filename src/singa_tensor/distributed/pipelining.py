"""Pipeline (inter-layer) model parallelism with torch.distributed.pipelining's names: a model
cut into consecutive stages, one per rank of a group, fed a batch in micro-batches so the
stages work at the same time.

- `PipelineStage` wraps this rank's part of the model (`split_sequential` cuts an
  `nn.Sequential`; `pipeline_stage` does both for this rank).
- `ScheduleGPipe` runs every micro-batch forward, then every one backward.
- `Schedule1F1B` runs `num_stages - stage_index - 1` forwards, then alternates one forward and
  one backward, then finishes the backwards: the same gradients with at most
  `num_stages - stage_index` micro-batches' activations alive on a stage instead of all of them.

`schedule.step(x, target=y)` on every rank (the first stage passes the batch, the last the
target, the others nothing) splits the batch along dim 0 (`tensor_split`), runs the schedule
and leaves the gradients accumulated in the stage's parameters; the optimizer step is the
caller's. Each micro-batch's loss is backpropagated with weight 1/n_microbatches, so with a
mean-reducing loss and a batch that divides evenly the gradients equal those of the whole
batch (PyTorch divides the accumulated gradients by n_microbatches after the step instead,
`scale_grads=True`: the same when the gradients start at zero).

Activations go to the next rank and their gradients back by point-to-point messages on the
group (`isend`/`irecv`, batched with `batch_isend_irecv` so the NCCL ones pair up). Each
activation is announced by a 128-byte header (step, micro-batch, shape, dtype) sent over the
host, so stages need not know the shapes in advance and ranks that call the schedules
differently are told so instead of exchanging wrong data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..autograd import backward as _backward
from ..autograd import is_grad_enabled
from ..backend.device import Device
from ..nn.containers import Sequential
from ..nn.module import Module
from ..ops.more_shape import tensor_split
from ..ops.shape import cat
from ..tensor import Tensor
from . import P2POp, _group, batch_isend_irecv, irecv, isend
from ._base import DistributedError, Group

__all__ = ["PipelineStage", "Schedule1F1B", "ScheduleGPipe", "pipeline_stage",
           "split_sequential"]

# Tags of the pipeline's messages on the group's communicator (below monitored_barrier's).
_HEADER_TAG, _ACT_TAG, _GRAD_TAG = 32760, 32761, 32762
# A header: step, n_microbatches, micro-batch, has_backward, n_tensors, tensor index, dtype,
# on a GPU, ndim, then up to _MAX_NDIM sizes (int64 each: 128 bytes).
_FIXED, _MAX_NDIM = 9, 7
HEADER_BYTES = 8 * (_FIXED + _MAX_NDIM)


def _int(name: str, what: str, v) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        raise TypeError(f"{name}: {what} must be an int, got {type(v).__name__}")
    return int(v)


def _as_tuple(out, name: str) -> tuple:
    outs = out if isinstance(out, tuple) else (out,)
    if not outs or not all(isinstance(t, Tensor) for t in outs):
        raise TypeError(f"{name}: a stage must return a Tensor or a tuple of Tensors, got "
                        f"{type(out).__name__}")
    return outs


class PipelineStage:
    """This rank's stage of a pipeline: submodule runs stage stage_index of num_stages, on
    group rank stage_index of group (the world for None), whose size must be num_stages.
    device: where received activations are put (default: the submodule's parameters' device,
    else the CPU).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> from singa_tensor import nn
        >>> from singa_tensor.distributed.pipelining import PipelineStage
        >>> dist.init_process_group()
        >>> stage = PipelineStage(nn.Linear(4, 2), stage_index=0, num_stages=1)
        >>> stage.is_first, stage.is_last
        (True, True)
        >>> dist.destroy_process_group()
    """

    def __init__(self, submodule: Module, stage_index: int, num_stages: int, device=None,
                 group: Group | None = None):
        name = "PipelineStage"
        if not isinstance(submodule, Module):
            raise TypeError(f"{name}: submodule must be an nn.Module, got "
                            f"{type(submodule).__name__}")
        stage_index = _int(name, "stage_index", stage_index)
        num_stages = _int(name, "num_stages", num_stages)
        if num_stages < 1:
            raise ValueError(f"{name}: num_stages must be at least 1, got {num_stages}")
        if not 0 <= stage_index < num_stages:
            raise ValueError(f"{name}: stage_index {stage_index} is out of range for "
                             f"{num_stages} stages (0..{num_stages - 1})")
        g = _group(group)
        if g.comm is None:
            raise ValueError(f"{name}: this rank is not a member of {g}")
        if g.size != num_stages:
            raise ValueError(f"{name}: num_stages={num_stages} but the group has {g.size} ranks "
                             f"(one stage per rank)")
        if g.rank != stage_index:
            raise ValueError(f"{name}: stage_index={stage_index} but this is rank {g.rank} of "
                             f"the group (stage i runs on group rank i)")
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group = group
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        self.prev_rank = None if self.is_first else g.ranks[stage_index - 1]
        self.next_rank = None if self.is_last else g.ranks[stage_index + 1]
        if device is None:
            p = next(iter(submodule.parameters()), None)
            device = p.device if p is not None else "cpu"
        self.device = Device(device)
        self._begin(0, 0, False, None, None, None, True)

    def __repr__(self) -> str:
        return (f"PipelineStage(stage_index={self.stage_index}, num_stages={self.num_stages}, "
                f"device={self.device})")

    # ---- per step state -----------------------------------------------------------------------
    def _begin(self, step: int, n: int, has_backward: bool, arg_mbs, target_mbs, loss_fn,
               scale_grads: bool) -> None:
        self._step, self._n, self._has_backward = step, n, has_backward
        self._arg_mbs, self._target_mbs, self._loss_fn = arg_mbs, target_mbs, loss_fn
        self._grad_scale = 1.0 / n if scale_grads and n else 1.0
        self._inputs: dict = {}    # micro-batch -> the received activations (graph leaves)
        self._outputs: dict = {}   # micro-batch -> this stage's outputs (graph roots)
        self._loss: dict = {}      # micro-batch -> its loss (last stage)
        self._recv: dict = {}      # action -> (receive buffers, their Works once started)
        self.output_chunks: list = [None] * n
        self.losses: list = []
        self.live = self.peak_live = 0  # micro-batches whose activations are kept

    def _header(self, mb: int, n_tensors: int, k: int, t: Tensor) -> Tensor:
        if t.ndim > _MAX_NDIM:
            raise ValueError(f"PipelineStage: stage {self.stage_index} outputs a {t.ndim}-d "
                             f"tensor; activations of at most {_MAX_NDIM} dims can be sent")
        h = np.zeros(_FIXED + _MAX_NDIM, np.int64)
        h[:_FIXED] = (self._step, self._n, mb, self._has_backward, n_tensors, k,
                      _dt.ALL.index(t.dtype), t.device.type == "cuda", t.ndim)
        h[_FIXED:_FIXED + t.ndim] = t.shape
        return creation.tensor(h)

    def _read_header(self, mb: int, k: int, n_tensors: int | None):
        buf = creation.zeros(_FIXED + _MAX_NDIM, dtype=_dt.int64)
        irecv(buf, self.prev_rank, self.group, _HEADER_TAG).wait()
        h = [int(v) for v in buf.numpy()]
        step, n, got_mb, has_bwd, got_n, got_k, code, cuda, ndim = h[:_FIXED]
        mine = (self._step, self._n, mb, int(self._has_backward))
        if (step, n, got_mb, has_bwd) != mine or (n_tensors is not None and got_n != n_tensors) \
                or got_k != k:
            def say(s, n_, m, b):
                return (f"step {s}, micro-batch {m} of {n_} "
                        f"({'with' if b else 'without'} backward)")
            raise DistributedError(
                f"pipeline step: stage {self.stage_index} expected {say(*mine)} from stage "
                f"{self.stage_index - 1}, got {say(step, n, got_mb, has_bwd)}; every rank must "
                f"call step() the same number of times, with the same n_microbatches and a "
                f"loss_fn on all ranks or on none")
        if bool(cuda) != (self.device.type == "cuda"):
            raise DistributedError(
                f"pipeline step: stage {self.stage_index - 1} sends activations on "
                f"{'a GPU' if cuda else 'the CPU'} but stage {self.stage_index} receives on "
                f"{self.device}; put the stages on the same kind of device")
        return got_n, _dt.ALL[code], tuple(h[_FIXED:_FIXED + ndim])

    # ---- messages -----------------------------------------------------------------------------
    def _recv_ops(self, action) -> list:
        """The receives action needs (after the activation headers arrived), remembered."""
        kind, mb = action.computation_type, action.microbatch_index
        bufs = []
        if kind == "F" and not self.is_first:
            n_tensors, k = None, 0
            while n_tensors is None or k < n_tensors:
                n_tensors, dt, shape = self._read_header(mb, k, n_tensors)
                bufs.append(creation.empty(*shape, dtype=dt, device=self.device))
                k += 1
            tag, peer = _ACT_TAG, self.prev_rank
        elif kind == "B" and not self.is_last:
            bufs = [creation.empty(*t.shape, dtype=t.dtype, device=t.device)
                    for t in self._outputs[mb] if t.dtype.is_floating_point]
            tag, peer = _GRAD_TAG, self.next_rank
        if not bufs:
            return []
        self._recv[action] = (bufs, None)
        return [P2POp(irecv, b, peer, self.group, tag) for b in bufs]

    def _received(self, action) -> list:
        bufs, works = self._recv.pop(action, ([], None))
        for w in works or ():
            w.wait()
        return bufs

    # ---- compute ------------------------------------------------------------------------------
    def _forward(self, mb: int) -> tuple[list, list]:
        """Run micro-batch mb forward; (header Works already started, payload send ops)."""
        if self.is_first:
            args = self._arg_mbs[mb]
        else:
            args = self._received(_Action(self.stage_index, "F", mb))
            if self._has_backward:
                for t in args:
                    if t.dtype.is_floating_point:
                        t.requires_grad_(True)
        out = self.submod(*args)
        outs = _as_tuple(out, "PipelineStage")
        if self._has_backward:
            self._inputs[mb] = args
            self._outputs[mb] = outs
            self.live += 1
            self.peak_live = max(self.peak_live, self.live)
        if self.is_last:
            self.output_chunks[mb] = tuple(t.detach() for t in outs) \
                if isinstance(out, tuple) else out.detach()
            if self._target_mbs is not None:
                loss = self._loss_fn(out, self._target_mbs[mb])
                self.losses.append(loss.detach())
                self._loss[mb] = loss
            return [], []
        heads = [isend(self._header(mb, len(outs), k, t), self.next_rank, self.group,
                       _HEADER_TAG) for k, t in enumerate(outs)]
        return heads, [P2POp(isend, t.detach(), self.next_rank, self.group, _ACT_TAG)
                       for t in outs]

    def _backward_one(self, mb: int) -> list:
        """Run micro-batch mb backward; the send ops of its input gradients."""
        if self.is_last:
            loss = self._loss.pop(mb)
            roots, grads = [loss], [creation.full(loss.shape, self._grad_scale,
                                                  dtype=loss.dtype, device=loss.device)]
        else:
            got = iter(self._received(_Action(self.stage_index, "B", mb)))
            roots, grads = [], []
            for t in self._outputs[mb]:
                if t.dtype.is_floating_point:
                    g = next(got)
                    if t.requires_grad:
                        roots.append(t)
                        grads.append(g)
        if roots:
            _backward(roots, grads)
        inputs = self._inputs.pop(mb)
        del self._outputs[mb]
        self.live -= 1
        if self.is_first:
            return []
        sends = []
        for x in inputs:
            if x.dtype.is_floating_point:
                g = x.grad if x.grad is not None else creation.zeros_like(x)
                sends.append(P2POp(isend, g, self.prev_rank, self.group, _GRAD_TAG))
        return sends


class _Action(NamedTuple):
    """One compute step of a schedule: stage_index runs micro-batch microbatch_index forward
    ("F") or backward ("B"); str() is PyTorch's "1F0" form."""

    stage_index: int
    computation_type: str
    microbatch_index: int

    def __str__(self) -> str:
        return f"{self.stage_index}{self.computation_type}{self.microbatch_index}"


class _PipelineSchedule:
    """What GPipe and 1F1B share: checking and splitting step()'s inputs, running a list of
    actions with each compute's sends batched with the next one's receives, and merging the
    last stage's outputs."""

    def __init__(self, stage: PipelineStage, n_microbatches: int,
                 loss_fn: Callable | None = None, scale_grads: bool = True):
        name = type(self).__name__
        if not isinstance(stage, PipelineStage):
            raise TypeError(f"{name}: stage must be a PipelineStage, got "
                            f"{type(stage).__name__}")
        n = _int(name, "n_microbatches", n_microbatches)
        if n < 1:
            raise ValueError(f"{name}: n_microbatches must be at least 1, got {n}")
        if loss_fn is not None and not callable(loss_fn):
            raise TypeError(f"{name}: loss_fn must be callable, got {type(loss_fn).__name__}")
        self._stage, self._n_microbatches, self._loss_fn = stage, n, loss_fn
        self.scale_grads = bool(scale_grads)
        self._steps = 0
        self.actions_log: list = []

    def _order(self, s: int) -> list:
        raise NotImplementedError

    @property
    def pipeline_order(self) -> dict:
        """{stage_index: [Action, ...]}: the compute order of every stage (no idle slots)."""
        return {s: self._order(s) for s in range(self._stage.num_stages)}

    def _split(self, args, target):
        name, st_ = f"{type(self).__name__}.step", self._stage
        n = self._n_microbatches
        if st_.is_first and not args:
            raise ValueError(f"{name}: stage 0 (the first) must be passed the batch")
        if not st_.is_first and args:
            raise ValueError(f"{name}: only the first stage takes the batch; stage "
                             f"{st_.stage_index} receives its input from stage "
                             f"{st_.stage_index - 1} (call step() without arguments)")
        has_loss = self._loss_fn is not None
        if st_.is_last and has_loss and target is None:
            raise ValueError(f"{name}: the last stage (stage {st_.stage_index}) needs target= "
                             f"for the loss")
        if target is not None and not (st_.is_last and has_loss):
            raise ValueError(f"{name}: target= is only taken by the last stage of a schedule "
                             f"with a loss_fn (this is stage {st_.stage_index} of "
                             f"{st_.num_stages}{'' if has_loss else ', no loss_fn'})")

        def chunks(t, what):
            if not isinstance(t, Tensor):
                raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
            if t.ndim == 0 or t.shape[0] < n:
                size = t.shape[0] if t.ndim else "a 0-d tensor"
                raise ValueError(f"{name}: {what} has batch size {size} along dim 0, fewer "
                                 f"than n_microbatches={n}")
            return tensor_split(t, n)

        arg_mbs = None
        if args:
            split = [chunks(a, f"argument {i}") for i, a in enumerate(args)]
            arg_mbs = [tuple(s[i] for s in split) for i in range(n)]
        target_mbs = chunks(target, "target") if target is not None else None
        return arg_mbs, target_mbs

    def step(self, *args, target: Tensor | None = None, losses: list | None = None):
        """Run one pass of the schedule over the batch; gradients accumulate into the stage's
        parameters (without a loss_fn: forward only). The first stage passes the batch (split
        along dim 0 into n_microbatches parts, as `tensor_split`), the last stage the target
        and optionally a list that gets each micro-batch's loss (cleared first, as PyTorch
        does), and gets the stage outputs concatenated along dim 0; the other stages call
        step() with no arguments and get None.

        Example:
            >>> import singa_tensor as st, singa_tensor.distributed as dist
            >>> import singa_tensor.nn.functional as F
            >>> from singa_tensor import nn
            >>> from singa_tensor.distributed.pipelining import PipelineStage, ScheduleGPipe
            >>> dist.init_process_group()
            >>> sched = ScheduleGPipe(PipelineStage(nn.Linear(3, 1), 0, 1), 2, F.mse_loss)
            >>> losses = []
            >>> sched.step(st.ones(4, 3), target=st.zeros(4, 1), losses=losses).shape
            (4, 1)
            >>> len(losses)
            2
            >>> dist.destroy_process_group()
        """
        name = f"{type(self).__name__}.step"
        if losses is not None and not isinstance(losses, list):
            raise TypeError(f"{name}: losses must be a list, got {type(losses).__name__}")
        has_backward = self._loss_fn is not None
        if has_backward and not is_grad_enabled():
            raise RuntimeError(f"{name}: backward needs gradients enabled; it was called under "
                               f"no_grad()")
        arg_mbs, target_mbs = self._split(args, target)
        stage = self._stage
        stage._begin(self._steps, self._n_microbatches, has_backward, arg_mbs, target_mbs,
                     self._loss_fn, self.scale_grads)
        self._steps += 1
        order = self._order(stage.stage_index) if has_backward else \
            [_Action(stage.stage_index, "F", i) for i in range(self._n_microbatches)]
        self.actions_log = []
        try:
            self._run(order)
        finally:
            stage._inputs.clear()
            stage._outputs.clear()
            stage._loss.clear()
        if losses is not None and stage.is_last:
            losses.clear()
            losses.extend(stage.losses)
        if not stage.is_last:
            return None
        chunks = stage.output_chunks
        if isinstance(chunks[0], tuple):
            return tuple(cat([c[k] for c in chunks]) for k in range(len(chunks[0])))
        return cat(chunks)

    def _run(self, order: list) -> None:
        stage = self._stage
        pending: list = []  # the sends, waited for at the end of the step
        ops = stage._recv_ops(order[0])
        if ops:
            self._start(ops, 0, order[0], pending)
        for i, action in enumerate(order):
            if action.computation_type == "F":
                heads, sends = stage._forward(action.microbatch_index)
                pending.extend(heads)
            else:
                sends = stage._backward_one(action.microbatch_index)
            self.actions_log.append(str(action))
            nxt = order[i + 1] if i + 1 < len(order) else None
            recvs = stage._recv_ops(nxt) if nxt is not None else []
            # one batch, so a GPU send to a peer pairs with the receive from it (NCCL groups)
            if sends or recvs:
                self._start(sends + recvs, len(sends), nxt, pending)
        for w in pending:
            w.wait()

    def _start(self, ops: list, n_sends: int, action, pending: list) -> None:
        works = batch_isend_irecv(ops)
        pending.extend(works[:n_sends])
        if len(works) > n_sends:
            bufs, _ = self._stage._recv[action]
            self._stage._recv[action] = (bufs, works[n_sends:])


class ScheduleGPipe(_PipelineSchedule):
    """GPipe: every micro-batch forward, then every one backward (fill, drain). Idle share of
    a step (the bubble): (S - 1) / (M + S - 1) for S stages and M micro-batches; a stage keeps
    all M micro-batches' activations until their backward.

    Example:
        >>> import singa_tensor as st, singa_tensor.distributed as dist
        >>> from singa_tensor import nn
        >>> from singa_tensor.distributed.pipelining import PipelineStage, ScheduleGPipe
        >>> dist.init_process_group()
        >>> sched = ScheduleGPipe(PipelineStage(nn.Linear(3, 1), 0, 1), n_microbatches=2)
        >>> [str(a) for a in sched.pipeline_order[0]]
        ['0F0', '0F1', '0B0', '0B1']
        >>> dist.destroy_process_group()
    """

    def _order(self, s: int) -> list:
        m = self._n_microbatches
        return [_Action(s, "F", i) for i in range(m)] + [_Action(s, "B", i) for i in range(m)]


class Schedule1F1B(_PipelineSchedule):
    """One forward, one backward: stage s runs `S - s - 1` forwards (warmup), then alternates
    a forward and a backward, then runs the remaining backwards (cooldown). The bubble is
    GPipe's, but stage s keeps at most `S - s` micro-batches' activations, not M.
    n_microbatches must be at least the number of stages (ValueError), as in PyTorch.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> from singa_tensor import nn
        >>> from singa_tensor.distributed.pipelining import PipelineStage, Schedule1F1B
        >>> dist.init_process_group()
        >>> sched = Schedule1F1B(PipelineStage(nn.Linear(3, 1), 0, 1), n_microbatches=2)
        >>> [str(a) for a in sched.pipeline_order[0]]
        ['0F0', '0B0', '0F1', '0B1']
        >>> dist.destroy_process_group()
    """

    def __init__(self, stage: PipelineStage, n_microbatches: int,
                 loss_fn: Callable | None = None, scale_grads: bool = True):
        super().__init__(stage, n_microbatches, loss_fn, scale_grads)
        if self._n_microbatches < stage.num_stages:
            raise ValueError(f"Schedule1F1B: n_microbatches ({self._n_microbatches}) must be "
                             f"at least the number of stages ({stage.num_stages})")

    def _order(self, s: int) -> list:
        m = self._n_microbatches
        warmup = min(self._stage.num_stages - s - 1, m)
        order = [_Action(s, "F", i) for i in range(warmup)]
        for k in range(m - warmup):
            order += [_Action(s, "F", warmup + k), _Action(s, "B", k)]
        return order + [_Action(s, "B", i) for i in range(m - warmup, m)]


# ---- cutting an nn.Sequential -------------------------------------------------------------------


def _balance(counts: list, num_stages: int) -> list:
    """Layer counts of num_stages contiguous non-empty parts of counts (parameter counts) whose
    largest parameter total is smallest; among those, one where every part has parameters
    when that is possible (it needs no optimizer of its own then), then one whose largest
    layer count is smallest."""
    n = len(counts)
    prefix = np.concatenate([[0], np.cumsum(counts)])

    def best(cost):
        # table[k][j]: (the smallest largest cost, cut) for layers [0, j) in k parts
        inf = (float("inf"),)
        table = [[(inf, 0)] * (n + 1) for _ in range(num_stages + 1)]
        table[0][0] = ((0,), 0)
        for k in range(1, num_stages + 1):
            for j in range(k, n - (num_stages - k) + 1):
                for i in range(k - 1, j):
                    prev = table[k - 1][i][0]
                    c = max(prev, cost(i, j))
                    if c < table[k][j][0]:
                        table[k][j] = (c, i)
        cuts, j = [], n
        for k in range(num_stages, 0, -1):
            i = table[k][j][1]
            cuts.append(j - i)
            j = i
        return table[num_stages][n][0], cuts[::-1]

    (top,), _ = best(lambda i, j: (int(prefix[j] - prefix[i]),))
    _, sizes = best(lambda i, j: (int(prefix[j] - prefix[i] > top),
                                  int(prefix[j] == prefix[i]), j - i))
    return sizes


def split_sequential(seq: Sequential, num_stages: int, balance: Sequence[int] | None = None
                     ) -> list:
    """Cut seq into num_stages consecutive nn.Sequential parts (sharing seq's layers, which
    keep their names). balance: the number of layers of each part; by default every part gets
    at least one layer and the largest part's parameter count is as small as it can be; ties
    go to a cut without parameter-free parts, then to the smallest largest layer count.

    Example:
        >>> from singa_tensor import nn
        >>> from singa_tensor.distributed.pipelining import split_sequential
        >>> seq = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.Linear(8, 2))
        >>> [len(p) for p in split_sequential(seq, 2)]
        [2, 2]
        >>> [len(p) for p in split_sequential(seq, 2, balance=[3, 1])]
        [3, 1]
    """
    name = "split_sequential"
    if not isinstance(seq, Sequential):
        raise TypeError(f"{name}: expected an nn.Sequential, got {type(seq).__name__}")
    num_stages = _int(name, "num_stages", num_stages)
    if not 1 <= num_stages <= len(seq):
        raise ValueError(f"{name}: num_stages must be between 1 and the {len(seq)} layers of "
                         f"the Sequential, got {num_stages}")
    if balance is None:
        sizes = _balance([sum(p.numel() for p in layer.parameters()) for layer in seq],
                         num_stages)
    else:
        sizes = [_int(name, "balance entries", b) for b in balance]
        if len(sizes) != num_stages or any(b < 1 for b in sizes) or sum(sizes) != len(seq):
            raise ValueError(f"{name}: balance must be {num_stages} positive layer counts "
                             f"adding up to {len(seq)}, got {list(balance)}")
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return [seq[a:b] for a, b in zip(bounds, bounds[1:])]


def pipeline_stage(seq: Sequential, balance: Sequence[int] | None = None, device=None,
                   group: Group | None = None) -> PipelineStage:
    """This rank's PipelineStage of seq cut into one part per rank of group (the world for
    None) by split_sequential; stage i is group rank i's part.

    Example:
        >>> import singa_tensor.distributed as dist
        >>> from singa_tensor import nn
        >>> from singa_tensor.distributed.pipelining import pipeline_stage
        >>> dist.init_process_group()
        >>> stage = pipeline_stage(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
        >>> stage.stage_index, stage.num_stages, len(stage.submod)
        (0, 1, 2)
        >>> dist.destroy_process_group()
    """
    g = _group(group)
    if g.comm is None:
        raise ValueError(f"pipeline_stage: this rank is not a member of {g}")
    parts = split_sequential(seq, g.size, balance)
    return PipelineStage(parts[g.rank], g.rank, g.size, device, group)
