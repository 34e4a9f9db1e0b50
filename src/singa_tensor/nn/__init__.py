"""Neural-network building blocks: Module, Parameter, containers, layers, `functional`, `init`.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor import nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> net(st.ones(3, 4)).shape
    (3, 2)
"""

from . import functional, init, parallel, utils
from .containers import ModuleDict, ModuleList, Sequential
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
from .more_layers import *  # noqa: F401,F403  (names in more_layers.__all__)
from .more_layers import __all__ as _more_layer_names
from .more_losses import *  # noqa: F401,F403  (names in more_losses.__all__)
from .more_losses import __all__ as _more_loss_names
from .more_transformer import Transformer
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
    "init",
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
    "functional",
    "init",
]
__all__ += _rnn_names + _transformer_names
__all__ += _more_layer_names + _more_loss_names + ["Transformer"]
