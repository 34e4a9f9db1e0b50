"""A word-level LSTM language model in the style of PyTorch's word_language_model example:
embedding, a 2-layer LSTM with dropout, a decoder with tied weights, truncated
backpropagation through time with repackaged hidden states, gradient clipping and a plain
SGD update written on p.data. The corpus is generated here from a small grammar.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = int(os.environ.get("PORT_STEPS", "30"))
DROPOUT = float(os.environ.get("PORT_DROPOUT", "0.2"))


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=True):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.nlayers, self.nhid = nlayers, nhid
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def make_corpus(rng, n):
    nouns, verbs = list(range(2, 20)), list(range(20, 32))
    words = []
    while len(words) < n:
        words += [0, int(rng.choice(nouns)), int(rng.choice(verbs)), int(rng.choice(nouns)), 1]
    return torch.tensor(words[:n], dtype=torch.long)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(5)
    ntokens, bptt, lr, clip = 32, 12, 5.0, 0.25
    train = batchify(make_corpus(rng, 4000), 8)
    model = RNNModel(ntokens, 32, 32, 2, DROPOUT)
    sync_init(model)
    criterion = nn.NLLLoss()
    model.train()
    hidden = model.init_hidden(8)
    step, i = 0, 0
    while step < STEPS:
        if i >= train.size(0) - 1:
            i = 0
            hidden = model.init_hidden(8)
        data, targets = get_batch(train, i, bptt)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        print(f"loss {step} {loss.item():.10f} ppl {math.exp(loss.item()):.4f}")
        step, i = step + 1, i + bptt


if __name__ == "__main__":
    main()
