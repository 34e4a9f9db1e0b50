"""A recorded step made replayable: storages that outlive the step are kept, the ones that die
inside it are packed into one arena by their lifetimes, guards are checked (early when they
depend on the inputs only), random draws are taken again, and optimizer updates whose
hyper-parameters changed run eagerly.
"""

from __future__ import annotations

import gc
import weakref

from .. import creation as _creation
from .. import dtype as _dt
from ..tensor import Tensor
from ._capture import GraphError, Guard, Recording, _ffi, address, fingerprint
from ._collective import CollectiveCall
from ._cudagraph import into_segments
from ._remat import rematerialize, renumber

_ALIGN = 64


class Block:
    """A temporary's place in the arena: bytes [offset, offset + nbytes), live from call
    `first` to call `last` (inclusive)."""

    __slots__ = ("sid", "nbytes", "first", "last", "offset", "be", "device")

    def __init__(self, sid, nbytes, first, last, be, device):
        self.sid, self.nbytes, self.first, self.last = sid, nbytes, first, last
        self.be, self.device = be, device
        self.offset = -1


def plan_blocks(blocks: list[Block]) -> int:
    """Give every block an offset so that blocks alive at the same time never overlap; the
    arena size. Largest first, each at the lowest gap among the blocks that overlap it in
    time (greedy best fit, the usual heuristic for this NP-hard packing)."""
    placed: list[Block] = []
    for b in sorted(blocks, key=lambda b: (-b.nbytes, b.first)):
        busy = sorted((p.offset, p.offset + p.nbytes) for p in placed
                      if p.first <= b.last and b.first <= p.last)
        at = 0
        for start, end in busy:
            if start - at >= b.nbytes:
                break
            at = max(at, (end + _ALIGN - 1) // _ALIGN * _ALIGN)
        b.offset = at
        placed.append(b)
    return max((b.offset + b.nbytes for b in blocks), default=0)


def check_plan(blocks: list[Block]) -> None:
    """Raise GraphError if two blocks alive at the same time share a byte."""
    order = sorted(blocks, key=lambda b: b.offset)
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if b.offset >= a.offset + a.nbytes:
                break
            if a.first <= b.last and b.first <= a.last and a.be is b.be:
                raise GraphError(f"graph memory plan: temporaries {a.sid} and {b.sid} overlap "
                                 f"in the arena while both are alive")


class Graph:
    """The replayable form of one Recording (see singa_tensor.graph.compile)."""

    def __init__(self, rec: Recording, backends: dict, devices: dict, inputs: set,
                 plan_memory: bool = True, poison: bool = False, fuse_fn=None,
                 recompute: bool = True, cuda_graphs: bool = True) -> None:
        calls = rec.calls
        touched = set()
        for c in calls:
            touched |= c.touched
        for g in rec.guards:
            touched |= g.storages
        # which storages outlive the run: drop every reference the recording holds and see
        # what survives (parameters, gradients, optimizer state, outputs, guard closures)
        # Storages from before the step and those filled from the host in it (constants) keep
        # their memory and contents; a storage born in the step that nothing references any
        # more is a temporary, whose memory the plan may share.
        born = rec.born
        self.keep = {}
        refs = {}
        for sid in touched:
            s = rec.storages[sid]
            if not born[sid] or sid in rec.host_init:
                self.keep[sid] = s
                continue
            try:
                refs[sid] = weakref.ref(s)
            except TypeError:  # a storage type without weak references: keep it
                self.keep[sid] = s
        nbytes = {sid: int(rec.storages[sid].nbytes) for sid in touched}
        rec.storages = None
        s = None
        gc.collect()
        temps = set()
        for sid, ref in refs.items():
            obj = ref()
            if obj is None:
                temps.add(sid)
            else:
                self.keep[sid] = obj
        self.born_kept = [sid for sid in self.keep if born[sid] and sid not in rec.host_init]
        # Storages from before the step (parameters, buffers, optimizer state) are held
        # weakly: when one goes, the tensor holding it was replaced (a new parameter,
        # module.to(...)) and the recording must not run on memory nobody uses any more.
        # Cached scalar operands (2 in `x * 2`) are constants: held like the step's own.
        self.externals = []
        weak = {}  # storage id -> its weak reference, for the collectives' replays
        for sid in [sid for sid in self.keep if not born[sid] and sid not in inputs
                    and sid not in rec.host_init
                    and self.keep[sid] not in _creation.constant_storages]:
            try:
                weak[sid] = weakref.ref(self.keep[sid])
            except TypeError:  # a storage type without weak references stays held
                continue
            self.externals.append(weak[sid])
            del self.keep[sid]
        backends, devices = dict(backends), dict(devices)
        if recompute:
            calls, new_index = rematerialize(calls, temps, {"nbytes": nbytes,
                                                            "backends": backends,
                                                            "devices": devices})
            renumber(rec, new_index)
        if fuse_fn is not None:
            # after the temporaries are known: only they may live in registers alone
            calls = fuse_fn(rec, calls, temps)
        self.temps = temps
        # lifetimes of the temporaries, in call positions
        first, last = {}, {}
        for i, c in enumerate(calls):
            for sid in c.touched:
                if sid in temps:
                    first.setdefault(sid, i)
                    last[sid] = i
        self.blocks = [Block(sid, _round(max(nbytes[sid], 1)), first[sid], last[sid],
                             backends.get(sid), devices.get(sid)) for sid in first]
        self.arenas = {}
        if plan_memory:
            by_be: dict = {}
            for b in self.blocks:
                by_be.setdefault(id(b.be), []).append(b)
            for bs in by_be.values():
                size = plan_blocks(bs)
                arena = Tensor._empty((max(size, 4) // 4,), _dt.float32, bs[0].device,
                                      bs[0].be)
                self.arenas[id(bs[0].be)] = arena
        else:  # every temporary in its own buffer, for comparison and debugging
            for b in self.blocks:
                arena = Tensor._empty((max(b.nbytes, 4) // 4,), _dt.float32, b.device, b.be)
                self.arenas[("own", b.sid)] = arena
                b.offset = 0
        self.arena_bytes = sum(4 * a.numel() for a in self.arenas.values())
        base = {}
        for b in self.blocks:
            arena = self.arenas[id(b.be)] if plan_memory else self.arenas[("own", b.sid)]
            base[b.sid] = address(arena._storage.ptr) + b.offset
        # the program: argument lists with temporaries pointing into the arena
        def resolve(sid, off, original):
            if sid in temps:
                return _ffi.cast("void *", base[sid] + off)
            return original

        aliases: dict = {}

        def storage_of(sid, dtype):
            """What a collective's replay finds storage sid in: the storage itself, or a
            storage over the temporary's place in the arena."""
            if sid in temps:
                key = (sid, dtype)
                if key not in aliases:
                    aliases[key] = backends[sid].alias(base[sid], nbytes[sid], dtype)
                # the graph holds the arena, so the alias's memory lives as long as it does
                return lambda s=aliases[key]: s
            if sid in weak:
                return weak[sid]
            return lambda s=self.keep[sid]: s

        self.calls = []
        for c in calls:
            if isinstance(c, CollectiveCall):
                self.calls.append((c.replayer(storage_of), [], c.symbol))
                continue
            build = getattr(c, "build", None)
            if build is not None:  # a fused chain: its pointers sit in arrays it builds
                fn, args = build(resolve)
                self.calls.append((fn, list(args), c.symbol))
                continue
            args = list(c.args)
            for i, sid, off in c.refs:
                if sid in temps:
                    args[i] = _ffi.cast("void *", base[sid] + off)
            for i in {i for i, _, sid, _ in c.tables if sid in temps}:
                # a table with entries in the arena: a copy pointing there (the recorded one
                # keeps the addresses the recording ran on)
                table = args[i]
                ffi = c.be.ffi
                args[i] = ffi.new(ffi.typeof(table), [table[j] for j in range(len(table))])
                for k, j, sid, off in c.tables:
                    if k == i and sid in temps:
                        args[i][j] = ffi.cast(ffi.typeof(table).item, base[sid] + off)
            self.calls.append((c.fn, args, c.symbol))
        self.rng = rec.rng
        self.updates = rec.updates
        self._split_guards(rec.guards, calls, inputs, born, rec.host_init, rec.writers)
        # storages no call writes: the inputs, host constants, and state from before the step
        # that nothing in it writes (the cached scalar operands)
        unwritten = {sid for sid in range(len(born)) if not born[sid] and sid not in rec.writers}
        self.early_only = self._early_only(calls, inputs | set(rec.host_init) | unwritten,
                                           rec.rng)
        self.poison = poison
        self.cuda_graphs = cuda_graphs
        self.segments: dict = {}  # (first, last) call position -> Segment
        self._program_full = self._build(eager_updates=())
        self._programs: dict = {}  # the start positions of the eager updates -> program

    # ---- guards -----------------------------------------------------------------------------
    def _split_guards(self, guards: list[Guard], calls, inputs: set, born: list,
                      host_init: set, writers: dict) -> None:
        """Guards whose values come from the inputs alone are checked before anything runs,
        by running the calls they depend on first; a failing one then leaves no trace and
        the step is recorded again. The others, and those that depend on a collective, are
        checked in place."""
        self.early: list[tuple] = []
        self.early_guards: list[Guard] = []
        self.late: dict[int, list[Guard]] = {}
        # Which call writes what is not known (only which storages it touches), so a call
        # counts as writing every storage it touches, except the inputs and the constants
        # made from the host: nothing writes those, and following them would pull in every
        # later reader of an input.
        readonly = set(inputs) | set(host_init)
        for g in guards:
            need, wanted, seen = set(g.storages) - readonly, [], set(g.storages)
            communicated = False
            for j in range(g.pos - 1, -1, -1):
                if calls[j].touched & need:
                    if isinstance(calls[j], CollectiveCall):
                        # a collective runs once per replay, in its place, on every rank
                        communicated = True
                        break
                    wanted.append(j)
                    need |= calls[j].touched - readonly
                    seen |= calls[j].touched
            # the storages a guard reads were born in the step (kept alive by the guard
            # itself) or come from outside it: only the first kind is computed from inputs
            outside = {s for s in seen if s not in self.temps and s not in readonly
                       and not (s in g.storages and born[s])}
            # state from before the step (a cached constant, a parameter) is safe to read
            # early when no call before the guard writes it: it holds then what it held at
            # the start; the calls run early must not write it either
            if outside and not any(j < g.pos for s in outside if not born[s]
                                   for j in writers.get(s, ())):
                outside = {s for s in outside if born[s]}
            if not outside and not communicated:
                self.early_guards.append(g)
                self.early.extend(j for j in wanted)
            else:
                self.late.setdefault(g.pos, []).append(g)
        self.early = sorted(set(self.early))

    def _early_only(self, calls, readonly: set, rng) -> set:
        """The early calls that the program need not run again: every storage they touch,
        besides those no call writes (`readonly`), no other call touches (the target checks of
        a loss: what they compute goes only to the guard). A replay has just run them, on the
        same inputs, in `early_checks_hold`."""
        early = set(self.early)
        if not early:
            return set()
        drawn = {t.call for t in rng if t.call is not None}
        private = set()
        for j in early:
            private |= calls[j].touched
        private -= readonly
        for i, c in enumerate(calls):
            if i not in early and c.touched & private:
                private -= c.touched
        return {j for j in early if j not in drawn and not (calls[j].touched - readonly - private)}

    # ---- programs ---------------------------------------------------------------------------
    def _build(self, eager_updates) -> list:
        """(fn, args) pairs to run in order; guards and eager updates appear as calls of
        bound methods so that one loop runs everything."""
        skip = {}
        for u in eager_updates:
            skip[u.start] = u
        counted = {}  # the replayed updates whose step counts the program advances
        for u in self.updates:
            if u.counters and u.start not in skip:
                counted.setdefault(u.start, []).append(u)
        prog, index = [], []  # index: the call position of each item, None for Python
        dying = {}
        if self.poison:
            for b in self.blocks:
                dying.setdefault(b.last, []).append(b)
        i, n = 0, len(self.calls)
        while i <= n:
            for g in self.late.get(i, ()):
                prog.append((self._check, (g,)))
                index.append(None)
            u = skip.get(i)
            if u is not None:
                prog.append((self._eager_update, (u,)))
                index.append(None)
                i = u.end
                continue
            for u in counted.get(i, ()):
                prog.append((self._advance, (u,)))
                index.append(None)
            if i == n:
                break
            if i not in self.early_only:
                fn, args, _ = self.calls[i]
                prog.append((fn, args))
                index.append(i)
            for b in dying.get(i, ()):
                prog.append((self._poison, (b,)))
                index.append(None)
            i += 1
        if self.cuda_graphs:
            varying = {take.call for take in self.rng if take.call is not None}
            varying.update(c.call for u in self.updates for c in u.counters)
            prog = into_segments(prog, index, varying, self.segments)
        return prog

    def _check(self, g: Guard) -> None:
        if not g.holds():
            raise GraphError(
                f"graph replay: {g.where} read tensor values on the host while the step was "
                f"recorded, and now they differ: the step's Python code may depend on them. "
                f"The step has partly run. Compute such values outside the step, or run "
                f"this step without a graph")

    def _eager_update(self, u) -> None:
        self.restore_grads((u,))
        u.optimizer.step()

    def _advance(self, u) -> None:
        """Advance the step counts of a replayed update, as its step() would, and set its
        calls' arguments that follow from them (Adam's bias corrections)."""
        calls = self.calls
        for c in u.counters:
            key = c.key
            for st in c.states:
                st[key] += 1
            c.patch(calls[c.call][1], c.states[0][key])

    def draw_again(self) -> None:
        """Take every recorded random draw again from its generator, into its call."""
        for take in self.rng:
            seed, offset = take.gen._take(take.blocks)
            if take.call is not None:
                args = self.calls[take.call][1]
                args[take.arg] = seed
                args[take.arg + 1] = offset

    @staticmethod
    def restore_grads(updates) -> None:
        """Give the parameters of the updates the gradient tensors the recording writes."""
        for u in updates:
            for p, grad in u.grads:
                p.grad = grad

    def _poison(self, b: Block) -> None:
        arena = self.arenas.get(("own", b.sid)) or self.arenas[id(b.be)]
        # NaN bits: float32 and float64 both read back NaN, integers read garbage
        arena[b.offset // 4:(b.offset + b.nbytes) // 4].fill_(float("nan"))

    # ---- replay -----------------------------------------------------------------------------
    def graph_stats(self) -> dict:
        """CUDA graphs of this recording: how many runs were captured, how many failed, how
        many launches they hold."""
        segs = list(self.segments.values())
        return {"captured": sum(sg.captured is not None for sg in segs),
                "failed": sum(sg.failed is not None for sg in segs),
                "launches": sum(len(sg.calls) for sg in segs if sg.captured is not None)}

    def pin(self) -> list | None:
        """The storages from before the step that the recording reads, held strongly while a
        replay runs (a collection during it must not free them); None when one of them is gone
        (the recording is stale)."""
        out = [r() for r in self.externals]
        for s in out:
            if s is None:
                return None
        return out

    def held(self) -> list:
        """Every storage the recording points at outside its arena."""
        return list(self.keep.values()) + [s for s in (r() for r in self.externals)
                                           if s is not None]

    def early_checks_hold(self) -> bool:
        """Run the calls the early guards depend on, then the guards."""
        if not self.early_guards:
            return True
        calls = self.calls
        for j in self.early:
            fn, args, _ = calls[j]
            fn(*args)
        return all(g.holds() for g in self.early_guards)

    def replay(self) -> None:
        self.draw_again()
        eager = [u for u in self.updates
                 if u.before != u.after or fingerprint(u.optimizer, u.counted) != u.before]
        if eager:
            key = tuple(u.start for u in eager)
            prog = self._programs.get(key)
            if prog is None:
                prog = self._programs[key] = self._build(eager)
        else:
            prog = self._program_full
            self.restore_grads(self.updates)
        for fn, args in prog:
            fn(*args)


def _round(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
