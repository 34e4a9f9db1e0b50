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
import struct
import tempfile
import threading
from typing import Any, Callable

import numpy as np

from . import dtype as _dt
from .backend import as_device
from .creation import from_numpy
from .tensor import Tensor

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

    Saving to a path is atomic: the data goes to a temporary file in the same directory, is
    flushed to disk, then renamed over the target, so an interrupted save leaves the old file
    (or none), never a partial one.

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
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=target_dir)
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


def _read_all(f, name: str) -> tuple:
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
    body = _read_exact(f, json_len + data_len, name, "header and tensor data")
    digest = _read_exact(f, _DIGEST, name, "checksum")
    h = hashlib.sha256(head)
    h.update(body)
    if h.digest() != digest:
        raise CheckpointError(f"load: {name} is corrupted: the SHA-256 checksum does not match "
                              f"its contents")
    mv = memoryview(body)
    return mv[:json_len], mv[json_len:]


def _parse_location(loc):
    return str(as_device(loc))


class _Decoder:
    def __init__(self, doc: dict, data: memoryview, name: str, map_location):
        self.name = name
        self.data = data
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

    def _block(self, meta, itemsize: int, what: str) -> tuple:
        try:
            shape = tuple(meta["shape"])
            off, nbytes = meta["offset"], meta["nbytes"]
        except (KeyError, TypeError):
            raise self.bad(f"{what} entry {meta!r} lacks shape/offset/nbytes") from None
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise self.bad(f"{what} has an invalid shape {list(shape)}")
        n = 1
        for s in shape:
            n *= s
        if not (isinstance(off, int) and isinstance(nbytes, int) and off >= 0
                and nbytes == n * itemsize and off + nbytes <= len(self.data)):
            raise self.bad(f"{what} of shape {shape} claims bytes [{off}, {off}+{nbytes}) "
                           f"outside the {len(self.data)}-byte data section or of the wrong "
                           f"size")
        return shape, self.data[off:off + nbytes]

    def tensor(self, i) -> Tensor:
        if not isinstance(i, int) or not 0 <= i < len(self.tensor_meta):
            raise self.bad(f"tensor reference {i!r} out of range")
        t = self.tensors.get(i)
        if t is not None:
            return t
        meta = self.tensor_meta[i]
        name = meta.get("dtype") if isinstance(meta, dict) else None
        dt = next((d for d in _dt.ALL if d.name == name), None)
        if dt is None:
            raise self.bad(f"tensor {i} has unknown dtype {name!r}")
        shape, raw = self._block(meta, dt.itemsize, f"tensor {i}")
        flat = np.frombuffer(raw, dtype=dt.storage.newbyteorder("<")).astype(dt.storage)
        if dt is _dt.bfloat16:
            f32 = (flat.astype(np.uint32) << 16).view(np.float32)
            t = from_numpy(f32.reshape(shape)).to(_dt.bfloat16)
        elif dt is _dt.bool_:
            t = from_numpy((flat != 0).reshape(shape))
        else:
            t = from_numpy(flat.reshape(shape))
        t = self._place(t, meta.get("device", "cpu"), i)
        self.tensors[i] = t
        return t

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
            s = meta.get("dtype") if isinstance(meta, dict) else None
            if not isinstance(s, str) or not _NDARRAY_DTYPE.match(s):
                raise self.bad(f"array {i} has unsupported dtype {s!r}")
            dt = np.dtype(s)
            shape, raw = self._block(meta, dt.itemsize, f"array {i}")
            a = self.arrays[i] = np.frombuffer(raw, dtype=dt).astype(dt.newbyteorder("="))\
                .reshape(shape)
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
    text, data = _read_all(f, name)
    try:
        doc = json.loads(bytes(text).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"load: {name} is malformed: its JSON header does not parse "
                              f"({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(doc, dict) or "root" not in doc:
        raise CheckpointError(f"load: {name} is malformed: the header has no 'root'")
    dec = _Decoder(doc, data, name, map_location)
    try:
        return dec.decode(doc["root"])
    except RecursionError:
        raise CheckpointError(f"load: {name} is malformed: structure nested too deeply") \
            from None


__all__ = ["CheckpointError", "load", "save"]
