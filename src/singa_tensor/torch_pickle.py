"""Reading PyTorch checkpoints (`torch.save` files, `.pt`/`.pth`) without torch and without
running anything they contain.

A PyTorch file is one of two layouts:

- zip (torch >= 1.6): a zip archive whose entries sit in one folder `<name>/`:
  `<name>/data.pkl` (the pickled object), `<name>/data/<key>` (the raw bytes of each storage,
  uncompressed), `<name>/byteorder` ("little" or "big"), `<name>/version`.
- legacy (`_use_new_zipfile_serialization=False`): five pickles one after another (the magic
  number 0x1950a86a20f9469cfc6c, the protocol version 1001, a dict of system facts, the
  object, the list of storage keys in file order), then each storage in that order as an
  int64 element count followed by its bytes.

In the object's pickle a tensor is the call `torch._utils._rebuild_tensor_v2(storage,
storage_offset, size, stride, requires_grad, backward_hooks)`; each storage is a persistent id
`("storage", torch.<Type>Storage, key, location, numel)`.

The unpickler here resolves only the names that rebuild tensors and plain containers
(`_allowed`): the rebuild functions, the storage types, torch.Size, torch.device (it
loads as the device's name), the dtypes,
collections.OrderedDict and the builtin set, frozenset and complex; every other global
(`os.system`, `builtins.eval`, ...) is refused with a `CheckpointError` before anything is
called. A tensor becomes a singa_tensor Tensor with a copy of its values (a view is copied, not
shared); int8, uint8 and int16 storages widen as `st.tensor` widens those numpy types.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile

import numpy as np

from . import dtype as _dt
from .backend import as_device
from .safetensors_io import tensor_from_bytes
from .serialization import CheckpointError
from .tensor import Tensor

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
ZIP_MAGIC = b"PK\x03\x04"
_MAX_EXPANDED = 1 << 30  # bytes a view larger than its storage may expand to when copied

# storage type name -> (numpy element type, the library's dtype)
_STORAGES = {
    "DoubleStorage": ("f8", _dt.float64), "FloatStorage": ("f4", _dt.float32),
    "HalfStorage": ("f2", _dt.float16), "BFloat16Storage": ("u2", _dt.bfloat16),
    "LongStorage": ("i8", _dt.int64), "IntStorage": ("i4", _dt.int32),
    "ShortStorage": ("i2", _dt.int32), "CharStorage": ("i1", _dt.int32),
    "ByteStorage": ("u1", _dt.int64), "BoolStorage": ("u1", _dt.bool_),
}
_DTYPE_NAMES = {"float64": _dt.float64, "double": _dt.float64, "float32": _dt.float32,
                "float": _dt.float32, "float16": _dt.float16, "half": _dt.float16,
                "bfloat16": _dt.bfloat16, "int64": _dt.int64, "long": _dt.int64,
                "int32": _dt.int32, "int": _dt.int32, "bool": _dt.bool_}


class _StorageType:
    """Stands for torch.<Type>Storage inside a persistent id."""

    def __init__(self, name: str):
        self.name = name
        self.np, self.dtype = _STORAGES[name]


class _Storage:
    """A storage of the file: its element type, element count, location and bytes (read when
    the first tensor on it is rebuilt)."""

    def __init__(self, kind: _StorageType, key: str, location: str, numel: int, reader):
        self.kind, self.key, self.location, self.numel = kind, key, location, numel
        self._reader = reader
        self._array = None

    def array(self, order: str) -> np.ndarray:
        if self._array is None:
            raw = self._reader(self)
            a = np.frombuffer(raw, dtype=np.dtype(self.kind.np).newbyteorder(order))
            self._array = a.astype(a.dtype.newbyteorder("="))
        return self._array


class _Rebuilder:
    """The functions the allowed globals resolve to, bound to one load."""

    def __init__(self, name: str, order: str, place):
        self.name, self.order, self.place = name, order, place

    def bad(self, msg: str) -> CheckpointError:
        return CheckpointError(f"load: {self.name} is a malformed PyTorch checkpoint: {msg}")

    def tensor_v2(self, storage, offset, size, stride, requires_grad=False, hooks=None,
                  metadata=None):
        if not isinstance(storage, _Storage):
            raise self.bad(f"a tensor is rebuilt from {type(storage).__name__}, not a storage")
        ints = [offset, *size, *stride] if isinstance(size, tuple) and isinstance(
            stride, tuple) else None
        if ints is None or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                   for v in ints) or len(size) != len(stride):
            raise self.bad(f"tensor of storage {storage.key!r} has an invalid offset, size or "
                           f"stride ({offset!r}, {size!r}, {stride!r})")
        numel = 1
        for s in size:
            numel *= s
        last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if numel else 0
        if numel and last >= storage.numel:
            raise self.bad(f"tensor of size {size} reaches element {last} of storage "
                           f"{storage.key!r}, which has {storage.numel}")
        a = storage.array(self.order)
        item = a.itemsize
        if numel > storage.numel and numel * item > _MAX_EXPANDED:
            # an expanded view (zero strides) is copied here: a hostile size must not make
            # that copy exhaust memory
            raise self.bad(f"tensor of size {size} repeats the {storage.numel} elements of "
                           f"storage {storage.key!r} into more than {_MAX_EXPANDED} bytes")
        view = np.lib.stride_tricks.as_strided(a[offset:] if numel else a[:0], shape=size,
                                               strides=tuple(s * item for s in stride))
        flat = np.ascontiguousarray(view).reshape(-1)
        t = tensor_from_bytes(flat.tobytes(), flat.dtype.str, storage.kind.dtype, tuple(size))
        return self.place(t, storage.location)

    def parameter(self, data, requires_grad=True, hooks=None, state=None):
        if not isinstance(data, Tensor):
            raise self.bad(f"a parameter is rebuilt from {type(data).__name__}, not a tensor")
        return data  # loaded tensors do not require grad, as with st.load's own files

    def from_type_v2(self, func, new_type, args, state):
        if new_type not in (_TENSOR_TYPE, _PARAMETER_TYPE) or not callable(func):
            raise self.bad(f"tensor subclass {new_type!r} cannot be rebuilt")
        if not isinstance(args, tuple):
            raise self.bad("the arguments of a tensor rebuild are not a tuple")
        return func(*args)


_TENSOR_TYPE, _PARAMETER_TYPE = object(), object()  # torch.Tensor, torch.nn.Parameter


def _size(*args):
    if len(args) != 1 or not isinstance(args[0], (tuple, list)):
        raise CheckpointError("load: torch.Size takes one sequence of ints")
    return tuple(args[0])


def _device(*args):
    if not (1 <= len(args) <= 2 and isinstance(args[0], str)
            and (len(args) == 1 or isinstance(args[1], int))):
        raise CheckpointError(f"load: torch.device{args!r} is not a device")
    return str(as_device(args[0] if len(args) == 1 else f"{args[0]}:{args[1]}"))


def _allowed(rebuild: _Rebuilder) -> dict:
    table = {
        ("torch._utils", "_rebuild_tensor_v2"): rebuild.tensor_v2,
        ("torch._utils", "_rebuild_parameter"): rebuild.parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): rebuild.parameter,
        ("torch._tensor", "_rebuild_from_type_v2"): rebuild.from_type_v2,
        ("torch", "Tensor"): _TENSOR_TYPE,
        ("torch.nn.parameter", "Parameter"): _PARAMETER_TYPE,
        ("torch", "Size"): _size,
        ("torch", "device"): _device,
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "complex"): complex,
    }
    for name in _STORAGES:
        table[("torch", name)] = _StorageType(name)
    for name, d in _DTYPE_NAMES.items():
        table[("torch", name)] = d
    return table


class _Unpickler(pickle._Unpickler):  # the Python one: its BUILD can be restricted
    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, f, name: str, allowed: dict, storage):
        super().__init__(f)
        self.name, self.allowed, self.storage = name, allowed, storage

    def find_class(self, module: str, name: str):
        try:
            return self.allowed[(module, name)]
        except (KeyError, TypeError):
            raise CheckpointError(
                f"load: {self.name} refers to {module}.{name}, which a checkpoint may not use "
                f"(only tensors, storages, dtypes and plain containers are rebuilt; nothing in "
                f"the file is run)") from None

    def persistent_load(self, pid):
        return self.storage(pid)

    def load_build(self):
        # BUILD sets an object's state: allowed only as torch writes it, the `_metadata` of a
        # state dict (an OrderedDict's attributes)
        state = self.stack.pop()
        inst = self.stack[-1]
        if not (type(inst) is collections.OrderedDict and isinstance(state, dict)
                and all(isinstance(k, str) for k in state)):
            raise CheckpointError(f"load: {self.name} sets the state of a "
                                  f"{type(inst).__name__}, which a checkpoint may not do")
        inst.__dict__.update(state)

    dispatch[pickle.BUILD[0]] = load_build


def _placer(name: str, map_location):
    if map_location is not None and not (callable(map_location) or isinstance(
            map_location, dict)):
        map_location = str(as_device(map_location))

    def place(t: Tensor, saved) -> Tensor:
        if not isinstance(saved, str):
            raise CheckpointError(f"load: {name}: a storage has an invalid location {saved!r}")
        ml = map_location
        if callable(ml) and not isinstance(ml, str):
            out = ml(t, saved)
            return t if out is None else out
        dest = ml.get(saved, saved) if isinstance(ml, dict) else (saved if ml is None else ml)
        try:
            dev = as_device(dest)
        except (ValueError, TypeError) as e:
            raise CheckpointError(f"load: {name}: location {saved!r} cannot be used "
                                  f"({e})") from None
        if dev.type == "cpu":
            return t
        try:
            return t.to(dev)
        except Exception as e:  # noqa: BLE001 - any failure to place means: remap it
            raise RuntimeError(f"load: {name}: cannot put a tensor on {dev} ({e}); pass "
                               f"map_location='cpu' to load it on the CPU") from None

    return place


def _storage_maker(name: str, reader):
    storages: dict = {}

    def make(pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise CheckpointError(f"load: {name}: unknown persistent id {str(pid)[:80]}")
        _, kind, key, location, numel = pid[:5]
        if len(pid) > 5 and pid[5] is not None:
            raise CheckpointError(f"load: {name}: storage views of torch < 0.4 are not "
                                  f"supported")
        if not isinstance(kind, _StorageType):
            raise CheckpointError(f"load: {name}: storage {key!r} has type {kind!r}, not a "
                                  f"torch storage type")
        if not (isinstance(key, str) and isinstance(numel, int) and numel >= 0):
            raise CheckpointError(f"load: {name}: storage id {str(pid)[:80]} is malformed")
        s = storages.get(key)
        if s is None:
            s = storages[key] = _Storage(kind, key, location, numel, reader)
        elif s.kind.name != kind.name or s.numel != numel:
            raise CheckpointError(f"load: {name}: storage {key!r} is declared twice with "
                                  f"different types or sizes")
        return s

    return make, storages


def _unpickle(f, name: str, order: str, map_location, reader):
    rebuild = _Rebuilder(name, order, _placer(name, map_location))
    make, storages = _storage_maker(name, reader)
    try:
        return _Unpickler(f, name, _allowed(rebuild), make).load(), storages
    except CheckpointError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, struct.error, RecursionError, MemoryError) as e:
        raise CheckpointError(f"load: {name} is not a singa_tensor checkpoint nor a valid "
                              f"PyTorch one "
                              f"({type(e).__name__}: {str(e)[:200]})") from None


def _load_zip(f, name: str, map_location):
    try:
        z = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise CheckpointError(f"load: {name} is not a readable zip archive ({e})") from None
    with z:
        names = z.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise CheckpointError(f"load: {name} is a zip archive but not a PyTorch checkpoint "
                                  f"(no single <name>/data.pkl entry)")
        prefix = pkl[0][:-len("data.pkl")]
        order = "<"
        if prefix + "byteorder" in names:
            bo = z.read(prefix + "byteorder")
            if bo not in (b"little", b"big"):
                raise CheckpointError(f"load: {name}: unknown byteorder {bo[:20]!r}")
            order = "<" if bo == b"little" else ">"

        def read(s: _Storage) -> bytes:
            entry = prefix + "data/" + s.key
            try:
                info = z.getinfo(entry)
            except KeyError:
                raise CheckpointError(f"load: {name}: storage {s.key!r} has no entry "
                                      f"{entry!r}") from None
            nbytes = s.numel * np.dtype(s.kind.np).itemsize
            if info.file_size != nbytes:
                raise CheckpointError(f"load: {name}: storage {s.key!r} of {s.numel} "
                                      f"{s.kind.name} elements needs {nbytes} bytes; its entry "
                                      f"holds {info.file_size}")
            return z.read(info)

        try:
            text = z.read(pkl[0])
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            raise CheckpointError(f"load: {name}: cannot read {pkl[0]} ({e})") from None
        obj, _ = _unpickle(io.BytesIO(text), name, order, map_location, read)
        return obj


def _load_legacy(f, name: str, map_location):
    def plain():
        # the header pickles hold only ints, bools, strings and dicts and lists of them
        v, _ = _unpickle(f, name, "<", None, _no_storage)
        return v

    def _no_storage(s):
        raise CheckpointError(f"load: {name}: storage bytes requested before they are read")

    if plain() != LEGACY_MAGIC:
        raise CheckpointError(f"load: {name} is neither a singa_tensor checkpoint nor a "
                              f"PyTorch one (bad magic number)")
    if plain() != 1001:
        raise CheckpointError(f"load: {name}: unsupported PyTorch legacy protocol version")
    info = plain()
    order = "<" if not isinstance(info, dict) or info.get("little_endian", True) else ">"
    data: dict = {}

    def read(s: _Storage) -> bytes:
        try:
            return data[s.key]
        except KeyError:
            raise CheckpointError(f"load: {name}: storage {s.key!r} is missing") from None

    # the object's pickle comes before the storages' bytes: walk it once for its storages,
    # read the bytes, then unpickle it again from its own bytes with the tensors rebuilt
    start = f.tell()
    _, storages = _unpickle_structure(f, name, order)
    obj_bytes_end = f.tell()
    keys = plain()
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise CheckpointError(f"load: {name}: the storage key list is malformed")
    for key in keys:
        s = storages.get(key)
        if s is None:
            raise CheckpointError(f"load: {name}: storage {key!r} is not used by the object")
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(f"load: {name} is truncated at storage {key!r}")
        (count,) = struct.unpack(order + "q", head)
        if count != s.numel:
            raise CheckpointError(f"load: {name}: storage {key!r} holds {count} elements; "
                                  f"the object says {s.numel}")
        nbytes = count * np.dtype(s.kind.np).itemsize
        raw = f.read(nbytes)
        if len(raw) != nbytes:
            raise CheckpointError(f"load: {name} is truncated in storage {key!r}")
        data[key] = raw
    f.seek(start)
    body = f.read(obj_bytes_end - start)
    obj, _ = _unpickle(io.BytesIO(body), name, order, map_location, read)
    return obj


def _unpickle_structure(f, name: str, order: str):
    """Walk the object pickle once for its storages, rebuilding no tensor."""

    class _Walk(_Rebuilder):
        def tensor_v2(self, storage, *args, **kwargs):
            if not isinstance(storage, _Storage):
                raise self.bad("a tensor is rebuilt from something that is not a storage")
            return None

        def parameter(self, data, *args, **kwargs):
            return None

    rebuild = _Walk(name, order, lambda t, loc: t)
    make, storages = _storage_maker(name, None)
    try:
        _Unpickler(f, name, _allowed(rebuild), make).load()
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure here is a malformed file
        raise CheckpointError(f"load: {name} is not a singa_tensor checkpoint nor a valid "
                              f"PyTorch one "
                              f"({type(e).__name__}: {str(e)[:200]})") from None
    return None, storages


def is_torch_file(head: bytes) -> bool:
    """Whether the first bytes of a file are those of a PyTorch checkpoint (a zip archive or a
    pickle).

    Example:
        >>> is_torch_file(b"PK\\x03\\x04"), is_torch_file(b"\\x89STC")
        (True, False)
    """
    return head.startswith(ZIP_MAGIC) or head[:1] == b"\x80"


def load_torch(f, name: str, map_location=None):
    """Read a PyTorch checkpoint from a seekable binary file (see the module's docstring);
    `st.load` calls this for files that start like one.

    Example:
        >>> import io, singa_tensor as st
        >>> from singa_tensor.torch_pickle import load_torch
        >>> try:
        ...     load_torch(io.BytesIO(b"\\x80\\x02K\\x05."), "<bytes>")
        ... except ValueError as e:
        ...     print(e)
        load: <bytes> is neither a singa_tensor checkpoint nor a PyTorch one (bad magic number)
    """
    head = f.read(4)
    f.seek(-len(head), 1)
    if head.startswith(ZIP_MAGIC):
        return _load_zip(f, name, map_location)
    return _load_legacy(f, name, map_location)
