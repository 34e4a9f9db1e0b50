"""A reader for the MNIST idx files in a local folder (no download)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

import singa_tensor as st
from singa_tensor.utils.data import TensorDataset

# idx magic: two zero bytes, a type code (0x08 = unsigned byte) and the number of dimensions.
_IMAGES_MAGIC = 0x00000803
_LABELS_MAGIC = 0x00000801

_FILES = {
    True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _find(folders: list[Path], name: str) -> Path | None:
    for folder in folders:
        for candidate in (folder / name, folder / (name + ".gz")):
            if candidate.is_file():
                return candidate
    return None


def _read_bytes(path: Path) -> bytes:
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as f:
                return f.read()
        except (OSError, EOFError) as e:
            raise ValueError(f"MNIST: {path} is not a valid gzip file ({e})") from None
    return path.read_bytes()


def _read_idx(path: Path, magic: int, ndim: int) -> np.ndarray:
    raw = _read_bytes(path)
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"MNIST: {path} is too short ({len(raw)} bytes) to hold an idx header")
    (found,) = struct.unpack(">I", raw[:4])
    if found != magic:
        raise ValueError(f"MNIST: {path} has magic number 0x{found:08x}, expected "
                         f"0x{magic:08x} (an idx{ndim}-ubyte file)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    expected = header + int(np.prod(dims, dtype=np.int64))
    if len(raw) != expected:
        raise ValueError(f"MNIST: {path} has {len(raw)} bytes, but its header (dims {dims}) "
                         f"implies {expected}; the file is truncated or corrupted")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


class MNIST(TensorDataset):
    """MNIST from the standard idx files in `root` (plain or .gz; `root/MNIST/raw` also works).

    Samples are (image, label): image (1, 28, 28) float32 in [0, 1], label an int64 in 0..9.
    The whole split is held in `.tensors` = (images (N, 1, 28, 28), labels (N,)).

    Example (with the four idx files in /data/mnist)::

        ds = MNIST("/data/mnist", train=False)
        len(ds), tuple(ds.tensors[0].shape)   # (10000, (10000, 1, 28, 28))
    """

    def __init__(self, root: str | Path, train: bool = True):
        root = Path(root)
        self.root, self.train = root, bool(train)
        folders = [root, root / "MNIST" / "raw"]
        names = _FILES[self.train]
        paths = [_find(folders, n) for n in names]
        if any(p is None for p in paths):
            expected = ", ".join(f"{n} (or {n}.gz)" for n in names)
            missing = ", ".join(n for n, p in zip(names, paths) if p is None)
            raise FileNotFoundError(
                f"MNIST: missing {missing} in {root} (also looked in {folders[1]}); the "
                f"{'train' if self.train else 'test'} split needs {expected}. All four MNIST "
                f"files are {', '.join(_FILES[True] + _FILES[False])}")
        images = _read_idx(paths[0], _IMAGES_MAGIC, 3)
        labels = _read_idx(paths[1], _LABELS_MAGIC, 1)
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"MNIST: {paths[0]} holds {images.shape[0]} images but {paths[1]} "
                             f"holds {labels.shape[0]} labels")
        if labels.size and labels.max() > 9:
            raise ValueError(f"MNIST: {paths[1]} holds label {int(labels.max())}; MNIST labels "
                             f"are 0..9")
        x = (images.astype(np.float32) / np.float32(255.0))[:, None, :, :]
        super().__init__(st.from_numpy(np.ascontiguousarray(x)),
                         st.from_numpy(labels.astype(np.int64)))

    def __repr__(self) -> str:
        return (f"MNIST(root={str(self.root)!r}, train={self.train}, "
                f"samples={len(self)})")
