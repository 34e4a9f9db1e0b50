"""The demo trains: a seeded run of the digits CNN reaches a stated accuracy in a few epochs,
and SINGA's Model idiom refuses what it cannot do."""

from __future__ import annotations

import pytest

import singa_tensor as st
from singa_tensor import demo, nn, optim
from singa_tensor.model import Model

from .helpers import DEVICE


def test_digits_cnn_converges(tmp_path):
    path = tmp_path / "digits.stk"
    acc = demo.main(["--epochs", "3", "--seed", "0", "--save", str(path), "--device", DEVICE])
    assert acc >= 0.95
    state = st.load(path)
    assert {str(t.device) for t in state.values()} == {str(st.device(DEVICE))}
    model = demo.DigitsCNN().to(DEVICE)
    model.load_state_dict(state)  # the checkpoint restores the trained model
    model.eval()
    x, y = (t.to(DEVICE) for t in st.datasets.load_digits("test", seed=0).tensors)
    with st.no_grad():
        again = (model(x).argmax(dim=1) == y).float().mean().item()
    assert again == pytest.approx(acc)


def test_model_compile_checks_graph_options_and_missing_optimizer():
    class Net(Model):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x)

    net = Net()
    with pytest.raises(RuntimeError, match="set an optimizer"):
        net.compile([st.ones(1, 2)], is_train=True)
    net.set_optimizer(optim.SGD(net.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="compile: on_change must be one of"):
        net.compile([st.ones(1, 2)], use_graph=True, on_change="sometimes")
    net.compile([st.ones(1, 2)], is_train=True)
    w0 = net.fc.weight.detach().clone()
    out, loss = net(st.ones(3, 2), st.tensor([0, 1, 1]))
    assert out.shape == (3, 2) and loss.ndim == 0
    assert not (net.fc.weight.detach() == w0).all().item()  # one SGD step happened
