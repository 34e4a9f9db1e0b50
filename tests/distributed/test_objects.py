"""The object collectives' encoding (distributed/_objects.py), without MPI: round trips of every
supported type, refusal of everything else, and truncated or hostile bytes that must raise
ObjectDecodeError without crashing, allocating wildly or running code."""

import math
import struct

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.distributed._objects import MAGIC, MAX_DEPTH, ObjectDecodeError, decode, encode


def roundtrip(x):
    return decode(encode(x, "test"), "test")


@pytest.mark.parametrize("value", [
    None, True, False, 0, 1, -1, 255, -256, 2 ** 200, -(2 ** 200) + 1, 0.0, -0.0, 1.5, 1e308,
    float("inf"), 3 - 4j, "", "héllo ✓", "\udc80", b"", b"\x00\xff", [], (), {},
    [1, [2, (3, {"k": [None, b"x"]})]], {None: 1, True: 2, 3: 3, 1.5: 4, 2j: 5, "s": 6, b"b": 7},
])
def test_plain_values_round_trip(value):
    out = roundtrip(value)
    assert out == value and type(out) is type(value)
    if type(value) is float:
        assert math.copysign(1.0, out) == math.copysign(1.0, value)


def test_nan_and_nested_types_survive():
    out = roundtrip({"a": (float("nan"), [1, (2,)])})
    assert math.isnan(out["a"][0]) and type(out["a"]) is tuple and type(out["a"][1][1]) is tuple


@pytest.mark.parametrize("a", [
    np.arange(12, dtype=np.int64).reshape(3, 4), np.array(2.5), np.zeros((0, 3), np.float32),
    np.array([1 + 2j], np.complex64), np.array([True, False]), np.array(["ab", "c"]),
    np.array([b"x", b"yz"]), np.arange(6, dtype=">i4"), np.arange(10.0)[::3],
    np.array(["2020-01-01"], "datetime64[D]"),
    np.zeros(2, dtype=[("x", "<i4"), ("y", "<f8", (2,))]),
])
def test_numpy_arrays_round_trip(a):
    out = roundtrip(a)
    assert type(out) is np.ndarray and out.dtype == a.dtype and out.shape == a.shape
    assert out.tobytes() == np.ascontiguousarray(a).tobytes()
    assert out.flags.writeable


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64",
                                   "bool"])
def test_tensors_round_trip_with_dtype_shape_and_values(dtype):
    base = np.array([[1.5, -2.0, 0.0], [3.0, 4.25, 1.0]])
    t = st.tensor(base if dtype != "bool" else base > 0, dtype=getattr(st, dtype))
    out = roundtrip({"w": t.t()})["w"]  # a non-contiguous view travels as its values
    assert isinstance(out, st.Tensor) and out.dtype is t.dtype and out.shape == (3, 2)
    assert out.float().tolist() == t.t().float().tolist()


def test_parameter_arrives_as_a_tensor():
    p = st.nn.Parameter(st.ones(2))
    out = roundtrip(p)
    assert type(out) is st.Tensor and not out.requires_grad and out.tolist() == [1.0, 1.0]


class Point:
    pass


@pytest.mark.parametrize("value, tname", [
    (object(), "object"), (Point(), "Point"), ({1, 2}, "set"), (lambda: 0, "function"),
    (np.float64(1.0), "numpy.float64"), (np.array([object()]), "dtype object"),
    ([1, {"k": range(3)}], "range"), ({(1, 2): 3}, "dict key of type tuple"),
    (__import__("collections").OrderedDict(a=1), "OrderedDict"),
    (bytearray(b"x"), "bytearray"),
])
def test_other_types_are_refused_naming_the_op_and_the_type(value, tname):
    with pytest.raises(TypeError) as e:
        encode(value, "all_gather_object")
    msg = str(e.value)
    assert msg.startswith("all_gather_object: cannot send") and tname in msg


def test_cycles_and_deep_nesting_are_refused():
    a: list = []
    a.append(a)
    with pytest.raises(ValueError, match="nested more than"):
        encode(a, "broadcast_object_list")
    deep: list = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError, match="broadcast_object_list: .* nested more than"):
        encode(deep, "broadcast_object_list")


def _u64(n):
    return struct.pack("<Q", n)


@pytest.mark.parametrize("data, why", [
    (b"", "header"),
    (b"PICKLE", "object header"),
    (MAGIC, "type tag"),
    (MAGIC + b"Z", "unknown type tag"),
    (MAGIC + b"N\x00", "left over"),
    (MAGIC + b"f\x00\x00", "truncated"),
    (MAGIC + b"s" + _u64(1 << 62) + b"abc", "more than the remaining"),
    (MAGIC + b"l" + _u64(1 << 60), "more than the remaining"),
    (MAGIC + b"d" + _u64(1) + b"l" + _u64(0) + b"N", "dict key of type list"),
    (MAGIC + b"d" + _u64(2) + b"N" + b"N" + b"N" + b"N", "appears twice"),
    (MAGIC + b"s" + _u64(2) + b"\xff\xfe", "not valid UTF-8"),
    (MAGIC + b"A" + b"s" + _u64(3) + b"|O8" + _u64(1) + _u64(1) + _u64(8) + b"\x00" * 8,
     "Python objects"),
    (MAGIC + b"A" + b"s" + _u64(4) + b"nope" + _u64(0) + _u64(0), "not valid"),
    (MAGIC + b"A" + b"s" + _u64(3) + b"<f8" + _u64(1) + _u64(4) + _u64(8) + b"\x00" * 8,
     "claims 8 bytes"),
    (MAGIC + b"A" + b"s" + _u64(3) + b"<f8" + _u64(99), "dimensions"),
    (MAGIC + b"A" + b"s" + _u64(3) + b"<f8" + _u64(2) + _u64(1 << 40) + _u64(1 << 40) + _u64(0),
     "claims 0 bytes"),
    (MAGIC + b"A" + b"s" + _u64(3) + b"<f8" + _u64(3) + _u64(0) + _u64(1 << 62) + _u64(1 << 62)
     + _u64(0), "cannot be built"),
    (MAGIC + b"X" + _u64(6) + b"object" + _u64(0) + _u64(1), "unknown dtype"),
    (MAGIC + b"X" + _u64(7) + b"float32" + _u64(1) + _u64(2) + _u64(4) + b"\x00" * 4,
     "claims 4 bytes"),
])
def test_malformed_bytes_raise_a_clear_error(data, why):
    with pytest.raises(ObjectDecodeError) as e:
        decode(data, "scatter_object_list")
    msg = str(e.value)
    assert msg.startswith("scatter_object_list: the received object bytes are malformed")
    assert any(w in msg for w in why.split("|")), msg
    assert isinstance(e.value, ValueError)


def test_deep_hostile_nesting_stops_at_the_limit():
    data = MAGIC + (b"l" + _u64(1)) * (MAX_DEPTH + 10) + b"N"
    with pytest.raises(ObjectDecodeError, match="nested more than"):
        decode(data, "broadcast_object_list")


def test_every_truncation_of_a_valid_message_is_refused():
    good = encode({"a": [1, 2.5, "x", b"y", (None, True)], "t": st.arange(4),
                   "n": np.eye(2)}, "test")
    for cut in range(len(good)):
        with pytest.raises(ObjectDecodeError):
            decode(good[:cut], "test")


def test_random_byte_flips_never_escape_as_other_errors():
    rng = np.random.default_rng(0)
    good = bytearray(encode({"a": [1, 2.5, "xyz", b"y"], "t": st.ones(3), "n": np.eye(2)},
                            "test"))
    for _ in range(2000):
        bad = bytearray(good)
        for i in rng.integers(0, len(bad), size=3):
            bad[i] = int(rng.integers(0, 256))
        try:
            decode(bytes(bad), "test")
        except ObjectDecodeError:
            pass
