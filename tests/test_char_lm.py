"""The character-level language model example trains: a few seeded steps of each model on the
bundled sonnets lower the loss by a stated margin, steadily, and sampling gives text from the
corpus's alphabet."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import re

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.datasets import load_sonnets

from .helpers import DEVICE, to_numpy

_PATH = pathlib.Path(__file__).resolve().parents[1] / "examples" / "char_lm.py"
_spec = importlib.util.spec_from_file_location("char_lm", _PATH)
char_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(char_lm)

# Small models and batches, so each run takes a few seconds. A uniform guess over the 59
# characters costs log(59) = 4.08 nats; knowing only how often each letter occurs gets to about
# 3.1. The LSTM reaches that in 40 steps; the Transformer, which sees the whole window at once,
# gets well below it.
SMALL = ["--steps", "40", "--batch-size", "16", "--seq-len", "32", "--hidden", "64",
         "--log-every", "10", "--sample-len", "0", "--seed", "0", "--device", DEVICE]
MARGIN = {"lstm": 0.8, "transformer": 1.2}


def _roman(n: int) -> str:
    digits = [(50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
    out = ""
    for value, numeral in digits:
        count, n = divmod(n, value)
        out += numeral * count
    return out


def test_the_corpus_is_sonnets_one_to_fifty_one_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the text ships with the package, not beside the example
    text = load_sonnets()
    assert text.startswith("THE SONNETS\nby William Shakespeare\n")
    headings = re.findall(r"^ +([IVXL]+)$", text, flags=re.MULTILINE)
    assert headings == [_roman(n) for n in range(1, 52)]


@pytest.mark.parametrize("model", ["lstm", "transformer"])
def test_loss_falls(model, capsys):
    history = char_lm.main(["--model", model] + SMALL)
    first, train, val = history["first"], history["train"], history["val"]
    assert abs(first - math.log(59)) < 0.35  # an untrained model guesses about uniformly
    assert len(train) == len(val) == 4
    assert train[-1] < first - MARGIN[model], (first, train)
    assert all(b < a for a, b in zip(train, train[1:])), train  # every interval lower
    assert val[-1] < val[0], val
    assert capsys.readouterr().out.count("train loss") == 4


def test_sample_extends_the_prompt_with_corpus_characters():
    data = char_lm.CharData(load_sonnets())
    assert data.vocab_size == 59
    assert data.decode(data.encode("Shall I")) == "Shall I"
    st.manual_seed(0)
    for model in (char_lm.LSTMLanguageModel(data.vocab_size, hidden_size=16),
                  char_lm.TransformerLanguageModel(data.vocab_size, context=8, d_model=16)):
        model = model.to(DEVICE)
        text = char_lm.sample(model, data, "Shall I ", 12, 1.0, np.random.default_rng(0),
                              st.device(DEVICE))
        assert text.startswith("Shall I ") and len(text) == 20
        assert set(text) <= set(data.chars)


def test_batches_are_shifted_windows_and_positions_are_bounded():
    data = char_lm.CharData(load_sonnets())
    x, y = data.batch(data.train, 4, 10, np.random.default_rng(0))
    x, y = to_numpy(x), to_numpy(y)
    assert x.shape == y.shape == (4, 10)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])  # the target is the input moved on by one
    mask = char_lm.causal_mask(4).cpu().numpy()
    np.testing.assert_array_equal(mask, np.triu(np.full((4, 4), -np.inf), 1))
    table = char_lm.sinusoidal_positions(6, 4)
    np.testing.assert_allclose(table[3], [np.sin(3), np.cos(3), np.sin(0.03), np.cos(0.03)],
                               rtol=1e-6)
    model = char_lm.TransformerLanguageModel(data.vocab_size, context=8, d_model=16)
    with pytest.raises(ValueError, match="9 characters given, the position table has 8"):
        model(st.zeros(1, 9, dtype=st.int64))
