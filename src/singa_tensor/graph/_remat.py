"""Recomputing instead of keeping: a temporary that a cheap, pure kernel made and that waits a
long time between two of its uses (the im2col columns a convolution keeps from forward to
backward) is made again just before the later use, from inputs that are still alive then, so
its memory is free in between. The copy writes a temporary of its own, so the plan can put
both wherever it likes.

Only kernels listed in RECOMPUTE take part, and a copy is made only when its inputs provably
hold the same values at the later use (their version counters did not move) and are alive
there anyway, or are less than half the size of the buffer they stand in for. A copy never
spans a collective.
"""

from __future__ import annotations

from ._capture import Call
from ._collective import positions

# kernel name prefix -> (argument index of the output, argument indices of the inputs)
RECOMPUTE = {"st_im2col_": (1, (0,))}
# calls between two uses of a buffer before a recomputation pays for itself
_GAP = 8


def _spec(symbol: str):
    for prefix, spec in RECOMPUTE.items():
        if symbol.startswith(prefix):
            return spec
    return None


def rematerialize(calls: list, temps: set, info: dict) -> tuple[list, list]:
    """(calls with recomputations inserted, old position -> new position). New temporaries
    get fresh ids, with their size, backend and device copied into info's dicts
    ("nbytes", "backends", "devices")."""
    uses: dict[int, list[int]] = {}
    for k, c in enumerate(calls):
        for sid in c.touched:
            uses.setdefault(sid, []).append(k)
    # a copy never spans a collective, nor stands in for a buffer one touches
    talks = set(positions(calls))
    inserts: dict[int, list] = {}  # position -> calls to run just before it
    rename: dict[int, list] = {}  # call position -> [(old sid, new sid)]
    next_id = max(info["nbytes"], default=0) + 1
    for p, c in enumerate(calls):
        spec = _spec(c.symbol)
        if spec is None:
            continue
        out_arg, in_args = spec
        out = [(sid, off) for i, sid, off in c.refs if i == out_arg]
        ins = [(sid, off) for i, sid, off in c.refs if i in in_args]
        if len(out) != 1 or out[0][0] not in temps or out[0][1] != 0 or not ins:
            continue
        t = out[0][0]
        if any(k in talks for k in uses[t]):
            continue
        later = [k for k in uses[t] if k > p]
        prev = p
        current = t
        for u in later:
            if u - prev > _GAP and not any(p < k < u for k in talks) and \
                    _still_valid(calls, p, u, ins, t, uses, info["nbytes"]):
                new = next_id
                next_id += 1
                for key in ("nbytes", "backends", "devices"):
                    if t in info[key]:
                        info[key][new] = info[key][t]
                temps.add(new)
                # the copy writes the new temporary (its inputs are other storages)
                inserts.setdefault(u, []).append(_renamed(c, t, new))
                current = new
            if current != t:
                rename.setdefault(u, []).append((t, current))
            prev = u
    if not inserts:
        return calls, list(range(len(calls) + 1))
    out_calls, new_index = [], []
    for k, c in enumerate(calls):
        new_index.append(len(out_calls))
        out_calls.extend(inserts.get(k, ()))
        for old, new in rename.get(k, ()):
            c = _renamed(c, old, new)
        out_calls.append(c)
    new_index.append(len(out_calls))
    return out_calls, new_index


def _still_valid(calls, p, u, ins, t, uses, nbytes) -> bool:
    """The inputs and the temporary hold at u what they held at p (no in-place write moved
    their version counters), and the inputs are alive at u (or cheap to keep alive)."""
    vp = calls[p].versions or {}
    for sid, _ in ins:
        if sid not in vp or _version_at(calls, sid, p, u, vp[sid]) != vp[sid]:
            return False
        # an input that would die before u lives on for the copy: worth it only when it is
        # much smaller than the buffer it lets go (im2col columns are k*k times the image)
        if max(uses.get(sid, [p])) < u and 2 * nbytes.get(sid, 1 << 62) > nbytes.get(t, 0):
            return False
    return _version_at(calls, t, p, u, vp.get(t)) == vp.get(t)


def _version_at(calls, sid, p, u, version):
    """sid's version counter as last recorded by a call in (p, u]; version if none did."""
    for k in range(u, p, -1):
        v = (calls[k].versions or {}).get(sid)
        if v is not None:
            return v
    return version


def _renamed(c: Call, old: int, new: int) -> Call:
    refs = [(i, new if sid == old else sid, off) for i, sid, off in c.refs]
    tables = tuple((i, j, new if sid == old else sid, off) for i, j, sid, off in c.tables)
    touched = frozenset((c.touched - {old}) | {new})
    return Call(c.symbol, c.fn, c.args, refs, touched, c.versions, c.be, tables)


def renumber(rec, new_index: list) -> None:
    """Move the recording's guards, draws and update regions to the new call positions."""
    for g in rec.guards:
        g.pos = new_index[g.pos]
    for u in rec.updates:
        u.start, u.end = new_index[u.start], new_index[u.end]
        for c in u.counters:
            c.call = new_index[c.call]
    for t in rec.rng:
        if t.call is not None:
            t.call = new_index[t.call]
