"""Eager and graph side by side: run one step both ways from the same state and name the first
kernel call whose results differ (CPU memory only)."""

from __future__ import annotations

import numpy as np

from .. import random as _random
from ..ops._registry import copy_into
from ..tensor import Tensor
from ._capture import GraphError, Recorder, _ffi, address

_LIMIT = 1 << 20  # bytes compared per argument of a call


def _bytes_at(p, n: int) -> bytes:
    return bytes(_ffi.buffer(_ffi.cast("char *", address(p)), n))


class _Snapshots(Recorder):
    """A recorder that also keeps, after each call, the bytes behind its pointer arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.after: list[list] = []

    def add_storage(self, storage, born: bool) -> int:
        # fresh memory starts at zero on both sides, so bytes a step never writes compare equal
        if born and id(storage) not in self._sid:
            _zero(storage)
        return super().add_storage(storage, born)

    def record(self, symbol, fn, args, be=None):
        n = len(self.recording.calls)
        super().record(symbol, fn, args, be)
        if len(self.recording.calls) == n:  # inside a collective: part of its call
            return
        c = self.recording.calls[-1]
        rec = self.recording
        self.after.append([(i, _bytes_at(args[i], min(_LIMIT, int(rec.storages[sid].nbytes)
                                                      - off)))
                           for i, sid, off in c.refs])


    def collective(self, what, args, run):
        n = len(self.recording.calls)
        super().collective(what, args, run)
        if len(self.recording.calls) > n:
            self.after.append([])  # its buffers are compared at the calls that read them


def _zero(storage) -> None:
    _ffi.memmove(_ffi.cast("char *", address(storage.ptr)), bytes(int(storage.nbytes)),
                 int(storage.nbytes))


def _state(entry) -> tuple:
    keep = entry.graph.held()
    saved = [bytes(_ffi.buffer(_ffi.cast("char *", address(s.ptr)), int(s.nbytes)))
             for s in keep]
    gens = {id(t.gen): (t.gen, t.gen.get_state()) for t in entry.graph.rng}
    gens[id(_random.default_generator)] = (_random.default_generator,
                                           _random.default_generator.get_state())
    return keep, saved, list(gens.values())


def _restore(state) -> None:
    keep, saved, gens = state
    for s, data in zip(keep, saved):
        _ffi.memmove(_ffi.cast("char *", address(s.ptr)), data, len(data))
    for gen, st in gens:
        gen.set_state(st)


def compare(entry, args: tuple) -> str | None:
    """None when a replay of entry's graph on args gives, call by call, the bytes eager
    execution gives; else a description of the first call that differs. Leaves the state as
    the eager run left it."""
    graph = entry.graph
    from ..backend import cpu

    if any(type(s) is not cpu.Storage for s in graph.held()) or \
            any(type(a._storage) is not cpu.Storage for a in graph.arenas.values()):
        raise GraphError("compare: the side-by-side comparison reads memory on the host and "
                         "works for CPU steps only")
    for static, a in zip(entry.static, args):
        if isinstance(a, Tensor):
            copy_into(a.detach(), static)
    state = _state(entry)
    snap = _Snapshots()
    with snap:
        entry.step.fn(*entry.static)
    calls = snap.recording.calls
    if len(calls) != len(graph.calls):
        return (f"eager ran {len(calls)} kernel calls, the graph {len(graph.calls)}: the "
                f"step's Python code took another path")
    for k, c in enumerate(calls):
        if graph.calls[k][2] != c.symbol:
            return f"call {k}: eager ran {c.symbol}, the graph {graph.calls[k][2]}"
    eager_state = _state(entry)
    _restore(state)
    try:
        return _first_difference(graph, snap.after)
    finally:
        _restore(eager_state)


def _first_difference(graph, after) -> str | None:
    graph.draw_again()
    graph.restore_grads(graph.updates)
    for arena in graph.arenas.values():
        _zero(arena._storage)
    for sid in graph.born_kept:
        _zero(graph.keep[sid])
    for k, (fn, cargs, symbol) in enumerate(graph.calls):
        fn(*cargs)
        for i, want in after[k]:
            got = _bytes_at(cargs[i], len(want))
            if got != want:
                return f"call {k} ({symbol}), argument {i}: {_difference(symbol, want, got)}"
    return None


def _difference(symbol: str, want: bytes, got: bytes) -> str:
    n = sum(x != y for x, y in zip(want, got))
    dtype = np.dtype(np.float64 if symbol.endswith("f64") else np.float32)
    k = len(want) // dtype.itemsize * dtype.itemsize
    a, b = np.frombuffer(want[:k], dtype), np.frombuffer(got[:k], dtype)
    with np.errstate(all="ignore"):
        worst = float(np.nanmax(np.abs(a - b))) if k else 0.0
    return f"{n} bytes differ from eager (as {dtype.name}, max difference {worst:.3g})"
