"""Style transfer in the style of PyTorch's fast_neural_style example: a transformer network
of reflection-padded convolutions, instance normalisation, residual blocks and nearest
upsampling, trained against a content loss and a Gram-matrix style loss computed with bmm
from a small fixed feature extractor. The images are synthetic patterns made here.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = int(os.environ.get("PORT_STEPS", "10"))


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class ConvLayer(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = nn.InstanceNorm2d(channels, affine=True)
        self.relu = nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        return out + residual


class UpsampleConvLayer(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        if self.upsample:
            x = F.interpolate(x, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.reflection_pad(x))


class TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = ConvLayer(3, 8, kernel_size=5, stride=1)
        self.in1 = nn.InstanceNorm2d(8, affine=True)
        self.conv2 = ConvLayer(8, 16, kernel_size=3, stride=2)
        self.in2 = nn.InstanceNorm2d(16, affine=True)
        self.res1 = ResidualBlock(16)
        self.res2 = ResidualBlock(16)
        self.deconv1 = UpsampleConvLayer(16, 8, kernel_size=3, stride=1, upsample=2)
        self.in3 = nn.InstanceNorm2d(8, affine=True)
        self.deconv2 = ConvLayer(8, 3, kernel_size=5, stride=1)
        self.relu = nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.res2(self.res1(y))
        y = self.relu(self.in3(self.deconv1(y)))
        return self.deconv2(y)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    return features.bmm(features.transpose(1, 2)) / (ch * h * w)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(9)
    yy, xx = np.mgrid[0:32, 0:32] / 32.0
    content = np.stack([np.sin(6 * xx + c) * np.cos(4 * yy - c) for c in range(3)])
    style = np.stack([np.sign(np.sin(20 * (xx + yy) + c)) for c in range(3)])
    images = torch.tensor((content[None] + 0.1 * rng.standard_normal((8, 3, 32, 32)))
                          .astype(np.float32))
    style = torch.tensor(style[None].astype(np.float32))
    features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(8, 8, 3, padding=1, stride=2), nn.ReLU())
    for p in features.parameters():
        p.requires_grad_(False)
    net = TransformerNet()
    sync_init(net, "net")
    sync_init(features, "features")
    optimizer = torch.optim.Adam(net.parameters(), 1e-3)
    mse_loss = torch.nn.MSELoss()
    gram_style = gram_matrix(features(style))
    for step in range(STEPS):
        x = images[(step * 4) % 8:(step * 4) % 8 + 4]
        optimizer.zero_grad()
        y = net(x)
        features_y, features_x = features(y), features(x)
        content_loss = mse_loss(features_y, features_x)
        style_loss = mse_loss(gram_matrix(features_y), gram_style.expand(x.size(0), -1, -1))
        total_loss = content_loss + 10.0 * style_loss
        total_loss.backward()
        optimizer.step()
        print(f"loss {step} {total_loss.item():.10f}")


if __name__ == "__main__":
    main()
