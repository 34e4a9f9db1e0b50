"""Basic layers: Linear, Embedding, Dropout, Flatten, Identity and the activation modules."""

from __future__ import annotations

import math

from .. import creation
from .. import ops as _ops
from ..autograd import no_grad
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module, Parameter


def _positive_int(op: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{op}: {name} must be a non-negative int, got {value!r}")
    return value


class Identity(Module):
    """Returns its input; any constructor arguments are ignored.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> x = st.ones(2)
        >>> nn.Identity(54, unused="x")(x) is x
        True
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features).

    Initialised like PyTorch: weight from kaiming_uniform_(a=sqrt(5)), i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and bias from the same range.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> fc = nn.Linear(20, 30)
        >>> fc(st.randn(128, 20)).shape, fc.weight.shape
        ((128, 30), (30, 20))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in_features = _positive_int("Linear", "in_features", in_features)
        self.out_features = _positive_int("Linear", "out_features", out_features)
        self.weight = Parameter(creation.empty(out_features, in_features, dtype=dtype,
                                               device=device))
        if bias:
            self.bias = Parameter(creation.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Flatten(Module):
    """Flatten dimensions start_dim..end_dim into one (by default all but the batch one).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Flatten()(st.zeros(2, 3, 4)).shape
        (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return _ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class _InplaceActivation(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_InplaceActivation):
    """max(x, 0) elementwise.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReLU()(st.tensor([-1.0, 1.0])).tolist()
        [0.0, 1.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, self.inplace)


class LeakyReLU(Module):
    """x for x > 0, negative_slope * x otherwise.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.LeakyReLU(0.1)(st.tensor([-1.0, 1.0])).tolist()
        [-0.10000000149011612, 1.0]
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                          else "")


class ELU(Module):
    """x for x > 0, alpha * (exp(x) - 1) otherwise.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ELU()(st.tensor([0.0, 2.0])).tolist()
        [0.0, 2.0]
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """Gaussian error linear unit, exact or with the tanh approximation.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.GELU(approximate="tanh")
        GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_InplaceActivation):
    """x * sigmoid(x) (also called swish).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.SiLU()(st.tensor([0.0])).tolist()
        [0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, self.inplace)


class Sigmoid(Module):
    """1 / (1 + exp(-x)).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Sigmoid()(st.tensor([0.0])).tolist()
        [0.5]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Tanh(Module):
    """Hyperbolic tangent.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Tanh()(st.tensor([0.0])).tolist()
        [0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Softmax(Module):
    """softmax along dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Softmax(dim=1)(st.zeros(1, 2)).tolist()
        [[0.5, 0.5]]
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax) along dim, computed stably.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> round(nn.LogSoftmax(dim=1)(st.zeros(1, 2))[0, 0].item(), 4)
        -0.6931
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class Dropout(Module):
    """In training mode, zero each element with probability p and scale the others by
    1 / (1 - p); in eval mode, the identity.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> drop = nn.Dropout(0.25).eval()
        >>> x = st.ones(4)
        >>> drop(x) is x
        True
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.p = F._check_p("Dropout", p)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Embedding(Module):
    """A lookup table of num_embeddings vectors of size embedding_dim, initialised N(0, 1).
    The padding_idx row starts at zero and receives no gradient.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> emb = nn.Embedding(10, 3, padding_idx=0)
        >>> emb(st.tensor([[0, 2], [4, 0]])).shape, emb.weight[0].tolist()
        ((2, 2, 3), [0.0, 0.0, 0.0])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 _weight: Tensor | None = None, _freeze: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_embeddings = _positive_int("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = _positive_int("Embedding", "embedding_dim", embedding_dim)
        self.padding_idx = F._padding_index("Embedding", padding_idx, num_embeddings)
        if _weight is None:
            self.weight = Parameter(creation.empty(num_embeddings, embedding_dim, dtype=dtype,
                                                   device=device), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight has shape {tuple(_weight.shape)}, expected "
                                 f"{(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None) -> Embedding:
        """An Embedding whose table is embeddings (2-D); frozen (no gradient) by default."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ValueError("Embedding.from_pretrained: embeddings must be a 2-D Tensor")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


__all__ = [
    "ELU",
    "GELU",
    "Dropout",
    "Embedding",
    "Flatten",
    "Identity",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "ReLU",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
]
