"""Sine-wave sequence prediction in the style of PyTorch's time_sequence_prediction example:
two stacked LSTMCells in float64, trained with L-BFGS and a closure, then asked to continue
the waves for future steps.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

STEPS = int(os.environ.get("PORT_STEPS", "4"))


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 24)
        self.lstm2 = nn.LSTMCell(24, 24)
        self.linear = nn.Linear(24, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 24, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 24, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 24, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 24, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(2)
    T, L, N = 20, 60, 24
    x = np.arange(L) + rng.integers(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / T).astype(np.float64)
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence().double()
    sync_init(seq)
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=8)
    for i in range(STEPS):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        print(f"loss {i} {loss.item():.10f}")
        with torch.no_grad():
            future = 20
            pred = seq(test_input, future=future)
            test_loss = criterion(pred[:, :-future], test_target)
            print(f"test {i} {test_loss.item():.10f}")
    y = pred.detach().numpy()
    assert y.shape == (3, L - 1 + future)


if __name__ == "__main__":
    main()
