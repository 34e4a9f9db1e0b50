"""Collectives in a recording: a call of `dist.all_reduce` (or any tensor collective) inside a
captured step becomes one recorded call that, on every replay, runs the same collective again
through the communicator, on the replay's buffers.

While recording, the collective runs to completion where it is called (an `async_op=True`
call is waited for at once and hands back a Work that is already complete), with the kernel
calls the communicator may make for it (staging copies) left out of the recording: the
recorded call stands for all of it. It keeps, for every tensor in the collective's arguments,
the storage it lies in and its shape, strides, offset and dtype. A replay makes tensors of
that layout over the storages the replay uses (a temporary's place in the arena, the
parameter or gradient itself otherwise) and calls the communicator again, so its checks
(the ranks' agreement on shapes and dtypes under SINGA_DIST_CHECK) and its waits with a
timeout run on every replay, as they do eagerly.

Every rank replays its calls in the order they were recorded, which is the order eager
execution issued them, so the ranks keep meeting in the same collectives. Nothing moves
across a collective: fusion does not merge calls over it, recomputation does not span it, a
guard that depends on what it wrote is checked in place (never before the replay starts),
and the buffers it reads and writes are alive at its position in the memory plan.
"""

from __future__ import annotations

from ..tensor import Tensor
from ._capture import Call, GraphError


def layout(args, tensors: list):
    """args with every Tensor replaced by its index in tensors (which gets it appended);
    lists and tuples are walked, anything else is kept as it is."""
    if isinstance(args, Tensor):
        tensors.append(args)
        return ("T", len(tensors) - 1)
    if isinstance(args, (list, tuple)):
        return (type(args), [layout(a, tensors) for a in args])
    return ("V", args)


def rebuild(spec, tensors: list):
    kind, body = spec
    if kind == "T":
        return tensors[body]
    if kind == "V":
        return body
    return kind(rebuild(s, tensors) for s in body)


class CollectiveCall(Call):
    """A recorded collective: `run(args)` performs it; `specs` holds, per tensor of args,
    (storage id, shape, strides, offset, dtype, device, backend)."""

    __slots__ = ("name", "run", "layout", "specs")

    def __init__(self, name: str, run, spec, specs: list, touched: frozenset, versions: dict):
        super().__init__(f"collective {name}", None, (), [(k, s[0], 0) for k, s in
                                                         enumerate(specs)], touched, versions)
        self.name, self.run, self.layout, self.specs = name, run, spec, specs

    def replayer(self, storage_of):
        """The replay's function: storage_of(sid, dtype) gives a function returning the
        storage a replay uses for storage sid (None when it is gone)."""
        getters = [storage_of(s[0], s[4]) for s in self.specs]
        specs, run, spec, name = self.specs, self.run, self.layout, self.name

        def replay():
            tensors = []
            for get, (_, shape, strides, offset, dtype, device, be) in zip(getters, specs):
                storage = get()
                if storage is None:
                    raise GraphError(f"graph replay: a tensor that {name} used while recording "
                                     f"is gone; record the step again (call it with new "
                                     f"inputs) or run it without compile")
                tensors.append(Tensor._make(storage, shape, strides, offset, dtype, device, be))
            run(rebuild(spec, tensors))

        replay.__name__ = self.symbol
        return replay


def positions(calls: list) -> list:
    """The positions of the collectives among calls."""
    return [k for k, c in enumerate(calls) if isinstance(c, CollectiveCall)]
