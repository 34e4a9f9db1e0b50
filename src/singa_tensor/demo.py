"""Train a small CNN on the 8x8 handwritten digits (the copy scikit-learn ships), SINGA style:
a `Model` with `train_one_batch`, a DataLoader, SGD with momentum and a cosine schedule.

    python -m singa_tensor.demo [--epochs 12] [--batch-size 32] [--seed 0] [--save PATH]
                                [--device cpu|cuda|cuda:N]

The data stay on the CPU; the model is moved to --device once and each batch is moved there
as it is used, as in PyTorch.
"""

from __future__ import annotations

import argparse
import sys
import time

import singa_tensor as st
from singa_tensor import nn, optim
from singa_tensor.model import Model
from singa_tensor.utils.data import DataLoader


class DigitsCNN(Model):
    """conv(1->16) - BN - ReLU - conv(16->32) - BN - ReLU - maxpool - linear(512->10)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten())
        self.classifier = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        return self.classifier(self.features(x))


def accuracy(model: Model, loader: DataLoader, device: str | st.device = "cpu") -> float:
    """The fraction of the loader's samples the model classifies right, computed on device."""
    model.eval()
    right = total = 0
    with st.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            right += int((model(x).argmax(dim=1) == y).sum().item())
            total += y.shape[0]
    model.train()
    return right / total


def _progress(iterable, total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:  # the bar is a nicety; training does not need it
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, file=sys.stdout)


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None, help="write the trained weights here (st.save)")
    ap.add_argument("--device", default="cpu", help="where to train: cpu, cuda or cuda:N")
    args = ap.parse_args(argv)
    device = st.device(args.device)

    from singa_tensor.datasets import load_digits

    st.manual_seed(args.seed)
    train, test = load_digits("train", seed=args.seed), load_digits("test", seed=args.seed)
    gen = st.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, generator=gen)
    test_loader = DataLoader(test, batch_size=256)

    model = DigitsCNN().to(device)
    sgd = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    schedule = optim.lr_scheduler.CosineAnnealingLR(sgd, T_max=args.epochs)
    model.set_optimizer(sgd)
    model.compile([train.tensors[0][:2].to(device)], is_train=True)
    print(f"singa_tensor {st.__version__}: digits, {len(train)} train / {len(test)} test images, "
          f"{sum(p.numel() for p in model.parameters())} parameters, on {device}")

    start = time.perf_counter()
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        total_loss, batches = 0.0, 0
        for x, y in _progress(train_loader, len(train_loader), f"epoch {epoch}"):
            _, loss = model(x.to(device), y.to(device))
            total_loss += loss.item()
            batches += 1
        schedule.step()
        acc = accuracy(model, test_loader, device)
        print(f"epoch {epoch:2d}  loss {total_loss / batches:.4f}  test accuracy {acc:.4f}  "
              f"({time.perf_counter() - start:.1f} s)")
    if args.save:
        st.save(model.state_dict(), args.save)
        print(f"saved the weights to {args.save}")
    return acc


if __name__ == "__main__":
    main()
