"""More layers: distance modules, instance and RMS normalisation, EmbeddingBag, Bilinear,
the parameter containers ParameterList/ParameterDict, and the lazy modules whose input size
is read from the first input.

Each computing layer holds its options and parameters and calls the function of the same name
(nn/_functional_more.py, ops/more_nn.py), where the computation is defined once.
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable, Iterator

from .. import creation
from ..autograd import no_grad
from ..tensor import Tensor
from . import _functional_more as M
from . import init
from .conv_layers import BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, init_norm_state
from .layers import Linear, _positive_int
from .module import Module, Parameter
from .module_state import UninitializedBuffer, UninitializedParameter

# ---- distances ---------------------------------------------------------------------------------


class CosineSimilarity(Module):
    """Cosine similarity of x1 and x2 along dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.CosineSimilarity(dim=0)(st.tensor([1.0, 0.0]), st.tensor([2.0, 0.0])).item()
        1.0
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return M.cosine_similarity(x1, x2, self.dim, self.eps)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, eps={self.eps}"


class PairwiseDistance(Module):
    """p-norm of x1 - x2 + eps over the last dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.PairwiseDistance(eps=0.0)(st.tensor([[0.0, 0.0]]), st.tensor([[3.0, 4.0]])).item()
        5.0
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return M.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

    def extra_repr(self) -> str:
        return f"p={self.norm}, eps={self.eps}, keepdim={self.keepdim}"


# ---- instance and RMS normalisation ------------------------------------------------------------


class _InstanceNorm(Module):
    _batched: int = 3  # dims of a batched input; one fewer is an unbatched one

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        if isinstance(num_features, bool) or not isinstance(num_features, int) or (
                num_features < 1):
            raise ValueError(f"{name}: num_features must be a positive int, got {num_features!r}")
        init_norm_state(self, num_features, eps, momentum, affine, track_running_stats, device,
                        dtype)

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.ndim not in (self._batched - 1, self._batched):
            raise ValueError(f"{name}: expected a {self._batched - 1}-d (unbatched) or "
                             f"{self._batched}-d input, got shape {tuple(input.shape)}")
        unbatched = input.ndim == self._batched - 1
        x = input.unsqueeze(0) if unbatched else input
        if x.shape[1] != self.num_features:
            if self.affine or self.track_running_stats:
                raise ValueError(f"{name}: expected {self.num_features} channels, got input of "
                                 f"shape {tuple(input.shape)}")
            warnings.warn(f"{name}: input has {x.shape[1]} channels but num_features is "
                          f"{self.num_features}; with affine=False the latter is ignored",
                          stacklevel=2)
        use_input_stats = self.training or not self.track_running_stats
        momentum = self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        out = M.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              use_input_stats, momentum or 0.0, self.eps)
        return out.squeeze(0) if unbatched else out

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or (C, L): each channel of each sample over L.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> y = nn.InstanceNorm1d(2)(st.randn(4, 2, 8))
        >>> y.shape, abs(y.mean(dim=2)).max().item() < 1e-5
        ((4, 2, 8), True)
    """

    _batched = 3


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or (C, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.InstanceNorm2d(3, affine=True)(st.randn(2, 3, 4, 4)).shape
        (2, 3, 4, 4)
    """

    _batched = 4


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.InstanceNorm3d(2)(st.randn(1, 2, 3, 3, 3)).shape
        (1, 2, 3, 3, 3)
    """

    _batched = 5


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape dims.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> [round(v, 4) for v in nn.RMSNorm(2)(st.tensor([[3.0, 4.0]]))[0].tolist()]
        [0.8485, 1.1314]
    """

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        if not shape or any(isinstance(s, bool) or not isinstance(s, int) or s < 1
                            for s in shape):
            raise ValueError(f"RMSNorm: normalized_shape must be positive ints, got "
                             f"{normalized_shape!r}")
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(*shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return M.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


# ---- EmbeddingBag and Bilinear -----------------------------------------------------------------


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings, without materialising the bags' rows.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> bag = nn.EmbeddingBag(10, 3, mode="sum")
        >>> bag(st.tensor([1, 2, 4, 5, 4, 3]), st.tensor([0, 4])).shape
        (2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.num_embeddings = _positive_int("EmbeddingBag", "num_embeddings", num_embeddings)
        self.embedding_dim = _positive_int("EmbeddingBag", "embedding_dim", embedding_dim)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        if max_norm is not None:
            raise NotImplementedError("EmbeddingBag: max_norm is not supported")
        from .functional import _padding_index

        self.padding_idx = _padding_index("EmbeddingBag", padding_idx, num_embeddings)
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, (
            scale_grad_by_freq)
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        if _weight is None:
            self.weight = Parameter(creation.empty(num_embeddings, embedding_dim, dtype=dtype,
                                                   device=device))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"EmbeddingBag: _weight has shape {tuple(_weight.shape)}, "
                                 f"expected {(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag whose table is embeddings (2-D); frozen by default."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ValueError("EmbeddingBag.from_pretrained: embeddings must be a 2-D Tensor")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return M.embedding_bag(input, self.weight, offsets, None, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class Bilinear(Module):
    """y = x1^T A x2 + b, weight A of shape (out_features, in1_features, in2_features),
    initialised U(-1/sqrt(in1_features), 1/sqrt(in1_features)) like the bias.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Bilinear(20, 30, 40)(st.randn(128, 20), st.randn(128, 30)).shape
        (128, 40)
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in1_features = _positive_int("Bilinear", "in1_features", in1_features)
        self.in2_features = _positive_int("Bilinear", "in2_features", in2_features)
        self.out_features = _positive_int("Bilinear", "out_features", out_features)
        self.weight = Parameter(creation.empty(out_features, in1_features, in2_features,
                                               dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(creation.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return M.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


# ---- parameter containers ----------------------------------------------------------------------


def _as_parameter(owner: str, value) -> Tensor:
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value, requires_grad=value.dtype.is_floating_point)
    raise TypeError(f"{owner}: expected a Tensor or Parameter, got {type(value).__name__}")


class ParameterList(Module):
    """A list of parameters registered with the owner (plain tensors become Parameters).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> ps = nn.ParameterList([nn.Parameter(st.zeros(2)) for _ in range(3)])
        >>> ps.append(st.ones(1))
        ParameterList(...)
        >>> len(ps), len(list(ps.parameters())), list(ps.state_dict())[-1]
        (4, 4, '3')
    """

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, idx: int) -> int:
        n = len(self)
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"ParameterList indices must be integers or slices, got "
                            f"{type(idx).__name__}")
        if not -n <= idx < n:
            raise IndexError(f"ParameterList index {idx} is out of range for length {n}")
        return idx % n

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self._parameters.values())[idx])
        return self._parameters[str(self._index(idx))]

    def __setitem__(self, idx: int, value) -> None:
        self.register_parameter(str(self._index(idx)), _as_parameter("ParameterList", value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self._parameters.values())

    def __iadd__(self, values: Iterable) -> ParameterList:
        return self.extend(values)

    def append(self, value) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter("ParameterList", value))
        return self

    def extend(self, values: Iterable) -> ParameterList:
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): Parameter containing: [{p.dtype.name} of size "
                         f"{tuple(p.shape)}]" for i, p in enumerate(self))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward: index it")


class ParameterDict(Module):
    """A dict of parameters registered with the owner (insertion ordered).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> pd = nn.ParameterDict({"scale": nn.Parameter(st.ones(3))})
        >>> pd["shift"] = st.zeros(3)
        >>> list(pd), sorted(n for n, _ in pd.named_parameters())
        (['scale', 'shift'], ['scale', 'shift'])
    """

    def __init__(self, parameters=None) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Tensor:
        if key not in self._parameters:
            raise KeyError(f"ParameterDict has no parameter '{key}'")
        return self._parameters[key]

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        self.register_parameter(key, _as_parameter("ParameterDict", value))

    def __delitem__(self, key: str) -> None:
        self[key]  # noqa: B018 (the KeyError of a missing key)
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def get(self, key: str, default=None):
        return self._parameters.get(key, default)

    def pop(self, key: str) -> Tensor:
        p = self[key]
        del self._parameters[key]
        return p

    def clear(self) -> None:
        self._parameters.clear()

    def update(self, parameters) -> None:
        pairs = parameters.items() if hasattr(parameters, "items") else parameters
        for pair in pairs:
            if len(pair) != 2:
                raise ValueError("ParameterDict.update: expected (name, parameter) pairs, got "
                                 f"an element of length {len(pair)}")
            self[pair[0]] = pair[1]

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype.name} of size "
                         f"{tuple(p.shape)}]" for k, p in self.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward: index it by name")


# ---- lazy modules ------------------------------------------------------------------------------


class _LazyModule(Module):
    """A module whose parameters (and running statistics) are uninitialised placeholders
    until the first call, which reads the input's size, builds the module it becomes with
    that size, and gives each placeholder its data in place. Holders of the placeholders (an
    optimizer built before that first call) therefore see the initialised parameters; as in
    PyTorch, build the optimizer after a dry run where possible."""

    def _init_lazy(self, dtype, device, params: dict, buffers: tuple = ()) -> None:
        # the names still waiting for data; a module attribute, so deepcopy keeps it
        self._uninitialized: set = set()
        for name, present in params.items():
            if present:
                setattr(self, name, UninitializedParameter(dtype=dtype, device=device))
                self._uninitialized.add(name)
            else:
                self.register_parameter(name, None)
        for name in buffers:
            self.register_buffer(name, UninitializedBuffer(dtype=dtype, device=device))
            self._uninitialized.add(name)

    def has_uninitialized_params(self) -> bool:
        """Whether some parameter or buffer is still waiting for the first input."""
        return bool(self._uninitialized)

    def _placeholders(self):
        for store in (self._parameters, self._buffers):
            for name, t in store.items():
                if name in self._uninitialized and t is not None:
                    yield name, t

    def _dtype_device(self):
        for _, t in self._placeholders():
            return t.dtype, t.device
        return None, None

    def _built(self, input: Tensor) -> Module:  # pragma: no cover (each lazy class has one)
        raise NotImplementedError

    def initialize_parameters(self, input: Tensor) -> None:
        """Materialise the parameters from input's size and become the eager module."""
        if not isinstance(input, Tensor):
            raise TypeError(f"{type(self).__name__}: input must be a Tensor, got "
                            f"{type(input).__name__}")
        built = self._built(input)
        built.train(self.training)
        waiting = dict(self._placeholders())
        with no_grad():
            for store in ("_parameters", "_buffers"):
                mine, theirs = self.__dict__[store], built.__dict__[store]
                for name, t in theirs.items():
                    if name in waiting and t is not None:
                        waiting[name].data = t.detach()
                    else:
                        mine[name] = t
        for k, v in built.__dict__.items():
            if k not in ("_parameters", "_buffers", "_modules", "training"):
                self.__dict__[k] = v
        for k in [k for k in self.__dict__ if k not in built.__dict__]:
            del self.__dict__[k]  # the lazy form's own bookkeeping (_uninitialized ...)
        self.__class__ = type(built)

    def __call__(self, *args, **kwargs):
        if self.has_uninitialized_params():
            if not args:
                raise TypeError(f"{type(self).__name__}: the first call needs the input as "
                                f"a positional argument to infer the parameters' shapes")
            self.initialize_parameters(args[0])
        return Module.__call__(self, *args, **kwargs)  # the class is now the eager one

    def reset_parameters(self) -> None:
        if self.has_uninitialized_params():
            return  # initialised when the first input arrives
        raise RuntimeError(f"{type(self).__name__}: parameters are initialised")

    def forward(self, *args, **kwargs):  # pragma: no cover (__call__ materialises first)
        raise RuntimeError(f"{type(self).__name__}: parameters are uninitialised; call the "
                           f"module on an input (a dry run) first")

    def extra_repr(self) -> str:
        return "uninitialized"

    def load_state_dict(self, state_dict, strict: bool = True):
        """Loading into an uninitialised module takes each placeholder's shape from the
        state dict, then loads as usual."""
        with no_grad():
            for name, t in self._placeholders():
                value = state_dict[name] if name in state_dict else None
                if isinstance(value, Tensor):
                    t.data = creation.zeros(*value.shape, dtype=t.dtype, device=t.device)
        return super().load_state_dict(state_dict, strict)


def _feature_size(name: str, input: Tensor, dim: int, min_ndim: int) -> int:
    if input.ndim < min_ndim:
        raise ValueError(f"{name}: cannot infer the input size from an input of shape "
                         f"{tuple(input.shape)}")
    return input.shape[dim]


class LazyLinear(_LazyModule):
    """A Linear whose in_features is read from the first input's last dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> fc = nn.LazyLinear(4)
        >>> fc(st.randn(2, 7)).shape, type(fc).__name__, fc.weight.shape
        ((2, 4), 'Linear', (4, 7))
    """

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = 0
        self.out_features = _positive_int("LazyLinear", "out_features", out_features)
        self._init_lazy(dtype, device, {"weight": True, "bias": bias})

    def _built(self, input: Tensor) -> Module:
        dtype, device = self._dtype_device()
        return Linear(_feature_size("LazyLinear", input, -1, 1), self.out_features,
                      bias=self.bias is not None, device=device, dtype=dtype)


class _LazyConv(_LazyModule):
    _eager: type = Conv2d
    _channel_dim = -3

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        self.in_channels = 0
        self.out_channels = _positive_int(name, "out_channels", out_channels)
        self._options = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                             dilation=dilation, groups=groups, bias=bias)
        self._init_lazy(dtype, device, {"weight": True, "bias": bias})

    def _built(self, input: Tensor) -> Module:
        dtype, device = self._dtype_device()
        c = _feature_size(type(self).__name__, input, self._channel_dim, -self._channel_dim)
        return self._eager(c, self.out_channels, device=device, dtype=dtype, **self._options)


class LazyConv1d(_LazyConv):
    """A Conv1d whose in_channels is read from the first input, (N, C, L) or (C, L).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> conv = nn.LazyConv1d(4, 3)
        >>> conv(st.randn(2, 5, 10)).shape, conv.weight.shape
        ((2, 4, 8), (4, 5, 3))
    """

    _eager = Conv1d
    _channel_dim = -2


class LazyConv2d(_LazyConv):
    """A Conv2d whose in_channels is read from the first input, (N, C, H, W) or (C, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> conv = nn.LazyConv2d(8, 3, padding=1)
        >>> conv(st.randn(1, 3, 6, 6)).shape, conv.in_channels
        ((1, 8, 6, 6), 3)
    """

    _eager = Conv2d
    _channel_dim = -3


class _LazyBatchNorm(_LazyModule):
    _eager: type = BatchNorm1d

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.num_features = 0
        self.eps, self.momentum = eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        stats = ("running_mean", "running_var") if track_running_stats else ()
        self._init_lazy(dtype, device, {"weight": affine, "bias": affine}, stats)
        if not track_running_stats:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
        self.register_buffer("num_batches_tracked",
                             creation.zeros((), dtype="int64", device=device)
                             if track_running_stats else None)

    def has_uninitialized_params(self) -> bool:
        return super().has_uninitialized_params() or self.num_features == 0

    def _built(self, input: Tensor) -> Module:
        dtype, device = self._dtype_device()
        c = _feature_size(type(self).__name__, input, 1, 2)
        return self._eager(c, self.eps, self.momentum, self.affine, self.track_running_stats,
                           device=device, dtype=dtype)


class LazyBatchNorm1d(_LazyBatchNorm):
    """A BatchNorm1d whose num_features is read from the first input's dim 1.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> bn = nn.LazyBatchNorm1d()
        >>> bn(st.randn(8, 3)).shape, bn.running_mean.shape
        ((8, 3), (3,))
    """

    _eager = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm):
    """A BatchNorm2d whose num_features is read from the first input's dim 1.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> bn = nn.LazyBatchNorm2d(affine=False)
        >>> bn(st.randn(2, 4, 3, 3)).shape, bn.num_features
        ((2, 4, 3, 3), 4)
    """

    _eager = BatchNorm2d


__all__ = ["Bilinear", "CosineSimilarity", "EmbeddingBag", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyConv1d", "LazyConv2d",
           "LazyLinear", "PairwiseDistance", "ParameterDict", "ParameterList", "RMSNorm"]
