"""Checkpoint save/load: round trips of every dtype and container, sharing, atomic writes and
clear errors for files that are not valid checkpoints."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import struct

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import serialization as ser
from singa_tensor.serialization import load, save

from .helpers import DEVICE, to_numpy


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    return load(buf, **kw)


@pytest.mark.parametrize("dtype", [st.float32, st.float64, st.float16, st.int32, st.int64,
                                   st.bool])
def test_every_numpy_dtype_roundtrips_bit_exactly(dtype):
    a = np.array([[0, 1, -2.5], [np.inf, -0.0, 3e4]], dtype=np.float64)
    if dtype is st.bool:
        t = st.tensor(a != 0)
    elif dtype.is_floating_point:
        t = st.tensor(a, dtype=dtype)
    else:
        t = st.tensor(np.array([[0, 1, -2], [2**31 - 1, -(2**31), 7]]), dtype=dtype)
    r = _roundtrip(t)
    assert r.dtype is dtype and r.shape == (2, 3) and not r.requires_grad
    assert to_numpy(r).tobytes() == to_numpy(t).tobytes()


def test_bfloat16_bits_roundtrip():
    vals = [1.5, -2.25, 3.0e38, 1e-30, 0.0, float("inf"), 65504.0]
    t = st.tensor(vals).bfloat16()
    r = _roundtrip(t)
    assert r.dtype is st.bfloat16
    assert r.float().tolist() == t.float().tolist()
    # the file holds bfloat16 bit patterns: 2 bytes per element
    buf = io.BytesIO()
    save(t, buf)
    meta = json.loads(buf.getvalue()[32:32 + struct.unpack("<Q", buf.getvalue()[16:24])[0]])
    assert meta["tensors"][0]["nbytes"] == 2 * len(vals)


def test_nested_structure_and_plain_values():
    obj = {
        "model": {"fc.weight": st.randn(3, 2), "fc.bias": st.zeros(3)},
        "optimizer": {"state": {0: {"step": 7, "exp_avg": st.ones(2, 2)}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1],
                                        "nesterov": False, "name": None}]},
        "rng": (12345678901234567890, 42),
        "nan": float("nan"), "inf": -math.inf, "s": "ünïcode", 1.5: "float key",
        (1, "a"): [], "arr": np.arange(6, dtype=np.int16).reshape(2, 3),
        "np_scalar": np.float32(2.5),
    }
    r = _roundtrip(obj)
    assert list(r) == list(obj)  # order and key types kept
    assert r["optimizer"]["state"][0]["step"] == 7
    assert r["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert r["rng"] == (12345678901234567890, 42)
    assert math.isnan(r["nan"]) and r["inf"] == -math.inf and r["s"] == "ünïcode"
    assert r[1.5] == "float key" and r[(1, "a")] == []
    assert r["arr"].dtype == np.int16 and r["arr"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert type(r["np_scalar"]) is float and r["np_scalar"] == 2.5
    np.testing.assert_array_equal(to_numpy(r["model"]["fc.weight"]),
                                  to_numpy(obj["model"]["fc.weight"]))
    assert isinstance(r["optimizer"]["state"][0]["exp_avg"], st.Tensor)


def test_shared_tensor_saved_once_and_views_saved_as_values():
    base = st.arange(12, dtype=st.float32).reshape(3, 4)
    view = base.T[1:]  # non-contiguous view
    buf = io.BytesIO()
    save({"a": base, "b": base, "v": view}, buf)
    n_once = len(buf.getvalue())
    buf.seek(0)
    r = load(buf)
    assert r["a"] is r["b"]
    assert r["v"].tolist() == view.tolist() == np.arange(12).reshape(3, 4).T[1:].tolist()
    two = io.BytesIO()
    save({"a": base, "b": base.clone(), "v": view}, two)
    assert len(two.getvalue()) > n_once  # a distinct tensor costs its bytes again


def test_grad_state_not_stored():
    w = st.randn(2, requires_grad=True)
    (w * 2).sum().backward()
    r = _roundtrip({"w": w, "y": w * 3})
    assert not r["w"].requires_grad and r["w"].grad is None and r["y"].is_leaf
    assert np.allclose(to_numpy(r["y"]), to_numpy(w) * 3)


def test_map_location_forms():
    t = st.ones(2, device="cpu")
    assert _roundtrip(t, map_location="cpu").device == st.device("cpu")
    assert _roundtrip(t, map_location={"cuda:0": "cpu"}).tolist() == [1.0, 1.0]
    seen = []
    r = _roundtrip(t, map_location=lambda x, loc: seen.append(loc) or x * 2)
    assert seen == ["cpu"] and r.tolist() == [2.0, 2.0]


def test_map_location_from_the_device_under_test():
    saved = str(st.device(DEVICE))
    t = st.tensor([1.0, 2.0], device=DEVICE)
    kept = _roundtrip(t)
    assert kept.device == t.device and kept.tolist() == [1.0, 2.0]
    for ml in ("cpu", {saved: "cpu"}):
        moved = _roundtrip(t, map_location=ml)
        assert moved.device == st.device("cpu") and moved.tolist() == [1.0, 2.0]
    seen = []
    r = _roundtrip(t, map_location=lambda x, loc: seen.append(loc) or x * 2)
    # as in PyTorch the callable gets the tensor as read, on the CPU, and places it itself
    assert seen == [saved] and r.device == st.device("cpu") and r.tolist() == [2.0, 4.0]


def test_save_to_path_is_atomic_and_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.st"
    save({"v": 1}, path)
    assert load(path) == {"v": 1}
    real = ser._tensor_bytes
    calls = []

    def flaky(t):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # interrupted half way through
        return real(t)

    monkeypatch.setattr(ser, "_tensor_bytes", flaky)
    with pytest.raises(KeyboardInterrupt):
        save({"a": st.ones(3), "b": st.ones(4)}, path)
    monkeypatch.setattr(ser, "_tensor_bytes", real)

    def crash_on_rename(src, dst):
        raise OSError("disk went away")

    monkeypatch.setattr(os, "replace", crash_on_rename)
    with pytest.raises(OSError, match="disk went away"):
        save({"a": st.ones(3)}, str(path))
    monkeypatch.undo()
    assert load(path) == {"v": 1}  # the old checkpoint survives both failures
    assert sorted(os.listdir(tmp_path)) == ["ckpt.st"]  # and no temporary files are left


def test_save_unsupported_object_fails_before_writing(tmp_path):
    path = tmp_path / "x.st"
    with pytest.raises(TypeError, match=r"cannot save an object of type object at "
                                        r"the root\['opt'\]\[1\]"):
        save({"opt": [1, object()]}, path)
    with pytest.raises(TypeError, match=r"numpy arrays of dtype object are not supported"):
        save(np.array([None]), path)
    cyc: list = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match=r"the object contains itself"):
        save(cyc, path)
    assert not path.exists() and os.listdir(tmp_path) == []


def _good_bytes():
    buf = io.BytesIO()
    save({"w": st.arange(10, dtype=st.float32), "n": 3}, buf)
    return buf.getvalue()


def test_truncated_files_name_the_file(tmp_path):
    good = _good_bytes()
    path = tmp_path / "ckpt.st"
    for cut in (0, 5, 20, 40, len(good) - 40, len(good) - 1):
        path.write_bytes(good[:cut])
        kind = "is not a singa_tensor checkpoint" if cut < 8 else "is truncated"
        with pytest.raises(ValueError, match=rf"load: {re.escape(repr(str(path)))} {kind}"):
            load(path)


def test_flipped_bytes_are_detected(tmp_path):
    good = _good_bytes()
    path = tmp_path / "ckpt.st"
    for pos in (40, len(good) // 2, len(good) - 40, len(good) - 3):
        bad = bytearray(good)
        bad[pos] ^= 0x10
        path.write_bytes(bytes(bad))
        with pytest.raises(ValueError, match=r"is corrupted: the SHA-256 checksum does not "
                                             r"match"):
            load(path)
    bad = bytearray(good)
    bad[0] ^= 1
    path.write_bytes(bytes(bad))
    with pytest.raises(ser.CheckpointError, match=r"not a singa_tensor checkpoint \(bad magic"):
        load(path)
    with pytest.raises(ValueError, match=r"not a singa_tensor checkpoint"):
        load(io.BytesIO(b"\x80\x04pickle-ish data"))


def _forge(doc, data: bytes = b"", version: int = 1) -> io.BytesIO:
    """A file with a valid checksum around a hand-written header: the checks after the
    checksum must catch what a hostile writer can put there."""
    text = doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
    body = struct.pack("<8sIIQQ", ser.MAGIC, version, 0, len(text), len(data)) + text + data
    return io.BytesIO(body + hashlib.sha256(body).digest())


def test_hostile_but_checksummed_files_raise_clean_errors():
    cases = [
        ({"root": {"tensor": 0}, "tensors": [], "arrays": []}, b"", r"tensor reference 0 out"),
        ({"root": {"tensor": 0}, "arrays": [], "tensors": [
            {"dtype": "float32", "shape": [1000], "offset": 0, "nbytes": 4000}]}, b"\0" * 8,
         r"outside the 8-byte data section"),
        ({"root": {"tensor": 0}, "arrays": [], "tensors": [
            {"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}]}, b"\0" * 8,
         r"unknown dtype 'object'"),
        ({"root": {"ndarray": 0}, "tensors": [], "arrays": [
            {"dtype": "|O", "shape": [1], "offset": 0, "nbytes": 8}]}, b"\0" * 8,
         r"unsupported dtype '\|O'"),
        ({"root": {"tensor": 0}, "arrays": [], "tensors": [
            {"dtype": "float32", "shape": [-2], "offset": 0, "nbytes": 8}]}, b"\0" * 8,
         r"invalid shape \[-2\]"),
        ({"root": {"__reduce__": "os.system"}, "tensors": [], "arrays": []}, b"",
         r"unknown node"),
        ({"root": {"dict": [[[1], 2]]}, "tensors": [], "arrays": []}, b"",
         r"unhashable dict key \[1\]"),
        ({"tensors": [], "arrays": []}, b"", r"the header has no 'root'"),
    ]
    for doc, data, msg in cases:
        with pytest.raises(ser.CheckpointError, match=r"is malformed: .*" + msg):
            load(_forge(doc, data))
    with pytest.raises(ValueError, match=r"format version 9; this singa_tensor reads version 1"):
        load(_forge({"root": None}, version=9))
    deep = '{"root": ' + "[" * 100000 + "]" * 100000 + ', "tensors": [], "arrays": []}'
    with pytest.raises(ValueError, match=r"malformed"):
        load(_forge(deep))


def test_several_objects_in_one_stream():
    buf = io.BytesIO()
    save([1], buf)
    save(st.ones(2), buf)
    buf.seek(0)
    assert load(buf) == [1]
    assert load(buf).tolist() == [1.0, 1.0]


def test_resume_reproduces_uninterrupted_run(tmp_path):
    """Plain SGD with momentum written with tensor ops: stopping after 3 steps, saving, loading
    into fresh state and continuing gives bit-identical parameters to an uninterrupted run."""
    rng = np.random.default_rng(0)
    x = st.tensor(rng.standard_normal((8, 3)))
    y = st.tensor(rng.standard_normal((8, 1)))

    def step(state):
        w = state["w"].detach().requires_grad_()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        buf = state["buf"] * 0.9 + w.grad
        return {"w": (w - 0.1 * buf).detach(), "buf": buf.detach(), "step": state["step"] + 1}

    init = {"w": st.tensor(rng.standard_normal((3, 1))), "buf": st.zeros(3, 1), "step": 0}
    s = init
    for _ in range(6):
        s = step(s)
    r = init
    for _ in range(3):
        r = step(r)
    save(r, tmp_path / "mid.st")
    r = load(tmp_path / "mid.st")
    for _ in range(3):
        r = step(r)
    assert r["step"] == s["step"] == 6
    assert to_numpy(r["w"]).tobytes() == to_numpy(s["w"]).tobytes()


def test_header_with_too_many_dims_names_the_file(tmp_path):
    doc = {"root": {"tensor": 0}, "arrays": [], "tensors": [
        {"dtype": "float32", "shape": [1] * 100, "offset": 0, "nbytes": 4}]}
    path = tmp_path / "many_dims.st"
    path.write_bytes(_forge(doc, b"\0" * 4).getvalue())
    with pytest.raises(ser.CheckpointError, match=rf"load: {re.escape(repr(str(path)))} is "
                                                  r"malformed: tensor 0 has 100 dimensions, "
                                                  r"more than the 32"):
        load(path)
    doc = {"root": {"ndarray": 0}, "tensors": [], "arrays": [
        {"dtype": "<f4", "shape": [1] * 100, "offset": 0, "nbytes": 4}]}
    with pytest.raises(ser.CheckpointError, match=r"array 0 has 100 dimensions"):
        load(_forge(doc, b"\0" * 4))


def _temps(d, name: str) -> list:
    return sorted(e for e in os.listdir(d) if e.startswith("." + name + ".")
                  and e.endswith(".tmp"))


def test_save_killed_mid_write_leaves_a_temporary_the_next_save_removes(tmp_path):
    import signal
    import subprocess
    import sys

    path = tmp_path / "ckpt.st"
    save({"v": 1}, path)
    # a writer that dies (SIGKILL: no cleanup runs) half way through writing the temporary
    script = (
        "import os, signal, singa_tensor as st\n"
        "from singa_tensor import serialization as ser\n"
        "real = ser._write\n"
        "def dying(f, *a):\n"
        "    f.write(b'partial'); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
        "ser._write = dying\n"
        f"ser.save({{'w': st.ones(3)}}, {str(path)!r})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    left = _temps(tmp_path, "ckpt.st")
    assert len(left) == 1 and f".{proc.pid}." in left[0]
    # a temporary of a writer that is still running is kept, as is one of another target
    live = tmp_path / f".ckpt.st.{ser._host_tag()}.{os.getppid()}.abc123.tmp"
    other = tmp_path / f".other.st.{ser._host_tag()}.{proc.pid}.abc123.tmp"
    live.write_bytes(b"x")
    other.write_bytes(b"x")
    save({"v": 2}, path)
    assert load(path) == {"v": 2}
    assert _temps(tmp_path, "ckpt.st") == [live.name]
    assert other.exists()


def test_save_documents_the_cleanup():
    doc = " ".join(save.__doc__.split())
    assert "killed mid-write" in doc and "no longer running" in doc


def test_load_reads_straight_into_the_tensors(tmp_path):
    import tracemalloc

    path = tmp_path / "big.st"
    w = st.arange(4 << 20, dtype=st.float32)
    save({"w": w, "b": st.ones(10, dtype=st.bfloat16), "m": st.tensor([True, False]),
          "a": np.arange(5)}, path)
    payload = 4 * w.numel()
    tracemalloc.start()
    try:
        r = load(path)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current >= 0.95 * payload  # the loaded tensor itself is counted
    assert peak < 1.1 * payload, f"load peaked at {peak / payload:.2f}x the payload"
    assert r["w"].tolist()[-3:] == [float(w.numel() - 3), float(w.numel() - 2),
                                    float(w.numel() - 1)]
    assert r["b"].dtype is st.bfloat16 and r["b"].float().tolist() == [1.0] * 10
    assert r["m"].tolist() == [True, False] and r["a"].tolist() == [0, 1, 2, 3, 4]


def test_loaded_tensors_own_writable_memory_even_when_entries_share_bytes():
    # two entries over the same bytes (never written by save) load as separate storages
    data = np.arange(4, dtype="<f4").tobytes()
    doc = {"root": [{"tensor": 0}, {"tensor": 1}], "arrays": [], "tensors": [
        {"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 16},
        {"dtype": "float32", "shape": [2], "offset": 8, "nbytes": 8}]}
    a, b = load(_forge(doc, data))
    a.add_(10)
    assert a.tolist() == [10.0, 11.0, 12.0, 13.0] and b.tolist() == [2.0, 3.0]


def test_truncated_data_section_is_reported_without_reading_it_all():
    buf = io.BytesIO()
    save({"w": st.ones(1000)}, buf)
    cut = io.BytesIO(buf.getvalue()[:-100])
    with pytest.raises(ser.CheckpointError, match=r"is truncated"):
        load(cut)
