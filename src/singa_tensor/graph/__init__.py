"""Graph mode: run a training step once while recording its kernel calls, then replay the
recording on new inputs without Python, autograd bookkeeping or allocation::

    step = st.compile(train_step)     # or @st.compile
    for x, y in loader:
        out, loss = step(x, y)        # calls 1..warmup: eager; next: recorded; then replayed

What a replay does, and what keeps it honest:

- The inputs are copied into the buffers the recording read; the calls run in order on fixed
  buffers. Tensors that die inside the step share one arena, placed by their lifetimes
  (`plan_memory`); what outlives it (parameters, gradients, optimizer state, outputs) keeps
  its own memory.
- A call with another input shape, dtype or device records again (`on_change="rerecord"`,
  the default) or raises GraphError (`on_change="raise"`).
- Values read on the host while recording (`.item()`, index bounds checks, ...) become guards:
  when a guard computed from the inputs alone would decide differently, the step is recorded
  again before anything runs; any other guard that fails raises GraphError, since the step's
  Python code may take another path on these values.
- Random draws (dropout, ...) draw again from their generators, as eager execution would.
- An optimizer update whose hyper-parameters changed since recording (a scheduler's lr), or
  that keeps host-side state (Adam's step count), runs eagerly in its place.
- Outputs are returned as fresh tensors (copies of the recorded ones).
- Collectives (dist.all_reduce, ..., as DistOpt and DistributedDataParallel call them) are
  recorded calls that communicate again on every replay, synchronously and in the recorded
  order on every rank (see graph/_collective.py); communication decided on the host (object
  collectives, the parameter server, DistOpt's sparse and partial updates) raises GraphError
  while recording.
- On a CUDA device, each run of kernel launches between such Python steps is captured once
  into a CUDA graph and launched as one (`cuda_graphs`, see graph/_cudagraph.py); launches
  through cuBLAS and random draws stay plain launches between the graphs.

What a replay cannot see: Python state the step reads that is not a tensor (a counter, a flag,
a module switched to eval mode) unless passed as an argument.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ops._registry import copy_into
from ..tensor import Tensor
from ._capture import GraphError, Recorder
from ._graph import Graph, check_plan

__all__ = ["CompiledStep", "GraphError", "compile"]

_ON_CHANGE = ("rerecord", "raise")
_MAX_RERECORDS = 8


def _signature(args: tuple) -> tuple:
    sig = []
    for a in args:
        if isinstance(a, Tensor):
            sig.append(("T", a.shape, a.dtype, a.device))
        else:
            try:
                hash(a)
            except TypeError:
                raise TypeError(f"compile: arguments must be tensors or hashable values (they "
                                f"select the recording), got {type(a).__name__}") from None
            sig.append(("V", type(a), a))
    return tuple(sig)


def _flatten(out, into: list):
    if isinstance(out, Tensor):
        into.append(out)
        return ("T", len(into) - 1)
    if isinstance(out, (tuple, list)):
        return (type(out), [_flatten(o, into) for o in out])
    if isinstance(out, dict):
        return (dict, {k: _flatten(v, into) for k, v in out.items()})
    return ("V", out)


def _rebuild(spec, tensors: list):
    kind, body = spec
    if kind == "T":  # a copy of its own, without autograd history
        t = tensors[body]
        out = Tensor._empty(t._shape, t.dtype, t._device, t._be)
        copy_into(t, out)
        return out
    if kind == "V":
        return body
    if kind is dict:
        return {k: _rebuild(v, tensors) for k, v in body.items()}
    return kind(_rebuild(v, tensors) for v in body)


class _Entry:
    """The recording for one input signature."""

    def __init__(self, step: CompiledStep) -> None:
        self.records = 0  # how many times this signature was recorded
        self.step = step

    def record(self, args: tuple):
        self.records += 1
        if self.records > _MAX_RERECORDS:
            raise GraphError(
                f"compile: the step was recorded {_MAX_RERECORDS} times for the same input "
                f"shapes because values it reads on the host keep changing; it cannot be "
                f"replayed (run it without compile)")
        step = self.step
        self.static = [a.detach().clone() if isinstance(a, Tensor) else a for a in args]
        with Recorder() as rec:
            out = step.fn(*self.static)
        tensors: list = []
        self.out_spec = _flatten(out, tensors)
        # without their autograd history, which would hold the step's saved tensors (and the
        # parameters they came from) alive
        self.outputs = [t.detach() for t in tensors]
        recording = rec.recording
        inputs = {rec._sid[id(a._storage)] for a in self.static
                  if isinstance(a, Tensor) and id(a._storage) in rec._sid}
        self.graph = Graph(recording, recording.backends, recording.devices, inputs,
                           plan_memory=step.plan_memory, poison=step.poison,
                           fuse_fn=step.fuse_fn, recompute=step.recompute,
                           cuda_graphs=step.cuda_graphs)
        del rec, recording, out
        return _rebuild(self.out_spec, self.outputs)

    def run(self, args: tuple):
        for static, a in zip(self.static, args):
            if isinstance(a, Tensor):
                copy_into(a.detach(), static)
        g = self.graph
        # held until the replay ends: a collection during it must not free what it reads
        pinned = g.pin()
        if pinned is None:
            if self.step.on_change == "raise":
                raise GraphError("compile: a tensor the step read from outside (a parameter, "
                                 "a buffer, optimizer state) was replaced since recording; "
                                 "on_change='raise' forbids recording again")
            return self.record(args)
        if not g.early_checks_hold():
            if self.step.on_change == "raise":
                raise GraphError(f"compile: a value read on the host while recording changed "
                                 f"({', '.join(x.where for x in g.early_guards)}); "
                                 f"on_change='raise' forbids recording again")
            return self.record(args)
        g.replay()
        del pinned
        return _rebuild(self.out_spec, self.outputs)


class CompiledStep:
    """A step function in graph mode (made by `st.compile`). Call it like the function.

    Attributes: `graphs` (signature -> recording), `calls`, `arena_bytes` and
    `cuda_graph_stats` of the latest recording, `replays` (how many calls were replayed).

    Example:
        >>> import singa_tensor as st
        >>> w = st.ones(3, requires_grad=True)
        >>> opt = st.optim.SGD([w], lr=0.1)
        >>> @st.compile
        ... def step(x):
        ...     opt.zero_grad()
        ...     loss = (w * x).sum()
        ...     loss.backward()
        ...     opt.step()
        ...     return loss
        >>> for _ in range(4):
        ...     loss = step(st.tensor([1.0, 2.0, 3.0]))
        >>> step.replays, [round(v, 4) for v in w.tolist()]
        (2, [0.6, 0.2, -0.2])
    """

    def __init__(self, fn: Callable, *, warmup: int = 1, on_change: str = "rerecord",
                 plan_memory: bool = True, fuse: bool = True, poison: bool = False,
                 recompute: bool = True, cuda_graphs: bool = True) -> None:
        if not callable(fn):
            raise TypeError(f"compile: expected a function, got {type(fn).__name__}")
        if on_change not in _ON_CHANGE:
            raise ValueError(f"compile: on_change must be one of {', '.join(_ON_CHANGE)}, got "
                             f"{on_change!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"compile: warmup must be an int >= 0, got {warmup!r}")
        self.fn = fn
        self.warmup = warmup
        self.on_change = on_change
        self.plan_memory = bool(plan_memory)
        self.poison = bool(poison)
        self.recompute = bool(recompute)
        self.cuda_graphs = bool(cuda_graphs)
        self.fuse_fn = None
        if fuse:
            from ._fuse import fuse_calls

            self.fuse_fn = fuse_calls
        self.graphs: dict = {}
        self.replays = 0
        self._eager_calls = 0

    def __call__(self, *args):
        if self._eager_calls < self.warmup:
            # the first steps create optimizer state and caches: their Python paths differ
            # from the steady state that a recording must capture
            self._eager_calls += 1
            return self.fn(*args)
        sig = _signature(args)
        entry = self.graphs.get(sig)
        if entry is None:
            if self.graphs and self.on_change == "raise":
                have = next(iter(self.graphs))
                raise GraphError(f"compile: the step was recorded for inputs {_describe(have)} "
                                 f"and is now called with {_describe(sig)}; on_change='raise' "
                                 f"forbids recording again")
            entry = self.graphs[sig] = _Entry(self)
            try:
                out = entry.record(args)
            except BaseException:
                del self.graphs[sig]
                raise
            self._latest = entry
            return out
        self._latest = entry
        self.replays += 1
        return entry.run(args)

    @property
    def calls(self) -> int:
        return len(self._latest.graph.calls) if self.graphs else 0

    @property
    def arena_bytes(self) -> int:
        return self._latest.graph.arena_bytes if self.graphs else 0

    @property
    def cuda_graph_stats(self) -> dict:
        """For the latest recording: CUDA graphs captured, captures that failed (their
        launches replay one by one) and launches the captured graphs hold. All zero on the
        CPU and before the first replay."""
        if not self.graphs:
            return {"captured": 0, "failed": 0, "launches": 0}
        return self._latest.graph.graph_stats()

    def check_plan(self) -> None:
        """Raise GraphError if two temporaries alive at the same time share arena bytes."""
        for entry in self.graphs.values():
            check_plan(entry.graph.blocks)


def _describe(sig: tuple) -> str:
    parts = []
    for kind, *rest in sig:
        if kind == "T":
            shape, dtype, device = rest
            parts.append(f"{tuple(shape)} {dtype.name} {device}")
        else:
            parts.append(repr(rest[1]))
    return "(" + ", ".join(parts) + ")"


def compile(fn: Callable | None = None, **options):  # noqa: A001 - st.compile, as in SINGA
    """Graph mode for a step function: `st.compile(fn, **options)` or `@st.compile` /
    `@st.compile(**options)`. Options: warmup (eager calls before recording, default 1),
    on_change ("rerecord" or "raise"), plan_memory, fuse (elementwise chains as one kernel),
    recompute (remake im2col columns before backward instead of keeping them), cuda_graphs
    (on a CUDA device, replay runs of kernel launches as CUDA graphs), poison (fill each
    temporary with NaN bits once dead: a plan that let two live tensors share memory then
    shows up as wrong results). See singa_tensor.graph for what a replay does.

    Example:
        >>> import singa_tensor as st
        >>> double = st.compile(lambda x: x * 2, warmup=0)
        >>> double(st.ones(2)).tolist(), double(st.tensor([1.0, 5.0])).tolist()
        ([2.0, 2.0], [2.0, 10.0])
    """
    if fn is None:
        return lambda f: CompiledStep(f, **options)
    return CompiledStep(fn, **options)
