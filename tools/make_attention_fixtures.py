"""Write tests/data/attention_fixtures.npz: seeded PyTorch attention and Transformer modules
(their state_dicts as numpy), inputs and PyTorch's outputs, for tests/nn/test_attention.py.

PyTorch is used here only; the library and its tests never import it. Run with an environment
that has torch:  python tools/make_attention_fixtures.py

Keys are "<case>/param/<state_dict name>", "<case>/in/<name>" and "<case>/out/<name>".
"""

from __future__ import annotations

import pathlib

import numpy as np
import torch
from torch import nn

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "attention_fixtures.npz"


def _np(t):
    return t.detach().numpy()


def main() -> None:
    torch.manual_seed(0)
    data: dict[str, np.ndarray] = {}

    def put(case, module, inputs, outputs):
        for k, v in module.state_dict().items():
            data[f"{case}/param/{k}"] = _np(v)
        for k, v in inputs.items():
            data[f"{case}/in/{k}"] = _np(v)
        for k, v in outputs.items():
            data[f"{case}/out/{k}"] = _np(v)

    # self-attention, batch first, key padding + float attn_mask, averaged weights
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        m.in_proj_bias.normal_(0, 0.1)  # PyTorch starts biases at zero; make them count
        m.out_proj.bias.normal_(0, 0.1)
    x = torch.randn(2, 5, 8)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    am = torch.randn(5, 5) * 0.5
    y, w = m(x, x, x, key_padding_mask=kpm, attn_mask=am)
    y2, _ = m(x, x, x, key_padding_mask=kpm, need_weights=False)
    put("mha_self", m, {"x": x, "kpm": kpm, "am": am}, {"y": y, "w": w, "y_noweights": y2})

    # cross attention, sequence first, kdim/vdim differ, per-head bool mask, unaveraged weights
    m = nn.MultiheadAttention(8, 2, kdim=6, vdim=4)
    q, k, v = torch.randn(5, 2, 8), torch.randn(7, 2, 6), torch.randn(7, 2, 4)
    am = torch.rand(2 * 2, 5, 7) > 0.7
    am[..., 0] = False  # every query row keeps a key
    y, w = m(q, k, v, attn_mask=am, average_attn_weights=False)
    put("mha_kv", m, {"q": q, "k": k, "v": v, "am": am}, {"y": y, "w": w})

    # encoder layers: post-norm relu batch first, pre-norm gelu sequence first
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    src = torch.randn(2, 5, 8)
    kpm = torch.tensor([[False] * 5, [False, False, False, False, True]])
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    y = layer(src, src_key_padding_mask=kpm)
    yc = layer(src, src_mask=causal, is_causal=True)
    put("enc_post", layer, {"src": src, "kpm": kpm, "causal": causal}, {"y": y, "y_causal": yc})

    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu",
                                       norm_first=True)
    src = torch.randn(5, 2, 8)
    put("enc_pre", layer, {"src": src}, {"y": layer(src)})

    # decoder layer with causal target mask and memory padding
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    tgt, mem = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    mkpm = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    causal = nn.Transformer.generate_square_subsequent_mask(4)
    y = layer(tgt, mem, tgt_mask=causal, memory_key_padding_mask=mkpm, tgt_is_causal=True)
    put("dec", layer, {"tgt": tgt, "mem": mem, "mkpm": mkpm, "causal": causal}, {"y": y})

    # a two-layer encoder stack with a final norm (state_dict names layers.0..., norm...)
    base = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(base, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
    with torch.no_grad():  # the copies start equal; make them differ
        for p in enc.layers[1].parameters():
            p.add_(torch.randn_like(p) * 0.1)
    src = torch.randn(2, 5, 8)
    put("enc_stack", enc, {"src": src}, {"y": enc(src)})

    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(data)} arrays)")


if __name__ == "__main__":
    main()
