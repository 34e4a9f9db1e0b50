"""Write tests/data/onnx_attention_{dynamo,torchscript}.onnx: a small attention block exported
by both of PyTorch's ONNX exporters, for the tests of which initializers an import trains.

The block has what real exports fold into initializers: an attention scale, a causal mask
buffer of -inf, a padding mask scaled by the float minimum, SDPA's own scale and mask, GELU's
tanh coefficients, and learned weights (an embedding, a positional Parameter, Linear weights
that the exporters transpose, a LayerNorm). Each file records, in its metadata under
`learned`, the initializers that hold one of the torch module's Parameters (its values, or
their transpose): the names the import should train. Needs torch and onnxscript:

    python tools/make_onnx_attention_fixtures.py
"""

from __future__ import annotations

import io
import math
import os

import numpy as np
import onnx
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data")


class Block(torch.nn.Module):
    def __init__(self, d: int = 8, length: int = 6):
        super().__init__()
        self.emb = torch.nn.Embedding(20, d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.ln = torch.nn.LayerNorm(d)
        self.out = torch.nn.Linear(d, d)
        self.pos = torch.nn.Parameter(torch.randn(1, length, d))
        self.register_buffer("mask", torch.full((length, length), float("-inf")).triu(1))
        self.d = d

    def forward(self, ids, am):
        n = ids.shape[1]
        x = self.emb(ids) + self.pos[:, :n]
        q, k, v = self.qkv(self.ln(x)).chunk(3, -1)
        pad = (1.0 - am[:, None, :].float()) * torch.finfo(torch.float32).min
        a = (q @ k.transpose(-1, -2)) / math.sqrt(self.d) + self.mask[:n, :n] + pad
        y = torch.softmax(a, -1) @ v
        y2 = torch.nn.functional.scaled_dot_product_attention(
            q[:, None], k[:, None], v[:, None], is_causal=True)[:, 0]
        return torch.nn.functional.gelu(self.out(y + y2), approximate="tanh")


def _learned(proto, model) -> list:
    params = [p.detach().numpy() for p in model.parameters()]
    names = []
    for t in proto.graph.initializer:
        a = onnx.numpy_helper.to_array(t)
        if a.dtype.kind == "f" and any(
                a.shape == p.shape and np.array_equal(a, p) or
                a.shape == p.T.shape and np.array_equal(a, p.T) for p in params):
            names.append(t.name)
    return sorted(names)


def main() -> None:
    torch.manual_seed(0)
    model = Block().eval()
    ids = torch.randint(0, 20, (2, 6))
    am = torch.ones(2, 6, dtype=torch.int64)
    am[1, 4:] = 0
    batch = torch.export.Dim("batch")
    dyn = torch.onnx.export(model, (ids, am), dynamo=True, opset_version=18,
                            input_names=["ids", "am"], output_names=["y"],
                            dynamic_shapes=({0: batch}, {0: batch})).model_proto
    f = io.BytesIO()
    torch.onnx.export(model, (ids, am), f, dynamo=False, opset_version=17,
                      input_names=["ids", "am"], output_names=["y"],
                      dynamic_axes={"ids": {0: "batch"}, "am": {0: "batch"}})
    script = onnx.load_from_string(f.getvalue())
    for name, proto in (("dynamo", dyn), ("torchscript", script)):
        onnx.helper.set_model_props(proto, {"learned": ",".join(_learned(proto, model))})
        path = os.path.join(OUT, f"onnx_attention_{name}.onnx")
        onnx.save(proto, path)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
