"""A siamese network in the style of PyTorch's siamese_network example: one shared
convolutional tower applied to both images of a pair, the two embeddings concatenated and
classified same/different with BCEWithLogitsLoss, plus a triplet margin loss on the
embeddings; Adadelta with a StepLR schedule. The images are synthetic glyphs made here.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

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


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.tower = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(128, 32), nn.ReLU(inplace=True), nn.Linear(32, 1))
        self.sigmoid = nn.Sigmoid()

    def forward_once(self, x):
        return self.tower(x)

    def forward(self, input1, input2):
        output1, output2 = self.forward_once(input1), self.forward_once(input2)
        return self.fc(torch.cat((output1, output2), 1)), output1, output2


def glyphs(rng, labels):
    yy, xx = np.mgrid[0:16, 0:16] - 7.5
    out = np.empty((len(labels), 1, 16, 16), np.float32)
    for i, k in enumerate(labels):
        a = np.pi * k / 5
        out[i, 0] = np.cos(xx * np.cos(a) * 0.6 + yy * np.sin(a) * 0.6) \
            + 0.3 * rng.standard_normal((16, 16))
    return out


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(8)
    model = SiameseNetwork()
    sync_init(model)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=5, gamma=0.7)
    criterion = nn.BCEWithLogitsLoss()
    triplet = nn.TripletMarginLoss(margin=1.0, p=2)
    model.train()
    for step in range(STEPS):
        a = rng.integers(0, 5, 16)
        same = rng.integers(0, 2, 16)
        b = np.where(same == 1, a, (a + rng.integers(1, 5, 16)) % 5)
        x1, x2 = torch.tensor(glyphs(rng, a)), torch.tensor(glyphs(rng, b))
        x3 = torch.tensor(glyphs(rng, (a + 1) % 5))
        targets = torch.tensor(same.astype(np.float32))
        optimizer.zero_grad()
        logits, e1, e2 = model(x1, x2)
        e_pos = model.forward_once(torch.tensor(glyphs(rng, a)))
        loss = criterion(logits.squeeze(1), targets) + 0.1 * triplet(
            e1, e_pos, model.forward_once(x3))
        loss.backward()
        optimizer.step()
        if step % 5 == 4:
            scheduler.step()
        print(f"loss {step} {loss.item():.10f}")


if __name__ == "__main__":
    main()
