"""A convolutional digit classifier in the style of PyTorch's MNIST example: two convolutions,
max pooling, dropout, log-softmax and NLL loss, Adadelta with a StepLR schedule. The images are
synthetic 28x28 strokes made here, so the script needs no download.

Written for PyTorch; runs on singa_tensor with only the imports changed
(see tests/test_pytorch_ports.py).
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

STEPS = int(os.environ.get("PORT_STEPS", "40"))
DROPOUT = float(os.environ.get("PORT_DROPOUT", "0.25"))


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(DROPOUT)
        self.dropout2 = nn.Dropout(2 * DROPOUT)
        self.fc1 = nn.Linear(2304, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def make_data(n, rng):
    """Ten classes of images: class k is a bar at angle k*18 degrees, with noise."""
    yy, xx = np.mgrid[0:28, 0:28] - 13.5
    labels = rng.integers(0, 10, n)
    images = np.empty((n, 1, 28, 28), np.float32)
    for i, k in enumerate(labels):
        a = np.pi * k / 10
        dist = np.abs(xx * np.sin(a) - yy * np.cos(a))
        images[i, 0] = np.exp(-dist ** 2 / 4) + 0.2 * rng.standard_normal((28, 28))
    return images, labels.astype(np.int64)


def main():
    torch.manual_seed(1)
    rng = np.random.default_rng(0)
    x, y = make_data(256, rng)
    loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                        batch_size=32, shuffle=False)
    device = torch.device("cuda" if torch.cuda.is_available() and
                          os.environ.get("PORT_CUDA") else "cpu")
    model = Net().to(device)
    sync_init(model)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    model.train()
    step = 0
    while step < STEPS:
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            print(f"loss {step} {loss.item():.10f}")
            step += 1
            if step == STEPS:
                break
        scheduler.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            pred = model(data.to(device)).argmax(dim=1, keepdim=True)
            correct += pred.eq(target.to(device).view_as(pred)).sum().item()
    print(f"accuracy {correct / len(loader.dataset):.4f}")


if __name__ == "__main__":
    main()
