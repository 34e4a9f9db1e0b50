"""The ONNX backend cases we do not pass, each pattern (re.search over the test name) with why.

A listed case that starts passing fails the run ("unexpected success"), so this list only
ever holds cases that really fail. Most are element types or domains outside a deep learning
tensor library; the rest are explained one by one.

A case whose outcome depends on how the CPU rounds (its GEMM kernel, its thread count) can be
neither listed nor left to pass: it is in ROUNDING_DEPENDENT instead, left out of the run
(BackendTest.exclude) and checked by a test of ours on what does not depend on rounding. A case
whose outcome is a matter of chance (random draws that agree with the stored ones now and then)
is in RANDOM_OUTCOME, left out in the same way.
"""

EXPECTED_FAILURES: dict[str, str] = {
    # ---- random ops: the expected values come from numpy's generator -------------------------
    r"^test_training_dropout(_default)?(_mask)?_(cpu|cuda)$":
        "training-mode Dropout draws a random mask: our Philox stream cannot reproduce numpy's",
    # ---- the expected values are outside the suite's own tolerance ---------------------------
    r"^test_dft_inverse(_opset19)?_":
        "the stored result keeps numpy's complex64 FFT rounding (exact zeros stored as 1.9e-7, "
        "above the 1e-7 absolute tolerance); ours is exact to 3e-15 there",
    r"^test_attention_4d_causal_fp16(_expanded)?_":
        "float16 attention: we accumulate in float32, the reference in float16, and the two "
        "differ by about 1e-3 relative, the suite's tolerance",
    r"^test_loop16_seq_none_":
        "onnx's runner cannot compare a sequence holding a 0-d tensor (len() of unsized "
        "object); our output equals the reference",
}

RANDOM_OUTCOME: dict[str, str] = {
    r"^test_bernoulli":
        "the expected values are draws of numpy's global generator (np.random.binomial, in the "
        "state the suite's earlier cases left it; the node's seed attribute never reaches it), "
        "which another generator cannot reproduce: the spec leaves the values to the "
        "implementation. Yet ten draws of 0 or 1 on these probabilities agree by chance with "
        "probability 0.44%, and the cases without a seed draw from our default generator, whose "
        "state depends on which tests ran before: so the three cases and their _expanded forms "
        "can be neither listed nor left to pass. tests/onnx/test_import_random.py checks "
        "Bernoulli by its distribution",
}

ROUNDING_DEPENDENT: dict[str, str] = {
    r"^test_squeezenet_":
        "the light SqueezeNet has constant weights, so in exact arithmetic its 9.5e9 logits tie "
        "in all 1000 channels and the stored softmax is 0.001 in each. The GEMM of its last 1x1 "
        "convolution computes the channels at the end of each block of work in a narrower tile, "
        "which can round them 1 ulp (1024) away from the rest, and then the softmax is 0 in "
        "every channel below the top: which channels, and whether they round apart at all, "
        "depends on the OpenBLAS kernel the CPU picks and on the thread count (Haswell: ties "
        "broken, the case fails; Sandybridge, Nehalem, Prescott: ties kept, it passes). "
        "tests/onnx/test_light_models.py checks the logits against onnx's reference evaluator "
        "in ulps, and the output against our softmax of those logits",
}
