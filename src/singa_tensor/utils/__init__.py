"""Utilities: `utils.data` holds datasets, samplers and the DataLoader; `utils.cpp_extension`
finds the C headers for code compiled against the kernel ABI."""

from . import cpp_extension, data

__all__ = ["cpp_extension", "data"]
