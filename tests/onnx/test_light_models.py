"""The light SqueezeNet that onnx ships with its backend tests (onnx/backend/test/data/light:
the model and its stored output; the runner makes the input), checked on what does not depend
on how the CPU rounds. Its constant weights make all 1000 logits equal in exact arithmetic, so
the stored output is a flat softmax that we reproduce only where our GEMM happens to keep the
ties (see ROUNDING_DEPENDENT in expected_failures.py): the logits are compared with onnx's
reference evaluator in ulps instead, and the output with our softmax of those logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402
from onnx.backend.test import BackendTest  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import singa_tensor as st  # noqa: E402

from ..helpers import as_tensor, assert_ulp_close, to_numpy  # noqa: E402

LIGHT = Path(onnx.backend.test.__file__).parent / "data" / "light"


@pytest.fixture(scope="module")
def squeezenet():
    proto = onnx.load(LIGHT / "light_squeezenet.onnx")
    graph = proto.graph
    initializers = {t.name for t in graph.initializer}
    (data,) = [i for i in graph.input if i.name not in initializers]
    # the input the conformance runner feeds a light model: arange(n) / n in its shape
    x = BackendTest.generate_dummy_data(data, seed=0, random=False)
    softmax = graph.node[-1]
    assert softmax.op_type == "Softmax" and proto.opset_import[0].version < 13
    logits = softmax.input[0]
    with st.no_grad():
        ours = to_numpy(st.onnx.load(proto, outputs=[logits]).eval()(as_tensor(x)))
        probs = to_numpy(st.onnx.load(proto).eval()(as_tensor(x)))
    return proto, {data.name: x}, logits, ours, probs


def test_squeezenet_logits_match_the_reference_evaluator(squeezenet):
    proto, feeds, logits, ours, _ = squeezenet
    (want,) = ReferenceEvaluator(proto).run([logits], feeds)
    assert ours.shape == want.shape == (1, 1000, 1, 1) and ours.dtype == np.float32
    # 26 convolutions, each a GEMM that rounds by the kernel the CPU picks (and numpy's, in the
    # reference): across OpenBLAS's Haswell, Sandybridge, Nehalem and Prescott kernels and
    # numpy with and without AVX2 the two differ by up to 8 ulps; 64 (7e-6 relative at these
    # 9.5e9 logits) leaves room for other kernels and is still far below what a wrong op moves
    assert_ulp_close(ours, want, ulps=64, msg="squeezenet logits")


def test_squeezenet_output_is_our_softmax_of_the_logits(squeezenet):
    _, _, _, logits, probs = squeezenet
    assert probs.shape == (1, 1000, 1, 1) and probs.dtype == np.float32
    # Softmax before opset 13 flattens from axis 1: one distribution over the 1000 channels
    flat = logits.reshape(1, 1000)
    np.testing.assert_array_equal(probs.reshape(1, 1000),
                                  to_numpy(st.softmax(as_tensor(flat), 1)))
    # a distribution: channels that rounded 1 ulp (1024) or more below the top get exp(-1024)
    # = 0; the k tied top ones get exp(0) = 1 over a normalizer of exactly k, each rounded once
    # to float32 (half an ulp of 1/k), so their sum is within half an ulp of 1
    top = flat == flat.max()
    assert (probs.reshape(1, 1000)[~top] == 0).all() and (probs.reshape(1, 1000)[top] > 0).all()
    assert_ulp_close(probs.astype(np.float64).sum(), np.float32(1.0), ulps=1,
                     msg="squeezenet output sum")
    # where the logits all tie, as in exact arithmetic and in the reference, the same softmax
    # gives the stored output exactly
    stored = numpy_helper.to_array(onnx.load_tensor(LIGHT / "light_squeezenet_output_0.pb"))
    tied = np.full((1, 1000), flat.max(), np.float32)
    np.testing.assert_array_equal(to_numpy(st.softmax(as_tensor(tied), 1)).reshape(stored.shape),
                                  stored)
