"""PyTorch's `nn.modules` path, for scripts that import from it (`nn.modules.module`).

Example:
    >>> from singa_tensor import nn
    >>> nn.modules.module.Module is nn.Module
    True
"""

from . import module

__all__ = ["module"]
