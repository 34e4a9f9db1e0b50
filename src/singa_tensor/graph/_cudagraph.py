"""Replay through CUDA graphs: runs of consecutive kernel launches on one CUDA device become one
graph launch each.

A replay program is a list of (fn, args) items, most of them kernel launches with fixed
arguments. Each maximal run of launches that a CUDA graph can hold is captured once, the first
time it is replayed, and launched as one graph from then on. A run ends at anything that must
run from Python each time:
- guards, eager optimizer updates and poisoning (Python code between the launches);
- launches whose arguments change between replays (random draws take a new seed and offset);
- launches a graph cannot hold (see `_UNCAPTURABLE` in backend/cuda.py: cuBLAS through CuPy,
  and kernels that wait for a result on the host);
- a launch on another device or on the CPU.
A run of one launch stays a plain launch: a graph would gain nothing.

If a capture fails, its run is replayed launch by launch from then on, with one warning: the
results are the same, only the launch overhead stays.
"""

from __future__ import annotations

import warnings


class Segment:
    """A run of kernel launches on one CUDA device, replayed as one CUDA graph."""

    __slots__ = ("calls", "be", "captured", "failed")

    def __init__(self, calls: list, be) -> None:
        self.calls = calls
        self.be = be
        self.captured = None
        self.failed: str | None = None

    def __call__(self) -> None:
        if self.captured is None and self.failed is None:
            try:
                self.captured = self.be.capture(self.calls)
            except Exception as e:  # noqa: BLE001 - reported, then replayed without a graph
                self.failed = f"{type(e).__name__}: {e}"
                warnings.warn(f"graph mode: capturing {len(self.calls)} kernel launches "
                              f"({self.calls[0][0].__name__} ...) into a CUDA graph failed "
                              f"({self.failed}); they replay one by one", RuntimeWarning,
                              stacklevel=3)
        if self.captured is not None:
            self.captured.launch()
            return
        for fn, args in self.calls:
            fn(*args)


def _capturable(fn):
    """The backend of a launch a CUDA graph can hold, else None."""
    if getattr(fn, "capturable", False):
        return fn.backend
    return None


def into_segments(prog: list, index: list, varying: set, cache: dict) -> list:
    """prog with every run of two or more capturable launches on one device replaced by one
    Segment item. index[k] is the call position of prog[k] (None for a Python item); calls in
    `varying` get new arguments each replay. Segments are kept in cache by their positions,
    so programs that share a run share its graph."""
    out: list = []
    run: list = []  # positions in prog

    def flush():
        if len(run) >= 2:
            key = (index[run[0]], index[run[-1]])
            seg = cache.get(key)
            if seg is None:
                seg = cache[key] = Segment([prog[k] for k in run], _capturable(prog[run[0]][0]))
            out.append((seg, ()))
        else:
            out.extend(prog[k] for k in run)
        run.clear()

    for k, (fn, _) in enumerate(prog):
        be = _capturable(fn) if index[k] is not None and index[k] not in varying else None
        if be is None:
            flush()
            out.append(prog[k])
            continue
        if run and _capturable(prog[run[-1]][0]) is not be:
            flush()
        run.append(k)
    flush()
    return out
