"""torch.distributed's object collectives over the safe encoding of `_objects` (never pickle:
a peer's bytes can only become plain values, tensors and arrays).

Each call first exchanges the byte counts, then the bytes (padded to the longest where the
primitive needs equal sizes). A rank whose object cannot be encoded sends a refusal in place
of its count: it raises the TypeError itself and every other rank raises DistributedError
naming it, so all ranks leave the call together and the group stays usable. Malformed bytes
raise ObjectDecodeError (a ValueError) on the receiving rank only, after the exchange.
"""

from __future__ import annotations

import numpy as np

from . import _group, _on_host
from ._base import DistributedError, Group
from ._objects import ObjectDecodeError, decode, encode

# why graph mode refuses these: the objects are Python values encoded on the host
_OBJECTS = ("its objects are Python values, encoded and decoded on the host, which a replay "
            "cannot see; exchange tensors (dist.broadcast, dist.all_gather) or call it outside "
            "the step")


def _encode(obj, name: str):
    """(bytes, None) or (the error's text as bytes, the error)."""
    try:
        return encode(obj, name), None
    except (TypeError, ValueError) as e:
        return str(e).encode("utf-8", "replace"), e


def _header(blob: bytes, err) -> int:
    # a refusal travels as -1 - (length of its message), so the message can follow it
    return -1 - len(blob) if err is not None else len(blob)


def _nbytes(h: int) -> int:
    return -1 - h if h < 0 else h


def _refused(name: str, who: list, text, err) -> None:
    """Raise on every rank when the world ranks `who` refused (on such a rank, its own
    error); text() is the first refusal's message."""
    if not who:
        return
    if err is not None:
        raise err
    ranks = ", ".join(str(r) for r in who)
    raise DistributedError(f"{name}: rank {ranks} could not send its object: "
                           f"{text().decode('utf-8', 'replace')}")


def _late(g: Group, heads: list) -> list:
    return [g.ranks[j] for j, h in enumerate(heads) if h < 0]


def _first_refusal(heads: list) -> int:
    return next((j for j, h in enumerate(heads) if h < 0), 0)


def _list(name: str, what: str, lst, size: int | None = None) -> list:
    if not isinstance(lst, list):
        raise TypeError(f"{name}: {what} must be a list, got {type(lst).__name__}")
    if size is not None and len(lst) != size:
        raise ValueError(f"{name}: {what} must have {size} entries (one per rank), got "
                         f"{len(lst)}")
    return lst


def _decode_list(buf, name: str, n: int) -> list:
    objs = decode(buf, name)
    if not isinstance(objs, list) or len(objs) != n:
        raise ObjectDecodeError(f"{name}: the received object bytes hold "
                                f"{type(objs).__name__}, not a list of {n} objects")
    return objs


def _padded(blob: bytes, n: int) -> np.ndarray:
    a = np.zeros(max(n, 1), np.uint8)
    a[:len(blob)] = np.frombuffer(blob, np.uint8)
    return a


def broadcast_object_list(object_list: list, src: int = 0, group: Group | None = None) -> None:
    """Replace object_list's entries on every rank by world rank src's (the lists have one
    length on all ranks). Values are encoded safely (see the module docs for the types).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> objs = [{"epoch": 3}, "ok"]; dist.broadcast_object_list(objs, src=0); objs
        [{'epoch': 3}, 'ok']
        >>> dist.destroy_process_group()
    """
    name = "broadcast_object_list"
    _on_host(name, _OBJECTS)
    g = _group(group)
    _list(name, "object_list", object_list)
    if g.comm is None:
        return
    comm, root = g.comm, g.group_rank(src, "src", name)
    mine = comm.rank == root
    blob, err = _encode(list(object_list), name) if mine else (b"", None)
    comm.agree(name, f"{len(object_list)} objects src {root}")
    if comm.size == 1:
        if err is not None:
            raise err
        return
    head = np.array([_header(blob, err) if mine else 0], np.int64)
    comm._bcast(name, head, root).wait()
    n = _nbytes(int(head[0]))
    buf = np.frombuffer(blob, np.uint8).copy() if mine else np.empty(n, np.uint8)
    if n:
        comm._bcast(name, buf, root).wait()
    if mine:
        comm.bytes_sent += (comm.size - 1) * (8 + n)
    _refused(name, [g.ranks[root]] if head[0] < 0 else [], buf.tobytes, err)
    if not mine:
        object_list[:] = _decode_list(buf, name, len(object_list))


def _gather_heads(comm, name: str, head: int) -> list:
    mine = np.array([head], np.int64)
    heads = np.zeros((comm.size, 1), np.int64)
    comm._allgather(name, mine, heads).wait()
    comm.bytes_sent += (comm.size - 1) * 8
    return heads[:, 0].tolist()


def all_gather_object(object_list: list, obj, group: Group | None = None) -> None:
    """object_list[r] = rank r's obj, on every rank (object_list has world_size entries).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = [None]; dist.all_gather_object(out, {"loss": 0.5}); out
        [{'loss': 0.5}]
        >>> dist.destroy_process_group()
    """
    name = "all_gather_object"
    _on_host(name, _OBJECTS)
    g = _group(group)
    if g.comm is None:
        return
    comm = g.comm
    _list(name, "object_list", object_list, comm.size)
    blob, err = _encode(obj, name)
    comm.agree(name, "")
    if comm.size == 1:
        if err is not None:
            raise err
        object_list[0] = decode(blob, name)
        return
    heads = _gather_heads(comm, name, _header(blob, err))
    sizes = [_nbytes(h) for h in heads]
    width = max(max(sizes), 1)
    every = np.empty((comm.size, width), np.uint8)
    comm._allgather(name, _padded(blob, width), every).wait()
    comm.bytes_sent += (comm.size - 1) * width
    j = _first_refusal(heads)
    _refused(name, _late(g, heads), lambda: every[j, :sizes[j]].tobytes(), err)
    for j in range(comm.size):
        object_list[j] = decode(every[j, :sizes[j]], name)


def gather_object(obj, object_gather_list: list | None = None, dst: int = 0,
                  group: Group | None = None) -> None:
    """object_gather_list[r] = rank r's obj on world rank dst (a list of world_size entries
    there; ignored elsewhere).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = [None]; dist.gather_object((1, "a"), out, dst=0); out
        [(1, 'a')]
        >>> dist.destroy_process_group()
    """
    name = "gather_object"
    _on_host(name, _OBJECTS)
    g = _group(group)
    if g.comm is None:
        return
    comm, root = g.comm, g.group_rank(dst, "dst", name)
    mine = comm.rank == root
    if mine:
        _list(name, "object_gather_list", object_gather_list, comm.size)
    blob, err = _encode(obj, name)
    comm.agree(name, f"dst {root}")
    if comm.size == 1:
        if err is not None:
            raise err
        object_gather_list[0] = decode(blob, name)
        return
    # every rank learns the counts, so that a refusal ends the call on every rank
    heads = _gather_heads(comm, name, _header(blob, err))
    sizes = [_nbytes(h) for h in heads]
    width = max(max(sizes), 1)
    every = np.empty((comm.size, width), np.uint8) if mine else None
    comm._gather(name, _padded(blob, width), every, root).wait()
    if not mine:
        comm.bytes_sent += width
    j = _first_refusal(heads)
    _refused(name, _late(g, heads), (lambda: every[j, :sizes[j]].tobytes()) if mine else
             (lambda: b"(its message went to the destination rank)"), err)
    if mine:
        for j in range(comm.size):
            object_gather_list[j] = decode(every[j, :sizes[j]], name)


def scatter_object_list(scatter_object_output_list: list,
                        scatter_object_input_list: list | None = None, src: int = 0,
                        group: Group | None = None) -> None:
    """scatter_object_output_list[0] = scatter_object_input_list[rank] of world rank src
    (the input list, world_size entries, is only read on src).

    Example:
        >>> import singa_tensor.distributed as dist
        >>> dist.init_process_group()
        >>> out = [None]; dist.scatter_object_list(out, ["shard 0"], src=0); out
        ['shard 0']
        >>> dist.destroy_process_group()
    """
    name = "scatter_object_list"
    _on_host(name, _OBJECTS)
    g = _group(group)
    _list(name, "scatter_object_output_list", scatter_object_output_list)
    if not scatter_object_output_list:
        raise ValueError(f"{name}: scatter_object_output_list must have at least one entry "
                         f"(the first receives this rank's object)")
    if g.comm is None:
        return
    comm, root = g.comm, g.group_rank(src, "src", name)
    mine = comm.rank == root
    blobs, err = [], None
    if mine:
        _list(name, "scatter_object_input_list", scatter_object_input_list, comm.size)
        for obj in scatter_object_input_list:
            blob, err = _encode(obj, name)
            if err is not None:
                blobs = [blob]
                break
            blobs.append(blob)
    comm.agree(name, f"src {root}")
    if comm.size == 1:
        if err is not None:
            raise err
        scatter_object_output_list[0] = decode(blobs[0], name)
        return
    # src's counts for every rank, or a refusal and its message's length in slot 0
    heads = np.zeros(comm.size, np.int64)
    if mine:
        heads[:] = [_header(b, err) for b in blobs] if err is None else \
            [_header(blobs[0], err)] + [0] * (comm.size - 1)
    comm._bcast(name, heads, root).wait()
    if heads[0] < 0:
        text = np.frombuffer(blobs[0], np.uint8).copy() if mine else \
            np.empty(_nbytes(int(heads[0])), np.uint8)
        comm._bcast(name, text, root).wait()
        _refused(name, [g.ranks[root]], text.tobytes, err)
    sizes = heads.tolist()
    width = max(max(sizes), 1)
    send = None
    if mine:
        send = np.stack([_padded(b, width) for b in blobs])
        comm.bytes_sent += (comm.size - 1) * (width + 8)
    recv = np.empty(width, np.uint8)
    comm._scatter(name, send, recv, root).wait()
    scatter_object_output_list[0] = decode(recv[:sizes[comm.rank]], name)
