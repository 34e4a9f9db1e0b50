"""Attention and Transformer layers: MultiheadAttention, Transformer encoder and decoder
layers, positional embeddings."""

from __future__ import annotations

__all__: list[str] = []
