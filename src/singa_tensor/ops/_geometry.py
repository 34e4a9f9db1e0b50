"""The one check of the geometry arguments of the convolutions, pools, unfold and fold: each
parsed tuple of sizes, strides, paddings or dilations is at least its lower bound, or the error
names the op, the argument and the value given."""

from __future__ import annotations


def at_least(op: str, name: str, vals: tuple, minimum: int, given=None) -> tuple:
    """vals, or ValueError when an entry is below minimum (1: positive, 0: non-negative).

    Example:
        >>> from singa_tensor.ops._geometry import at_least
        >>> at_least("conv2d", "stride", (1, 2), 1)
        (1, 2)
    """
    if min(vals, default=minimum) < minimum:
        what = "positive" if minimum == 1 else "non-negative" if minimum == 0 else \
            f"at least {minimum}"
        shown = vals if given is None else given
        raise ValueError(f"{op}: {name} must be {what}, got {shown!r}")
    return vals


def kernel_of(op: str, weight) -> tuple:
    """The spatial sizes of a convolution weight (its dims after the first two), each positive."""
    k = tuple(weight.shape[2:])
    if min(k, default=1) < 1:
        raise ValueError(f"{op}: kernel_size must be positive, got {k} (weight of shape "
                         f"{tuple(weight.shape)})")
    return k
