"""The ONNX ImageDecoder op: an encoded image (a 1-d uint8 tensor holding a JPEG, PNG, BMP,
TIFF, WebP, JPEG 2000 or PNM file) to its pixels, [height, width, 3] for pixel_format RGB
(the default) and BGR, [height, width, 1] for Grayscale.

The codecs are Pillow's, an optional dependency (`pip install "singa_tensor[image]"`), imported
when such a node first runs. Grayscale is Pillow's luma conversion (ITU-R 601-2). The output
is a uint8 tensor without gradient.
"""

from __future__ import annotations

import io

import numpy as np

from .. import dtype as _dt
from .._optional import missing
from ._handlers import handler
from .ops_math import _need

_FORMATS = ("RGB", "BGR", "Grayscale")


def _pillow(node):
    try:
        from PIL import Image
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.partition(".")[0] != "PIL":
            raise
        raise missing("PIL", f"node {node.name!r} (ImageDecoder)") from None
    return Image


@handler("ImageDecoder")
def image_decoder(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if x.ndim != 1 or x.dtype.is_floating_point or x.dtype is _dt.bool_:
        raise node.fail(f"encoded_stream must be a 1-d uint8 tensor, got {x.dtype.name} of "
                        f"shape {list(x.shape)}")
    fmt = attrs.get("pixel_format", "RGB")
    if fmt not in _FORMATS:
        raise node.fail(f"pixel_format must be RGB, BGR or Grayscale, got {fmt!r}")
    image = _pillow(node)
    data = np.asarray(x.detach().cpu().numpy())
    if data.size and (data.min() < 0 or data.max() > 255):
        raise node.fail("encoded_stream must hold bytes (0 to 255)")
    try:
        with image.open(io.BytesIO(data.astype(np.uint8).tobytes())) as img:
            img.load()
            pixels = np.asarray(img.convert("L" if fmt == "Grayscale" else "RGB"))
    except Exception as e:  # Pillow's errors for unknown or damaged files vary by format
        raise node.fail(f"cannot decode the image: {e}") from None
    if fmt == "Grayscale":
        pixels = pixels[:, :, None]
    elif fmt == "BGR":
        pixels = pixels[:, :, ::-1]
    return node.const(np.ascontiguousarray(pixels))
