"""Attention and Transformer layers: MultiheadAttention, Transformer encoder and decoder
layers and stacks, positional embeddings. Parameter names and semantics follow PyTorch, so a
PyTorch state_dict converted to numpy loads unchanged."""

from __future__ import annotations

import copy
import math
from typing import Callable

from .. import creation
from .. import ops as _ops
from ..autograd import no_grad
from ..ops.attention import _multi_head_attention
from ..tensor import Tensor
from . import functional as F
from . import init
from .containers import ModuleList
from .conv_layers import LayerNorm
from .layers import Dropout, Linear
from .module import Module, Parameter


def _positive(op: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{op}: {name} must be a positive int, got {value!r}")
    return value


# ---- MultiheadAttention ------------------------------------------------------------------------


class MultiheadAttention(Module):
    """Attention over num_heads heads of embed_dim / num_heads features each.

    Parameters as in PyTorch: in_proj_weight (3 * embed_dim, embed_dim) and in_proj_bias when
    key and value have embed_dim features, else q_proj_weight, k_proj_weight (embed_dim, kdim)
    and v_proj_weight (embed_dim, vdim); out_proj (a Linear). Inputs are (L, N, E), or
    (N, L, E) with batch_first, or unbatched (L, E). In key_padding_mask (N, S) and attn_mask
    (L, S) or (N * num_heads, L, S), True (bool) blocks a position and a float mask is added
    to the scores. forward returns (output, weights): the weights are averaged over heads
    unless average_attn_weights=False, and None when need_weights=False (the faster path).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> mha = nn.MultiheadAttention(16, 4, batch_first=True)
        >>> x = st.randn(2, 5, 16)
        >>> out, w = mha(x, x, x)
        >>> out.shape, w.shape
        ((2, 5, 16), (2, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        op = "MultiheadAttention"
        self.embed_dim = _positive(op, "embed_dim", embed_dim)
        self.num_heads = _positive(op, "num_heads", num_heads)
        if embed_dim % num_heads:
            raise ValueError(f"{op}: embed_dim {embed_dim} must be divisible by num_heads "
                             f"{num_heads}")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError(f"{op}: add_bias_kv and add_zero_attn are not supported")
        self.kdim = embed_dim if kdim is None else _positive(op, "kdim", kdim)
        self.vdim = embed_dim if vdim is None else _positive(op, "vdim", vdim)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.dropout = F._check_p(op, dropout)
        self.batch_first = bool(batch_first)
        kw = {"dtype": dtype, "device": device}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(creation.empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(creation.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(creation.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(creation.empty(embed_dim, self.vdim, **kw))
        if bias:
            self.in_proj_bias = Parameter(creation.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple:
        return _multi_head_attention(
            "MultiheadAttention", query, key, value, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight,
            self.out_proj.weight, self.out_proj.bias, self.dropout if self.training else 0.0,
            key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal,
            self.batch_first)

    def extra_repr(self) -> str:
        s = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if not self._qkv_same_embed_dim:
            s += f", kdim={self.kdim}, vdim={self.vdim}"
        return s + (", batch_first=True" if self.batch_first else "")


# ---- encoder and decoder layers ----------------------------------------------------------------


def _activation(op: str, activation) -> Callable:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise ValueError(f"{op}: activation must be 'relu', 'gelu' or a callable, got "
                     f"{activation!r}")


class _FeedForwardLayer(Module):
    """What the encoder and decoder layers share: the feed-forward block and the options."""

    def _init_common(self, op: str, d_model: int, nhead: int, dim_feedforward: int,
                     dropout: float, activation, layer_norm_eps: float, batch_first: bool,
                     norm_first: bool, bias: bool, kw: dict, norms: int) -> None:
        _positive(op, "d_model", d_model)
        _positive(op, "dim_feedforward", dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = bool(norm_first)
        self.batch_first = bool(batch_first)
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(op, activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x, last_dropout):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return last_dropout(x)


class TransformerEncoderLayer(_FeedForwardLayer):
    """Self-attention then a feed-forward network (linear1, activation, linear2), each with a
    residual connection and LayerNorm: after the residual (post-norm, the default) or, with
    norm_first, before the block.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32,
        ...                                    batch_first=True)
        >>> layer(st.randn(2, 7, 16), is_causal=True).shape
        (2, 7, 16)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self._init_common("TransformerEncoderLayer", d_model, nhead, dim_feedforward, dropout,
                          activation, layer_norm_eps, batch_first, norm_first, bias,
                          {"device": device, "dtype": dtype}, norms=2)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x), self.dropout2)
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x, self.dropout2))


class TransformerDecoderLayer(_FeedForwardLayer):
    """Self-attention over the target, attention to the encoder's output (memory), then a
    feed-forward network; residual connections with LayerNorm (norm1..norm3), post-norm by
    default or pre-norm with norm_first.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> layer = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, batch_first=True)
        >>> tgt, memory = st.randn(2, 5, 16), st.randn(2, 7, 16)
        >>> layer(tgt, memory, tgt_is_causal=True).shape
        (2, 5, 16)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self._init_common("TransformerDecoderLayer", d_model, nhead, dim_feedforward, dropout,
                          activation, layer_norm_eps, batch_first, norm_first, bias, kw,
                          norms=3)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(x)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            return x + self._ff_block(self.norm3(x), self.dropout3)
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x, self.dropout3))


# ---- stacks ------------------------------------------------------------------------------------


def _clones(layer: Module, n: int) -> ModuleList:
    """n independent copies of layer (same initial values, own parameters)."""
    _positive("Transformer", "num_layers", n)
    out = []
    for _ in range(n):
        # Tensors refuse pickling, so deepcopy is given their copies up front
        memo = {}
        for t in list(layer.parameters()) + [b for b in layer.buffers() if b is not None]:
            c = t.detach().clone()
            memo[id(t)] = Parameter(c, t.requires_grad) if isinstance(t, Parameter) else c
        out.append(copy.deepcopy(layer, memo))
    return ModuleList(out)


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer applied in turn, then an optional final norm.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
        >>> enc = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(16))
        >>> enc(st.randn(3, 6, 16)).shape, len(enc.layers)
        ((3, 6, 16), 2)
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer applied in turn, then an optional final norm.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> layer = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, batch_first=True)
        >>> dec = nn.TransformerDecoder(layer, num_layers=2)
        >>> dec(st.randn(3, 5, 16), st.randn(3, 6, 16), tgt_is_causal=True).shape
        (3, 5, 16)
    """

    def __init__(self, decoder_layer: Module, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


# ---- positions ---------------------------------------------------------------------------------


def sinusoidal_positional_encoding(seq_len: int, d_model: int, dtype=None,
                                   device=None) -> Tensor:
    """The fixed (seq_len, d_model) encoding of "Attention Is All You Need": even columns
    sin(pos / 10000^(2i / d_model)), odd columns the matching cos.

    Example:
        >>> from singa_tensor import nn
        >>> pe = nn.sinusoidal_positional_encoding(4, 6)
        >>> pe.shape, pe[0].tolist()
        ((4, 6), [0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    """
    op = "sinusoidal_positional_encoding"
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 0:
        raise ValueError(f"{op}: seq_len must be a non-negative int, got {seq_len!r}")
    _positive(op, "d_model", d_model)
    pos = creation.arange(seq_len, dtype=dtype or "float32", device=device).unsqueeze(1)
    half = (d_model + 1) // 2
    freq = _ops.exp(creation.arange(half, dtype=pos.dtype, device=device)
                    * (-2.0 * math.log(10000.0) / d_model))
    angle = pos * freq  # (seq_len, half)
    # interleave: column 2i is sin, 2i + 1 is cos
    pe = _ops.stack([_ops.sin(angle), _ops.cos(angle)], 2).reshape(seq_len, 2 * half)
    return pe[:, :d_model] if 2 * half != d_model else pe


class _PositionsAdded(Module):
    def _add(self, x: Tensor, table: Tensor, op: str) -> Tensor:
        if x.__class__ is not Tensor or x.ndim not in (2, 3):
            raise ValueError(f"{op}: input must be a (N, L, E), (L, N, E) or (L, E) tensor, got "
                             f"{getattr(x, 'shape', type(x).__name__)}")
        seq = x.shape[1] if x.ndim == 3 and self.batch_first else x.shape[0]
        if x.shape[-1] != table.shape[1]:
            raise ValueError(f"{op}: input has {x.shape[-1]} features, expected "
                             f"{table.shape[1]}")
        if seq > table.shape[0]:
            raise ValueError(f"{op}: sequence length {seq} exceeds the {table.shape[0]} "
                             f"positions of the table")
        pos = table[:seq]
        if x.ndim == 3 and not self.batch_first:
            pos = pos.unsqueeze(1)
        return self.dropout(x + pos)


class PositionalEmbedding(_PositionsAdded):
    """A learned position table (num_positions, embedding_dim), initialised N(0, 1), added
    to the input: x + weight[:L]. Inputs as in the Transformer layers: (N, L, E) with
    batch_first (the default here), (L, N, E) without, or (L, E).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> pos = nn.PositionalEmbedding(32, 16)
        >>> pos(st.zeros(2, 10, 16)).shape, pos.weight.shape
        ((2, 10, 16), (32, 16))
    """

    def __init__(self, num_positions: int, embedding_dim: int, dropout: float = 0.0,
                 batch_first: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        op = "PositionalEmbedding"
        self.num_positions = _positive(op, "num_positions", num_positions)
        self.embedding_dim = _positive(op, "embedding_dim", embedding_dim)
        self.batch_first = bool(batch_first)
        self.weight = Parameter(creation.empty(num_positions, embedding_dim, dtype=dtype,
                                               device=device))
        self.dropout = Dropout(dropout)
        with no_grad():
            init.normal_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return self._add(input, self.weight, "PositionalEmbedding")

    def extra_repr(self) -> str:
        return f"{self.num_positions}, {self.embedding_dim}"


class SinusoidalPositionalEncoding(_PositionsAdded):
    """Adds the fixed sinusoidal_positional_encoding (a non-persistent buffer of max_len rows)
    to the input, then dropout.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> enc = nn.SinusoidalPositionalEncoding(16, max_len=64)
        >>> enc(st.zeros(2, 10, 16))[0, 0, :4].tolist()
        [0.0, 1.0, 0.0, 1.0]
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0,
                 batch_first: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.batch_first = bool(batch_first)
        self.dropout = Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model, dtype,
                                                                  device), persistent=False)

    def forward(self, input: Tensor) -> Tensor:
        return self._add(input, self.pe, "SinusoidalPositionalEncoding")


__all__ = [
    "MultiheadAttention",
    "PositionalEmbedding",
    "SinusoidalPositionalEncoding",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "sinusoidal_positional_encoding",
]
