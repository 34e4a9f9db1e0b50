"""Spatial sampling of nn.functional: affine_grid builds the sampling grid of an affine map,
grid_sample reads an image at the grid's positions (bilinear, nearest or bicubic, with zeros,
border or reflection padding).

Both are registry composites. grid_sample is differentiable in the image and, for bilinear
and bicubic sampling, in the grid too: the tap indices come from floor() (a zero gradient) while the
interpolation weights are smooth functions of the positions. The ONNX importer's AffineGrid
and GridSample handlers call these functions for the cases they cover.
"""

from __future__ import annotations

import numpy as np

from ..creation import tensor as _tensor_of
from ..tensor import Tensor
from ._registry import composite, expect_tensor
from .elementwise import where
from .linalg import matmul

_MODES = ("bilinear", "nearest", "bicubic")
_A = -0.75  # the cubic convolution constant PyTorch's bicubic uses
_PADDINGS = ("zeros", "border", "reflection")


# ---- affine_grid -------------------------------------------------------------------------------


def _base_axis(d: int, align_corners: bool) -> np.ndarray:
    if d <= 1:
        return np.zeros(max(d, 0))
    if align_corners:
        return np.linspace(-1.0, 1.0, d)
    return (np.arange(d) * 2 + 1) / d - 1


def _base_grid(spatial: tuple, align_corners: bool) -> np.ndarray:
    """(prod(spatial), r + 1) homogeneous points, x (the last spatial dim) first."""
    axes = [_base_axis(d, align_corners) for d in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # mesh[k] varies along spatial dim k
    cols = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack(cols + [np.ones(int(np.prod(spatial)))], axis=-1)


def _affine_grid_np(theta, size, align_corners=None):
    base = _base_grid(tuple(size[2:]), bool(align_corners))
    grid = base @ np.swapaxes(theta, 1, 2)
    return grid.reshape(size[0], *size[2:], len(size) - 2)


_rng = np.random.default_rng(43)


@composite("affine_grid", _affine_grid_np, samples=lambda: [
    ((_rng.standard_normal((2, 2, 3)), (2, 3, 4, 5)), {}),
    ((_rng.standard_normal((1, 2, 3)), (1, 1, 3, 1)), {"align_corners": True}),
    ((_rng.standard_normal((2, 3, 4)), (2, 1, 2, 3, 2)), {"align_corners": False}),
])
def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of the affine maps theta
    (N, 2, 3) (or (N, 3, 4)) for an output of size (N, C, H, W) (or (N, C, D, H, W)), in
    the normalised [-1, 1] coordinates grid_sample reads; align_corners=None is False.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> identity = st.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
        >>> F.affine_grid(identity, (1, 1, 1, 2), align_corners=True).tolist()
        [[[[-1.0, 0.0], [1.0, 0.0]]]]
    """
    op = "affine_grid"
    expect_tensor(op, theta, "theta")
    if not theta.dtype.is_floating_point:
        raise TypeError(f"{op}: theta must be a floating point tensor, got {theta.dtype.name}")
    size = tuple(size)
    if len(size) not in (4, 5) or not all(isinstance(s, int) and s >= 0 for s in size):
        raise ValueError(f"{op}: size must be 4 (N, C, H, W) or 5 (N, C, D, H, W) "
                         f"non-negative ints, got {size}")
    r = len(size) - 2
    if tuple(theta.shape) != (size[0], r, r + 1):
        raise ValueError(f"{op}: expected theta of shape ({size[0]}, {r}, {r + 1}) for size "
                         f"{size}, got {tuple(theta.shape)}")
    base = _tensor_of(_base_grid(size[2:], bool(align_corners)), dtype=theta.dtype,
                      device=theta.device)
    grid = matmul(base, theta.transpose(1, 2))  # (N, P, r)
    return grid.reshape(size[0], *size[2:], r)


# ---- grid_sample -------------------------------------------------------------------------------


def _unnormalize(v, d: int, align: bool):
    return (v + 1) * ((d - 1) / 2) if align else ((v + 1) * d - 1) / 2


def _reflect(v, lo2: float, hi2: float, floor, absolute, select):
    """v reflected into [lo2 / 2, hi2 / 2] (bounds given doubled, as they may be halves)."""
    if lo2 == hi2:
        return v * 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    a = absolute(v - lo)
    flips = floor(a / span)
    extra = a - flips * span
    even = floor(flips / 2) * 2 == flips
    return select(even, extra + lo, span - extra + lo)


def _pad_coord(x, d: int, padding: str, align: bool, ops: dict):
    """A pixel coordinate moved inside the image by padding_mode ("zeros" leaves it)."""
    if padding == "border":
        x = ops["clip"](x, 0.0, d - 1.0)
    elif padding == "reflection":
        if align:
            x = _reflect(x, 0.0, 2.0 * (d - 1), ops["floor"], ops["abs"], ops["where"])
        else:
            x = _reflect(x, -1.0, 2.0 * d - 1, ops["floor"], ops["abs"], ops["where"])
        x = ops["clip"](x, 0.0, d - 1.0)
    return x


def _source_coord(v, d: int, padding: str, align: bool, ops: dict):
    return _pad_coord(_unnormalize(v, d, align), d, padding, align, ops)


def _cubic_weights(t) -> list:
    """The four cubic-convolution weights of the taps at -1, 0, 1, 2 for a fraction t."""
    def near(x):  # |x| <= 1
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(gx, gy, h: int, w: int, mode: str, padding: str, align: bool, ops: dict,
          detach=lambda v: v) -> list:
    """(x, y, weight) of each tap: pixel coordinates inside the image, or outside it only
    with zeros padding (those taps read 0); weight None is 1 (nearest)."""
    if mode == "bicubic":  # padding applies to each tap, not to the sampled position
        x, y = _unnormalize(gx, w, align), _unnormalize(gy, h, align)
        x0, y0 = ops["floor"](detach(x)), ops["floor"](detach(y))
        wx, wy = _cubic_weights(x - x0), _cubic_weights(y - y0)
        return [(_pad_coord(x0 + (j - 1), w, padding, align, ops),
                 _pad_coord(y0 + (i - 1), h, padding, align, ops), wx[j] * wy[i])
                for i in range(4) for j in range(4)]
    x = _source_coord(gx, w, padding, align, ops)
    y = _source_coord(gy, h, padding, align, ops)
    if mode == "nearest":
        return [(ops["round"](detach(x)), ops["round"](detach(y)), None)]
    x0, y0 = ops["floor"](detach(x)), ops["floor"](detach(y))
    tx, ty = x - x0, y - y0
    return [(x0, y0, (1 - tx) * (1 - ty)), (x0 + 1, y0, tx * (1 - ty)),
            (x0, y0 + 1, (1 - tx) * ty), (x0 + 1, y0 + 1, tx * ty)]


_NP_OPS = {"clip": np.clip, "floor": np.floor, "abs": np.abs, "where": np.where,
           "round": np.rint}
_T_OPS = {"clip": lambda x, lo, hi: x.clamp(min=lo, max=hi), "floor": lambda x: x.floor(),
          "abs": lambda x: x.abs(), "where": where, "round": lambda x: x.round()}


def _grid_sample_np(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    n, c, h, w = input.shape
    align = bool(align_corners)
    taps = _taps(grid[..., 0], grid[..., 1], h, w, mode, padding_mode, align, _NP_OPS)
    out = np.zeros((n, c) + grid.shape[1:3], dtype=input.dtype)
    taps = [(xs, ys, np.ones_like(xs) if wt is None else wt) for xs, ys, wt in taps]
    for b in range(n):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                for xs, ys, wt in taps:
                    xi, yi = int(np.rint(xs[b, i, j])), int(np.rint(ys[b, i, j]))
                    if 0 <= xi < w and 0 <= yi < h:
                        out[b, :, i, j] += wt[b, i, j] * input[b, :, yi, xi]
    return out


def _grid_samples():
    img = _rng.standard_normal((2, 2, 3, 4))
    # positions off the half-integers, where the taps (floor, rounding) would jump
    grid = _rng.uniform(-1.4, 1.4, (2, 3, 2, 2))
    grid = np.where(np.abs(grid * 4 % 1 - 0.5) < 0.1, grid + 0.07, grid)
    return [((img, grid), {"padding_mode": p, "align_corners": a})
            for p in _PADDINGS for a in (False, True)] + [
        ((img, grid), {"mode": "nearest", "padding_mode": "reflection"}),
        ((img, grid), {"mode": "bicubic", "padding_mode": "zeros"}),
        ((img, grid), {"mode": "bicubic", "padding_mode": "reflection", "align_corners": True}),
        ((img, grid), {"mode": "bicubic", "padding_mode": "border"})]


@composite("grid_sample", _grid_sample_np, samples=_grid_samples)
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample input (N, C, H, W) at grid (N, H_out, W_out, 2) positions (x, y) in [-1, 1]
    by bilinear, nearest or bicubic (cubic convolution, a = -0.75) interpolation
    (-1 the left/top, 1 the right/bottom: pixel centres with align_corners, pixel edges
    without); positions outside read zeros, the border, or the image reflected at its
    border, by padding_mode. Returns (N, C, H_out, W_out); align_corners=None is False.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> img = st.tensor([[[[1.0, 3.0]]]])
        >>> F.grid_sample(img, st.tensor([[[[0.0, 0.0]]]]), align_corners=True).tolist()
        [[[[2.0]]]]
    """
    op = "grid_sample"
    expect_tensor(op, input)
    expect_tensor(op, grid, "grid")
    for t, name in ((input, "input"), (grid, "grid")):
        if not t.dtype.is_floating_point:
            raise TypeError(f"{op}: {name} must be a floating point tensor, got "
                            f"{t.dtype.name}")
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"{op}: padding_mode must be one of {_PADDINGS}, got "
                         f"{padding_mode!r}")
    if input.ndim != 4:
        raise ValueError(f"{op}: expected a 4-D input (N, C, H, W), got shape "
                         f"{tuple(input.shape)}")
    if grid.ndim != 4 or grid.shape[0] != input.shape[0] or grid.shape[3] != 2:
        raise ValueError(f"{op}: grid must be (N, H_out, W_out, 2) with N={input.shape[0]}, "
                         f"got shape {tuple(grid.shape)}")
    if grid.dtype is not input.dtype:
        raise TypeError(f"{op}: input and grid must have the same dtype, got "
                        f"{input.dtype.name} and {grid.dtype.name}")
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    align = bool(align_corners)
    taps = _taps(grid[..., 0], grid[..., 1], h, w, mode, padding_mode, align, _T_OPS,
                 detach=lambda v: v.detach())
    flat = input.reshape(n, c, h * w)
    out = None
    for xs, ys, wt in taps:
        inside = (xs >= 0) & (xs <= w - 1) & (ys >= 0) & (ys <= h - 1)
        xs, ys = xs.detach(), ys.detach()
        index = (ys.clamp(min=0, max=h - 1) * w + xs.clamp(min=0, max=w - 1)).round()
        index = index.to("int64")
        picked = flat.gather(2, index.reshape(n, 1, ho * wo).expand(n, c, ho * wo))
        keep = inside.to(input.dtype) if wt is None else where(inside, wt, 0.0)
        term = picked * keep.reshape(n, 1, ho * wo)
        out = term if out is None else out + term
    return out.reshape(n, c, ho, wo)


__all__: list[str] = []  # nn.functional names, not st.* ones
