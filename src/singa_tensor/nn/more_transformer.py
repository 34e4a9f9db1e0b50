"""nn.Transformer: the encoder-decoder model of "Attention Is All You Need", assembled from the
encoder and decoder stacks of nn/transformer.py."""

from __future__ import annotations

from typing import Callable

from .. import creation
from ..tensor import Tensor
from . import init
from .conv_layers import LayerNorm
from .module import Module
from .transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)


class Transformer(Module):
    """An encoder stack over src and a decoder stack over tgt that attends to the encoder's
    output; each stack ends with a LayerNorm. custom_encoder/custom_decoder replace the
    stacks (modules with the call signatures of TransformerEncoder/TransformerDecoder).
    Inputs are (S, N, E) and (T, N, E), or (N, S, E) and (N, T, E) with batch_first.
    Weight matrices are initialised with ``xavier_uniform_``, as PyTorch does.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> model = nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2,
        ...                        num_decoder_layers=2, dim_feedforward=32, batch_first=True)
        >>> mask = nn.Transformer.generate_square_subsequent_mask(5)
        >>> model(st.randn(2, 7, 16), st.randn(2, 5, 16), tgt_mask=mask).shape
        (2, 5, 16)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        for name, m in (("custom_encoder", custom_encoder), ("custom_decoder", custom_decoder)):
            if m is not None and not isinstance(m, Module):
                raise TypeError(f"Transformer: {name} must be a Module, got "
                                f"{type(m).__name__}")
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            self.encoder = TransformerEncoder(
                layer, num_encoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                     **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            self.decoder = TransformerDecoder(
                layer, num_decoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                     **kw))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The (sz, sz) causal mask: 0 on and below the diagonal, -inf above it (position i
        may attend to positions <= i).

        Example:
            >>> from singa_tensor import nn
            >>> nn.Transformer.generate_square_subsequent_mask(3).tolist()
            [[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
        """
        if isinstance(sz, bool) or not isinstance(sz, int) or sz < 0:
            raise ValueError(f"Transformer.generate_square_subsequent_mask: sz must be a "
                             f"non-negative int, got {sz!r}")
        return creation.full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        for name, x in (("src", src), ("tgt", tgt)):
            if not isinstance(x, Tensor):
                raise TypeError(f"Transformer: {name} must be a Tensor, got "
                                f"{type(x).__name__}")
        if src.ndim != tgt.ndim or src.ndim not in (2, 3):
            raise ValueError(f"Transformer: src and tgt must both be 3-D (or both 2-D, "
                             f"unbatched), got shapes {tuple(src.shape)} and "
                             f"{tuple(tgt.shape)}")
        if src.ndim == 3:
            b = 0 if self.batch_first else 1
            if src.shape[b] != tgt.shape[b]:
                raise RuntimeError(f"Transformer: the batch number of src and tgt must be "
                                   f"equal, got {src.shape[b]} and {tgt.shape[b]}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src and tgt must be equal "
                               f"to d_model={self.d_model}, got {src.shape[-1]} and "
                               f"{tgt.shape[-1]}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)


__all__ = ["Transformer"]
