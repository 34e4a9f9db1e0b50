"""Reading and writing the safetensors format (the weights format of the Hugging Face hub),
with our own code and no pickle::

    offset 0   header_len  uint64 little-endian
           8   header      header_len bytes of UTF-8 JSON, padded with spaces to a multiple of
                           8: {"<name>": {"dtype": "F32", "shape": [2, 3],
                           "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
       8 + header_len      data: the tensors' little-endian bytes, row-major, back to back;
                           data_offsets count from the start of this section

Dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL. I16, I8 and U8 have no singa_tensor dtype and
load widened (to int32, int32 and int64, as `st.tensor` widens those numpy arrays); `save`
writes only the library's own dtypes. The reader trusts nothing in the file: the header length
is capped, the JSON must be an object of well-formed entries without repeated names, and the
entries' byte ranges must tile the data section exactly (no overlap, no gap, nothing out of
range, each the size its dtype and shape give), as the format's reference reader requires.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from . import dtype as _dt
from .creation import from_numpy
from .serialization import (
    CheckpointError,
    _default_mode,
    _fsync_dir,
    _temp_beside,
    _tensor_bytes,
)
from .tensor import MAX_DIMS, Tensor

MAX_HEADER = 100_000_000  # bytes of JSON, the reference implementation's limit

# file dtype -> (numpy type of the stored little-endian elements, the library's dtype)
_DTYPES = {
    "F64": ("<f8", _dt.float64), "F32": ("<f4", _dt.float32), "F16": ("<f2", _dt.float16),
    "BF16": ("<u2", _dt.bfloat16), "I64": ("<i8", _dt.int64), "I32": ("<i4", _dt.int32),
    "I16": ("<i2", _dt.int32), "I8": ("i1", _dt.int32), "U8": ("u1", _dt.int64),
    "BOOL": ("u1", _dt.bool_),
}
_CODES = {_dt.float64: "F64", _dt.float32: "F32", _dt.float16: "F16", _dt.bfloat16: "BF16",
          _dt.int64: "I64", _dt.int32: "I32", _dt.bool_: "BOOL"}


def tensor_from_bytes(raw, storage: str, d: _dt.DType, shape: tuple) -> Tensor:
    """A CPU tensor of dtype d holding raw elements of numpy type storage (a copy: the tensor
    owns its memory).

    Example:
        >>> from singa_tensor import bfloat16
        >>> tensor_from_bytes(b"\\x80\\x3f\\x20\\xc0", "<u2", bfloat16, (2,)).float().tolist()
        [1.0, -2.5]
    """
    flat = np.frombuffer(raw, dtype=np.dtype(storage)).astype(np.dtype(storage).newbyteorder("="))
    if d is _dt.bfloat16:  # bfloat16 is the top half of a float32: exact
        f32 = (flat.astype(np.uint32) << 16).view(np.float32)
        return from_numpy(f32.reshape(shape)).to(_dt.bfloat16)
    if d is _dt.bool_:
        return from_numpy((flat != 0).reshape(shape))
    if flat.dtype != d.np:
        flat = flat.astype(d.np)
    return from_numpy(flat.reshape(shape).copy())


# ---- save --------------------------------------------------------------------------------------


def save_safetensors(tensors: dict, path, metadata: dict | None = None) -> None:
    """Write a dict of named tensors as a safetensors file (atomically: a crash leaves the old
    file or the new one, and the temporary a killed save leaves behind is removed by the next
    save of the same path, as `st.save` does). metadata is a dict of strings stored in the
    header's `__metadata__`.

    Example:
        >>> import os, tempfile, singa_tensor as st
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> st.save_safetensors({"w": st.ones(2, 2), "b": st.zeros(2)}, p, {"step": "3"})
        >>> st.load_safetensors(p)["w"].tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    if not isinstance(tensors, dict):
        raise TypeError(f"save_safetensors: expected a dict of name -> Tensor, got "
                        f"{type(tensors).__name__}")
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save_safetensors: metadata must be a dict of str -> str")
    header: dict = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    blocks, offset = [], 0
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"save_safetensors: tensor names must be strings, got {name!r}")
        if name == "__metadata__":
            raise ValueError("save_safetensors: '__metadata__' is reserved for the metadata")
        if not isinstance(t, Tensor):
            raise TypeError(f"save_safetensors: {name!r} is a {type(t).__name__}, not a Tensor")
        a = _tensor_bytes(t)
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blocks.append(a)
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    path = os.fspath(path)
    target_dir = os.path.dirname(os.path.abspath(path))
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(struct.pack("<Q", len(text)))
            out.write(text)
            for a in blocks:
                out.write(a.tobytes())
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(target_dir)


# ---- load --------------------------------------------------------------------------------------


def _no_repeats(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the name {k!r} appears twice")
        out[k] = v
    return out


def _header(data: bytes, name: str) -> tuple:
    def bad(msg):
        return CheckpointError(f"load_safetensors: {name} is not a valid safetensors file: "
                               f"{msg}")

    if len(data) < 8:
        raise bad(f"{len(data)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER:
        raise bad(f"the header claims {n} bytes (at most {MAX_HEADER} are read)")
    if 8 + n > len(data):
        raise bad(f"the header claims {n} bytes but the file has {len(data) - 8} after the "
                  f"length")
    try:
        text = bytes(data[8:8 + n]).decode("utf-8")
        if not text.startswith("{"):
            raise ValueError("the header does not start with '{'")
        doc = json.loads(text, object_pairs_hook=_no_repeats)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise bad(f"the JSON header does not parse ({str(e)[:200]})") from None
    if not isinstance(doc, dict):
        raise bad("the header is not a JSON object")
    return doc, memoryview(data)[8 + n:], bad


def _entries(doc: dict, size: int, bad) -> tuple:
    meta = doc.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(
            isinstance(v, str) for v in meta.values())):
        raise bad("__metadata__ must be an object of strings")
    out = []
    for key, e in doc.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"tensor {key!r}: an entry has exactly dtype, shape and data_offsets")
        code, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if code not in _DTYPES:
            raise bad(f"tensor {key!r}: unsupported dtype {code!r} (supported: "
                      f"{', '.join(_DTYPES)})")
        if not (isinstance(shape, list) and all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
            raise bad(f"tensor {key!r}: shape {shape!r} is not a list of non-negative ints")
        if len(shape) > MAX_DIMS:
            raise bad(f"tensor {key!r}: shape has {len(shape)} dimensions, more than the "
                      f"{MAX_DIMS} a tensor can have")
        if not (isinstance(offs, list) and len(offs) == 2 and all(
                isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise bad(f"tensor {key!r}: data_offsets {offs!r} is not a pair of ints")
        begin, end = offs
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * np.dtype(_DTYPES[code][0]).itemsize
        if not 0 <= begin <= end <= size:
            raise bad(f"tensor {key!r}: bytes [{begin}, {end}) lie outside the {size}-byte "
                      f"data section")
        if end - begin != nbytes:
            raise bad(f"tensor {key!r}: bytes [{begin}, {end}) hold {end - begin} bytes, but "
                      f"{code} of shape {shape} needs {nbytes}")
        out.append((key, code, tuple(shape), begin, end))
    pos = 0
    for key, _, _, begin, end in sorted(out, key=lambda r: (r[3], r[4])):
        if begin != pos:
            raise bad(f"tensor {key!r}: bytes [{begin}, {end}) "
                      + ("overlap another tensor's" if begin < pos else
                         f"leave a gap after byte {pos}"))
        pos = end
    if pos != size:
        raise bad(f"the tensors cover {pos} bytes of the {size}-byte data section")
    return out, meta


def _read(path, name: str) -> bytes:
    if isinstance(path, (bytes, bytearray)):
        return bytes(path)
    with open(os.fspath(path), "rb") as f:
        return f.read()


def load_safetensors(path, device="cpu") -> dict:
    """The tensors of a safetensors file (a path, or the file's bytes), as a dict of name ->
    Tensor on device, in the header's order.

    Example:
        >>> import os, tempfile, singa_tensor as st
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> st.save_safetensors({"x": st.arange(3)}, p)
        >>> st.load_safetensors(p)
        {'x': tensor([0, 1, 2])}
    """
    return _load(path, device)[0]


def safetensors_metadata(path) -> dict | None:
    """The `__metadata__` strings of a safetensors file (None when it has none).

    Example:
        >>> import os, tempfile, singa_tensor as st
        >>> from singa_tensor.safetensors_io import safetensors_metadata
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> st.save_safetensors({}, p, metadata={"format": "pt"})
        >>> safetensors_metadata(p)
        {'format': 'pt'}
    """
    return _load(path, "cpu", tensors=False)[1]


def _load(path, device, tensors: bool = True) -> tuple:
    name = "<bytes>" if isinstance(path, (bytes, bytearray)) else repr(os.fspath(path))
    doc, data, bad = _header(_read(path, name), name)
    entries, meta = _entries(doc, len(data), bad)
    out: dict = {}
    if tensors:
        for key, code, shape, begin, end in entries:
            t = tensor_from_bytes(data[begin:end], _DTYPES[code][0], _DTYPES[code][1], shape)
            out[key] = t if device is None or str(device) == "cpu" else t.to(device)
    return out, meta
