"""SINGA's worker-group / server-group training: server ranks hold slices of the parameters and
apply the optimizer; workers push gradients and pull parameters with non-blocking messages.

The last K ranks of the world are servers, the rest are workers. Workers form groups: inside a
group gradients are all-reduced synchronously and only the group's leader (its first rank)
talks to the servers, so groups run asynchronously with respect to each other (SINGA's hybrid).
Three consistency modes decide when a server applies a gradient and when it answers a pull:

- ``bsp``: a server steps once every group has pushed (the gradients are averaged, each group
  weighted by its number of workers, so that unequal groups train as all-reduce would), and a
  pull waits for that step, so every worker holds the same version.
- ``downpour``: each push is applied at once; a pull returns whatever is current.
- ``ssp``: pushes are applied at once, but a pull at clock t waits until the slowest group has
  pushed t - staleness steps, so no worker runs more than `staleness` steps ahead.

Wire protocol (all on the world communicator; messages between a pair of ranks with one tag
arrive in order, which is what keeps a header and its payload together):
a header ``[kind, clock]`` with tag ``_CTRL``, then for a push one message per slice with tag
``_grad_tag(slice)``; a pull is answered with ``[version, min_clock]`` on ``_REPLY`` and one
message per slice on ``_param_tag(slice)``. Payloads travel as raw bytes, so any dtype works.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..autograd import no_grad
from ..tensor import Tensor
from ._mpi import _host_tensor, _raw_view

__all__ = ["MODES", "ParameterServer", "Slice", "plan_slices"]

MODES = ("bsp", "downpour", "ssp")

_CTRL, _REPLY = 1, 2
_PUSH, _PULL, _STOP = 1, 2, 3


def _grad_tag(slice_id: int) -> int:
    return 16 + 2 * slice_id


def _param_tag(slice_id: int) -> int:
    return 17 + 2 * slice_id


@dataclass(frozen=True)
class Slice:
    """Rows ``[start, stop)`` of parameter ``param`` (viewed as ``(rows, -1)``), held by the
    server with ordinal ``server`` (0 is the first server rank)."""

    index: int
    param: int
    start: int
    stop: int
    server: int
    numel: int


def _rows(shape: tuple) -> tuple[int, int]:
    n = math.prod(shape)
    rows = shape[0] if len(shape) >= 1 and shape[0] > 0 else 1
    return rows, n // rows if rows else 0


def plan_slices(shapes: Iterable[tuple], servers: int) -> list[Slice]:
    """Split parameters of the given shapes over `servers` servers, balancing the element
    counts: a parameter larger than a fair share is cut by rows, then pieces go, largest first,
    to the least-loaded server. Every rank computes the same plan from the same shapes.

    Example:
        >>> from singa_tensor.distributed.parameter_server import plan_slices
        >>> [(s.param, s.start, s.stop, s.server) for s in plan_slices([(4, 2), (3,)], 2)]
        [(0, 0, 3, 0), (0, 3, 4, 1), (1, 0, 3, 1)]
    """
    shapes = [tuple(s) for s in shapes]
    if servers < 1:
        raise ValueError(f"plan_slices: need at least one server, got {servers}")
    total = sum(math.prod(s) for s in shapes)
    share = max(1, -(-total // servers))
    pieces = []
    for p, shape in enumerate(shapes):
        rows, width = _rows(shape)
        step = rows if rows * width <= share or width == 0 else max(1, share // width)
        for start in range(0, rows, step):
            stop = min(rows, start + step)
            pieces.append((p, start, stop, (stop - start) * width))
    load = [0] * servers
    owner = {}
    # largest first, ties by position, so the plan is the same on every rank
    for p, start, _stop, n in sorted(pieces, key=lambda x: (-x[3], x[0], x[1])):
        s = min(range(servers), key=lambda k: (load[k], k))
        load[s] += n
        owner[(p, start)] = s
    return [Slice(i, p, start, stop, owner[(p, start)], n)
            for i, (p, start, stop, n) in enumerate(pieces)]


def _host(t: Tensor) -> np.ndarray:
    """A contiguous host copy of t's elements as stored (bfloat16 as its uint16 bits), which is
    what travels: the wire and the slicing never interpret the values."""
    h = t.detach()
    if not hasattr(h._be, "view_numpy"):
        h = h.cpu()
    return np.array(_raw_view(h), copy=True, order="C")


def _tensor(a: np.ndarray, dtype) -> Tensor:
    """A CPU tensor of dtype over a copy of the raw elements in a."""
    return _host_tensor(np.array(a, copy=True), dtype)


def _write(t: Tensor, a: np.ndarray) -> None:
    """Overwrite t's values with the raw elements a (bumping its version, on any device)."""
    with no_grad():
        t.copy_(_tensor(a, t.dtype).to(t.device))


def _mean(arrays: list, dtype, weights: list) -> np.ndarray:
    """The element-wise mean of raw arrays of dtype weighted by `weights` (each group's worker
    count, so that every worker counts once), computed by our ops (half precision accumulates
    in float32), as raw elements again."""
    acc = None
    for a, w in zip(arrays, weights):
        x = _tensor(a, dtype)
        if dtype.itemsize == 2:
            x = x.float()
        if w != 1:
            x = x * float(w)
        acc = x if acc is None else acc + x
    acc = acc / float(sum(weights))
    return _host(acc.to(dtype) if acc.dtype is not dtype else acc)


def _pause(waited: float) -> None:
    """Between polls of a message: give the core away at once for the first 20 ms (a reply
    usually comes within them, and a sleep of even 1 ms per exchange made steps 2x slower),
    then sleep, longer the longer the wait, up to 2 ms."""
    if waited < 0.02:
        os.sched_yield()
    else:
        time.sleep(min(2e-3, waited / 20))


def _as_bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


class ParameterServer:
    """Train with server ranks that hold the parameters and worker ranks that compute gradients.

    Every rank builds the same model and calls the constructor (it broadcasts rank 0's initial
    parameters). Server ranks then call `run_server()`; workers call `step(loss)` per batch
    and `close()` at the end.

    Args:
        model_or_params: a Module (its parameters()) or a list of parameter tensors.
        optimizer_factory: called on each server with the list of its slice tensors, returns the
            optimizer that updates them, e.g. ``lambda ps: optim.SGD(ps, lr=0.1)``.
        mode: "bsp", "downpour" or "ssp".
        staleness: for "ssp", how many steps a worker may run ahead of the slowest group.
        servers: how many of the last ranks are servers (default: env SINGA_DIST_SERVERS or 1).
        groups: how many worker groups (default: every worker is its own group).
        timeout: seconds to wait for any message before raising (default: env
            SINGA_DIST_TIMEOUT or 300).

    Example (run under ``mpiexec -n 3``)::

        ps = ParameterServer(model, lambda p: optim.SGD(p, lr=0.1), mode="bsp")
        if ps.is_server:
            ps.run_server()
        else:
            for x, y in loader:
                ps.step(F.mse_loss(model(x), y))
            ps.close()
    """

    def __init__(self, model_or_params, optimizer_factory: Callable[[list[Tensor]], object],
                 mode: str = "bsp", staleness: int = 2, servers: int | None = None,
                 groups: int | None = None, timeout: float | None = None) -> None:
        name = "ParameterServer"
        if mode not in MODES:
            raise ValueError(f"{name}: unknown mode {mode!r} (expected one of "
                             f"{', '.join(MODES)})")
        if isinstance(staleness, bool) or not isinstance(staleness, int) or staleness < 0:
            raise ValueError(f"{name}: staleness must be an int >= 0, got {staleness!r}")
        if not callable(optimizer_factory):
            raise TypeError(f"{name}: optimizer_factory must be callable (list of tensors -> "
                            f"optimizer), got {type(optimizer_factory).__name__}")
        params = (list(model_or_params.parameters()) if hasattr(model_or_params, "parameters")
                  else list(model_or_params))
        if not params or not all(isinstance(p, Tensor) for p in params):
            raise TypeError(f"{name}: needs a model or a non-empty list of parameter tensors")
        if servers is None:
            servers = int(os.environ.get("SINGA_DIST_SERVERS", "1"))
        if timeout is None:
            timeout = float(os.environ.get("SINGA_DIST_TIMEOUT", "300"))
        if timeout <= 0:
            raise ValueError(f"{name}: timeout must be positive, got {timeout}")
        from singa_tensor import distributed as dist  # here: the package imports this module

        if not dist.is_initialized():
            dist.init_process_group()
        world = dist.get_world_size()
        if isinstance(servers, bool) or not isinstance(servers, int) or not 1 <= servers < world:
            raise ValueError(f"{name}: servers={servers!r} must be at least 1 and less than the "
                             f"world size {world} (at least one rank must be a worker)")
        n_workers = world - servers
        if groups is None:
            groups = n_workers
        if isinstance(groups, bool) or not isinstance(groups, int) or \
                not 1 <= groups <= n_workers:
            raise ValueError(f"{name}: groups={groups!r} must be between 1 and the number of "
                             f"workers {n_workers}")
        self.mode, self.staleness, self.timeout = mode, staleness, float(timeout)
        self.params, self._dist = params, dist
        # a communicator of our own, so no other point-to-point traffic can match our tags
        self._mpi = dist.get_communicator().mpi.Dup()
        self.rank, self.world_size = dist.get_rank(), world
        self.server_ranks = list(range(n_workers, world))
        self.is_server = self.rank >= n_workers
        self.slices = plan_slices([tuple(p.shape) for p in params], servers)
        self.group_ranks = [list(map(int, g)) for g in np.array_split(range(n_workers), groups)]
        self.leaders = [g[0] for g in self.group_ranks]
        # SSP bookkeeping, for tests and logs: (clock, slowest clock) seen at each pull
        self.clock_log: list[tuple[int, int, int]] = []
        self.clock = 0
        self._sends: list = []
        self._closed = False
        # payload bytes this rank sent (messages, and collectives within its worker group):
        # in all, and in the latest step()
        self.bytes_sent = 0
        self.last_bytes_sent = 0

        for p in params:
            dist.broadcast(p, 0)
        handles = [dist.new_group(g) for g in self.group_ranks]
        self._group, self._group_size, self.is_leader = None, 1, False
        for g, h in zip(self.group_ranks, handles):
            if self.rank in g:
                self._group, self._group_size = h, len(g)
                self._leader = g[0]
                self.is_leader = self.rank == g[0]
        if self.is_server:
            ordinal = self.rank - n_workers
            self._mine = [s for s in self.slices if s.server == ordinal]
            self._values = [_tensor(self._view(s), params[s.param].dtype).requires_grad_(True)
                            for s in self._mine]
            self.optimizer = optimizer_factory(self._values) if self._values else None
        self.version = 0  # on a server: how many steps its slices have taken

    # ---- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """This rank's part of the training state: on a server its parameter slices, their
        optimizer state and its step count; on a worker its clock (the model's parameters are
        the worker's own `model.state_dict()`). Each rank saves its own, e.g. to
        f"ckpt-rank{rank}.pt"; call it after close() (workers) or run_server() (servers).

        Example:
            >>> # on a server rank of a run under mpiexec, after run_server():
            >>> sorted(ps.state_dict())  # doctest: +SKIP
            ['optimizer', 'rank', 'role', 'slices', 'values', 'version']
        """
        if not self.is_server:
            return {"rank": self.rank, "role": "worker", "clock": self.clock}
        return {"rank": self.rank, "role": "server", "version": self.version,
                "slices": [[s.param, s.start, s.stop] for s in self._mine],
                "values": [v.detach().clone() for v in self._values],
                "optimizer": None if self.optimizer is None else self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict() returned on this rank, before training resumes (before
        run_server() or the first step()). The world, the number of servers and the model's
        shapes must be those of the run that saved it: a server's slices are checked."""
        name = "ParameterServer.load_state_dict"
        if not isinstance(state, dict) or state.get("role") not in ("server", "worker"):
            raise ValueError(f"{name}: expected a dict from ParameterServer.state_dict()")
        role = "server" if self.is_server else "worker"
        if state["role"] != role or state.get("rank") != self.rank:
            raise ValueError(f"{name}: the state was saved by {state['role']} rank "
                             f"{state.get('rank')}, but this is {role} rank {self.rank}")
        if not self.is_server:
            self.clock = int(state["clock"])
            return
        mine = [[s.param, s.start, s.stop] for s in self._mine]
        if [list(map(int, x)) for x in state["slices"]] != mine:
            raise ValueError(f"{name}: the saved slices {state['slices']} are not this server's "
                             f"{mine} (a different world size, server count or model)")
        with no_grad():
            for v, saved in zip(self._values, state["values"]):
                if tuple(saved.shape) != tuple(v.shape) or saved.dtype is not v.dtype:
                    raise ValueError(f"{name}: a saved slice has shape {tuple(saved.shape)} "
                                     f"{saved.dtype.name}, expected {tuple(v.shape)} "
                                     f"{v.dtype.name}")
                v.copy_(saved)
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        self.version = int(state["version"])

    # ---- helpers ---------------------------------------------------------------------------
    def _view(self, s: Slice) -> np.ndarray:
        p = self.params[s.param]
        return _host(p).reshape(_rows(tuple(p.shape))[0], -1)[s.start:s.stop]

    def _error(self, message: str) -> Exception:
        role = "server" if self.is_server else "worker"
        return self._dist.DistributedError(f"ParameterServer ({role} rank {self.rank}): {message}")

    def _wait(self, requests: list, what: str) -> None:
        """Complete the requests, polling with a growing sleep so oversubscribed ranks share
        the cores, and raise instead of hanging."""
        if not requests:
            return
        from mpi4py import MPI
        start = time.monotonic()
        deadline = start + self.timeout
        while not MPI.Request.Testall(requests):
            now = time.monotonic()
            if now > deadline:
                for r in requests:  # so that MPI can still shut down cleanly
                    if not r.Test():
                        r.Cancel()
                raise self._error(f"timed out after {self.timeout:g} s waiting for {what}")
            _pause(now - start)

    def _flush_sends(self) -> None:
        sends, self._sends = self._sends, []
        self._wait([r for r, _ in sends], "sends to complete")

    def _isend(self, array: np.ndarray, dest: int, tag: int) -> None:
        buf = _as_bytes(array)
        self._sends.append((self._mpi.Isend(buf, dest=dest, tag=tag), buf))
        self.bytes_sent += buf.nbytes

    def _require_worker(self, what: str) -> None:
        if self.is_server:
            raise RuntimeError(f"ParameterServer.{what}: rank {self.rank} is a server; call "
                               f"run_server() there")
        if self._closed:
            raise RuntimeError(f"ParameterServer.{what}: this worker is closed")

    def _not_in_graph(self, what: str) -> None:
        from . import _on_host

        _on_host(f"ParameterServer.{what}", "the servers answer on the host, and when (the "
                 "consistency mode's clocks) decides what a worker gets; call it outside the "
                 "step: compile the forward and backward, then push and pull")

    # ---- workers ---------------------------------------------------------------------------
    def push_gradients(self) -> None:
        """Send this group's averaged gradients to the servers (missing ones count as zero),
        then clear the local gradients."""
        self._require_worker("push_gradients")
        self._not_in_graph("push_gradients")
        grads = []
        for p in self.params:
            g = p.grad
            grads.append(np.zeros(tuple(p.shape), dtype=p.dtype.storage) if g is None
                         else _host(g))
            p.grad = None
        if self._group_size > 1:
            for i, g in enumerate(grads):
                t = _tensor(g, self.params[i].dtype)
                self._dist.all_reduce(t, op=self._dist.ReduceOp.AVG, group=self._group)
                self.bytes_sent += g.nbytes
                grads[i] = _host(t)
        self.clock += 1
        if not self.is_leader:
            return
        self._flush_sends()
        for k, server in enumerate(self.server_ranks):
            self._isend(np.array([_PUSH, self.clock], dtype=np.int64), server, _CTRL)
            for s in self.slices:
                if s.server == k:
                    rows = _rows(tuple(self.params[s.param].shape))[0]
                    self._isend(grads[s.param].reshape(rows, -1)[s.start:s.stop], server,
                                _grad_tag(s.index))

    def pull_parameters(self) -> None:
        """Fetch the servers' parameters into the model (waiting as the mode requires); the
        group leader then shares them with its group."""
        self._require_worker("pull_parameters")
        self._not_in_graph("pull_parameters")
        hosts = [_host(p) for p in self.params]
        if self.is_leader:
            recvs, replies = [], []
            for k, server in enumerate(self.server_ranks):
                self._isend(np.array([_PULL, self.clock], dtype=np.int64), server, _CTRL)
                reply = np.zeros(2, dtype=np.int64)
                replies.append(reply)
                recvs.append(self._mpi.Irecv(_as_bytes(reply), source=server, tag=_REPLY))
                for s in self.slices:
                    if s.server == k:
                        buf = self._view(s).copy()
                        recvs.append(self._mpi.Irecv(_as_bytes(buf), source=server,
                                                     tag=_param_tag(s.index)))
                        replies.append((s, buf))
            self._wait(recvs, "parameters from the servers")
            self._flush_sends()
            for item in replies:
                if isinstance(item, np.ndarray):
                    self.clock_log.append((self.rank, self.clock, int(item[1])))
                else:
                    s, buf = item
                    rows = _rows(tuple(self.params[s.param].shape))[0]
                    hosts[s.param].reshape(rows, -1)[s.start:s.stop] = buf
        for p, h in zip(self.params, hosts):
            if self._group_size > 1:
                t = _tensor(h, p.dtype)
                self._dist.broadcast(t, self._leader, group=self._group)
                if self.is_leader:
                    self.bytes_sent += h.nbytes
                h = _host(t)
            _write(p, h)

    def step(self, loss: Tensor) -> float:
        """Backward from `loss`, push the gradients, pull the new parameters; the loss value.
        `last_bytes_sent` then holds the payload bytes this step sent (gradients and
        requests to the servers, and the group's all-reduce and broadcast)."""
        self._require_worker("step")
        self._not_in_graph("step")
        before = self.bytes_sent
        loss.backward()
        self.push_gradients()
        self.pull_parameters()
        self.last_bytes_sent = self.bytes_sent - before
        return float(loss.item())

    def close(self) -> None:
        """Tell the servers this worker is done (leaders only; safe to call twice)."""
        if self.is_server or self._closed:
            return
        self._closed = True
        if self.is_leader:
            for server in self.server_ranks:
                self._isend(np.array([_STOP, self.clock], dtype=np.int64), server, _CTRL)
            self._flush_sends()

    # ---- servers ---------------------------------------------------------------------------
    def run_server(self) -> None:
        """Serve pushes and pulls until every group leader has sent its stop."""
        if not self.is_server:
            raise RuntimeError(f"ParameterServer.run_server: rank {self.rank} is a worker")
        from mpi4py import MPI
        clients = list(self.leaders)
        size = {g[0]: len(g) for g in self.group_ranks}  # a group's gradient is its mean
        active = set(clients)
        pushes = dict.fromkeys(clients, 0)
        queued: dict[int, deque] = {c: deque() for c in clients}
        pulls: list[int] = []
        header = np.zeros(2, dtype=np.int64)
        status = MPI.Status()
        while active or pulls:
            req = self._mpi.Irecv(_as_bytes(header), source=MPI.ANY_SOURCE, tag=_CTRL)
            start = time.monotonic()
            deadline = start + self.timeout
            while not req.Test(status):
                now = time.monotonic()
                if now > deadline:
                    req.Cancel()
                    raise self._error(f"no message from any worker for {self.timeout:g} s "
                                      f"(still waiting on ranks {sorted(active)})")
                _pause(now - start)
            src, kind = status.Get_source(), int(header[0])
            if src not in pushes:
                raise self._error(f"message from rank {src}, which is not a group leader")
            if kind == _PUSH:
                grads = [np.empty(tuple(v.shape), v.dtype.storage) for v in self._values]
                self._wait([self._mpi.Irecv(_as_bytes(g), source=src, tag=_grad_tag(s.index))
                            for g, s in zip(grads, self._mine)], f"gradients from rank {src}")
                pushes[src] += 1
                if self.mode == "bsp":
                    queued[src].append(grads)
                else:
                    self._apply(grads)
            elif kind == _PULL:
                pulls.append(src)
            elif kind == _STOP:
                active.discard(src)
            else:
                raise self._error(f"unknown message kind {kind} from rank {src}")
            if self.mode == "bsp":
                while active and all(queued[c] for c in active):
                    batch = [queued[c].popleft() for c in active]
                    weights = [size[c] for c in active]
                    self._apply([_mean([g[i] for g in batch], v.dtype, weights)
                                 for i, v in enumerate(self._values)])
            slowest = min((pushes[c] for c in active), default=None)
            waiting = []
            for c in pulls:
                ready = (self.mode == "downpour" or not active
                         or (self.mode == "bsp" and not queued[c])
                         or (self.mode == "ssp" and slowest >= pushes[c] - self.staleness))
                if ready:
                    low = pushes[c] if slowest is None else slowest
                    self.clock_log.append((c, pushes[c], low))
                    self._reply(c, low)
                else:
                    waiting.append(c)
            pulls = waiting
            if len(self._sends) > 64:
                self._sends = [(r, b) for r, b in self._sends if not r.Test()]
        self._flush_sends()

    def _apply(self, grads: list[np.ndarray]) -> None:
        for v, g in zip(self._values, grads):
            v.grad = _tensor(g, v.dtype)
        if self.optimizer is not None:
            self.optimizer.step()
        self.version += 1

    def _reply(self, client: int, slowest: int) -> None:
        self._isend(np.array([self.version, slowest], dtype=np.int64), client, _REPLY)
        for v, s in zip(self._values, self._mine):
            self._isend(_host(v), client, _param_tag(s.index))
