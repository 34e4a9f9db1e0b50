"""The wire format of the object collectives (broadcast_object_list, all_gather_object, ...):
a small tagged binary encoding of plain values, never pickle, so that the bytes a peer rank
sends can only ever become data.

Supported: None, bool, int (any size), float, complex, str, bytes, list, tuple, dict (keys of
the scalar types), singa_tensor Tensors (dtype, shape and values; they arrive on the CPU,
without requires_grad) and numpy arrays of any dtype without Python objects in it. Exactly
these types: a subclass (a namedtuple, an IntEnum, an OrderedDict, a numpy scalar) is refused,
because it would arrive as something else.

Layout: the magic b"STOBJ1", then one value. A value is a one-byte tag followed by its body;
lengths and counts are unsigned 64-bit little-endian.
"""

from __future__ import annotations

import struct

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor

MAGIC = b"STOBJ1"
MAX_DEPTH = 100  # nesting deeper than this (or a cycle) is refused on both ends
MAX_NDIM = 64

_SUPPORTED = ("None, bool, int, float, complex, str, bytes, list, tuple, dict, "
              "singa_tensor.Tensor and numpy arrays of non-object dtype")
_KEY_TYPES = (type(None), bool, int, float, complex, str, bytes)

_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_C128 = struct.Struct("<dd")


class ObjectDecodeError(ValueError):
    """Bytes received by an object collective that are not a well-formed encoded object."""


def encode(obj, op: str = "encode") -> bytes:
    """The bytes of obj; TypeError naming op and the type for anything unsupported.

    Example:
        >>> from singa_tensor.distributed import _objects
        >>> _objects.decode(_objects.encode({"lr": 0.1, "steps": [1, 2]}))
        {'lr': 0.1, 'steps': [1, 2]}
    """
    out: list = [MAGIC]
    _put(obj, out, op, 0, "the object")
    return b"".join(out)


def _length(n: int) -> bytes:
    return _U64.pack(n)


def _put(obj, out: list, op: str, depth: int, where: str) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"{op}: {where} is nested more than {MAX_DEPTH} levels deep "
                         f"(or contains itself)")
    tp = type(obj)
    if obj is None:
        out.append(b"N")
    elif tp is bool:
        out.append(b"T" if obj else b"F")
    elif tp is int:
        n = (obj.bit_length() + 8) // 8  # room for the sign bit
        out += [b"i", _length(n), obj.to_bytes(n, "little", signed=True)]
    elif tp is float:
        out += [b"f", _F64.pack(obj)]
    elif tp is complex:
        out += [b"c", _C128.pack(obj.real, obj.imag)]
    elif tp is str:
        data = obj.encode("utf-8", "surrogatepass")
        out += [b"s", _length(len(data)), data]
    elif tp is bytes:
        out += [b"b", _length(len(obj)), obj]
    elif tp is list or tp is tuple:
        out += [b"l" if tp is list else b"t", _length(len(obj))]
        for i, x in enumerate(obj):
            _put(x, out, op, depth + 1, f"{where}[{i}]")
    elif tp is dict:
        out += [b"d", _length(len(obj))]
        for k, v in obj.items():
            if type(k) not in _KEY_TYPES:
                raise TypeError(f"{op}: cannot send a dict key of type {type(k).__name__} (in "
                                f"{where}); keys must be None, bool, int, float, complex, str "
                                f"or bytes")
            _put(k, out, op, depth + 1, where)
            _put(v, out, op, depth + 1, f"{where}[{k!r}]")
    elif tp is np.ndarray:
        _put_array(obj, out, op, depth, where)
    elif isinstance(obj, Tensor):  # a Parameter arrives as a plain Tensor
        _put_tensor(obj, out, op, depth, where)
    else:
        raise TypeError(f"{op}: cannot send an object of type {_type_name(tp)} (in {where}); "
                        f"supported: {_SUPPORTED}")


def _type_name(tp) -> str:
    mod = tp.__module__
    return tp.__qualname__ if mod == "builtins" else f"{mod}.{tp.__qualname__}"


def _put_array(a: np.ndarray, out: list, op: str, depth: int, where: str) -> None:
    if a.dtype.hasobject:
        raise TypeError(f"{op}: cannot send a numpy array of dtype {a.dtype} (in {where}): it "
                        f"holds Python objects; supported: {_SUPPORTED}")
    if a.dtype.itemsize == 0:
        raise TypeError(f"{op}: cannot send a numpy array of dtype {a.dtype} (in {where}): its "
                        f"elements have no size")
    descr = np.lib.format.dtype_to_descr(a.dtype)
    data = np.ascontiguousarray(a).tobytes()
    out.append(b"A")
    _put(descr, out, op, depth + 1, f"{where}.dtype")
    out.append(_length(a.ndim))
    out += [_length(d) for d in a.shape]
    out += [_length(len(data)), data]


def _put_tensor(t: Tensor, out: list, op: str, depth: int, where: str) -> None:
    from ..serialization import _tensor_bytes

    data = _tensor_bytes(t).tobytes()
    name = t.dtype.name.encode()
    out += [b"X", _length(len(name)), name, _length(t.ndim)]
    out += [_length(d) for d in t.shape]
    out += [_length(len(data)), data]


def decode(data, op: str = "decode"):
    """The object encoded in data; ObjectDecodeError (a ValueError) naming op when the bytes
    are not a complete, well-formed encoding.

    Example:
        >>> from singa_tensor.distributed import _objects
        >>> _objects.decode(_objects.encode((1, "a", None)))
        (1, 'a', None)
    """
    r = _Reader(bytes(data), op)
    if r.take(len(MAGIC), "the header") != MAGIC:
        raise r.bad("it does not start with the object header (not an encoded object, or "
                     "a different singa_tensor version)")
    obj = r.value(0)
    if r.pos != len(r.data):
        raise r.bad(f"{len(r.data) - r.pos} bytes left over after the object")
    return obj


class _Reader:
    __slots__ = ("data", "pos", "op")

    def __init__(self, data: bytes, op: str):
        self.data = data
        self.pos = 0
        self.op = op

    def bad(self, why: str) -> ObjectDecodeError:
        return ObjectDecodeError(f"{self.op}: the received object bytes are malformed at byte "
                                 f"{self.pos} of {len(self.data)}: {why}")

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise self.bad(f"{what} needs {n} bytes, only {len(self.data) - self.pos} remain "
                           f"(truncated?)")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u64(self, what: str) -> int:
        return _U64.unpack(self.take(8, what))[0]

    def count(self, what: str, min_bytes_each: int) -> int:
        """A length or count that the remaining bytes can hold (so a hostile count cannot
        make us allocate or loop beyond the message)."""
        n = self.u64(what)
        if n * min_bytes_each > len(self.data) - self.pos:
            raise self.bad(f"{what} is {n}, more than the remaining "
                           f"{len(self.data) - self.pos} bytes can hold")
        return n

    def value(self, depth: int):
        if depth > MAX_DEPTH:
            raise self.bad(f"nested more than {MAX_DEPTH} levels deep")
        tag = self.take(1, "a type tag")
        if tag == b"N":
            return None
        if tag == b"T":
            return True
        if tag == b"F":
            return False
        if tag == b"i":
            return int.from_bytes(self.take(self.count("an int's length", 1), "an int"),
                                  "little", signed=True)
        if tag == b"f":
            return _F64.unpack(self.take(8, "a float"))[0]
        if tag == b"c":
            re, im = _C128.unpack(self.take(16, "a complex"))
            return complex(re, im)
        if tag == b"s":
            raw = self.take(self.count("a str's length", 1), "a str")
            try:
                return raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError as e:
                raise self.bad(f"a str is not valid UTF-8 ({e.reason})") from None
        if tag == b"b":
            return self.take(self.count("a bytes length", 1), "bytes")
        if tag in (b"l", b"t"):
            n = self.count("a sequence's length", 1)
            items = [self.value(depth + 1) for _ in range(n)]
            return items if tag == b"l" else tuple(items)
        if tag == b"d":
            n = self.count("a dict's length", 2)
            d: dict = {}
            for _ in range(n):
                at = self.pos
                k = self.value(depth + 1)
                if type(k) not in _KEY_TYPES:
                    self.pos = at
                    raise self.bad(f"a dict key of type {type(k).__name__}")
                if k in d:
                    self.pos = at
                    raise self.bad(f"the dict key {k!r} appears twice")
                d[k] = self.value(depth + 1)
            return d
        if tag == b"A":
            return self.array(depth)
        if tag == b"X":
            return self.tensor()
        self.pos -= 1
        raise self.bad(f"unknown type tag {tag!r}")

    def shape(self) -> tuple:
        ndim = self.u64("the number of dimensions")
        if ndim > MAX_NDIM:
            raise self.bad(f"{ndim} dimensions (at most {MAX_NDIM})")
        return tuple(self.u64("a dimension") for _ in range(ndim))

    def payload(self, shape: tuple, itemsize: int, what: str) -> bytes:
        n = 1
        for d in shape:
            n *= d
        nbytes = self.u64(f"the {what}'s byte count")
        if nbytes != n * itemsize:
            raise self.bad(f"a {what} of shape {shape} and {itemsize}-byte elements claims "
                           f"{nbytes} bytes")
        return self.take(nbytes, f"the {what}'s values")

    def array(self, depth: int) -> np.ndarray:
        at = self.pos
        descr = self.value(depth + 1)
        try:
            dt = np.lib.format.descr_to_dtype(descr)
        except Exception as e:  # numpy raises TypeError/ValueError/KeyError on a bad descr
            self.pos = at
            raise self.bad(f"an array's dtype {descr!r} is not valid ({e})") from None
        if dt.hasobject or dt.itemsize == 0:
            self.pos = at
            raise self.bad(f"an array of dtype {dt} (Python objects and zero-size elements are "
                           f"never received)")
        shape = self.shape()
        raw = self.payload(shape, dt.itemsize, "array")
        try:
            return np.frombuffer(raw, dtype=dt).reshape(shape).copy()
        except Exception as e:  # e.g. a shape whose size overflows
            raise self.bad(f"an array of shape {shape} cannot be built ({e})") from None

    def tensor(self) -> Tensor:
        from ..creation import from_numpy

        name = self.take(self.count("a tensor dtype's length", 1), "a tensor dtype")
        dt = next((d for d in _dt.ALL if d.name.encode() == name), None)
        if dt is None:
            raise self.bad(f"a tensor of unknown dtype {name[:40]!r}")
        shape = self.shape()
        raw = self.payload(shape, dt.itemsize, "tensor")
        try:
            flat = np.frombuffer(raw, dtype=dt.storage.newbyteorder("<")).astype(dt.storage)
            if dt is _dt.bfloat16:
                f32 = (flat.astype(np.uint32) << 16).view(np.float32)
                return from_numpy(f32.reshape(shape)).to(_dt.bfloat16)
            if dt is _dt.bool_:
                return from_numpy((flat != 0).reshape(shape))
            return from_numpy(flat.reshape(shape))
        except Exception as e:  # e.g. a shape whose size overflows
            raise self.bad(f"a tensor of shape {shape} cannot be built ({e})") from None
