"""A Transformer language model in the style of the word_language_model example's
TransformerModel: sinusoidal positional encoding kept as a buffer, nn.TransformerEncoder with
a causal mask from nn.Transformer.generate_square_subsequent_mask, CrossEntropyLoss, and
SGD with a StepLR schedule and gradient clipping. The corpus is generated here.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import math
import os

import numpy as np
import torch
import torch.nn as nn

STEPS = int(os.environ.get("PORT_STEPS", "20"))
DROPOUT = float(os.environ.get("PORT_DROPOUT", "0.1"))


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=200):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        initrange = 0.1
        nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, src_mask):
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask)
        return torch.log_softmax(self.decoder(output), dim=-1)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(11)
    ntokens, bptt, bsz = 24, 16, 8
    words = []
    while len(words) < 3000:
        start = int(rng.integers(0, ntokens))
        words += [(start + k) % ntokens for k in range(int(rng.integers(3, 8)))]
    data = torch.tensor(words[:bsz * (len(words) // bsz)], dtype=torch.long)
    data = data.view(bsz, -1).t().contiguous()
    model = TransformerModel(ntokens, 32, 4, 64, 2, DROPOUT)
    sync_init(model)
    criterion = nn.NLLLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10, gamma=0.9)
    mask = nn.Transformer.generate_square_subsequent_mask(bptt)
    model.train()
    for step in range(STEPS):
        i = (step * bptt) % (data.size(0) - bptt - 1)
        src, tgt = data[i:i + bptt], data[i + 1:i + 1 + bptt].reshape(-1)
        optimizer.zero_grad()
        output = model(src, mask)
        loss = criterion(output.view(-1, ntokens), tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
        print(f"loss {step} {loss.item():.10f}")


if __name__ == "__main__":
    main()
