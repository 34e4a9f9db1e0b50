"""The execution context: the one place that says whether something changes how ops run right
now (ONNX export tracing a forward pass, graph mode recording a step), and what.

Code that behaves differently under such a context asks `current()` (None in eager execution:
the fast path) and calls the hook it needs; nothing flips module globals. The context lives in
a `contextvars.ContextVar`, so a trace or a capture in one thread (or asyncio task) leaves the
others eager. This module imports nothing of the package, so every layer, backends included,
can ask it without reaching upward.

Example:
    >>> from singa_tensor import _execution
    >>> _execution.current() is None
    True
    >>> with _execution.running(_execution.ExecutionContext()) as ctx:
    ...     _execution.current() is ctx
    True
    >>> _execution.current() is None
    True
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, Callable, Iterator

_current: ContextVar[ExecutionContext | None] = ContextVar("singa_tensor_execution",
                                                           default=None)
current = _current.get
# how many contexts are running, in any thread: while none is (eager training, always), the
# hottest paths (apply, kernel) test this number and skip even the ContextVar lookup
running_count = 0
_count_lock = threading.Lock()


class ExecutionContext:
    """What ops ask while a context runs; the defaults are eager execution's behaviour.
    `singa_tensor.onnx`'s Tracer and `singa_tensor.graph`'s Recorder implement it."""

    name = "execution context"
    # ops that have a form for tracing (a traced nonzero instead of a host read) ask this
    tracing = False
    # whether a kernel may take a table of buffer pointers (the optimizers' list kernels):
    # the context then follows the buffers through the table
    pointer_tables = False

    def run_op(self, spec, node, args: tuple, attrs: dict):
        """Run spec's forward (ops/_registry.py `apply`)."""
        return spec.forward(node, *args, **attrs)

    def scope(self, spec, arguments: dict, run: Callable[[], Any]):
        """Run a composite op's body (`traced`)."""
        return run()

    def kernel(self, fn: Callable, symbol: str, backend) -> Callable:
        """The kernel function to call for `symbol` on `backend`."""
        return fn

    def decision(self, read: Callable[[], Any], decide: Callable[[Any], Any]):
        """A host read of tensor values whose only use is decide(value)."""
        return read()

    def begin_update(self, optimizer) -> None:
        """An optimizer's step starts."""

    def end_update(self, optimizer) -> None:
        """An optimizer's step has ended."""

    def collective(self, what: str, args: tuple, run: Callable[[tuple], Any]) -> None:
        """A collective communicates: run(args) performs it, to completion, on the tensors
        (and lists of tensors) in args, the ones it reads and writes; graph capture records
        it, to perform it again on each replay's buffers."""
        run(args)

    def host_communication(self, what: str, why: str) -> None:
        """Communication whose pattern or result is decided on the host (object collectives,
        the parameter server, DistOpt's sparse and partial updates) is about to run; a
        capture refuses it, saying why."""

    def custom_function(self, cls, args: tuple, kwargs: dict, run: Callable[[], Any]):
        """A user's autograd.Function runs (`run` applies it as in eager execution)."""
        return run()

    # ---- memory and host traffic (asked only while a context runs: `running_count`) ----------
    def tensor_made(self, t) -> None:
        """A Tensor was made (Tensor._make); its storage may be new."""

    def storage_refs(self, storage) -> int:
        """How many references to storage this context itself holds (autograd counts the
        others to tell whether a gradient is shared)."""
        return 0

    def host_read(self, t, value) -> None:
        """t's values were read to the host (Tensor._numpy) as the array value."""

    def host_written(self, storage) -> None:
        """storage was filled from host memory (a numpy array, a CuPy array), not a kernel."""

    def transferred(self, out, src, again: Callable[[], Any]) -> None:
        """out is a copy of src on another device; again() copies it once more."""

    def random_drawn(self, generator, blocks: int, seed: int, offset: int) -> None:
        """generator handed out `blocks` counter blocks at (seed, offset) (Generator._take)."""


def enter(ctx: ExecutionContext) -> Token:
    """Make ctx the current context (until `leave` with the token returned)."""
    global running_count
    with _count_lock:
        running_count += 1
    return _current.set(ctx)


def leave(token: Token) -> None:
    global running_count
    _current.reset(token)
    with _count_lock:
        running_count -= 1


@contextmanager
def running(ctx: ExecutionContext) -> Iterator[ExecutionContext]:
    """Make ctx the current context for the block; one context at a time."""
    other = _current.get()
    if other is not None:
        raise RuntimeError(f"{ctx.name}: {other.name} is already running here (a trace or a "
                           f"capture cannot start inside another)")
    token = enter(ctx)
    try:
        yield ctx
    finally:
        leave(token)


# ---- autocast ---------------------------------------------------------------------------------
# `singa_tensor.amp.autocast` keeps its per-thread state here, below every layer that asks it:
# ops/_registry.py `apply` hands each op's arguments to the state's `cast_args` while a region is
# active, and the backward engine suspends it (a backward runs in the dtypes its forward chose).
_autocast: ContextVar[Any] = ContextVar("singa_tensor_autocast", default=None)
autocast_state = _autocast.get
# how many threads have an autocast region open: zero keeps apply's test to one integer
autocast_count = 0


def set_autocast(state) -> Token:
    """Make state (an object with `cast_args(spec, args)`, or None) this thread's autocast
    state until `reset_autocast` with the token returned."""
    global autocast_count
    token = _autocast.set(state)
    with _count_lock:
        autocast_count += 1
    return token


def reset_autocast(token: Token) -> None:
    global autocast_count
    _autocast.reset(token)
    with _count_lock:
        autocast_count -= 1


@contextmanager
def autocast_suspended() -> Iterator[None]:
    """No autocast casts for the block (the backward engine, functions run in float32)."""
    if not autocast_count or _autocast.get() is None:
        yield
        return
    token = set_autocast(None)
    try:
        yield
    finally:
        reset_autocast(token)
