"""`nn.modules.module`: Module, Parameter and the global module hooks under PyTorch's path.

Example:
    >>> from singa_tensor.nn.modules.module import register_module_forward_hook
    >>> callable(register_module_forward_hook)
    True
"""

from ..hooks import (
    RemovableHandle,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ..module import Module, Parameter

__all__ = ["Module", "Parameter", "RemovableHandle", "register_module_forward_hook",
           "register_module_forward_pre_hook", "register_module_full_backward_hook",
           "register_module_full_backward_pre_hook"]
