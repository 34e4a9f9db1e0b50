"""save_safetensors / load_safetensors: round trips of every dtype, files built by hand byte by
byte (the format: an 8-byte little-endian header length, a JSON header, the raw data), and
hostile headers that must be refused with a clear error."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.safetensors_io import MAX_HEADER, safetensors_metadata
from singa_tensor.serialization import CheckpointError

DATA = Path(__file__).parent / "data"


def _file(header: dict, data: bytes, pad: bool = True) -> bytes:
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def test_round_trip_every_dtype(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "f64": st.tensor(rng.standard_normal((2, 3))),
        "f32": st.tensor(rng.standard_normal((4,)).astype(np.float32)),
        "f16": st.tensor(rng.standard_normal((3, 1)).astype(np.float16)),
        "bf16": st.tensor([1.0, -2.5, 3.140625, 1e30], dtype=st.bfloat16),
        "i64": st.tensor([-(2 ** 62), 5]),
        "i32": st.tensor([7, -8], dtype=st.int32),
        "bool": st.tensor([[True, False], [False, True]]),
        "empty": st.zeros(0, 3),
        "scalar": st.tensor(2.5),
        "view": st.arange(12.0).reshape(3, 4).t(),  # not contiguous
    }
    p = tmp_path / "m.safetensors"
    st.save_safetensors(tensors, p, metadata={"format": "pt", "note": "ü"})
    back = st.load_safetensors(p)
    assert list(back) == list(tensors)
    for k, t in tensors.items():
        assert back[k].dtype is t.dtype and back[k].shape == t.shape, k
        assert back[k].tolist() == t.tolist(), k
    assert safetensors_metadata(p) == {"format": "pt", "note": "ü"}
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and raw[8:9] == b"{"
    assert st.load_safetensors(raw)["i32"].tolist() == [7, -8]  # the bytes load too


def test_written_layout_is_the_format(tmp_path):
    p = tmp_path / "a.safetensors"
    st.save_safetensors({"a": st.tensor([1.0, 2.0]), "b": st.tensor([3], dtype=st.int32)}, p)
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert header == {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "I32", "shape": [1], "data_offsets": [8, 12]}}
    data = raw[8 + n:]
    assert np.frombuffer(data[:8], "<f4").tolist() == [1.0, 2.0]
    assert np.frombuffer(data[8:], "<i4").tolist() == [3]
    assert safetensors_metadata(p) is None


def test_hand_built_file_loads(tmp_path):
    a = np.arange(6, dtype="<f8").reshape(2, 3)
    bf = np.array([0x3F80, 0xC020, 0x7F80], dtype="<u2")  # 1.0, -2.5, inf as bfloat16 bits
    i8 = np.array([-128, 127], dtype="i1")
    u8 = np.array([0, 255], dtype="u1")
    i16 = np.array([-300, 300], dtype="<i2")
    data = a.tobytes() + bf.tobytes() + i8.tobytes() + u8.tobytes() + i16.tobytes()
    o = np.cumsum([0, a.nbytes, bf.nbytes, i8.nbytes, u8.nbytes, i16.nbytes]).tolist()
    header = {"__metadata__": {"k": "v"},
              "a": {"dtype": "F64", "shape": [2, 3], "data_offsets": [o[0], o[1]]},
              "bf": {"dtype": "BF16", "shape": [3], "data_offsets": [o[1], o[2]]},
              "i8": {"dtype": "I8", "shape": [2], "data_offsets": [o[2], o[3]]},
              "u8": {"dtype": "U8", "shape": [2], "data_offsets": [o[3], o[4]]},
              "i16": {"dtype": "I16", "shape": [2], "data_offsets": [o[4], o[5]]}}
    p = tmp_path / "h.safetensors"
    p.write_bytes(_file(header, data, pad=False))  # padding is optional for a reader
    t = st.load_safetensors(p)
    assert t["a"].dtype is st.float64 and t["a"].tolist() == a.tolist()
    assert t["bf"].dtype is st.bfloat16 and t["bf"].float().tolist() == [1.0, -2.5, float("inf")]
    assert t["i8"].tolist() == [-128, 127] and t["i8"].dtype is st.int32
    assert t["u8"].tolist() == [0, 255] and t["i16"].tolist() == [-300, 300]


def test_entries_out_of_order_in_the_header(tmp_path):
    data = np.array([1, 2], "<i8").tobytes() + np.array([3.0], "<f4").tobytes()
    header = {"late": {"dtype": "F32", "shape": [1], "data_offsets": [16, 20]},
              "early": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}}
    p = tmp_path / "o.safetensors"
    p.write_bytes(_file(header, data))
    t = st.load_safetensors(p)
    assert list(t) == ["late", "early"] and t["early"].tolist() == [1, 2]


def test_device_argument(tmp_path):
    p = tmp_path / "d.safetensors"
    st.save_safetensors({"x": st.ones(2)}, p)
    assert st.load_safetensors(p, device="cpu")["x"].device == st.device("cpu")


F32x2 = np.array([1.0, 2.0], "<f4").tobytes()


@pytest.mark.parametrize("raw, match", [
    (b"\x01\x00", r"shorter than the 8-byte header length"),
    (struct.pack("<Q", MAX_HEADER + 1) + b"{}", r"claims 100000001 bytes \(at most"),
    (struct.pack("<Q", 64) + b"{}", r"claims 64 bytes but the file has 2"),
    (struct.pack("<Q", 2) + b"[]", r"does not start with '\{'"),
    (struct.pack("<Q", 3) + b"{x}", r"JSON header does not parse"),
    (struct.pack("<Q", 2) + b"\xff\xfe", r"JSON header does not parse"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}}, F32x2),
     r"'a': bytes \[0, 12\) lie outside the 8-byte data section"),
    (_file({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, F32x2),
     r"'a': bytes \[0, 8\) hold 8 bytes, but F32 of shape \[3\] needs 12"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, F32x2),
     r"overlap another tensor's"),
    (_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, F32x2),
     r"'a': bytes \[4, 8\) leave a gap after byte 0"),
    (_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, F32x2),
     r"the tensors cover 4 bytes of the 8-byte data section"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, F32x2),
     r"bytes \[8, 0\) lie outside"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, F32x2),
     r"bytes \[-8, 0\) lie outside"),
    (_file({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, F32x2),
     r"'a': unsupported dtype 'C64'"),
    (_file({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, F32x2),
     r"shape \[-2\] is not a list of non-negative ints"),
    (_file({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, F32x2),
     r"is not a list of non-negative ints"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}, F32x2),
     r"data_offsets \[0\] is not a pair of ints"),
    (_file({"a": {"dtype": "F32", "shape": [2]}}, F32x2),
     r"exactly dtype, shape and data_offsets"),
    (_file({"a": [1, 2]}, F32x2), r"exactly dtype, shape and data_offsets"),
    (_file({"__metadata__": {"a": 1}}, b""), r"__metadata__ must be an object of strings"),
    (_file({"a": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40], "data_offsets": [0, 8]}},
           F32x2), r"needs 4835703278458516698824704"),
    (_file({"a": {"dtype": "F32", "shape": [1] * 98 + [2], "data_offsets": [0, 8]}}, F32x2),
     r"'a': shape has 99 dimensions, more than the 32 a tensor can have"),
])
def test_hostile_files_are_refused(raw, match):
    with pytest.raises(CheckpointError, match="load_safetensors: <bytes> is not a valid "
                                              "safetensors file: " + ".*" + match):
        st.load_safetensors(raw)


def test_repeated_names_are_refused(tmp_path):
    text = (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
    p = tmp_path / "r.safetensors"
    p.write_bytes(struct.pack("<Q", len(text)) + text + F32x2)
    with pytest.raises(CheckpointError, match=r"the name 'a' appears twice"):
        st.load_safetensors(p)


def test_save_errors(tmp_path):
    p = tmp_path / "e.safetensors"
    with pytest.raises(TypeError, match="save_safetensors: expected a dict"):
        st.save_safetensors([st.ones(1)], p)
    with pytest.raises(TypeError, match="save_safetensors: 'x' is a list, not a Tensor"):
        st.save_safetensors({"x": [1]}, p)
    with pytest.raises(TypeError, match="save_safetensors: tensor names must be strings"):
        st.save_safetensors({1: st.ones(1)}, p)
    with pytest.raises(ValueError, match="'__metadata__' is reserved"):
        st.save_safetensors({"__metadata__": st.ones(1)}, p)
    with pytest.raises(TypeError, match="metadata must be a dict of str -> str"):
        st.save_safetensors({"x": st.ones(1)}, p, metadata={"a": 1})
    assert not p.exists() and not list(tmp_path.iterdir())  # nothing half-written


def test_file_written_by_the_reference_library():
    # tests/data/torch_written.safetensors: written by safetensors.torch.save_file (see
    # tests/data/make_torch_fixtures.py), with a bfloat16 tensor
    t = st.load_safetensors(DATA / "torch_written.safetensors")
    assert t["weight"].tolist() == np.arange(6, dtype=np.float32).reshape(2, 3).tolist()
    assert t["bias"].dtype is st.bfloat16 and t["bias"].float().tolist() == [0.5, -1.0, 3.0]
    assert t["steps"].dtype is st.int64 and t["steps"].tolist() == [1, 2, 3]
    assert t["mask"].dtype is st.bool and t["mask"].tolist() == [True, False]
    assert t["half"].dtype is st.float16 and t["half"].tolist() == [1.5, -0.25]
    assert safetensors_metadata(DATA / "torch_written.safetensors") == {"format": "pt"}
