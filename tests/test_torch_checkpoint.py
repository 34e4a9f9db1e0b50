"""st.load of PyTorch checkpoints without torch: files written by torch.save (tests/data, made by
tools/make_torch_fixtures.py), files built here opcode by opcode, and hostile pickles that must
be refused without running anything.

The hand-built files follow the layouts of singa_tensor/torch_pickle.py's docstring: a zip
archive `<name>/data.pkl` + `<name>/data/<key>` + `<name>/byteorder`, or the legacy stream of
pickles (magic number, protocol 1001, system info, the object, the storage keys) followed by each
storage as an int64 count and its bytes. In the object pickle a tensor is
`torch._utils._rebuild_tensor_v2(<persistent id ('storage', torch.FloatStorage, key, 'cpu',
numel)>, offset, size, stride, False, OrderedDict())`.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn
from singa_tensor.serialization import CheckpointError
from singa_tensor.torch_pickle import LEGACY_MAGIC

DATA = Path(__file__).parent / "data"


# ---- a tiny pickle writer (protocol 2 opcodes) ---------------------------------------------------

def glob(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text: str) -> bytes:
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def i(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def tup(*parts: bytes) -> bytes:
    return b"(" + b"".join(parts) + b"t"


def dct(*pairs) -> bytes:
    return b"}(" + b"".join(k + v for k, v in pairs) + b"u"


def pickled(body: bytes) -> bytes:
    return b"\x80\x02" + body + b"."


def tensor(key: str, numel: int, offset: int, size, stride, storage="FloatStorage",
           location="cpu") -> bytes:
    pid = tup(s("storage"), glob("torch", storage), s(key), s(location), i(numel)) + b"Q"
    return (glob("torch._utils", "_rebuild_tensor_v2")
            + tup(pid, i(offset), tup(*map(i, size)), tup(*map(i, stride)), b"\x89",
                  glob("collections", "OrderedDict") + b")R")
            + b"R")


def zip_file(obj_pickle: bytes, storages: dict, byteorder=b"little", prefix="archive") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", obj_pickle)
        z.writestr(f"{prefix}/byteorder", byteorder)
        for key, raw in storages.items():
            z.writestr(f"{prefix}/data/{key}", raw)
        z.writestr(f"{prefix}/version", b"3\n")
    return buf.getvalue()


def legacy_file(obj_pickle: bytes, storages: dict, counts: dict | None = None) -> bytes:
    out = [pickle.dumps(LEGACY_MAGIC, protocol=2), pickle.dumps(1001, protocol=2),
           pickle.dumps({"protocol_version": 1001, "little_endian": True,
                         "type_sizes": {"short": 2, "int": 4, "long": 4}}, protocol=2),
           obj_pickle, pickle.dumps(list(storages), protocol=2)]
    for key, (raw, itemsize) in storages.items():
        n = (counts or {}).get(key, len(raw) // itemsize)
        out.append(struct.pack("<q", n) + raw)
    return b"".join(out)


def _load(raw: bytes, **kw):
    return st.load(io.BytesIO(raw), **kw)


W = np.arange(6, dtype="<f4")
STATE = pickled(dct((s("w"), tensor("0", 6, 0, (2, 3), (3, 1))),
                    (s("wt"), tensor("0", 6, 0, (3, 2), (1, 3))),
                    (s("row"), tensor("0", 6, 3, (3,), (1,))),
                    (s("step"), i(12)), (s("name"), s("x"))))


# ---- files from torch.save ---------------------------------------------------------------------

@pytest.mark.parametrize("fname", ["torch_checkpoint.pt", "torch_checkpoint_legacy.pt"])
def test_file_written_by_torch(fname):
    c = st.load(DATA / fname)
    m = c["model"]
    assert list(m) == ["fc.weight", "fc.bias", "bn.num_batches_tracked", "bf16", "half", "mask",
                       "i32", "base", "view_t", "view_row"]
    assert m["fc.weight"].dtype is st.float32
    assert m["fc.weight"].tolist() == [[1.0, -2.0, 3.0], [0.5, 0.25, -0.125]]
    np.testing.assert_allclose(m["fc.bias"].numpy(), np.float32([0.1, -0.2]), rtol=0)
    assert m["bn.num_batches_tracked"].shape == () and m["bn.num_batches_tracked"].item() == 7
    assert m["bf16"].dtype is st.bfloat16
    assert m["bf16"].float().tolist() == [1.0, -2.5, 3.140625]
    assert m["half"].dtype is st.float16 and m["half"].tolist() == [1.5, -0.25]
    assert m["mask"].tolist() == [True, False, True] and m["i32"].dtype is st.int32
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert m["base"].dtype is st.float64 and m["base"].tolist() == base.tolist()
    assert m["view_t"].tolist() == base.T.tolist() and m["view_row"].tolist() == [4, 5, 6, 7]
    assert (c["epoch"], c["lr"], c["name"], c["best"]) == (3, 0.01, "run-1", None)
    assert c["betas"] == (0.9, 0.999) and c["history"] == [1.5, 1.25]
    assert c["flags"] == {"amp": False} and c["dtype"] is st.float16 and c["size"] == (2, 3)
    assert c["params"][0].tolist() == [1.0, 1.0] and not c["params"][0].requires_grad
    lin = nn.Linear(3, 2)
    lin.load_state_dict(c["linear"])
    assert lin.weight.tolist() == [[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]]
    assert lin(st.ones(1, 3)).tolist() == [[6.5, -6.5]]


# ---- hand-built files ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["zip", "legacy"])
def test_hand_built_checkpoint(layout, tmp_path):
    raw = (zip_file(STATE, {"0": W.tobytes()}) if layout == "zip"
           else legacy_file(STATE, {"0": (W.tobytes(), 4)}))
    p = tmp_path / "c.pt"
    p.write_bytes(raw)
    for c in (st.load(p), _load(raw)):
        assert c["w"].tolist() == W.reshape(2, 3).tolist()
        assert c["wt"].tolist() == W.reshape(3, 2, order="F").tolist()
        assert c["row"].tolist() == [3.0, 4.0, 5.0]
        assert c["step"] == 12 and c["name"] == "x"


def test_big_endian_zip():
    raw = zip_file(STATE, {"0": W.astype(">f4").tobytes()}, byteorder=b"big")
    assert _load(raw)["w"].tolist() == W.reshape(2, 3).tolist()


def test_storage_types_and_map_location():
    obj = pickled(dct(
        (s("i8"), tensor("a", 2, 0, (2,), (1,), "CharStorage")),
        (s("u8"), tensor("b", 2, 0, (2,), (1,), "ByteStorage")),
        (s("i16"), tensor("c", 2, 0, (2,), (1,), "ShortStorage")),
        (s("d"), tensor("d", 1, 0, (), (), "DoubleStorage", location="cuda:0"))))
    raw = zip_file(obj, {"a": np.int8([-5, 7]).tobytes(), "b": np.uint8([0, 255]).tobytes(),
                         "c": np.int16([-300, 300]).tobytes(), "d": np.float64([2.5]).tobytes()})
    c = _load(raw, map_location="cpu")
    assert c["i8"].tolist() == [-5, 7] and c["u8"].tolist() == [0, 255]
    assert c["i16"].tolist() == [-300, 300] and c["d"].item() == 2.5
    seen = []
    _load(raw, map_location=lambda t, loc: seen.append(loc))
    assert sorted(seen) == ["cpu", "cpu", "cpu", "cuda:0"]
    assert _load(raw, map_location={"cuda:0": "cpu"})["d"].device == st.device("cpu")


def test_st_checkpoints_still_load(tmp_path):
    p = tmp_path / "own.st"
    st.save({"w": st.ones(2)}, p)
    assert st.load(p, weights_only=True)["w"].tolist() == [1.0, 1.0]


# ---- hostile files ------------------------------------------------------------------------------

class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("layout", ["zip", "legacy"])
def test_os_system_is_refused(tmp_path, protocol, layout):
    marker = tmp_path / "pwned"
    evil = pickle.dumps({"w": _Evil(marker)}, protocol=protocol)
    raw = zip_file(evil, {}) if layout == "zip" else legacy_file(evil, {})
    with pytest.raises(CheckpointError, match=r"refers to (posix|os|nt)\.system, which a "
                                              r"checkpoint may not use"):
        _load(raw)
    assert not marker.exists()


@pytest.mark.parametrize("module, name", [
    ("builtins", "eval"), ("builtins", "getattr"), ("builtins", "__import__"),
    ("subprocess", "Popen"), ("torch._utils", "_rebuild_tensor"), ("torch", "load"),
    ("numpy.core.multiarray", "_reconstruct"), ("collections", "defaultdict"),
    ("torch.serialization", "_get_layout"),
])
def test_other_globals_are_refused(module, name):
    obj = pickled(glob(module, name) + tup(s("1")) + b"R")
    with pytest.raises(CheckpointError, match=f"refers to {module}.{name}, which a checkpoint "
                                              f"may not use"):
        _load(zip_file(obj, {}))


def test_inst_and_obj_opcodes_go_through_the_allow_list():
    inst = b"\x80\x02(" + b"i" + b"os\nsystem\n" + b"."  # INST os system with no arguments
    with pytest.raises(CheckpointError, match=r"refers to os.system"):
        _load(zip_file(inst, {}))


def test_build_on_a_tensor_is_refused():
    # BUILD could otherwise set a Tensor's offset or shape past its memory
    obj = pickled(tensor("0", 6, 0, (6,), (1,)) + dct((s("_offset"), i(10 ** 6))) + b"b")
    with pytest.raises(CheckpointError, match=r"sets the state of a Tensor"):
        _load(zip_file(obj, {"0": W.tobytes()}))


@pytest.mark.parametrize("body, storages, match", [
    (tensor("0", 6, 4, (3,), (1,)), {"0": W.tobytes()},
     r"tensor of size \(3,\) reaches element 6 of storage '0', which has 6"),
    (tensor("0", 6, 0, (2, 3), (5, 1)), {"0": W.tobytes()}, r"reaches element 7"),
    (tensor("0", 6, -1, (2,), (1,)), {"0": W.tobytes()}, r"invalid offset, size or stride"),
    (tensor("0", 6, 0, (2,), (1, 1)), {"0": W.tobytes()}, r"invalid offset, size or stride"),
    (tensor("0", 8, 0, (2,), (1,)), {"0": W.tobytes()},
     r"storage '0' of 8 FloatStorage elements needs 32 bytes; its entry holds 24"),
    (tensor("9", 6, 0, (2,), (1,)), {"0": W.tobytes()}, r"storage '9' has no entry"),
    (tensor("0", 6, 0, (2,), (1,), "QInt8Storage"), {"0": W.tobytes()},
     r"refers to torch.QInt8Storage"),
    (b"(" + s("file") + b"tQ", {}, r"unknown persistent id"),
    (tensor("0", 6, 0, (2 ** 20, 2 ** 20), (0, 0)), {"0": W.tobytes()},
     r"repeats the 6 elements of storage '0' into more than 1073741824 bytes"),
    (glob("torch._utils", "_rebuild_tensor_v2") + tup(i(1), i(0), tup(), tup(), b"\x89",
                                                      b"N") + b"R", {},
     r"a tensor is rebuilt from int, not a storage"),
    (dct((s("a"), tensor("0", 6, 0, (2,), (1,))), (s("b"), tensor("0", 2, 0, (2,), (1,)))),
     {"0": W.tobytes()}, r"storage '0' is declared twice"),
])
def test_malformed_tensors_are_refused(body, storages, match):
    with pytest.raises(CheckpointError, match=match):
        _load(zip_file(pickled(body), storages))


def test_malformed_containers_are_refused():
    with pytest.raises(CheckpointError, match=r"is a zip archive but not a PyTorch checkpoint"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("other.txt", b"x")
        _load(buf.getvalue())
    with pytest.raises(CheckpointError, match=r"unknown byteorder"):
        _load(zip_file(STATE, {"0": W.tobytes()}, byteorder=b"middle"))
    with pytest.raises(CheckpointError, match=r"not a singa_tensor checkpoint nor a valid "
                                              r"PyTorch one \(EOFError"):
        _load(zip_file(b"\x80\x02}q\x00", {}))  # a pickle that stops early
    with pytest.raises(CheckpointError, match=r"not a readable zip archive"):
        _load(b"PK\x03\x04 truncated")
    with pytest.raises(CheckpointError, match=r"bad magic number"):
        _load(pickle.dumps(12345, protocol=2))


def test_malformed_legacy_files_are_refused():
    good = legacy_file(STATE, {"0": (W.tobytes(), 4)})
    with pytest.raises(CheckpointError, match=r"is truncated in storage '0'"):
        _load(good[:-4])
    with pytest.raises(CheckpointError, match=r"storage '0' holds 5 elements; the object says 6"):
        _load(legacy_file(STATE, {"0": (W.tobytes(), 4)}, counts={"0": 5}))
    with pytest.raises(CheckpointError, match=r"storage 'zz' is not used by the object"):
        _load(legacy_file(STATE, {"zz": (W.tobytes(), 4)}))
    bad_version = (pickle.dumps(LEGACY_MAGIC, protocol=2) + pickle.dumps(7, protocol=2))
    with pytest.raises(CheckpointError, match=r"unsupported PyTorch legacy protocol version"):
        _load(bad_version)


def test_the_standard_unpickler_is_untouched():
    # the restricted BUILD lives in our subclass's own dispatch table
    assert pickle.loads(pickle.dumps(_Plain())).__dict__ == {"a": 1}


class _Plain:
    def __init__(self):
        self.a = 1


def test_expanded_views_load():
    # a tensor with a zero stride (torch's expand) repeats its storage's elements
    obj = pickled(tensor("0", 2, 0, (3, 2), (0, 1)))
    raw = zip_file(obj, {"0": np.float32([1.0, 2.0]).tobytes()})
    assert _load(raw).tolist() == [[1.0, 2.0]] * 3


def test_devices_load_as_their_names():
    obj = pickled(b"](" + glob("torch", "device") + tup(s("cuda"), i(1)) + b"R"
                  + glob("torch", "device") + tup(s("cpu")) + b"R" + b"e")
    assert _load(zip_file(obj, {})) == ["cuda:1", "cpu"]
    bad = pickled(glob("torch", "device") + tup(i(3)) + b"R")
    with pytest.raises(CheckpointError, match=r"torch.device\(3,\) is not a device"):
        _load(zip_file(bad, {}))


def test_rebuild_from_type_v2():
    # what torch.save writes for a tensor carrying Python attributes: the attributes are dropped
    inner = tensor("0", 6, 0, (6,), (1,))[len(glob("torch._utils", "_rebuild_tensor_v2")):-1]
    obj = pickled(glob("torch._tensor", "_rebuild_from_type_v2")
                  + tup(glob("torch._utils", "_rebuild_tensor_v2"), glob("torch", "Tensor"),
                        inner, dct((s("note"), s("x"))))
                  + b"R")
    assert _load(zip_file(obj, {"0": W.tobytes()})).tolist() == W.tolist()
    odd = pickled(glob("torch._tensor", "_rebuild_from_type_v2")
                  + tup(glob("torch._utils", "_rebuild_tensor_v2"), glob("builtins", "set"),
                        inner, b"N") + b"R")
    with pytest.raises(CheckpointError, match=r"tensor subclass .* cannot be rebuilt"):
        _load(zip_file(odd, {"0": W.tobytes()}))
