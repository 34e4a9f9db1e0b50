"""Fusion of elementwise chains in a recording: consecutive calls of fusible unary and binary
kernels over the same number of elements become one call of the fused kernel
(`ops/fused.py`), which keeps intermediates in registers. A temporary that only the chain
touches is then never written at all, so it also leaves the memory plan.

A chain stops where fusing could change a result: at another kind of call, a different element
count or dtype, an input read with broadcasting from a buffer the chain itself writes (the
fused kernel writes its outputs only after reading all inputs of an element), guards, random
draws, collectives and optimizer-update boundaries, and at the kernel's limits.
"""

from __future__ import annotations

from ..ops import fused as _fused
from ._capture import Call
from ._collective import positions

_MIN_CHAIN = 2
# the dtypes with a fused kernel (float16/bfloat16 programs round each instruction's result)
_FUSED_SUFFIXES = ("f32", "f64", "f16", "bf16")


class FusedCall(Call):
    """A chain as one call: built for the pointers the memory plan gives (see build)."""

    __slots__ = ("dtype", "instrs", "consts", "ins", "outs", "n")

    def build(self, resolve):
        """(kernel, args) with each (storage id, offset, original pointer) resolved."""
        from .. import dtype as _dt

        d = {"f32": _dt.float32, "f64": _dt.float64, "f16": _dt.float16,
             "bf16": _dt.bfloat16}[self.dtype]
        inputs = [(resolve(*p), inner, period) for p, inner, period in self.ins]
        outputs = [(resolve(*p), reg) for p, reg in self.outs]
        return _fused.fused_call(self.be, d, self.instrs, self.consts, inputs, outputs, self.n)


def _mode(strides, shape):
    """(inner, period) such that the strided read at flat output position i is element
    (i // inner) % period of a contiguous block, or None when it is not of that form."""
    nd = len(shape)
    live = [k for k in range(nd) if strides[k] != 0 and shape[k] != 1]
    if not live:
        return 1, 1
    lo, hi = live[0], live[-1]
    expect = 1
    for k in range(hi, lo - 1, -1):
        if shape[k] != 1 and strides[k] != expect:
            return None
        expect *= shape[k]
    inner = 1
    for k in range(hi + 1, nd):
        inner *= shape[k]
    return inner, expect


def _elementwise(c: Call):
    """(dtype suffix, op, binary, n, [(arg, inner, period)], out arg, alpha, beta) for a call
    of a fusible CPU kernel, else None."""
    sym = c.symbol
    if not sym.startswith("st_") or c.be is None or not hasattr(c.be, "pointer_array"):
        return None
    body, _, suffix = sym[3:].rpartition("_")
    if suffix not in _FUSED_SUFFIXES:
        return None
    a = c.args
    if body in _fused.FUSIBLE_UNARY and len(a) == 5:
        n = int(a[2])
        return suffix, body, False, n, [(0, 1, n)], 1, float(a[3]), float(a[4])
    if body in _fused.FUSIBLE_BINARY and len(a) == 7:
        nd = int(a[3])
        shape = list(a[4][0:nd])
        n = 1
        for s in shape:
            n *= s
        ma, mb = _mode(list(a[5][0:nd]), shape), _mode(list(a[6][0:nd]), shape)
        if ma is None or mb is None:
            return None
        return suffix, body, True, n, [(0, *ma), (1, *mb)], 2, 0.0, 0.0
    return None


def fuse_calls(rec, calls: list, temps: set) -> list:
    """calls with chains merged; rec's guards, draws and update regions are renumbered. Of the
    buffers a chain writes, only temporaries (temps) that nothing else touches stay in
    registers."""
    barriers = {0, len(calls)}
    barriers.update(g.pos for g in rec.guards)
    for u in rec.updates:
        barriers.update((u.start, u.end))
    for k in positions(calls):  # nothing fuses across a collective
        barriers.update((k, k + 1))
    # calls whose arguments a replay rewrites: random draws, counted optimizer steps
    rng_calls = {t.call for t in rec.rng if t.call is not None}
    rng_calls.update(c.call for u in rec.updates for c in u.counters)
    # how many calls touch each storage: a chain's intermediate that nothing else touches
    # needs no memory
    uses: dict[int, int] = {}
    for c in calls:
        for sid in c.touched:
            uses[sid] = uses.get(sid, 0) + 1
    out: list = []
    new_index = []  # old position -> new position
    i = 0
    while i < len(calls):
        j = _chain_end(calls, i, barriers, rng_calls)
        if j - i >= _MIN_CHAIN:
            for piece, count in _fuse_run(calls[i:j], uses, temps):
                new_index.extend([len(out)] * count)
                out.append(piece)
            i = j
            continue
        new_index.append(len(out))
        out.append(calls[i])
        i += 1
    new_index.append(len(out))

    def at(p):
        return new_index[p]

    for g in rec.guards:
        g.pos = at(g.pos)
    for u in rec.updates:
        u.start, u.end = at(u.start), at(u.end)
        for c in u.counters:
            c.call = at(c.call)
    for t in rec.rng:
        if t.call is not None:
            t.call = at(t.call)
    return out


def _chain_end(calls, i, barriers, rng_calls) -> int:
    """The end of the longest run of fusible calls from i (i itself when calls[i] is not)."""
    first = _elementwise(calls[i])
    if first is None or i in rng_calls:
        return i
    suffix, n, be = first[0], first[3], calls[i].be
    j = i + 1
    while j < len(calls) and j not in barriers and j not in rng_calls:
        e = _elementwise(calls[j])
        if e is None or e[0] != suffix or e[3] != n or calls[j].be is not be:
            break
        j += 1
    return j


def _fuse_run(run: list, uses: dict, temps: set) -> list:
    """(call, how many recorded calls it stands for) pairs covering a run: the longest
    fusible prefix each time (split at the kernel's limits or a hazard), single calls where
    nothing fuses."""
    out = []
    start = 0
    while start < len(run):
        best = None
        end = start + _MIN_CHAIN
        while end <= len(run):
            f = _build(run[start:end], uses, temps)
            if f is None:
                break
            best = (end, f)
            end += 1
        if best is None:
            out.append((run[start], 1))
            start += 1
        else:
            out.append((best[1], best[0] - start))
            start = best[0]
    return out


def _operands(op: str, a, b) -> tuple:
    """The values an instruction reads: none for load/const, one for unary, two for binary."""
    if op == "load" or op == "const":
        return ()
    return (a, b) if op in _fused.FUSIBLE_BINARY else (a,)


def _allocate(instrs: list, keep: set) -> list | None:
    """instrs with each value (one per instruction) in a physical register, reusing a
    register once its value is read for the last time (values in keep live to the end);
    None when more than the kernel's registers would be needed at once."""
    last = {}
    for k, (op, _dst, a, b) in enumerate(instrs):
        for v in _operands(op, a, b):
            last[v] = k
    for v in keep:
        last[v] = len(instrs)
    free, phys, out = list(range(_fused.MAX_REGS - 1, -1, -1)), {}, []
    for k, (op, dst, a, b) in enumerate(instrs):
        reads = _operands(op, a, b)
        if reads:
            a = phys[reads[0]]
            if len(reads) == 2:
                b = phys[reads[1]]
        # operands read here for the last time give their registers back first
        for v in set(reads):
            if last[v] == k:
                free.append(phys.pop(v))
        if not free:
            return None
        r = free.pop()
        phys[dst] = r
        if last.get(dst, -1) < k:  # never read (a dead value): its register is free again
            free.append(phys.pop(dst))
        out.append((op, r, a, b))
    return out


def _build(chain: list, uses: dict, temps: set):
    """A FusedCall for a chain of fusible calls, or None when it cannot be fused safely or
    does not fit the kernel."""
    parsed = [_elementwise(c) for c in chain]
    suffix, n = parsed[0][0], parsed[0][3]
    # where each pointer argument points: (sid, offset) when known
    def where(c, arg):
        for i, sid, off in c.refs:
            if i == arg:
                return sid, off
        return None

    written = {}  # (sid, off) -> register holding that buffer's latest value
    wrote_sids = set()
    spread = set()  # storages read with broadcasting: the chain must not write them
    instrs, consts, ins, in_key, outs_final = [], [], [], {}, {}
    reg_count = 0
    touched = set()
    for c, (_, op, binary, _, inputs, out_arg, alpha, beta) in zip(chain, parsed):
        regs = []
        for arg, inner, period in inputs:
            loc = where(c, arg)
            full = inner == 1 and period == n
            if loc is not None and loc in written and full:
                regs.append(written[loc])
                continue
            if loc is not None and loc[0] in wrote_sids:
                return None  # a broadcast or shifted read of what the chain writes
            if loc is not None and not full:
                spread.add(loc[0])
            key = (loc if loc is not None else ("ptr", id(c.args[arg])), inner, period)
            r = in_key.get(key)
            if r is None:
                if len(ins) >= _fused.MAX_INPUTS:
                    return None
                r = reg_count
                reg_count += 1
                in_key[key] = r
                ins.append(((loc[0], loc[1], c.args[arg]) if loc is not None
                            else (None, 0, c.args[arg]), inner, period))
                instrs.append(("load", r, len(ins) - 1, 0))
            regs.append(r)
        dst = reg_count
        reg_count += 1
        if binary:
            instrs.append((op, dst, regs[0], regs[1]))
        else:
            consts += [alpha, beta]
            instrs.append((op, dst, regs[0], len(consts) - 2))
        loc = where(c, out_arg)
        if loc is None or loc[0] in spread:
            return None
        written[loc] = dst
        wrote_sids.add(loc[0])
        outs_final[loc] = (dst, c.args[out_arg])
        touched |= c.touched
        if len(instrs) > _fused.MAX_INSTR or len(consts) > _fused.MAX_CONSTS:
            return None
    # every written buffer is stored, except intermediates nothing outside the chain touches
    in_chain: dict[int, int] = {}
    for c in chain:
        for sid in c.touched:
            in_chain[sid] = in_chain.get(sid, 0) + 1
    last_reg = instrs[-1][1]
    outs = []
    for (sid, off), (reg, ptr) in outs_final.items():
        if sid not in temps or uses.get(sid, 0) > in_chain.get(sid, 0) or reg == last_reg:
            outs.append(((sid, off, ptr), reg))
        else:
            touched.discard(sid)
    if not outs or len(outs) > _fused.MAX_OUTPUTS:
        return None
    # values are numbered by the instruction that makes them; give them physical registers
    number = {ins_[1]: k for k, ins_ in enumerate(instrs)}
    instrs = [(op, k, number.get(a, a) if op not in ("load", "const") else a,
               number.get(b, b) if op in _fused.FUSIBLE_BINARY else b)
              for k, (op, _, a, b) in enumerate(instrs)]
    values = {number[reg] for _, reg in outs}
    allocated = _allocate(instrs, values)
    if allocated is None:
        return None
    reg_of = {k: allocated[k][1] for k in values}
    outs = [(p, reg_of[number[reg]]) for p, reg in outs]
    f = FusedCall(f"st_fused_{suffix}", None, (), [], frozenset(touched), None, chain[0].be)
    f.dtype, f.instrs, f.consts, f.ins, f.outs, f.n = suffix, allocated, consts, ins, outs, n
    return f
