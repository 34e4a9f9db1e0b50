"""Activation modules beyond the basic ones of layers.py (PyTorch names, arguments, defaults).

Each module holds its arguments and calls its nn.functional form; PReLU holds a learnable
slope.
"""

from __future__ import annotations

from .. import creation
from ..autograd import no_grad
from ..tensor import Tensor
from . import functional as F
from .module import Module, Parameter


def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


class Hardtanh(Module):
    """x clipped to [min_val, max_val].

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Hardtanh(-2.0, 2.0)(st.tensor([-3.0, 1.0, 3.0])).tolist()
        [-2.0, 1.0, 2.0]
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        if max_val < min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater or equal to "
                             f"min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """min(max(x, 0), 6).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReLU6()(st.tensor([-1.0, 7.0])).tolist()
        [0.0, 6.0]
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class _Simple(Module):
    """A parameterless activation with an optional inplace flag; `_fn` names its F function."""

    _fn = ""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class SELU(_Simple):
    """scale * elu(x, alpha) with the self-normalising constants.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.SELU()(st.tensor([0.0])).tolist()
        [0.0]
    """

    _fn = "selu"


class Hardsigmoid(_Simple):
    """clamp(x / 6 + 1/2, 0, 1).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Hardsigmoid()(st.tensor([0.0])).tolist()
        [0.5]
    """

    _fn = "hardsigmoid"


class Hardswish(_Simple):
    """x * hardsigmoid(x).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Hardswish()(st.tensor([-4.0, 4.0])).tolist()
        [0.0, 4.0]
    """

    _fn = "hardswish"


class Mish(_Simple):
    """x * tanh(softplus(x)).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Mish()(st.tensor([0.0])).tolist()
        [0.0]
    """

    _fn = "mish"


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.CELU(0.5)(st.tensor([1.0])).tolist()
        [1.0]
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class _NoArgs(Module):
    _fn = ""

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input)


class Softsign(_NoArgs):
    """x / (1 + |x|).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Softsign()(st.tensor([1.0])).tolist()
        [0.5]
    """

    _fn = "softsign"


class LogSigmoid(_NoArgs):
    """log(sigmoid(x)).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> round(nn.LogSigmoid()(st.tensor([0.0])).item(), 4)
        -0.6931
    """

    _fn = "logsigmoid"


class Tanhshrink(_NoArgs):
    """x - tanh(x).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Tanhshrink()(st.tensor([0.0])).tolist()
        [0.0]
    """

    _fn = "tanhshrink"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear where beta * x > threshold.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> round(nn.Softplus()(st.tensor([0.0])).item(), 4)
        0.6931
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class GLU(Module):
    """Gated linear unit over dim: first half * sigmoid(second half).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.GLU()(st.ones(3, 4)).shape
        (3, 2)
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Threshold(Module):
    """x where x > threshold, value elsewhere.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Threshold(0.5, -1.0)(st.tensor([0.0, 1.0])).tolist()
        [-1.0, 1.0]
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class PReLU(Module):
    """x for x >= 0, a * x otherwise, with a learnable: one slope, or one per channel
    (num_parameters = C, dimension 1 of the input), each starting at init.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = nn.PReLU()
        >>> m(st.tensor([-2.0, 1.0])).tolist(), m.weight.tolist()
        ([-0.5, 1.0], [0.25])
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, int) or \
                num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got "
                             f"{num_parameters!r}")
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(creation.full((num_parameters,), float(init), dtype=dtype,
                                              device=device))

    def reset_parameters(self) -> None:
        with no_grad():
            self.weight.fill_(float(self.init))

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Randomized leaky ReLU: negative slopes drawn from U(lower, upper) in training mode,
    their mean (lower + upper) / 2 in eval mode.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.RReLU(0.1, 0.3).eval()(st.tensor([-1.0, 1.0])).tolist()
        [-0.20000000298023224, 1.0]
    """

    def __init__(self, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0,
                 inplace: bool = False) -> None:
        super().__init__()
        if upper < lower:
            raise ValueError(f"RReLU: lower ({lower}) must be less than or equal to upper "
                             f"({upper})")
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (
            ", inplace=True" if self.inplace else "")


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, 0 between.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Softshrink(1.0)(st.tensor([-3.0, 0.5, 3.0])).tolist()
        [-2.0, 0.0, 2.0]
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        if lambd < 0:
            raise ValueError(f"Softshrink: lambd must be greater or equal to 0, got {lambd}")
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x where |x| > lambd, 0 elsewhere.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Hardshrink(1.0)(st.tensor([-3.0, 0.5, 3.0])).tolist()
        [-3.0, 0.0, 3.0]
    """

    def __init__(self, lambd: float = 0.5) -> None:
        if lambd < 0:
            raise ValueError(f"Hardshrink: lambd must be greater or equal to 0, got {lambd}")
        super().__init__(lambd)

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)


class Softmin(Module):
    """softmax(-x) along dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Softmin(dim=1)(st.zeros(1, 4)).tolist()
        [[0.25, 0.25, 0.25, 0.25]]
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W), at each location.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Softmax2d()(st.zeros(1, 2, 1, 1)).tolist()
        [[[[0.5]], [[0.5]]]]
    """

    def forward(self, input: Tensor) -> Tensor:
        F._tensor("Softmax2d", input)
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3D or 4D input, got a {input.ndim}D input "
                             f"of shape {input.shape}")
        return F.softmax(input, -3)


class _DropoutNd(Module):
    _fn = ""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.p = F._check_p(type(self).__name__, p)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) with probability p in training mode.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Dropout1d(0.5).eval()(st.ones(1, 2, 3)).shape
        (1, 2, 3)
    """

    _fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) with probability p in training mode.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Dropout2d(0.5).eval()(st.ones(1, 2, 3, 3)).shape
        (1, 2, 3, 3)
    """

    _fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p in training
    mode.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Dropout3d(0.5).eval()(st.ones(1, 2, 1, 3, 3)).shape
        (1, 2, 1, 3, 3)
    """

    _fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    """Alpha dropout (for SELU networks) in training mode; keeps mean and variance.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> x = st.ones(3)
        >>> nn.AlphaDropout(0.2).eval()(x) is x
        True
    """

    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels in training mode.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> x = st.ones(2, 3, 4)
        >>> nn.FeatureAlphaDropout(0.2).eval()(x) is x
        True
    """

    _fn = "feature_alpha_dropout"


__all__ = [
    "CELU", "GLU", "SELU", "AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d",
    "FeatureAlphaDropout", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LogSigmoid",
    "Mish", "PReLU", "ReLU6", "RReLU", "Softmax2d", "Softmin", "Softplus", "Softshrink",
    "Softsign", "Tanhshrink", "Threshold",
]
