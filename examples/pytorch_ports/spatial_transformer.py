"""A spatial transformer network in the style of PyTorch's spatial transformer tutorial: a
localisation network predicts a 2x3 affine matrix (initialised to the identity), F.affine_grid
and F.grid_sample warp the input, and a small classifier is trained on the warped images with
SGD. The digits are synthetic shifted and rotated bars made here.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

STEPS = int(os.environ.get("PORT_STEPS", "20"))


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
        self.conv1 = nn.Conv2d(1, 8, kernel_size=5)
        self.conv2 = nn.Conv2d(8, 12, kernel_size=5)
        self.fc1 = nn.Linear(12 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, 4)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(6, 8, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(8 * 3 * 3, 16), nn.ReLU(True), nn.Linear(16, 3 * 2))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 8 * 3 * 3)
        theta = self.fc_loc(xs).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = x.view(-1, 12 * 2 * 2)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(13)
    yy, xx = np.mgrid[0:20, 0:20] - 9.5
    labels = rng.integers(0, 4, 64)
    imgs = np.empty((64, 1, 20, 20), np.float32)
    for i, k in enumerate(labels):
        a = np.pi * k / 4 + rng.normal(0, 0.2)
        dx, dy = rng.uniform(-3, 3, 2)
        imgs[i, 0] = np.exp(-np.abs((xx - dx) * np.sin(a) - (yy - dy) * np.cos(a)) ** 2 / 3)
    x, y = torch.tensor(imgs), torch.tensor(labels, dtype=torch.long)
    model = Net()
    sync_init(model)
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model.train()
    for step in range(STEPS):
        i = (step * 16) % 64
        optimizer.zero_grad()
        loss = F.nll_loss(model(x[i:i + 16]), y[i:i + 16])
        loss.backward()
        optimizer.step()
        print(f"loss {step} {loss.item():.10f}")


if __name__ == "__main__":
    main()
