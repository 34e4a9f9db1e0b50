"""A variational autoencoder in the style of PyTorch's VAE example: an MLP encoder to a mean
and log-variance, the reparameterisation trick with torch.randn_like, a sigmoid decoder, and
the binary cross entropy + KL loss summed over the batch, trained with Adam. The data are
synthetic 28x28 blobs made here.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F

STEPS = int(os.environ.get("PORT_STEPS", "30"))


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 200)
        self.fc21 = nn.Linear(200, 8)
        self.fc22 = nn.Linear(200, 8)
        self.fc3 = nn.Linear(8, 200)
        self.fc4 = nn.Linear(200, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:28, 0:28]
    cx, cy = rng.uniform(6, 22, (2, 128, 1, 1))
    data = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 18).astype(np.float32)
    data = torch.tensor(data).unsqueeze(1)
    model = VAE()
    sync_init(model)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for step in range(STEPS):
        batch = data[(step * 32) % 128:(step * 32) % 128 + 32]
        # the noise comes from numpy so that both libraries draw the same
        eps = torch.tensor(rng.standard_normal((32, 8)).astype(np.float32))
        optimizer.zero_grad()
        recon, mu, logvar = model(batch, eps)
        loss = loss_function(recon, batch, mu, logvar)
        loss.backward()
        optimizer.step()
        print(f"loss {step} {loss.item() / len(batch):.10f}")
    with torch.no_grad():
        sample = model.decode(torch.zeros(4, 8))
    assert tuple(sample.shape) == (4, 784)


if __name__ == "__main__":
    main()
