"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's parameter names."""

from __future__ import annotations

__all__: list[str] = []
