"""Device names: "cpu" and "cuda:N"."""

from __future__ import annotations


class Device:
    """Where a tensor lives.

    Example:
        >>> import singa_tensor as st
        >>> st.device("cpu")
        device(type='cpu')
    """

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, Device):
            self.type, self.index = spec.type, spec.index
            return
        if isinstance(spec, int) and not isinstance(spec, bool):  # PyTorch: an int is a GPU
            spec = f"cuda:{spec}" if spec >= 0 else str(spec)
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a string such as 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, num = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"device: unknown device type {kind!r} (expected 'cpu' or 'cuda')")
        if num:
            if not num.isdigit():
                raise ValueError(f"device: bad device index in {spec!r}")
            if index is not None:
                raise ValueError("device: index given twice")
            index = int(num)
        if kind == "cuda" and index is None:
            index = 0
        if index is not None and (not isinstance(index, int) or index < 0):
            raise ValueError(f"device: the index must be a non-negative int, got {index!r}")
        if kind == "cpu":
            index = None
        self.type, self.index = kind, index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = Device("cpu")


_interned: dict = {}


def as_device(d) -> Device:
    """The canonical Device object for d, so that device checks can compare by identity."""
    if d is None:
        return CPU
    key = (d.type, d.index) if isinstance(d, Device) else d
    dev = _interned.get(key)
    if dev is None:
        dev = CPU if Device(d) == CPU else Device(d)
        _interned[key] = dev
    return dev
