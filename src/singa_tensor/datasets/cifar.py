"""A reader for the CIFAR-10 "python version" batches in a local folder (no download).

The batches are Python pickles, and `pickle.load` on an untrusted file can run arbitrary code:
unpickling calls whatever importable callable the file names (os.system, eval, ...). So the
batches are read with `_SafeUnpickler`, whose `find_class` resolves only this short allow-list:

- numpy's array reconstructors (`_reconstruct`, and `_frombuffer` for pickle protocol 5) under
  both their numpy 1 (`numpy.core`) and numpy 2 (`numpy._core`) module names, plus the
  `numpy.ndarray` and `numpy.dtype` classes they are given. These only allocate an array of a
  given dtype/shape and fill it from bytes in the file; with a numeric dtype nothing else runs.
  An object-dtype array would unpickle its elements through this same restricted unpickler, and
  the reader rejects any non-numeric array anyway.
- `_codecs.encode`, which Python 3 uses for bytes in protocol-2 pickles, wrapped so that only
  the latin-1 codec (a plain str -> bytes conversion) can be asked for.

Every other global (and so every way to reach a function with side effects) raises
`UnsafePickleError` (a `pickle.UnpicklingError`) before anything is called. The rest of a batch
is dicts, lists, str, bytes and ints, which the pickle machine builds without calling user code.
"""

from __future__ import annotations

import codecs
import io
import pickle
from pathlib import Path

import numpy as np

import singa_tensor as st
from singa_tensor.utils.data import TensorDataset

_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_TEST = ("test_batch",)
_SUBDIR = "cifar-10-batches-py"


class UnsafePickleError(pickle.UnpicklingError):
    """A batch file named a global outside the allow-list (it is not a genuine batch)."""


def _numpy_attr(name: str):
    # numpy 2 moved numpy.core to numpy._core; importing numpy.core there only warns, so the
    # objects are looked up on whichever private module exists instead of importing by name.
    for mod in ("_core", "core"):
        sub = getattr(np, mod, None)
        for part in ("multiarray", "numeric"):
            fn = getattr(getattr(sub, part, None), name, None)
            if fn is not None:
                return fn
    raise pickle.UnpicklingError(f"CIFAR10: this numpy has no {name}")


_LATIN1_NAMES = {"latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1"}


def _latin1_encode(obj, encoding="utf-8", errors="strict"):
    # Compared by name rather than codecs.lookup, which could import an encodings module.
    if str(encoding).lower().replace("_", "-") not in _LATIN1_NAMES:
        raise UnsafePickleError(f"CIFAR10: refusing _codecs.encode with encoding "
                                     f"{encoding!r} (only latin-1 is allowed)")
    return codecs.encode(obj, "latin-1", errors)


_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): lambda: _numpy_attr("_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"): lambda: _numpy_attr("_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"): lambda: _numpy_attr("_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"): lambda: _numpy_attr("_frombuffer"),
    ("numpy", "ndarray"): lambda: np.ndarray,
    ("numpy", "dtype"): lambda: np.dtype,
    ("_codecs", "encode"): lambda: _latin1_encode,
}


class _SafeUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only the numpy array globals listed in `_ALLOWED`."""

    def find_class(self, module: str, name: str):
        make = _ALLOWED.get((module, name))
        if make is None:
            raise UnsafePickleError(
                f"CIFAR10: refusing to load global '{module}.{name}' from the batch file; "
                f"a CIFAR-10 batch holds only dicts, lists, bytes, ints and numpy arrays, so "
                f"this file is not a genuine batch (it could run code if unpickled)")
        return make()


def safe_load_pickle(data: bytes):
    """Unpickle bytes holding only plain containers and numeric numpy arrays; anything that
    would import another callable raises UnsafePickleError (a pickle.UnpicklingError).

    Example:
        >>> import pickle, numpy as np
        >>> safe_load_pickle(pickle.dumps({"a": np.arange(3)}))["a"].tolist()
        [0, 1, 2]
    """
    # latin1 keeps the bytes of Python 2 pickles (the official batches) intact for numpy.
    return _SafeUnpickler(io.BytesIO(data), encoding="latin1").load()


def _get(batch: dict, key: str, path: Path):
    for k in (key, key.encode()):
        if k in batch:
            return batch[k]
    raise ValueError(f"CIFAR10: {path} has no '{key}' entry (keys: {sorted(map(str, batch))})")


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = safe_load_pickle(path.read_bytes())
    except UnsafePickleError as e:
        raise UnsafePickleError(f"{e} [file: {path}]") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError) as e:
        raise ValueError(f"CIFAR10: {path} is not a valid CIFAR-10 batch "
                         f"({type(e).__name__}: {e})") from None
    if not isinstance(batch, dict):
        raise ValueError(f"CIFAR10: {path} holds a {type(batch).__name__}, expected a dict")
    data = _get(batch, "data", path)
    labels = _get(batch, "labels", path)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8:
        desc = data.dtype if isinstance(data, np.ndarray) else type(data).__name__
        raise ValueError(f"CIFAR10: {path}: 'data' must be a uint8 numpy array, got {desc}")
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise ValueError(f"CIFAR10: {path}: 'data' has shape {data.shape}, expected (N, 3072)")
    try:
        labels = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError(f"CIFAR10: {path}: 'labels' must be a list of ints") from None
    if labels.shape != (data.shape[0],):
        raise ValueError(f"CIFAR10: {path}: {data.shape[0]} images but 'labels' has shape "
                         f"{labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"CIFAR10: {path}: labels must be in 0..9, found "
                         f"{int(labels.min())}..{int(labels.max())}")
    return data, labels


class CIFAR10(TensorDataset):
    """CIFAR-10 from the python-version batches in `root` or `root/cifar-10-batches-py`.

    Train uses data_batch_1..data_batch_5, test uses test_batch. Samples are (image, label):
    image (3, 32, 32) float32 in [0, 1], label an int64 in 0..9; `.tensors` holds the whole
    split. The files are read without executing pickle code (see the module docstring).

    Example (with the CIFAR-10 python batches unpacked under /data/cifar10)::

        ds = CIFAR10("/data/cifar10", train=True)
        len(ds), tuple(ds.tensors[0].shape)   # (50000, (50000, 3, 32, 32))
    """

    def __init__(self, root: str | Path, train: bool = True):
        root = Path(root)
        self.root, self.train = root, bool(train)
        names = _TRAIN if self.train else _TEST
        folder = next((f for f in (root, root / _SUBDIR)
                       if all((f / n).is_file() for n in names)), None)
        if folder is None:
            missing = [n for n in names if not (root / n).is_file()]
            raise FileNotFoundError(
                f"CIFAR10: missing {', '.join(missing)} in {root} (also looked in "
                f"{root / _SUBDIR}); the {'train' if self.train else 'test'} split needs "
                f"{', '.join(names)} (the CIFAR-10 python-version batches)")
        parts = [_read_batch(folder / n) for n in names]
        data = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
        # Rows are 1024 red, then 1024 green, then 1024 blue values, each plane row-major.
        x = (data.astype(np.float32) / np.float32(255.0)).reshape(-1, 3, 32, 32)
        super().__init__(st.from_numpy(np.ascontiguousarray(x)), st.from_numpy(labels))

    def __repr__(self) -> str:
        return f"CIFAR10(root={str(self.root)!r}, train={self.train}, samples={len(self)})"
