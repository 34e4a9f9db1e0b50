"""Train a character-level language model on Shakespeare's sonnets: an LSTM or a small
Transformer learns to predict each next character of the text, then writes some of its own.

The text, `singa_tensor.datasets.load_sonnets()`, is Sonnets I-LI by William Shakespeare
(1609), public domain, as modernised in the Project Gutenberg edition; it ships with the package.

    python examples/char_lm.py                        # 2-layer LSTM, 300 steps
    python examples/char_lm.py --model transformer    # 2 Transformer encoder layers
    python examples/char_lm.py --steps 2000 --sample-len 400 --device cuda

A language model gives, for every position of a sequence, a probability for each possible
next character. Training shows it windows of the text (the input) and the same windows moved
one character on (the target), and lowers the cross-entropy between its predictions and the
targets. The loss starts near log(vocabulary size), about 4.1 nats for the 59 characters
here (a uniform guess); it falls quickly to about 3.1 once the model knows how often each
letter occurs, and keeps falling as it learns which letters follow which, then spelling.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim
from singa_tensor.datasets import load_sonnets

# ---------------------------------------------------------------------------------------------
# Data: the text as a sequence of integer character ids
# ---------------------------------------------------------------------------------------------

class CharData:
    """The corpus encoded as ids, split 90/10 into training and validation text.

    The vocabulary is simply every distinct character of the corpus, sorted, so a given text
    always gives the same ids."""

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        ids = self.encode(text)
        cut = int(0.9 * len(ids))
        self.train, self.val = ids[:cut], ids[cut:]

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index[c] for c in text], dtype=np.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def batch(self, split: np.ndarray, batch_size: int, seq_len: int,
              rng: np.random.Generator) -> tuple[st.Tensor, st.Tensor]:
        """`batch_size` windows of `seq_len` characters at random places, and the targets: each
        window moved on by one character. Both are (batch, seq_len) int64 tensors."""
        starts = rng.integers(0, len(split) - seq_len - 1, size=batch_size)
        rows = starts[:, None] + np.arange(seq_len)[None, :]
        return st.tensor(split[rows]), st.tensor(split[rows + 1])


# ---------------------------------------------------------------------------------------------
# Two models with one interface: forward(ids, state) -> (logits, state)
# ---------------------------------------------------------------------------------------------

class LSTMLanguageModel(nn.Module):
    """Embedding -> 2-layer LSTM -> Linear.

    The LSTM reads the characters in order and carries a state (h, c) from one step to the
    next, so it needs no positional information and, when sampling, can be fed one character
    at a time with the state it returned last."""

    recurrent = True

    def __init__(self, vocab_size: int, embed_dim: int = 32, hidden_size: int = 128,
                 num_layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, ids, state=None):
        out, state = self.lstm(self.embed(ids), state)  # out: (batch, seq, hidden)
        return self.head(out), state


def sinusoidal_positions(length: int, dim: int) -> np.ndarray:
    """The fixed position code of "Attention Is All You Need": position p gets sines and
    cosines of p at geometrically spaced frequencies, so nearby positions have similar codes
    and relative offsets are easy for attention to pick up."""
    pos = np.arange(length)[:, None]
    freq = np.exp(-math.log(10000.0) * np.arange(0, dim, 2) / dim)[None, :]
    table = np.zeros((length, dim), dtype=np.float32)
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq)
    return table


def causal_mask(length: int, device=None) -> st.Tensor:
    """An additive attention mask: 0 where position i may look at position j (j <= i) and -inf
    above the diagonal, so no position sees the characters it has to predict."""
    return st.triu(st.full((length, length), float("-inf"), device=device), diagonal=1)


class TransformerLanguageModel(nn.Module):
    """Embedding + sinusoidal positions -> 2 Transformer encoder layers under a causal mask
    -> Linear.

    Self-attention looks at the whole window at once and has no notion of order by itself:
    the position code tells it where each character is, and the causal mask stops it from
    reading ahead."""

    recurrent = False

    def __init__(self, vocab_size: int, context: int, d_model: int = 128, nhead: int = 4,
                 num_layers: int = 2, dim_feedforward: int = 256) -> None:
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab_size, d_model)
        # A buffer, not a parameter: it moves with .to(device) and is saved, but is not trained.
        self.register_buffer("positions", st.tensor(sinusoidal_positions(context, d_model)))
        # dropout=0: the corpus is small, but so are the model and the number of steps.
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=dim_feedforward,
                                       dropout=0.0, batch_first=True)
            for _ in range(num_layers)])
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids, state=None):
        seq_len = ids.shape[1]
        if seq_len > self.context:
            raise ValueError(f"TransformerLanguageModel: {seq_len} characters given, the "
                             f"position table has {self.context}")
        x = self.embed(ids) + self.positions[:seq_len]
        mask = causal_mask(seq_len, x.device)
        for layer in self.layers:
            x = layer(x, src_mask=mask)
        return self.head(x), None


# ---------------------------------------------------------------------------------------------
# Training and sampling
# ---------------------------------------------------------------------------------------------

def next_char_loss(model: nn.Module, x, y):
    """Mean cross-entropy of the model's next-character predictions over a batch."""
    logits, _ = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def evaluate(model: nn.Module, batches) -> float:
    """Mean loss over fixed validation batches, without recording a graph."""
    model.eval()
    with st.no_grad():
        loss = sum(next_char_loss(model, x, y).item() for x, y in batches) / len(batches)
    model.train()
    return loss


def sample(model: nn.Module, data: CharData, prompt: str, length: int, temperature: float,
           rng: np.random.Generator, device) -> str:
    """Extend `prompt` by `length` characters, each drawn from the model's predicted
    distribution (sharpened when temperature < 1)."""
    model.eval()
    ids = list(data.encode(prompt))
    feed, state = ids, None
    with st.no_grad():
        for _ in range(length):
            if model.recurrent:
                # The state summarises everything read so far: feed only what is new.
                logits, state = model(st.tensor([feed]).to(device), state)
            else:
                # No state to carry: attend over the last `context` characters every time.
                logits, _ = model(st.tensor([ids[-model.context:]]).to(device))
            scaled = logits[0, -1].cpu().numpy().astype(np.float64) / temperature
            probs = np.exp(scaled - scaled.max())
            nxt = int(rng.choice(len(probs), p=probs / probs.sum()))
            ids.append(nxt)
            feed = [nxt]
    model.train()
    return data.decode(ids)


def build_model(args, vocab_size: int) -> nn.Module:
    if args.model == "lstm":
        return LSTMLanguageModel(vocab_size, hidden_size=args.hidden)
    return TransformerLanguageModel(vocab_size, context=args.seq_len, d_model=args.hidden,
                                    nhead=args.heads, dim_feedforward=2 * args.hidden)


def main(argv=None) -> dict:
    """Train, print the loss as it goes and a sample at the end; return the loss history:
    {"first": loss of step 1, "train": [mean loss of each logging interval], "val": [...]}."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["lstm", "transformer"], default="lstm")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=64, help="characters per training window")
    ap.add_argument("--hidden", type=int, default=128, help="LSTM hidden size or d_model")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (transformer)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--sample-len", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.8)
    args = ap.parse_args(argv)
    device = st.device(args.device)

    st.manual_seed(args.seed)  # the initial weights
    rng = np.random.default_rng(args.seed)  # the batches and the sampling
    data = CharData(load_sonnets())
    model = build_model(args, data.vocab_size).to(device)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    val_batches = [tuple(t.to(device) for t in data.batch(data.val, args.batch_size,
                                                          args.seq_len, rng))
                   for _ in range(4)]
    n_params = sum(p.numel() for p in model.parameters())
    print(f"singa_tensor {st.__version__}: {args.model}, {n_params} parameters, "
          f"{len(data.train)} training characters, vocabulary {data.vocab_size}, on {device}")

    history = {"first": None, "train": [], "val": []}
    running, start = 0.0, time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = (t.to(device) for t in data.batch(data.train, args.batch_size, args.seq_len,
                                                 rng))
        loss = next_char_loss(model, x, y)
        opt.zero_grad()
        loss.backward()
        # A long unrolled sequence can produce the odd huge gradient; clipping its norm keeps
        # one bad batch from undoing what the model has learned.
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = loss.item()
        if step == 1:
            history["first"] = value
        running += value
        if step % args.log_every == 0 or step == args.steps:
            n = step % args.log_every or args.log_every
            history["train"].append(running / n)
            history["val"].append(evaluate(model, val_batches))
            print(f"step {step:5d}  train loss {history['train'][-1]:.3f}  "
                  f"val loss {history['val'][-1]:.3f}  ({time.perf_counter() - start:.1f} s)")
            running = 0.0

    if args.sample_len > 0:
        text = sample(model, data, "Shall I ", args.sample_len, args.temperature, rng, device)
        print(f"\nsample (temperature {args.temperature}):\n{text}")
    return history


if __name__ == "__main__":
    main()
