"""Neural-network building blocks: Module, Parameter, containers, layers, `functional`, `init`.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor import nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> net(st.ones(3, 4)).shape
    (3, 2)
"""

from . import functional, hooks, init, modules, parallel, utils
from .activation import *  # noqa: F401,F403  (more activations and dropouts)
from .activation import __all__ as _activation_names
from .containers import ModuleDict, ModuleList, Sequential
from .conv3d_layers import *  # noqa: F401,F403  (3-d and transposed convolutions, unpooling)
from .conv3d_layers import __all__ as _conv3d_names
from .conv_layers import (
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    GroupNorm,
    LayerNorm,
    MaxPool2d,
    Upsample,
)
from .layers import (
    ELU,
    GELU,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LeakyReLU,
    Linear,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module, Parameter
from .module_state import Buffer, UninitializedBuffer, UninitializedParameter
from .more_layers import *  # noqa: F401,F403  (names in more_layers.__all__)
from .more_layers import __all__ as _more_layer_names
from .more_losses import *  # noqa: F401,F403  (names in more_losses.__all__)
from .more_losses import __all__ as _more_loss_names
from .more_transformer import Transformer
from .padding_layers import *  # noqa: F401,F403  (padding modules)
from .padding_layers import __all__ as _padding_names
from .pooling_layers import *  # noqa: F401,F403  (1-d, 3-d, adaptive max and power pools)
from .pooling_layers import __all__ as _pooling_names
from .rearrange_layers import *  # noqa: F401,F403  (shuffles, fold, unflatten, upsampling)
from .rearrange_layers import __all__ as _rearrange_names
from .rnn import *  # noqa: F401,F403  (recurrent layers; names in rnn.__all__)
from .rnn import __all__ as _rnn_names
from .transformer import *  # noqa: F401,F403  (attention layers; names in transformer.__all__)
from .transformer import __all__ as _transformer_names

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
    "functional",
    "hooks",
    "init",
    "modules",
    "parallel",
    "utils",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose2d",
    "GroupNorm",
    "LayerNorm",
    "MaxPool2d",
    "Upsample",
    "ELU",
    "GELU",
    "Dropout",
    "Embedding",
    "Flatten",
    "Identity",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
]
__all__ += (_rnn_names + _transformer_names + _activation_names + _padding_names
            + _pooling_names + _rearrange_names)
__all__ += _more_layer_names + _more_loss_names + ["Transformer"]
__all__ += _conv3d_names + ["Buffer", "UninitializedBuffer", "UninitializedParameter"]
