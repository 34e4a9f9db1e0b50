"""StackDataset: several datasets of one length read side by side (PyTorch's name and
behaviour)."""

from __future__ import annotations

from .data import Dataset


class StackDataset(Dataset):
    """Sample i is (ds1[i], ds2[i], ...) for datasets given positionally, or
    {"name": ds[i], ...} for datasets given by keyword; all must have one length.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.utils.data import StackDataset, TensorDataset
        >>> images, labels = TensorDataset(st.arange(3.0)), [10, 11, 12]
        >>> StackDataset(images, labels)[1][1], StackDataset(x=images, y=labels)[2]["y"]
        (11, 12)
        >>> len(StackDataset(images, labels))
        3
    """

    def __init__(self, *args, **kwargs) -> None:
        if args and kwargs:
            raise ValueError("StackDataset: give the datasets either positionally (tuple "
                             "samples) or by keyword (dict samples), not both")
        datasets = args or kwargs
        if not datasets:
            raise ValueError("StackDataset: needs at least one dataset")
        items = datasets.items() if kwargs else enumerate(args)
        lengths = {}
        for name, ds in items:
            try:
                lengths[name] = len(ds)
            except TypeError:
                raise TypeError(f"StackDataset: dataset {name!r} has no length "
                                f"({type(ds).__name__})") from None
        if len(set(lengths.values())) != 1:
            raise ValueError(f"StackDataset: size mismatch between datasets: {lengths}")
        self.datasets = datasets
        self._length = next(iter(lengths.values()))

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: ds[index] for k, ds in self.datasets.items()}
        return tuple(ds[index] for ds in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """The samples at indices, in order (what a DataLoader batch reads)."""
        return [self[i] for i in indices]

    def __len__(self) -> int:
        return self._length


__all__ = ["StackDataset"]
