"""Checkpoints: `save` and `load` of nested containers of tensors and plain values.

The file is self-describing and loading it never unpickles or executes anything::

    offset 0   magic      8 bytes  b"\\x89STCKPT\\n"
           8   version    uint32 little-endian (1)
          12   flags      uint32 (0, reserved)
          16   json_len   uint64
          24   data_len   uint64
          32   JSON       json_len bytes, UTF-8: {"tensors": [...], "arrays": [...], "root": ...}
               data       data_len bytes: raw little-endian element bytes, each block 64-aligned
               checksum   32 bytes: SHA-256 of everything before it

The JSON tags every container so that types survive the round trip: a list is a JSON array,
a dict is {"dict": [[key, value], ...]} (keys of any supported type, order kept), a tuple is
{"tuple": [...]}, a tensor is {"tensor": i} (an index into "tensors"), a numpy array is
{"ndarray": i}. Floats, ints, bools, None and strings are JSON values (NaN and infinities
included). A tensor referenced several times is stored once and loads as one tensor; a view is
stored as its own values (its storage is not shared with its base after loading).

`requires_grad` is not stored: loaded tensors are plain tensors that do not require grad
(`nn.Module.load_state_dict` copies them into parameters). The device each tensor was on is
stored and restored unless `map_location` says otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import struct
import tempfile
import threading
from typing import Any, Callable

import numpy as np

from . import backend as _backend
from . import dtype as _dt
from .backend import as_device
from .tensor import MAX_DIMS, Tensor

MAGIC = b"\x89STCKPT\n"
VERSION = 1
_HEAD = struct.Struct("<8sIIQQ")
_DIGEST = 32
_ALIGN = 64
_CHUNK = 1 << 24
_NDARRAY_DTYPE = re.compile(r"^[<|][biuf]\d{1,2}$|^<c(8|16)$")


# ---- save --------------------------------------------------------------------------------------


class _Encoder:
    """Turns the object into the JSON tree, collecting tensors and arrays (each once)."""

    def __init__(self):
        self.blocks: list = []  # numpy arrays in file order, little-endian, C-contiguous
        self.tensors: list = []
        self.arrays: list = []
        self._tensor_ids: dict = {}
        self._array_ids: dict = {}
        self._offset = 0
        self._active: set = set()
        self._keep: list = []  # holding the objects keeps their id() unique while we encode

    def _add_block(self, arr: np.ndarray) -> int:
        off = self._offset
        self.blocks.append((off, arr))
        self._offset = off + arr.nbytes
        self._offset += -self._offset % _ALIGN
        return off

    def encode(self, obj, where: str):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            return float(obj)
        if isinstance(obj, np.bool_):
            return bool(obj)
        if isinstance(obj, Tensor):
            return {"tensor": self._tensor(obj)}
        if isinstance(obj, np.ndarray):
            return {"ndarray": self._array(obj, where)}
        if isinstance(obj, (list, tuple, dict)):
            if id(obj) in self._active:
                raise ValueError(f"save: the object contains itself (a cycle) at {where}")
            self._active.add(id(obj))
            try:
                if isinstance(obj, list):
                    return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
                if isinstance(obj, tuple):
                    return {"tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
                return {"dict": [[self.encode(k, f"{where} key {k!r}"),
                                  self.encode(v, f"{where}[{k!r}]")] for k, v in obj.items()]}
            finally:
                self._active.discard(id(obj))
        raise TypeError(
            f"save: cannot save an object of type {type(obj).__name__} at {where}; checkpoints "
            f"hold tensors, numpy arrays, numbers, strings, None, and lists, tuples and dicts "
            f"of them"
        )

    def _tensor(self, t: Tensor) -> int:
        i = self._tensor_ids.get(id(t))
        if i is not None:
            return i
        a = _tensor_bytes(t)
        self._tensor_ids[id(t)] = i = len(self.tensors)
        self.tensors.append({"dtype": t.dtype.name, "shape": list(t.shape),
                             "device": str(t.device), "offset": self._add_block(a),
                             "nbytes": a.nbytes})
        self._keep.append(t)
        return i

    def _array(self, a: np.ndarray, where: str) -> int:
        i = self._array_ids.get(id(a))
        if i is not None:
            return i
        le = a.dtype.newbyteorder("<") if a.dtype.byteorder not in "|" else a.dtype
        if not _NDARRAY_DTYPE.match(le.str):
            raise TypeError(f"save: numpy arrays of dtype {a.dtype} are not supported (at "
                            f"{where}); only bool, integer, float and complex arrays are")
        data = np.ascontiguousarray(a, dtype=le)
        self._array_ids[id(a)] = i = len(self.arrays)
        self.arrays.append({"dtype": le.str, "shape": list(a.shape),
                            "offset": self._add_block(data), "nbytes": data.nbytes})
        self._keep.append(a)
        return i


def _tensor_bytes(t: Tensor) -> np.ndarray:
    """The tensor's elements as a C-contiguous little-endian numpy array of its storage type
    (bfloat16 as its uint16 bit patterns)."""
    t = t.detach().cpu()
    if t.dtype is _dt.bfloat16:
        # bfloat16 is the top half of a float32, so widening and shifting is exact
        bits = np.ascontiguousarray(t.float().numpy()).view(np.uint32) >> 16
        return bits.astype("<u2")
    a = t.numpy()
    if t.dtype is _dt.bool_:
        a = a.view(np.uint8)
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))


def _payload(obj) -> tuple:
    enc = _Encoder()
    root = enc.encode(obj, "the root")
    doc = {"format": "singa_tensor checkpoint", "tensors": enc.tensors, "arrays": enc.arrays,
           "root": root}
    text = json.dumps(doc, separators=(",", ":"), allow_nan=True).encode("utf-8")
    return text, enc.blocks, enc._offset


def _write(f, text: bytes, blocks: list, data_len: int) -> None:
    h = hashlib.sha256()

    def put(b) -> None:
        h.update(b)
        f.write(b)

    put(_HEAD.pack(MAGIC, VERSION, 0, len(text), data_len))
    put(text)
    pos = 0
    for off, arr in blocks:
        if off > pos:
            put(b"\0" * (off - pos))
        put(memoryview(arr).cast("B") if arr.nbytes else b"")
        pos = off + arr.nbytes
    if data_len > pos:
        put(b"\0" * (data_len - pos))
    f.write(h.digest())


_umask_lock = threading.Lock()


def _default_mode() -> int:
    with _umask_lock:
        mask = os.umask(0)
        os.umask(mask)
    return 0o666 & ~mask


def save(obj: Any, f) -> None:
    """Write obj (nested dicts, lists and tuples of tensors, numpy arrays, numbers, strings,
    bools and None) to a path or a writable binary file.

    Saving to a path is atomic: the data goes to a temporary file in the same directory
    (`.<name>.<host>.<pid>.<random>.tmp`), is flushed to disk, then renamed over the target, so
    an interrupted save leaves the old file (or none), never a partial one. A save killed
    mid-write leaves its temporary behind; the next save of the same target removes such
    leftovers of this host whose writing process is no longer running.

    Example:
        >>> import os, tempfile, singa_tensor as st
        >>> from singa_tensor.serialization import load, save
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.st")
        >>> save({"w": st.ones(2), "step": 3}, path)
        >>> load(path)["w"].tolist()
        [1.0, 1.0]
    """
    text, blocks, data_len = _payload(obj)  # validates everything before touching the disk
    if hasattr(f, "write") and not isinstance(f, (str, bytes, os.PathLike)):
        _write(f, text, blocks, data_len)
        return
    path = os.fspath(f)
    target_dir = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = _default_mode()
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as out:
            _write(out, text, blocks, data_len)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(target_dir)


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True


def _remove_stale_temps(path: str) -> list:
    """Remove the temporaries that saves of path by processes no longer running left behind
    (a save killed mid-write); returns the removed paths. A temporary is named
    `.<target>.<host>.<pid>.<random>.tmp`: only this host's, of dead processes, are removed,
    so a save still under way elsewhere is never disturbed."""
    if os.name != "posix":  # no side-effect-free way to ask whether a pid is alive
        return []
    target_dir = os.path.dirname(os.path.abspath(path))
    pattern = re.compile(re.escape("." + os.path.basename(path) + "." + _host_tag() + ".")
                         + r"(\d+)\.[A-Za-z0-9_]+\.tmp")
    removed = []
    try:
        names = os.listdir(target_dir)
    except OSError:
        return removed
    for entry in names:
        m = pattern.fullmatch(entry)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or _alive(pid):
            continue
        stale = os.path.join(target_dir, entry)
        try:
            os.unlink(stale)
            removed.append(stale)
        except OSError:
            pass
    return removed


def _temp_beside(path: str) -> tuple:
    """(fd, name) of a new temporary file next to path for an atomic save, named after the
    target, this host and this process; stale temporaries of the target go first."""
    _remove_stale_temps(path)
    prefix = f".{os.path.basename(path)}.{_host_tag()}.{os.getpid()}."
    return tempfile.mkstemp(prefix=prefix, suffix=".tmp",
                            dir=os.path.dirname(os.path.abspath(path)))


def _fsync_dir(d: str) -> None:
    # makes the rename itself durable; not every platform can open a directory
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- load --------------------------------------------------------------------------------------


class CheckpointError(ValueError):
    """A file that is not a valid checkpoint (wrong magic, truncated, corrupted)."""


def _read_exact(f, n: int, name: str, what: str) -> bytes:
    # read in chunks so a corrupt length cannot make us allocate a huge buffer up front
    parts, got = [], 0
    while got < n:
        b = f.read(min(_CHUNK, n - got))
        if not b:
            raise CheckpointError(
                f"load: {name} is truncated: expected {n} bytes of {what}, found {got}"
            )
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _read_head(f, name: str) -> tuple:
    """(header bytes, JSON bytes, data_len) after checking magic, size and version."""
    head = f.read(_HEAD.size)
    if len(head) < 8 or head[:8] != MAGIC:
        raise CheckpointError(
            f"load: {name} is not a singa_tensor checkpoint (bad magic number "
            f"{bytes(head[:8])!r}; expected {MAGIC!r})"
        )
    if len(head) < _HEAD.size:
        raise CheckpointError(f"load: {name} is truncated: the {_HEAD.size}-byte header is "
                              f"incomplete ({len(head)} bytes)")
    _, version, _flags, json_len, data_len = _HEAD.unpack(head)
    if version != VERSION:
        raise CheckpointError(
            f"load: {name} has checkpoint format version {version}; this singa_tensor reads "
            f"version {VERSION}"
        )
    left = _bytes_left(f)
    if left is not None and left < json_len + data_len + _DIGEST:
        # before anything is allocated for the lengths a damaged header claims
        raise CheckpointError(f"load: {name} is truncated: expected {json_len + data_len} "
                              f"bytes of header and tensor data and a {_DIGEST}-byte "
                              f"checksum, found {left} bytes")
    return head, _read_exact(f, json_len, name, "header"), data_len


def _bytes_left(f) -> int | None:
    """How many bytes f holds past its position, where it can tell."""
    try:
        if not f.seekable():
            return None
        here = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(here)
        return end - here
    except (AttributeError, OSError, ValueError):
        return None


class _DataSection:
    """Reads the data section in file order, each block straight into the numpy array that
    becomes its tensor's storage (no second copy of the payload), hashing as it goes; the
    checksum is compared before any tensor is handed out."""

    def __init__(self, f, name: str, data_len: int, h):
        self.f, self.name, self.len, self.h = f, name, data_len, h
        self.pos = 0
        self.blocks: dict = {}  # (offset, nbytes, storage dtype) -> flat array
        self.readinto = getattr(f, "readinto", None)

    def _fill(self, buf: memoryview) -> None:
        got, n = 0, len(buf)
        while got < n:
            if self.readinto is not None:
                k = self.readinto(buf[got:got + _CHUNK])
            else:
                b = self.f.read(min(_CHUNK, n - got))
                k = len(b)
                buf[got:got + k] = b
            if not k:
                raise CheckpointError(f"load: {self.name} is truncated: expected "
                                      f"{self.len} bytes of tensor data, found "
                                      f"{self.pos + got}")
            got += k
        self.h.update(buf)
        self.pos += n

    def _skip_to(self, off: int) -> None:
        while self.pos < off:
            self._fill(memoryview(bytearray(min(_CHUNK, off - self.pos))))

    def read(self, wanted: list) -> None:
        """Read the blocks `wanted` ((offset, nbytes, storage dtype), each checked to lie in
        the section), then the rest of the section."""
        order = sorted(set(wanted), key=lambda w: w[0])
        if any(b[0] < a[0] + a[1] for a, b in zip(order, order[1:])):
            # blocks that share bytes (never written by save): the whole section, once
            whole = np.empty(self.len, dtype=np.uint8)
            self._fill(memoryview(whole))
            for off, nbytes, dt in order:
                self.blocks[off, nbytes, dt] = whole[off:off + nbytes].view(dt).copy()
            return
        for off, nbytes, dt in order:
            self._skip_to(off)
            arr = np.empty(nbytes // dt.itemsize, dtype=dt)
            self._fill(memoryview(arr.view(np.uint8)))
            self.blocks[off, nbytes, dt] = arr
        self._skip_to(self.len)


def _read_all(f, name: str) -> tuple:
    """The JSON document and the data section's blocks, checksum verified."""
    head, text, data_len = _read_head(f, name)
    h = hashlib.sha256(head)
    h.update(text)
    try:
        doc = json.loads(bytes(text).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        doc = e
    data = _DataSection(f, name, data_len, h)
    wanted = _blocks_wanted(doc, data_len, name) if isinstance(doc, dict) else []
    data.read(wanted)
    digest = _read_exact(f, _DIGEST, name, "checksum")
    if h.digest() != digest:
        raise CheckpointError(f"load: {name} is corrupted: the SHA-256 checksum does not match "
                              f"its contents")
    if isinstance(doc, Exception):
        raise CheckpointError(f"load: {name} is malformed: its JSON header does not parse "
                              f"({type(doc).__name__}: {str(doc)[:200]})") from None
    return doc, data


def _tensor_dtype(meta):
    name = meta.get("dtype") if isinstance(meta, dict) else None
    return next((d for d in _dt.ALL if d.name == name), None)


def _array_dtype(meta):
    s = meta.get("dtype") if isinstance(meta, dict) else None
    return np.dtype(s) if isinstance(s, str) and _NDARRAY_DTYPE.match(s) else None


def _layout(meta, itemsize: int, data_len: int):
    """(shape, offset, nbytes) of a well-formed entry lying inside the data section, or a
    message saying what is wrong with it."""
    try:
        shape = tuple(meta["shape"])
        off, nbytes = meta["offset"], meta["nbytes"]
    except (KeyError, TypeError):
        return f"entry {meta!r} lacks shape/offset/nbytes"
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        return f"has an invalid shape {list(shape)}"
    if len(shape) > MAX_DIMS:
        return f"has {len(shape)} dimensions, more than the {MAX_DIMS} a tensor can have"
    n = 1
    for s in shape:
        n *= s
    if not (isinstance(off, int) and isinstance(nbytes, int) and off >= 0
            and nbytes == n * itemsize and off + nbytes <= data_len):
        return (f"of shape {shape} claims bytes [{off}, {off}+{nbytes}) outside the "
                f"{data_len}-byte data section or of the wrong size")
    return shape, off, nbytes


def _blocks_wanted(doc: dict, data_len: int, name: str) -> list:
    """(offset, nbytes, little-endian storage dtype) of every well-formed entry; the decoder
    reports the others when they are referenced."""
    out = []
    for key, dtype_of in (("tensors", _tensor_dtype), ("arrays", _array_dtype)):
        entries = doc.get(key)
        for meta in entries if isinstance(entries, list) else ():
            d = dtype_of(meta)
            if d is None:
                continue
            storage = (d.storage if key == "tensors" else d).newbyteorder("<")
            lay = _layout(meta, storage.itemsize, data_len)
            if isinstance(lay, tuple):
                out.append((lay[1], lay[2], storage))
    return out


def _parse_location(loc):
    return str(as_device(loc))


class _Decoder:
    def __init__(self, doc: dict, data: _DataSection, name: str, map_location):
        self.name = name
        self.data = data
        self.taken: dict = {}  # the blocks already made into a tensor or an array
        self.map_location = map_location
        self.tensor_meta = self._list(doc, "tensors")
        self.array_meta = self._list(doc, "arrays")
        self.tensors: dict = {}
        self.arrays: dict = {}

    def bad(self, msg: str) -> CheckpointError:
        return CheckpointError(f"load: {self.name} is malformed: {msg}")

    def _list(self, doc, key):
        v = doc.get(key)
        if not isinstance(v, list):
            raise self.bad(f"'{key}' must be a list")
        return v

    def _block(self, meta, storage: np.dtype, what: str) -> tuple:
        """(shape, the block's flat little-endian array as read from the file)."""
        storage = storage.newbyteorder("<")
        lay = _layout(meta, storage.itemsize, self.data.len)
        if isinstance(lay, str):
            raise self.bad(f"{what} {lay}")
        shape, off, nbytes = lay
        return shape, self.data.blocks[off, nbytes, storage]

    def tensor(self, i) -> Tensor:
        if not isinstance(i, int) or not 0 <= i < len(self.tensor_meta):
            raise self.bad(f"tensor reference {i!r} out of range")
        t = self.tensors.get(i)
        if t is not None:
            return t
        meta = self.tensor_meta[i]
        dt = _tensor_dtype(meta)
        if dt is None:
            name = meta.get("dtype") if isinstance(meta, dict) else None
            raise self.bad(f"tensor {i} has unknown dtype {name!r}")
        shape, flat = self._block(meta, dt.storage, f"tensor {i}")
        if self._used(flat):  # a second tensor on the same bytes gets its own storage
            flat = flat.copy()
        if not flat.dtype.isnative:
            flat = flat.byteswap().view(flat.dtype.newbyteorder("="))
        if dt is _dt.bool_:
            np.minimum(flat, 1, out=flat)  # any nonzero byte is True
        cpu = _backend.get(_backend.CPU)
        t = Tensor._make(cpu.from_numpy(flat, dt), shape, None, 0, dt, _backend.CPU, cpu)
        t = self._place(t, meta.get("device", "cpu"), i)
        self.tensors[i] = t
        return t

    def _used(self, flat: np.ndarray) -> bool:
        key = id(flat)
        if key in self.taken:
            return True
        self.taken[key] = flat
        return False

    def _place(self, t: Tensor, saved, i: int) -> Tensor:
        if not isinstance(saved, str):
            raise self.bad(f"tensor {i} has an invalid device {saved!r}")
        ml = self.map_location
        if callable(ml) and not isinstance(ml, str):
            out = ml(t, saved)
            return t if out is None else out
        if isinstance(ml, dict):
            dest = ml.get(saved, saved)
        else:
            dest = saved if ml is None else ml
        try:
            dev = as_device(dest)
        except (ValueError, TypeError) as e:
            raise self.bad(f"tensor {i} has device {saved!r} that cannot be used ({e})") from None
        if dev.type == "cpu":
            return t
        try:
            return t.to(dev)
        except Exception as e:  # noqa: BLE001 - any failure to place means: remap it
            raise RuntimeError(
                f"load: {self.name}: cannot put tensor {i} on {dev} ({e}); pass "
                f"map_location='cpu' to load it on the CPU"
            ) from None

    def array(self, i) -> np.ndarray:
        if not isinstance(i, int) or not 0 <= i < len(self.array_meta):
            raise self.bad(f"array reference {i!r} out of range")
        a = self.arrays.get(i)
        if a is None:
            meta = self.array_meta[i]
            dt = _array_dtype(meta)
            if dt is None:
                s = meta.get("dtype") if isinstance(meta, dict) else None
                raise self.bad(f"array {i} has unsupported dtype {s!r}")
            shape, flat = self._block(meta, dt, f"array {i}")
            if self._used(flat):
                flat = flat.copy()
            a = self.arrays[i] = flat.astype(dt.newbyteorder("="), copy=False).reshape(shape)
        return a

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if isinstance(node, dict) and len(node) == 1:
            (tag, body), = node.items()
            if tag == "tensor":
                return self.tensor(body)
            if tag == "ndarray":
                return self.array(body)
            if tag == "tuple" and isinstance(body, list):
                return tuple(self.decode(v) for v in body)
            if tag == "dict" and isinstance(body, list):
                out = {}
                for pair in body:
                    if not (isinstance(pair, list) and len(pair) == 2):
                        raise self.bad("a dict entry is not a [key, value] pair")
                    k = self.decode(pair[0])
                    try:
                        out[k] = self.decode(pair[1])
                    except TypeError:
                        raise self.bad(f"unhashable dict key {k!r}") from None
                return out
        raise self.bad(f"unknown node {str(node)[:80]}")


def load(f, map_location: str | Callable | dict | None = None,
         weights_only: bool | None = None) -> Any:
    """Read an object written by `save` from a path or a readable binary file.

    Tensors come back on the device they were saved from unless `map_location` is given: a
    device ("cpu", "cuda:0"), a dict mapping saved device names to new ones, or a callable
    `fn(tensor, saved_device_name) -> tensor`. Loaded tensors do not require grad.

    A file that is not a checkpoint, is truncated or is corrupted raises `ValueError` naming
    the file and the problem; nothing in the file is ever executed.

    PyTorch checkpoints (`torch.save` files, zip or legacy) load too, through a reader that
    rebuilds only tensors and plain containers (`torch_pickle.py`); `weights_only` is accepted
    for PyTorch's signature, and loading is always weights-only.

    Example:
        >>> import io, singa_tensor as st
        >>> from singa_tensor.serialization import load, save
        >>> buf = io.BytesIO(); save([st.tensor([1, 2]), (None, "a")], buf)
        >>> _ = buf.seek(0); load(buf)
        [tensor([1, 2]), (None, 'a')]
    """
    if hasattr(f, "read") and not isinstance(f, (str, bytes, os.PathLike)):
        name = repr(getattr(f, "name", None) or f"<{type(f).__name__}>")
        return _load_from(f, name, map_location)
    path = os.fspath(f)
    with open(path, "rb") as fh:
        return _load_from(fh, repr(path), map_location)


def _load_from(f, name: str, map_location):
    seekable = getattr(f, "seekable", lambda: False)()
    if seekable:
        head = f.read(4)
        f.seek(-len(head), 1)
        if head[:1] != MAGIC[:1]:
            from . import torch_pickle

            if torch_pickle.is_torch_file(head):
                return torch_pickle.load_torch(f, name, map_location)
    return _load_st(f, name, map_location)


def _load_st(f, name: str, map_location):
    if map_location is not None and not (callable(map_location) or isinstance(
            map_location, dict)):
        map_location = _parse_location(map_location)
    doc, data = _read_all(f, name)
    if not isinstance(doc, dict) or "root" not in doc:
        raise CheckpointError(f"load: {name} is malformed: the header has no 'root'")
    dec = _Decoder(doc, data, name, map_location)
    try:
        return dec.decode(doc["root"])
    except RecursionError:
        raise CheckpointError(f"load: {name} is malformed: structure nested too deeply") \
            from None


__all__ = ["CheckpointError", "load", "save"]
