"""Functional forms for sequence models (PyTorch names): scaled_dot_product_attention,
multi_head_attention_forward. Defined in ops/attention.py; re-exported here."""

from __future__ import annotations

from ..ops import attention as _attention

__all__: list[str] = [n for n in _attention.__all__]
globals().update({n: getattr(_attention, n) for n in __all__})
