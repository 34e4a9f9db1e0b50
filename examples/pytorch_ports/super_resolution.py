"""Sub-pixel super-resolution in the style of PyTorch's super_resolution example: four
convolutions ending in nn.PixelShuffle, orthogonal initialisation with
init.calculate_gain('relu'), MSE loss, Adam, and the PSNR of the result. Low-resolution inputs
are synthetic smooth images made here, downsampled by average pooling.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
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
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(32, 32, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(32, 16, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(16, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:24, 0:24] / 24.0
    fx, fy, ph = rng.uniform(1, 3, (3, 32, 1, 1))
    hr = (0.5 + 0.5 * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph)).astype(np.float32)
    target = torch.tensor(hr).unsqueeze(1)
    inputs = F.avg_pool2d(target, 3)
    model = Net(upscale_factor=3)
    sync_init(model)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        i = (step * 8) % 32
        optimizer.zero_grad()
        loss = criterion(model(inputs[i:i + 8]), target[i:i + 8])
        loss.backward()
        optimizer.step()
        print(f"loss {step} {loss.item():.10f}")
    with torch.no_grad():
        mse = criterion(model(inputs), target).item()
    print(f"psnr {10 * math.log10(1 / mse):.4f}")


if __name__ == "__main__":
    main()
