"""Loss modules pass their options to the functional losses."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn

from ..helpers import to_numpy

rng = np.random.default_rng(5)
logits = st.tensor(rng.standard_normal((6, 4)))
classes = st.tensor([0, 3, 1, 2, 3, -100])
probs = st.tensor(rng.uniform(0.05, 0.95, (6, 4)))
targets01 = st.tensor(rng.integers(0, 2, (6, 4)).astype(np.float64))
w = st.tensor([1.0, 2.0, 0.5, 1.5])


@pytest.mark.parametrize("module, functional, args", [
    (nn.CrossEntropyLoss(weight=w, label_smoothing=0.1),
     lambda a, b: F.cross_entropy(a, b, weight=w, label_smoothing=0.1), (logits, classes)),
    (nn.NLLLoss(reduction="sum"), lambda a, b: F.nll_loss(a, b, reduction="sum"),
     (F.log_softmax(logits, 1), classes)),
    (nn.MSELoss(reduction="none"), lambda a, b: F.mse_loss(a, b, reduction="none"),
     (probs, targets01)),
    (nn.L1Loss(), F.l1_loss, (probs, targets01)),
    (nn.SmoothL1Loss(beta=0.3), lambda a, b: F.smooth_l1_loss(a, b, beta=0.3),
     (probs, targets01)),
    (nn.BCELoss(weight=w), lambda a, b: F.binary_cross_entropy(a, b, weight=w),
     (probs, targets01)),
    (nn.BCEWithLogitsLoss(pos_weight=w),
     lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=w), (logits, targets01)),
    (nn.KLDivLoss(reduction="batchmean"), lambda a, b: F.kl_div(a, b, reduction="batchmean"),
     (F.log_softmax(logits, 1), probs)),
])
def test_modules_match_functional(module, functional, args):
    np.testing.assert_array_equal(to_numpy(module(*args)), to_numpy(functional(*args)))


def test_loss_weight_is_a_buffer_and_repr_shows_reduction():
    loss = nn.CrossEntropyLoss(weight=w, reduction="sum")
    assert list(loss.state_dict()) == ["weight"]
    assert repr(loss) == "CrossEntropyLoss(reduction='sum')"


def test_module_reports_bad_reduction():
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")(probs, targets01)
