"""ImageDecoder (onnx/ops_image.py): lossless images decode to their exact pixels in each
pixel format; a missing Pillow names the extra to install; bad input names the node."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

U8 = TensorProto.UINT8


def decoder(elem=U8, **attrs):
    node = helper.make_node("ImageDecoder", ["x"], ["y"], name="dec", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, None)],
                          [helper.make_tensor_value_info("y", U8, None)])
    return st.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))


def encoded(pixels: np.ndarray, fmt: str) -> np.ndarray:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return np.frombuffer(buf.getvalue(), np.uint8)


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "TIFF", "PPM"])
def test_lossless_formats_decode_exactly(fmt):
    pytest.importorskip("PIL")
    rgb = np.random.default_rng(0).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    data = encoded(rgb, fmt)
    y = decoder().run_numpy([data])[0]
    assert y.dtype == np.uint8 and np.array_equal(y, rgb)
    assert np.array_equal(decoder(pixel_format="BGR").run_numpy([data])[0], rgb[:, :, ::-1])
    gray = decoder(pixel_format="Grayscale").run_numpy([data])[0]
    # ITU-R 601-2 luma, as Pillow rounds it
    luma = (rgb.astype(np.float64) @ [0.299, 0.587, 0.114]).reshape(7, 5, 1)
    assert gray.shape == (7, 5, 1) and np.abs(gray - luma).max() <= 1


def test_a_grayscale_file_decodes_to_three_equal_channels():
    pytest.importorskip("PIL")
    g = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    y = decoder().run_numpy([encoded(g, "PNG")])[0]
    assert y.shape == (3, 4, 3) and all(np.array_equal(y[:, :, c], g) for c in range(3))


def test_without_pillow_the_error_names_the_extra(monkeypatch):
    for mod in [m for m in sys.modules if m == "PIL" or m.startswith("PIL.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ModuleNotFoundError, match=r"^node 'dec' \(ImageDecoder\) needs the "
                                                  r"pillow package, which is not installed: "
                                                  r'pip install "singa_tensor\[image\]"'):
        decoder().run_numpy([np.zeros(4, np.uint8)])


def test_error_paths():
    pytest.importorskip("PIL")
    with pytest.raises(OnnxImportError, match=r"node 'dec' \(ImageDecoder\): cannot decode the "
                                              r"image"):
        decoder().run_numpy([np.arange(20, dtype=np.uint8)])
    with pytest.raises(OnnxImportError, match=r"pixel_format must be RGB, BGR or Grayscale, got "
                                              r"'RGBA'"):
        decoder(pixel_format="RGBA").run_numpy([np.zeros(4, np.uint8)])
    with pytest.raises(OnnxImportError, match=r"encoded_stream must be a 1-d uint8 tensor, got "
                                              r"float32 of shape \[4\]"):
        decoder(TensorProto.FLOAT).run_numpy([np.zeros(4, np.float32)])
    with pytest.raises(OnnxImportError, match=r"encoded_stream must be a 1-d uint8 tensor, got "
                                              r"int64 of shape \[2, 2\]"):
        decoder().run_numpy([np.zeros((2, 2), np.uint8)])
