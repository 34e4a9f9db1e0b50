"""singa_tensor.datasets: the bundled digits, and MNIST / CIFAR-10 readers on files written here."""

import gzip
import os
import pickle
import struct

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.datasets import CIFAR10, MNIST, load_digits
from singa_tensor.datasets.cifar import safe_load_pickle

# ---- digits ------------------------------------------------------------------------------------

DIGIT_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]  # per class, sklearn's docs


def _sklearn_digits_rows():
    # An independent parse (csv module, not numpy) of the file scikit-learn ships; importing
    # sklearn itself would cost seconds.
    import csv
    import importlib.util
    from pathlib import Path
    spec = importlib.util.find_spec("sklearn")
    if spec is None:
        pytest.skip("scikit-learn is not installed")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = [[int(v) for v in r] for r in csv.reader(f) if r]
    return np.array([r[:64] for r in rows]), np.array([r[64] for r in rows])


def test_digits_all_matches_file():
    ref_data, ref_target = _sklearn_digits_rows()
    x, y = load_digits("all").tensors
    assert x.shape == (1797, 1, 8, 8) and x.dtype == st.float32
    assert y.shape == (1797,) and y.dtype == st.int64
    xa, ya = x.numpy(), y.numpy()
    assert xa.min() == 0.0 and xa.max() == 1.0
    np.testing.assert_array_equal(xa.reshape(1797, 64) * 16, ref_data.astype(np.float32))
    np.testing.assert_array_equal(ya, ref_target)
    assert np.bincount(ya).tolist() == DIGIT_COUNTS


def test_digits_split_disjoint_complete_stratified_reproducible():
    full_x = load_digits("all").tensors[0].numpy().reshape(1797, 64)
    tr_x, tr_y = (t.numpy() for t in load_digits("train", seed=3).tensors)
    te_x, te_y = (t.numpy() for t in load_digits("test", seed=3).tensors)
    assert len(tr_y) + len(te_y) == 1797
    assert len(te_y) == sum(int(round(0.2 * c)) for c in DIGIT_COUNTS)
    # Each row of the full set shows up exactly once across train+test (rows as bytes keys;
    # duplicates in the data are counted, not collapsed).
    from collections import Counter
    key = lambda a: Counter(r.tobytes() for r in a.reshape(len(a), 64))  # noqa: E731
    assert key(tr_x) + key(te_x) == key(full_x)
    # stratified: every class keeps ~20% in test
    for c, n in enumerate(DIGIT_COUNTS):
        assert (te_y == c).sum() == int(round(0.2 * n))
        assert (tr_y == c).sum() == n - int(round(0.2 * n))
    again = load_digits("test", seed=3).tensors[0].numpy()
    np.testing.assert_array_equal(again, te_x)
    other = load_digits("test", seed=4).tensors[0].numpy()
    assert not np.array_equal(other, te_x)


def test_digits_dtype_and_bad_args():
    x, _ = load_digits("test", test_fraction=0.5, dtype=st.float64).tensors
    assert x.dtype == st.float64 and x.shape[0] == sum(int(round(0.5 * c)) for c in DIGIT_COUNTS)
    with pytest.raises(ValueError, match="split must be 'train', 'test' or 'all', got 'val'"):
        load_digits("val")
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\), got 1.5"):
        load_digits(test_fraction=1.5)
    with pytest.raises(TypeError, match="floating-point dtype, got singa_tensor.int64"):
        load_digits(dtype=st.int64)


def test_digits_missing_sklearn(monkeypatch):
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="digits.csv.gz.*scikit-learn"):
        load_digits()


# ---- MNIST -------------------------------------------------------------------------------------


def _idx(arr: np.ndarray, magic: int) -> bytes:
    return struct.pack(">I", magic) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _write_mnist(folder, prefix, n, gz=False, img_magic=0x803, lbl_magic=0x801, seed=0):
    rng = np.random.default_rng(seed)
    imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    imgs[0, 0, 0], imgs[0, 0, 1] = 0, 255
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    for name, data in ((f"{prefix}-images-idx3-ubyte", _idx(imgs, img_magic)),
                       (f"{prefix}-labels-idx1-ubyte", _idx(labels, lbl_magic))):
        if gz:
            with gzip.open(folder / (name + ".gz"), "wb") as f:
                f.write(data)
        else:
            (folder / name).write_bytes(data)
    return imgs, labels


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reads_idx(tmp_path, gz):
    imgs, labels = _write_mnist(tmp_path, "train", 5, gz=gz)
    timgs, tlabels = _write_mnist(tmp_path, "t10k", 3, gz=gz, seed=1)
    ds = MNIST(tmp_path, train=True)
    assert len(ds) == 5
    x, y = ds.tensors
    assert x.shape == (5, 1, 28, 28) and x.dtype == st.float32 and y.dtype == st.int64
    np.testing.assert_allclose(x.numpy()[:, 0], imgs / np.float32(255), rtol=0, atol=1e-7)
    np.testing.assert_array_equal(y.numpy(), labels.astype(np.int64))
    assert x.numpy()[0, 0, 0, 0] == 0.0 and x.numpy()[0, 0, 0, 1] == 1.0
    xi, yi = ds[2]
    assert xi.shape == (1, 28, 28) and int(yi.item()) == int(labels[2])
    test = MNIST(str(tmp_path), train=False)
    np.testing.assert_array_equal(test.tensors[1].numpy(), tlabels.astype(np.int64))
    np.testing.assert_allclose(test.tensors[0].numpy()[:, 0], timgs / np.float32(255), atol=1e-7)


def test_mnist_bad_magic_and_truncation(tmp_path):
    _write_mnist(tmp_path, "train", 2, img_magic=0x801)
    with pytest.raises(ValueError, match="magic number 0x00000801, expected 0x00000803"):
        MNIST(tmp_path)
    _write_mnist(tmp_path, "train", 2, lbl_magic=0x12345678)
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte has magic number 0x12345678"):
        MNIST(tmp_path)
    _write_mnist(tmp_path, "train", 2)
    p = tmp_path / "train-images-idx3-ubyte"
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(ValueError, match="truncated or corrupted"):
        MNIST(tmp_path)
    p.write_bytes(b"\x00\x00")
    with pytest.raises(ValueError, match="too short"):
        MNIST(tmp_path)


def test_mnist_count_mismatch_and_bad_label(tmp_path):
    _write_mnist(tmp_path, "train", 3)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx(np.zeros(2, np.uint8), 0x801))
    with pytest.raises(ValueError, match="holds 3 images but .* holds 2 labels"):
        MNIST(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx(np.array([1, 2, 10], np.uint8), 0x801))
    with pytest.raises(ValueError, match="label 10; MNIST labels are 0..9"):
        MNIST(tmp_path)


def test_mnist_bad_gzip(tmp_path):
    _write_mnist(tmp_path, "t10k", 2)
    os.remove(tmp_path / "t10k-images-idx3-ubyte")
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="not a valid gzip file"):
        MNIST(tmp_path, train=False)


def test_mnist_missing_files_message(tmp_path):
    _write_mnist(tmp_path, "t10k", 2)
    with pytest.raises(FileNotFoundError) as info:
        MNIST(tmp_path, train=True)
    msg = str(info.value)
    assert str(tmp_path) in msg and "missing train-images-idx3-ubyte, train-labels-idx1-ubyte" \
        in msg
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte", ".gz"):
        assert name in msg
    assert len(MNIST(tmp_path, train=False)) == 2


# ---- CIFAR-10 ----------------------------------------------------------------------------------


def _write_cifar(folder, names, n=2, protocol=pickle.DEFAULT_PROTOCOL, bytes_keys=False, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n).tolist()
        d = {"batch_label": "batch " + name, "data": data, "labels": labels,
             "filenames": [f"img{i}.png" for i in range(n)]}
        if bytes_keys:  # how Python 2 pickles look when loaded with encoding="bytes"
            d = {k.encode(): v for k, v in d.items()}
        with open(folder / name, "wb") as f:
            pickle.dump(d, f, protocol=protocol)
        out.append((data, labels))
    return out


TRAIN = [f"data_batch_{i}" for i in range(1, 6)]


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar_reads_batches(tmp_path, protocol):
    batches = _write_cifar(tmp_path / "cifar-10-batches-py", TRAIN + ["test_batch"],
                           protocol=protocol)
    ds = CIFAR10(tmp_path, train=True)
    x, y = ds.tensors
    assert x.shape == (10, 3, 32, 32) and x.dtype == st.float32 and y.dtype == st.int64
    data = np.concatenate([b[0] for b in batches[:5]])
    # channel-major rows: pixel (c, h, w) is column c*1024 + h*32 + w
    exp = data.astype(np.float64) / 255.0
    np.testing.assert_allclose(x.numpy()[3, 1, 4, 5], exp[3, 1024 + 4 * 32 + 5], rtol=1e-6)
    np.testing.assert_allclose(x.numpy().reshape(10, 3072), exp, rtol=1e-6)
    np.testing.assert_array_equal(y.numpy(), sum((b[1] for b in batches[:5]), []))
    test = CIFAR10(tmp_path / "cifar-10-batches-py", train=False)
    assert len(test) == 2 and test.tensors[1].tolist() == batches[5][1]
    img, lab = test[1]
    assert img.shape == (3, 32, 32) and int(lab.item()) == batches[5][1][1]


def test_cifar_bytes_keys(tmp_path):
    (b,) = _write_cifar(tmp_path, ["test_batch"], n=3, protocol=2, bytes_keys=True)
    ds = CIFAR10(tmp_path, train=False)
    assert ds.tensors[1].tolist() == b[1]


def test_cifar_missing_files_message(tmp_path):
    _write_cifar(tmp_path, ["data_batch_1", "data_batch_2"])
    with pytest.raises(FileNotFoundError) as info:
        CIFAR10(tmp_path, train=True)
    msg = str(info.value)
    assert str(tmp_path) in msg and "cifar-10-batches-py" in msg
    assert "missing data_batch_3, data_batch_4, data_batch_5" in msg
    assert "data_batch_1, data_batch_2, data_batch_3, data_batch_4, data_batch_5" in msg
    with pytest.raises(FileNotFoundError, match="missing test_batch"):
        CIFAR10(tmp_path, train=False)


class _Evil:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def test_cifar_refuses_malicious_pickle(tmp_path):
    marker = tmp_path / "pwned"
    payload = {"data": np.zeros((1, 3072), np.uint8), "labels": [_Evil(f"touch {marker}")]}
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump(payload, f)
    with pytest.raises(pickle.UnpicklingError,
                       match=r"refusing to load global '(posix|nt|os)\.system'.*test_batch"):
        CIFAR10(tmp_path, train=False)
    assert not marker.exists()
    # builtins too (eval / getattr chains start with a global lookup)
    evil = b"cbuiltins\neval\n(S'1+1'\ntR."
    with pytest.raises(pickle.UnpicklingError, match="builtins.eval"):
        safe_load_pickle(evil)
    # the _codecs.encode allowance only converts with latin-1
    sneaky = b"c_codecs\nencode\n(S'x'\nS'rot13'\ntR."
    with pytest.raises(pickle.UnpicklingError, match="encoding 'rot13'"):
        safe_load_pickle(sneaky)
    assert safe_load_pickle(b"c_codecs\nencode\n(S'\\xe9'\nS'latin1'\ntR.") == b"\xe9"


def test_cifar_rejects_malformed_batches(tmp_path):
    def write(obj):
        with open(tmp_path / "test_batch", "wb") as f:
            pickle.dump(obj, f)

    write([1, 2])
    with pytest.raises(ValueError, match="holds a list, expected a dict"):
        CIFAR10(tmp_path, train=False)
    write({"labels": [0]})
    with pytest.raises(ValueError, match="has no 'data' entry"):
        CIFAR10(tmp_path, train=False)
    write({"data": np.zeros((1, 3072), np.float32), "labels": [0]})
    with pytest.raises(ValueError, match="'data' must be a uint8 numpy array, got float32"):
        CIFAR10(tmp_path, train=False)
    write({"data": np.zeros((1, 100), np.uint8), "labels": [0]})
    with pytest.raises(ValueError, match=r"shape \(1, 100\), expected \(N, 3072\)"):
        CIFAR10(tmp_path, train=False)
    write({"data": np.zeros((2, 3072), np.uint8), "labels": [0]})
    with pytest.raises(ValueError, match="2 images but 'labels' has shape"):
        CIFAR10(tmp_path, train=False)
    write({"data": np.zeros((1, 3072), np.uint8), "labels": [12]})
    with pytest.raises(ValueError, match="labels must be in 0..9"):
        CIFAR10(tmp_path, train=False)
    (tmp_path / "test_batch").write_bytes(pickle.dumps({"data": 1})[:-3])
    with pytest.raises(ValueError, match="not a valid CIFAR-10 batch"):
        CIFAR10(tmp_path, train=False)


def test_cifar_accepts_numpy1_module_names(tmp_path):
    # Batches written by numpy 1 (the official files) name numpy.core.multiarray._reconstruct.
    data = np.arange(3072, dtype=np.uint8)[None] + np.uint8(7)
    raw = pickle.dumps({"data": data, "labels": [4]}, protocol=2)
    assert b"numpy._core.multiarray" in raw
    (tmp_path / "test_batch").write_bytes(raw.replace(b"numpy._core.multiarray",
                                                      b"numpy.core.multiarray"))
    x, y = CIFAR10(tmp_path, train=False).tensors
    np.testing.assert_allclose(x.numpy().reshape(3072), data[0] / 255.0, rtol=1e-6)
    assert y.tolist() == [4]
