"""Small datasets, read offline from local files.

- `load_digits`: the 8x8 handwritten digits that scikit-learn ships (1797 images, 10 classes).
- `MNIST`: the standard idx files (plain or gzip) from a local folder.
- `CIFAR10`: the "python version" batches from a local folder, read without running pickle code.

Each of these returns a `TensorDataset` of (images, labels): float images in [0, 1] shaped
(N, C, H, W) and int64 class labels.

- `load_sonnets`: Shakespeare's Sonnets I-LI as one string, shipped with the package, the corpus
  of the character-level language models.
"""

from singa_tensor.datasets.cifar import CIFAR10
from singa_tensor.datasets.digits import load_digits
from singa_tensor.datasets.mnist import MNIST
from singa_tensor.datasets.sonnets import load_sonnets

__all__ = ["CIFAR10", "MNIST", "load_digits", "load_sonnets"]
