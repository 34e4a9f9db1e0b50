"""A small DCGAN in the style of PyTorch's dcgan example: a generator of transposed
convolutions with batch norm and ReLU, a discriminator of strided convolutions with
LeakyReLU, weights initialised through Module.apply, BCELoss and Adam with betas=(0.5, 0.999).
The "real" images are synthetic 16x16 rings made here.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

STEPS = int(os.environ.get("PORT_STEPS", "20"))
NZ, NGF, NDF = 16, 16, 16


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(NGF * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NGF),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF, 1, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, NDF, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NDF * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[0:16, 0:16] - 7.5
    r = rng.uniform(3, 6, (64, 1, 1, 1))
    real_images = np.tanh(2 * np.exp(-(np.hypot(xx, yy) - r) ** 2)).astype(np.float32)
    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    sync_init(netG, "G")
    sync_init(netD, "D")
    criterion = nn.BCELoss()
    optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real_label, fake_label = 1.0, 0.0
    for step in range(STEPS):
        real = torch.tensor(real_images[(step * 16) % 64:(step * 16) % 64 + 16])
        b = real.size(0)
        noise = torch.tensor(rng.standard_normal((b, NZ, 1, 1)).astype(np.float32))
        netD.zero_grad()
        label = torch.full((b,), real_label, dtype=real.dtype)
        errD_real = criterion(netD(real), label)
        errD_real.backward()
        fake = netG(noise)
        label.fill_(fake_label)
        errD_fake = criterion(netD(fake.detach()), label)
        errD_fake.backward()
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        errG = criterion(netD(fake), label)
        errG.backward()
        optimizerG.step()
        print(f"loss {step} {(errD_real + errD_fake).item():.10f} {errG.item():.10f}")


if __name__ == "__main__":
    main()
