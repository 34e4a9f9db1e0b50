"""Write tests/data/rnn_fixtures.npz: small PyTorch RNN/LSTM/GRU layers with seeded weights,
their inputs, outputs, final states and input gradients, for tests/nn/test_rnn.py.

PyTorch is used here only (never by the library or its tests). Run from the repository root:
    python tools/make_rnn_fixtures.py

Keys: "<case>.<parameter name>" hold the state dict, "<case>:<name>" the tensors of the run
(input, h0, c0, output, h_n, c_n, lengths, grad_input = d sum(output) / d input and
grad.<parameter name>, the parameters' gradients of the same sum).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "rnn_fixtures.npz"

# name: (class, constructor kwargs, input shape, lengths for a packed run or None)
CASES = {
    "lstm": (torch.nn.LSTM, dict(input_size=3, hidden_size=4, num_layers=2,
                                 bidirectional=True), (5, 2, 3), None),
    "lstm_proj": (torch.nn.LSTM, dict(input_size=3, hidden_size=5, num_layers=2, proj_size=2,
                                      bidirectional=True), (4, 2, 3), None),
    "gru": (torch.nn.GRU, dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True,
                               batch_first=True), (2, 5, 3), None),
    "rnn_tanh": (torch.nn.RNN, dict(input_size=3, hidden_size=4, num_layers=2,
                                    bidirectional=True), (5, 2, 3), None),
    "rnn_relu": (torch.nn.RNN, dict(input_size=3, hidden_size=4, num_layers=1,
                                    nonlinearity="relu"), (4, 3, 3), None),
    "lstm_packed": (torch.nn.LSTM, dict(input_size=3, hidden_size=4, num_layers=2,
                                        bidirectional=True), (5, 3, 3), [3, 5, 2]),
    "gru_packed": (torch.nn.GRU, dict(input_size=3, hidden_size=4, bidirectional=True),
                   (4, 3, 3), [4, 2, 1]),
}


def _case(name: str, cls, kwargs: dict, shape: tuple, lengths, seed: int) -> dict:
    torch.manual_seed(seed)
    layer = cls(**kwargs).double()
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    dirs = 2 if kwargs.get("bidirectional") else 1
    batch = shape[0] if kwargs.get("batch_first") else shape[1]
    n = kwargs.get("num_layers", 1) * dirs
    hsize = kwargs.get("proj_size") or kwargs["hidden_size"]
    h0 = torch.randn(n, batch, hsize, dtype=torch.float64)
    c0 = torch.randn(n, batch, kwargs["hidden_size"], dtype=torch.float64)
    hx = (h0, c0) if cls is torch.nn.LSTM else h0
    if lengths is None:
        out, state = layer(x, hx)
    else:
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            x, torch.tensor(lengths), batch_first=kwargs.get("batch_first", False),
            enforce_sorted=False)
        out, state = layer(packed, hx)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(
            out, batch_first=kwargs.get("batch_first", False))
    out.sum().backward()
    rec = {f"{name}.{k}": v.detach().numpy() for k, v in layer.state_dict().items()}
    h_n, c_n = state if cls is torch.nn.LSTM else (state, None)
    run = {"input": x, "h0": h0, "output": out, "h_n": h_n, "grad_input": x.grad}
    if cls is torch.nn.LSTM:
        run.update(c0=c0, c_n=c_n)
    if lengths is not None:
        run["lengths"] = torch.tensor(lengths)
    rec.update({f"{name}:{k}": v.detach().numpy() for k, v in run.items()})
    rec.update({f"{name}:grad.{k}": p.grad.numpy() for k, p in layer.named_parameters()})
    return rec


def main() -> None:
    arrays = {}
    for i, (name, (cls, kwargs, shape, lengths)) in enumerate(CASES.items()):
        arrays.update(_case(name, cls, kwargs, shape, lengths, seed=100 + i))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(arrays)} arrays, torch "
          f"{torch.__version__})")


if __name__ == "__main__":
    main()
