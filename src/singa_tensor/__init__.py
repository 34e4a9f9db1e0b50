"""singa_tensor: define-by-run autograd tensors on a C++ CPU backend.

Example:
    >>> import singa_tensor as st
    >>> x = st.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [2.0, 4.0, 6.0]
"""

from __future__ import annotations

import sys as _sys

from . import autograd, backend, cuda, random
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .backend.device import Device
from .backend.device import Device as device
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    get_default_device,
    get_default_dtype,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    scalar_tensor,
    set_default_device,
    set_default_dtype,
    tensor,
    uniform,
    zeros,
    zeros_like,
)
from .dtype import DType, bfloat16, float16, float32, float64, int32, int64
from .dtype import bool_ as bool  # noqa: A001  (PyTorch's name for the dtype)
from .finfo import finfo, iinfo
from .ops import *  # noqa: F401,F403
from .ops import REGISTRY as op_registry
from .random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .tensor import Tensor
from .tensor_api import (
    asarray,
    empty_strided,
    inference_mode,
    is_floating_point,
    is_inference_mode_enabled,
    numel,
)

half = float16
double = float64
long = int64
float = float32  # noqa: A001
int = int32  # noqa: A001

__version__ = "0.1.0"


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def set_num_threads(n: int) -> None:
    """Threads used by CPU kernels."""
    backend.get(backend.CPU).set_num_threads(n)


def get_num_threads() -> int:
    return backend.get(backend.CPU).num_threads()


def _export_ops():
    from . import ops

    g = globals()
    for mod in ops._FAMILIES:
        for name in getattr(mod, "__all__", ()):
            g.setdefault(name, getattr(mod, name))


_export_ops()
del _export_ops

# (they build on all above)
from . import accelerator, backends, datasets, graph, nn, onnx, optim, utils  # noqa: E402
from . import torch_misc as _torch_misc  # noqa: E402
from . import torch_nn_forms as _torch_nn_forms  # noqa: E402
from .backends import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled,
    set_float32_matmul_precision,
    use_deterministic_algorithms,
)
from .graph import compile  # noqa: E402,A001  (SINGA's and PyTorch's name)
from .legacy import CPU_TYPES as _LEGACY_TYPES  # noqa: E402
from .random_fills import bernoulli, multinomial, normal, poisson  # noqa: E402
from .safetensors_io import load_safetensors, save_safetensors  # noqa: E402
from .serialization import load, save  # noqa: E402
from .torch_misc import *  # noqa: E402,F401,F403
from .torch_nn_forms import *  # noqa: E402,F401,F403

globals().update(_LEGACY_TYPES)

__all__ = [
    "Device", "DType", "Generator", "Tensor", "autograd", "arange", "as_tensor", "bfloat16",
    "device", "empty", "empty_like", "enable_grad", "eye", "float16", "float32", "float64",
    "from_numpy", "full", "full_like", "int32", "int64", "is_grad_enabled", "linspace",
    "manual_seed", "no_grad", "ones", "ones_like", "rand", "randint", "randn", "set_grad_enabled",
    "tensor", "zeros", "zeros_like", "op_registry", "get_rng_state", "set_rng_state",
    "initial_seed", "seed", "random", "randperm", "normal", "uniform", "scalar_tensor",
    "rand_like", "randn_like", "half", "double", "long", "is_tensor", "cuda", "nn", "optim",
    "utils", "save", "load", "datasets", "from_dlpack", "set_default_device",
    "get_default_device", "onnx", "graph", "compile", "accelerator", "backends",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision",
    "get_float32_matmul_precision",
    "finfo", "iinfo", "get_default_dtype", "set_default_dtype", "inference_mode",
    "is_inference_mode_enabled", "numel", "is_floating_point", "empty_strided", "asarray",
    *_LEGACY_TYPES, "bernoulli", "multinomial", "poisson", "load_safetensors",
    "save_safetensors",
    "linalg", "distributions", *_torch_nn_forms.__all__,
    # st.range stays out of `import *`, which would hide the builtin
    *(n for n in _torch_misc.__all__ if n != "range"),
]

# mixed precision: st.autocast and the torch.* functions on its state, st.amp, st.cpu.amp and
# st.cuda.amp (registered as modules, so `from singa_tensor.cuda.amp import GradScaler` works)
from . import amp, cpu  # noqa: E402
from .amp import GradScaler  # noqa: E402
from .amp._devices import cpu_amp as _cpu_amp  # noqa: E402
from .amp._devices import cuda_amp as _cuda_amp  # noqa: E402
from .amp.autocast_mode import (  # noqa: E402
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
    set_autocast_gpu_dtype,
)

cuda.amp = _cuda_amp
_sys.modules[_cpu_amp.__name__] = _cpu_amp
_sys.modules[_cuda_amp.__name__] = _cuda_amp
__all__ += ["amp", "cpu", "GradScaler", "autocast", "clear_autocast_cache",
            "get_autocast_cpu_dtype", "get_autocast_dtype", "get_autocast_gpu_dtype",
            "is_autocast_cache_enabled",
            "is_autocast_cpu_enabled", "is_autocast_enabled", "set_autocast_cache_enabled",
            "set_autocast_dtype", "set_autocast_enabled", "set_autocast_cpu_dtype",
            "set_autocast_cpu_enabled", "set_autocast_gpu_dtype", "autocast_increment_nesting",
            "autocast_decrement_nesting"]

# PyTorch's torch.linalg and torch.distributions namespaces (top layer, built on all above)
from . import distributions, linalg  # noqa: E402

# PyTorch's out= keyword on the functions that take it there (st.add(a, b, out=c))
from ._out import install as _install_out  # noqa: E402

_install_out(globals())
