"""A progress thread for started MPI operations.

MPI moves a nonblocking operation's data only while some thread of the process is inside an
MPI call: a collective started with `async_op=True` and then left alone while the caller
computes sits still until the caller's `wait()`, so nothing overlaps. The thread here polls
the requests handed to it (MPI is initialized with MPI_THREAD_MULTIPLE, and mpi4py lets go of
the GIL inside each call) while the caller runs kernels, which let go of the GIL too.

Only the thread touches a request once it holds it: `Work.wait()` then sleeps on an event
instead of polling, and the completion steps (copies back into tensors, averaging) still run
on the caller's thread, in `Work.wait()`. The thread sleeps when it holds no request, and
gives its core away between rounds of polls, so ranks that oversubscribe the cores still get
their compute done. A request nobody waits for is dropped once its timeout passes (its
buffers are kept alive, as for a wait that timed out).

`SINGA_DIST_PROGRESS_THREAD=0` turns the thread off (async operations then progress only
inside `wait()` and `is_completed()`, as before).
"""

from __future__ import annotations

import atexit
import collections
import os
import threading
import time
from typing import Callable


def enabled_by_env() -> bool:
    """False when SINGA_DIST_PROGRESS_THREAD is set to 0/false/no/off."""
    value = os.environ.get("SINGA_DIST_PROGRESS_THREAD", "1").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("", "1", "true", "yes", "on"):
        return True
    raise ValueError(f"SINGA_DIST_PROGRESS_THREAD must be 0 or 1, got {value!r}")


class Ticket:
    """One operation the thread drives: `test()` polls it (True once complete); `event` is set
    when it completed or failed (`error` then holds the exception); `cancelled` tells the thread
    to drop it; `keep` holds the buffers MPI reads and writes until then."""

    __slots__ = ("test", "event", "error", "cancelled", "keep", "deadline", "on_drop")

    def __init__(self, test: Callable[[], bool], keep, deadline: float,
                 on_drop: Callable[[], None] | None):
        self.test = test
        self.event = threading.Event()
        self.error: BaseException | None = None
        self.cancelled = False
        self.keep = keep
        self.deadline = deadline
        self.on_drop = on_drop


class ProgressThread:
    """The process's one progress thread, started on the first `submit()`.

    Example:
        >>> from singa_tensor.distributed._progress import ProgressThread
        >>> engine = ProgressThread()
        >>> ticket = engine.submit(lambda: True, None, timeout=1.0)
        >>> ticket.event.wait(5.0), ticket.error
        (True, None)
        >>> engine.stop()
    """

    # polls of every held request between two yields of the core
    ROUND = 8

    def __init__(self) -> None:
        self._incoming: collections.deque = collections.deque()
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._pid = None
        self._stopping = False
        self._abandon = False
        self.completed = 0  # operations this thread saw complete (for tests and benchmarks)

    def submit(self, test: Callable[[], bool], keep, timeout: float,
               on_drop: Callable[[], None] | None = None) -> Ticket:
        """Hand over an operation: from now on only the thread calls `test`."""
        ticket = Ticket(test, keep, time.monotonic() + timeout, on_drop)
        with self._wake:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._start()
            self._incoming.append(ticket)
            self._wake.notify()
        return ticket

    def _start(self) -> None:
        self._stopping = self._abandon = False
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._loop, name="singa-dist-progress",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread (after the operations it holds, or after `timeout` seconds), so
        that no thread is inside MPI when it is finalized."""
        thread = self._thread
        if thread is None or self._pid != os.getpid():
            return
        with self._wake:
            self._stopping = True
            self._wake.notify()
        thread.join(timeout)
        if thread.is_alive():  # operations that never complete: leave them at the next round
            self._abandon = True
            thread.join(0.1)
        self._thread = None

    def _loop(self) -> None:
        held: list = []
        incoming = self._incoming
        yield_ = os.sched_yield
        clock = time.monotonic
        while True:
            if not held:
                with self._wake:
                    while not incoming and not self._stopping:
                        self._wake.wait()
                    if self._stopping and not incoming:
                        return
            while incoming:
                held.append(incoming.popleft())
            for _ in range(self.ROUND):
                kept = []
                for t in held:
                    if t.cancelled:
                        t.keep = t.test = t.on_drop = None
                        continue
                    try:
                        done = t.test()
                    except BaseException as e:  # noqa: BLE001 - handed to the waiter
                        t.error, done = e, True
                    if done:
                        # nothing of the operation stays referenced from here: its buffers
                        # may be freed as soon as the caller lets go of them
                        t.keep = t.test = t.on_drop = None
                        self.completed += 1
                        t.event.set()
                    else:
                        kept.append(t)
                held = kept
                if not held:
                    break
            if held:
                now = clock()
                for t in held:
                    if now > t.deadline and not t.cancelled:
                        # nobody waited in time: MPI may still write into the buffers, which
                        # on_drop keeps alive; the waiter, if one comes, gets the timeout
                        t.cancelled = True
                        if t.on_drop is not None:
                            t.on_drop()
                        t.keep = t.test = t.on_drop = None
                held = [t for t in held if not t.cancelled]
                if self._abandon:
                    return
                yield_()


_engine: ProgressThread | None = None


def engine() -> ProgressThread:
    """The process's progress thread (stopped at exit, before MPI is finalized)."""
    global _engine
    if _engine is None:
        _engine = ProgressThread()
        atexit.register(_engine.stop)
    return _engine
