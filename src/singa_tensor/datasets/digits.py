"""The 8x8 handwritten digits bundled with scikit-learn, parsed here from its csv file.

Only the data file is taken from scikit-learn (found by path, without importing sklearn), so the
parse and the train/test split are this library's and do not change with sklearn's loader API.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

import singa_tensor as st
from singa_tensor._optional import missing
from singa_tensor.dtype import as_dtype
from singa_tensor.utils.data import TensorDataset

_FILE = "digits.csv.gz"
_N_SAMPLES = 1797
_N_FEATURES = 64


def _digits_path() -> Path:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise missing("sklearn", f"load_digits (its data file {_FILE} comes with scikit-learn)")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / _FILE
    if not path.is_file():
        raise FileNotFoundError(f"load_digits: scikit-learn is installed but its data file "
                                f"{_FILE} is missing (looked for {path})")
    return path


def _read_digits() -> tuple[np.ndarray, np.ndarray]:
    path = _digits_path()
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
    if table.shape != (_N_SAMPLES, _N_FEATURES + 1):
        raise ValueError(f"load_digits: {path} has shape {table.shape}, expected "
                         f"({_N_SAMPLES}, {_N_FEATURES + 1}) (64 pixels and a label per row)")
    pixels, labels = table[:, :_N_FEATURES], table[:, _N_FEATURES]
    if pixels.min() < 0 or pixels.max() > 16 or np.any(labels != np.round(labels)) \
            or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"load_digits: {path} holds values outside the expected ranges "
                         f"(pixels 0..16, labels 0..9)")
    return pixels, labels.astype(np.int64)


def _split_indices(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray,
                                                                                  np.ndarray]:
    # Stratified: each class contributes round(test_fraction * its size) test samples, so the
    # class balance of both parts matches the whole set whatever the seed.
    rng = np.random.default_rng(seed)
    test = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        members = members[rng.permutation(members.size)]
        test.append(members[:int(round(test_fraction * members.size))])
    test_idx = np.sort(np.concatenate(test))
    mask = np.ones(labels.size, dtype=bool)
    mask[test_idx] = False
    return np.flatnonzero(mask), test_idx


def load_digits(split: str = "train", test_fraction: float = 0.2, seed: int = 0,
                dtype: st.DType = st.float32) -> TensorDataset:
    """The scikit-learn 8x8 digits as a TensorDataset of (images, labels).

    Images are (N, 1, 8, 8) in [0, 1] (the file's 0..16 divided by 16), labels int64 in 0..9.
    `split` is "train", "test" or "all"; the train/test split is a stratified random partition
    fixed by `seed` (the same seed always gives the same split; the two parts are disjoint and
    together make up all 1797 samples).

    Example:
        >>> import singa_tensor as st
        >>> train = load_digits("train")
        >>> x, y = train[0]
        >>> tuple(x.shape), y.dtype
        ((1, 8, 8), singa_tensor.int64)
        >>> len(train) + len(load_digits("test"))
        1797
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"load_digits: split must be 'train', 'test' or 'all', got {split!r}")
    if not isinstance(test_fraction, (int, float)) or not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction!r}")
    dtype = as_dtype(dtype)
    if not getattr(dtype, "is_floating_point", False):
        raise TypeError(f"load_digits: dtype must be a floating-point dtype, got {dtype}")
    pixels, labels = _read_digits()
    if split != "all":
        train_idx, test_idx = _split_indices(labels, float(test_fraction), seed)
        idx = train_idx if split == "train" else test_idx
        pixels, labels = pixels[idx], labels[idx]
    images = (pixels / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    x = st.from_numpy(np.ascontiguousarray(images))
    if dtype is not st.float32:
        x = x.to(dtype)
    return TensorDataset(x, st.from_numpy(np.ascontiguousarray(labels)))
