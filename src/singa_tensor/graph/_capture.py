"""Recording one run of a step: every kernel call with the storages its pointer arguments fall
in, the storages born during the run, host reads of tensor values (they become guards), draws
from random generators (a replay draws again) and optimizer updates (a replay may run them
eagerly when their hyper-parameters changed).

The recorder is the execution context (`singa_tensor._execution`) for the length of one run:
ops hand it their kernels to wrap, their results to check and their host decisions, and
optimizers and collectives tell it where they run (a collective becomes one recorded call,
see _collective.py), and Tensor creation, host reads, random draws and the backends' host
writers report to it. Eager execution pays one integer test (`_execution.running_count`) on
those paths.
"""

from __future__ import annotations

import bisect
import gc
import os
import sys

import cffi
import numpy as np

from .._execution import ExecutionContext, current, enter, leave
from ..tensor import Tensor

_ffi = cffi.FFI()
_CData = _ffi.CData
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def address(p) -> int:
    return int(_ffi.cast("uintptr_t", p))


class GraphError(RuntimeError):
    """A step cannot be captured or replayed as asked (the message says why and what to do).

    Example:
        >>> import singa_tensor as st
        >>> issubclass(st.graph.GraphError, RuntimeError)
        True
    """


class Call:
    """One kernel call: refs lists (argument index, storage id, byte offset) for the pointer
    arguments that fall in a known storage; the others (shape arrays) are kept as they are.
    tables lists (argument index, entry, storage id, byte offset) for the entries of pointer
    tables (the optimizers' list kernels) that fall in one."""

    __slots__ = ("symbol", "fn", "args", "refs", "touched", "versions", "be", "tables")

    def __init__(self, symbol, fn, args, refs, touched, versions=None, be=None, tables=()):
        self.symbol, self.fn, self.args, self.refs, self.touched = (
            symbol, fn, args, refs, touched)
        self.be = be  # the backend whose kernel this is, when known
        # storage id -> its version counter when the call ran: equal counters at two calls
        # mean no in-place write in between
        self.versions = versions
        self.tables = tables


class Guard:
    """A host read at position `pos` (calls before it): replaying must see decide(read()) ==
    expected, or the step's Python code might take another path."""

    __slots__ = ("pos", "read", "decide", "expected", "storages", "where", "raw")

    def __init__(self, pos, read, decide, expected, storages, where, raw=None):
        self.pos, self.read, self.decide, self.expected = pos, read, decide, expected
        self.storages, self.where = storages, where
        # (a numpy view of the memory read, its bytes when recorded) when the host read the
        # values where they lie: equal bytes are equal values, checked without a tensor
        self.raw = raw

    def holds(self) -> bool:
        raw = self.raw
        if raw is not None and raw[0].tobytes() == raw[1]:
            return True
        value = self.read()
        got = self.decide(value) if self.decide is not None else np.array(value, copy=True)
        return _same(got, self.expected)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    return a == b


class RngTake:
    """A draw of `blocks` counter blocks from generator `gen`; the seed and offset it returned
    went into argument `arg` (and `arg` + 1) of call `call` (None: no kernel used them)."""

    __slots__ = ("gen", "blocks", "seed", "offset", "call", "arg")

    def __init__(self, gen, blocks, seed, offset):
        self.gen, self.blocks, self.seed, self.offset = gen, blocks, seed, offset
        self.call = self.arg = None


class Counter:
    """A step count on the host that an optimizer's step() advanced by one in each dict of
    `states` (all to the same value) before it launched call `call`, whose scalar arguments
    follow from the count: a replay advances the counts as step() would and has
    patch(args, count) rewrite that call's arguments."""

    __slots__ = ("call", "states", "key", "patch")

    def __init__(self, call, states, key, patch):
        self.call, self.states, self.key, self.patch = call, states, key, patch


class Update:
    """An optimizer.step() that ran between calls [start, end). `counters`: the step counts
    a replay advances itself (`Counter`); `counted` names them (id of the state dict, key),
    and the fingerprints leave them out."""

    __slots__ = ("optimizer", "start", "end", "before", "after", "grads", "counters",
                 "counted", "keys")

    def __init__(self, optimizer, start, before):
        self.optimizer, self.start, self.before = optimizer, start, before
        self.end = self.after = None
        self.grads: list = []
        self.counters: list[Counter] = []
        self.counted: frozenset = frozenset()
        self.keys = _state_keys(optimizer)


def _state_keys(optimizer) -> set:
    """(id of a state dict, key) of every value of the optimizer's state."""
    return {(id(st), k) for st in list(optimizer.state.values()) for k in st}


def fingerprint(optimizer, skip: frozenset = frozenset()) -> tuple:
    """The optimizer's scalar hyper-parameters and scalar per-parameter state: what its update
    kernels take as arguments and what step() changes on the host (Adam's step count), as
    (hyper-parameters of each group, ((id of a state dict, key, value), ...)); the state
    values named in `skip` (id of the state dict, key) are left out."""
    groups, states = [], []
    add = states.append
    state = optimizer.state
    for g in optimizer.param_groups:  # (a replay computes this once per step: no generators)
        groups.append(tuple([kv for kv in g.items() if kv[0] != "params" and (
            type(kv[1]) in _HYPER_EXACT or isinstance(kv[1], _HYPER_TYPES))]))
        for p in g["params"]:
            st = state.get(p)
            if st:
                for kv in st.items():  # most values are the state's tensors: skipped
                    v = kv[1]
                    if type(v) in _STATE_EXACT or (type(v) is not Tensor
                                                   and isinstance(v, _STATE_TYPES)):
                        if not skip or (id(st), kv[0]) not in skip:
                            add((id(st), kv[0], v))
    return tuple(groups), tuple(states)


_HYPER_TYPES = (int, float, bool, str, tuple)
# the common exact types first (an isinstance test of five types is the slow part); None
# counts too: a flag such as `foreach` set from None after recording changes the update
_HYPER_EXACT = frozenset(_HYPER_TYPES + (type(None),))
_STATE_TYPES = (int, float, bool)
_STATE_EXACT = frozenset(_STATE_TYPES)


def _where() -> str:
    """The op and the user's line that made a host read, for error messages."""
    inner = outer = None
    for frame in reversed(_stack()):
        fname = frame[0]
        inside = fname.startswith(_PACKAGE)
        if inside and inner is None and os.sep + "graph" + os.sep not in fname and \
                not fname.endswith("tensor.py"):
            inner = frame
        if not inside:
            outer = frame
            break
    parts = []
    if inner is not None:
        parts.append(f"{inner[2]} ({os.path.relpath(inner[0], _PACKAGE)}:{inner[1]})")
    if outer is not None:
        parts.append(f"called from {os.path.basename(outer[0])}:{outer[1]}")
    return " ".join(parts) or "a host read"


def _stack() -> list:
    f = sys._getframe(2)
    out = []
    while f is not None:
        out.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    out.reverse()
    return out


def _device_backends() -> list:
    """The loaded backend modules of devices other than the CPU (the CUDA backend, or a
    stand-in with its code)."""
    from .. import backend

    mods = []
    for be in list(backend._loaded.values()):
        mod = sys.modules.get(type(be).__module__) if not isinstance(be, type(sys)) else be
        if mod is not None and mod is not sys.modules.get("singa_tensor.backend.cpu") and \
                mod not in mods:
            mods.append(mod)
    return mods


def _storage_types() -> tuple:
    from ..backend import cpu

    types = [cpu.Storage]
    for mod in _device_backends():
        if hasattr(mod, "Storage"):
            types.append(mod.Storage)
    return tuple(types)


class Recording:
    """What one captured run produced."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.storages: list = []  # strong references while recording; id = position
        self.born: list[bool] = []
        self.guards: list[Guard] = []
        self.rng: list[RngTake] = []
        self.updates: list[Update] = []
        # storage id -> calls that wrote it, for storages from before the run: seen through
        # their version counters, which every in-place write bumps after its kernel returns
        self.writers: dict[int, set] = {}
        self.backends: dict = {}  # storage id -> backend, for storages born in the run
        self.devices: dict = {}
        # storages born with values written from the host (constants made from numpy, uploads):
        # no recorded call fills them, so they keep their memory and contents
        self.host_init: set[int] = set()


class Recorder(ExecutionContext):
    """Active for one run; `with Recorder() as rec:` then `rec.recording`."""

    name = "graph capture"
    pointer_tables = True

    def __init__(self) -> None:
        self.recording = Recording()
        self._sid: dict[int, int] = {}  # id(storage) -> storage id
        self._bases: list[int] = []  # sorted start addresses of known storages
        self._span: dict[int, tuple[int, int]] = {}  # start -> (end, storage id)
        self._wrapped: dict = {}
        self._reading = 0
        self._read_tensors: list = []
        self._open_updates: list[Update] = []
        self._version: dict[int, int] = {}
        self._copies: dict[int, tuple] = {}  # id(host storage) -> (device tensor, copy again)
        self._last_touch: dict[int, int] = {}
        # > 0 while a collective runs: what it does inside (staging copies, host reads) is
        # part of the one recorded call that stands for it
        self._quiet = 0

    # ---- storages ---------------------------------------------------------------------------
    def add_storage(self, storage, born: bool) -> int:
        sid = self._sid.get(id(storage))
        rec = self.recording
        if sid is not None and rec.storages[sid] is storage:
            return sid
        sid = len(rec.storages)
        rec.storages.append(storage)
        rec.born.append(born)
        self._sid[id(storage)] = sid
        start = address(storage.ptr)
        end = start + max(int(storage.nbytes), 1)
        if start not in self._span:
            bisect.insort(self._bases, start)
        # every storage seen is held until the run ends, so an address is reused only by a
        # storage that was never seen; the newer one wins
        self._span[start] = (end, sid)
        return sid

    def lookup(self, addr: int):
        i = bisect.bisect_right(self._bases, addr) - 1
        if i < 0:
            return None
        start = self._bases[i]
        end, sid = self._span[start]
        if addr >= end:
            return None
        return sid, addr - start

    # ---- kernels ----------------------------------------------------------------------------
    def wrap(self, fn, symbol: str, be=None):
        key = (id(fn), symbol)
        w = self._wrapped.get(key)
        if w is None:
            def w(*args, _fn=fn, _symbol=symbol, _be=be):
                out = _fn(*args)
                self.record(_symbol, _fn, args, _be)
                return out

            self._wrapped[key] = (w, fn)  # fn kept: its id stays unique
        else:
            w = w[0]
        return w

    def record(self, symbol: str, fn, args: tuple, be=None) -> None:
        if self._quiet:
            return
        refs, touched, tables = [], set(), []
        for i, a in enumerate(args):
            if not isinstance(a, _CData):
                continue
            t = _ffi.typeof(a)
            if t.kind == "array" and t.item.kind == "pointer":  # a table of buffer pointers
                for j in range(len(a)):
                    hit = self.lookup(address(a[j]))
                    if hit is not None:
                        tables.append((i, j, hit[0], hit[1]))
                        touched.add(hit[0])
            elif t.kind in ("pointer", "array"):
                hit = self.lookup(address(a))
                if hit is not None:
                    refs.append((i, hit[0], hit[1]))
                    touched.add(hit[0])
        rec = self.recording
        if symbol == "transfer":
            # (dst, src, nbytes): a copy of a constant from the host is a constant too
            where = {i: sid for i, sid, _ in refs}
            if where.get(1) in rec.host_init and 0 in where:
                rec.host_init.add(where[0])
        self._note_writes(touched)
        for take in rec.rng:
            if take.call is None:
                for i in range(len(args) - 1):
                    if args[i] == take.seed and args[i + 1] == take.offset and \
                            type(args[i]) is int:
                        take.call, take.arg = len(rec.calls), i
                        break
        storages = rec.storages
        rec.calls.append(Call(symbol, fn, args, refs, frozenset(touched),
                              {sid: storages[sid].version for sid in touched}, be,
                              tuple(tables)))

    def _note_writes(self, touched=()) -> None:
        rec = self.recording
        storages, born, seen, last = rec.storages, rec.born, self._version, self._last_touch
        for sid in list(seen):
            v = storages[sid].version
            if v != seen[sid]:
                rec.writers.setdefault(sid, set()).add(last[sid])
                seen[sid] = v
        n = len(rec.calls)
        for sid in touched:
            if not born[sid]:
                if sid not in seen:
                    seen[sid] = storages[sid].version
                last[sid] = n

    # ---- ops ---------------------------------------------------------------------------------
    # ---- the execution context's hooks -------------------------------------------------------
    def run_op(self, spec, node, args: tuple, attrs: dict):
        if self._quiet:
            return spec.forward(node, *args, **attrs)
        mark = self.mark()
        out = spec.forward(node, *args, **attrs)
        self.op_done(spec, mark, out)
        return out

    def kernel(self, fn, symbol: str, backend):
        return self.wrap(fn, symbol, backend)

    def collective(self, what: str, args: tuple, run) -> None:
        """Run the collective now, to completion, and record it as one call that runs it
        again on every replay (see graph/_collective.py)."""
        from ._collective import CollectiveCall, layout

        if self._quiet:  # a collective made by another one's run: part of that call
            run(args)
            return
        tensors: list = []
        spec = layout(args, tensors)
        sids = [self.add_storage(t._storage, False) for t in tensors]
        touched = frozenset(sids)
        # earlier in-place writes are settled first, so that the writes the collective makes
        # are put down to it
        self._note_writes(touched)
        self._quiet += 1
        try:
            run(args)
        finally:
            self._quiet -= 1
        storages = self.recording.storages
        specs = [(sid, t._shape, t._strides, t._offset, t.dtype, t._device, t._be)
                 for sid, t in zip(sids, tensors)]
        self.recording.calls.append(CollectiveCall(
            what, run, spec, specs, touched, {sid: storages[sid].version for sid in touched}))

    def host_communication(self, what: str, why: str) -> None:
        raise GraphError(f"graph capture: {what} cannot be recorded in graph mode (st.compile): "
                         f"{why}")

    def mark(self) -> tuple:
        return len(self.recording.calls), len(self.recording.storages)

    def op_done(self, spec, mark: tuple, out) -> None:
        """Refuse an op whose new result no recorded call wrote: its forward filled the memory
        some other way (its own C code through cffi, ctypes, ...), which a replay would skip,
        returning the recorded values again."""
        ncalls, nstorages = mark
        rec = self.recording
        written = None
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if not isinstance(t, Tensor) or t.numel() == 0:
                continue
            sid = self._sid.get(id(t._storage))
            if sid is None or sid < nstorages or sid in rec.host_init:
                continue  # older memory (a view, an in-place write) or values from the host
            if written is None:
                written = set().union(*(c.touched for c in rec.calls[ncalls:]))
            if sid not in written:
                raise GraphError(
                    f"graph capture: op {spec.name} made its result without a kernel call "
                    f"the recording can see (its forward writes memory directly, not through "
                    f"ops._registry.kernel); a replay would return the recorded values again. "
                    f"Launch its kernels through kernel(), or run this step without compile "
                    f"({_where()})")

    # ---- host reads -------------------------------------------------------------------------
    def host_read(self, t: Tensor, value) -> None:
        if self._quiet:
            return
        if self._reading:
            self._read_tensors.append(t)
            return
        source, read = self._source(t)
        expected = np.array(value, copy=True)
        raw = None
        held = getattr(t._storage, "array", None)  # a host storage's memory
        if source is t and isinstance(held, np.ndarray) and isinstance(value, np.ndarray) \
                and np.may_share_memory(value, held):
            raw = (value, expected.tobytes())
        self.recording.guards.append(Guard(
            len(self.recording.calls), lambda: read()._numpy(), None, expected,
            frozenset((self.add_storage(source._storage, False),)), _where(), raw))

    def _source(self, t: Tensor):
        """(the tensor whose values t holds, a function giving them again as a host tensor):
        t itself, or the device tensor t was copied from."""
        copy = self._copies.get(id(t._storage))
        if copy is None:
            return t, lambda: t
        src, again = copy
        return src, again

    def decision(self, read, decide):
        if self._quiet:
            return read()
        self._reading += 1
        mark = len(self._read_tensors)
        try:
            value = read()
        finally:
            self._reading -= 1
        tensors = self._read_tensors[mark:]
        del self._read_tensors[mark:]
        sids = frozenset(self.add_storage(self._source(t)[0]._storage, False) for t in tensors)
        self.recording.guards.append(Guard(len(self.recording.calls), read, decide,
                                           decide(value), sids, _where()))
        return value

    # ---- optimizer updates ------------------------------------------------------------------
    def begin_update(self, optimizer) -> None:
        self._open_updates.append(Update(optimizer, len(self.recording.calls),
                                         fingerprint(optimizer)))

    def end_update(self, optimizer) -> None:
        u = self._open_updates.pop()
        u.end = len(self.recording.calls)
        # a step that made state (a first step, a buffer for an option switched on) recorded
        # the calls that made it too: it runs eagerly on every replay, its counts uncounted
        if _state_keys(optimizer) != u.keys:
            u.counters = []
        u.counted = frozenset((id(s), c.key) for c in u.counters for s in c.states)
        if u.counted:
            u.before = (u.before[0], tuple(e for e in u.before[1]
                                           if (e[0], e[1]) not in u.counted))
        u.after = fingerprint(optimizer, u.counted)
        u.grads = [(p, p.grad) for g in optimizer.param_groups for p in g["params"]]
        self.recording.updates.append(u)

    def host_counter(self, states: list, key: str, patch) -> None:
        """The optimizer step being recorded advanced states[i][key] by one, then launched
        the latest call, whose arguments patch(args, count) sets for another count."""
        if self._quiet or not self._open_updates or not self.recording.calls:
            return
        self._open_updates[-1].counters.append(
            Counter(len(self.recording.calls) - 1, list(states), key, patch))

    # ---- memory and host traffic -----------------------------------------------------------
    def tensor_made(self, t: Tensor) -> None:
        # a collective's own tensors are left out: MPI's reduction of half-precision values
        # wraps MPI's buffers, the collective's own operands among them, and a storage seen
        # there would take their addresses over
        if id(t._storage) not in self._sid and not self._quiet:
            sid = self.add_storage(t._storage, True)
            self.recording.backends[sid] = t._be
            self.recording.devices[sid] = t._device

    def storage_refs(self, storage) -> int:
        sid = self._sid.get(id(storage))
        return int(sid is not None and self.recording.storages[sid] is storage)

    def host_written(self, storage) -> None:
        if self._quiet:
            return
        self.recording.host_init.add(self.add_storage(storage, True))

    def transferred(self, out: Tensor, src: Tensor, again) -> None:
        if self._quiet:
            return
        # The copy itself is recorded as a call (the backend launches it through kernel()),
        # so a replay copies the new values. A copy to the host is also how a device tensor's
        # values are read: a guard on it copies again, from the tensor it came from.
        self._copies[id(out._storage)] = (src, again)

    def random_drawn(self, generator, blocks: int, seed: int, offset: int) -> None:
        self.recording.rng.append(RngTake(generator, blocks, seed, offset))

    # ---- entering and leaving ---------------------------------------------------------------
    def __enter__(self) -> Recorder:
        if current() is not None:
            raise GraphError("graph capture: another capture is already recording (a compiled "
                             "step cannot call another compiled step)")
        types = _storage_types()
        for obj in gc.get_objects():
            if type(obj) in types:
                self.add_storage(obj, False)
        self._token = enter(self)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._note_writes()
        finally:  # eager execution must come back even when the recording failed
            leave(self._token)
            self._wrapped.clear()
