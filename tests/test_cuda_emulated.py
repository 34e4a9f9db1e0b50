"""The CUDA library's own kernels, run on the CPU: the op, autograd, layer, optimizer and
graph-mode suites rerun with SINGA_TENSOR_DEVICE=emu-cuda, where the stand-in CUDA device
launches cuda/*.cu built for the CPU by tools/cuda_emu (each CUDA thread a fiber; barriers,
warp shuffles and launch limits modelled). On a machine without a GPU this is what checks the
CUDA kernels' indexing, reductions and launch configurations against the CPU results; on a GPU
the same suites run on the device itself (tools/gpu_check.sh).

The suites run in a child pytest, since the session's device is fixed when it starts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import helpers

ROOT = Path(__file__).resolve().parent.parent

# every file whose tests create tensors on the device under test; the slow model-training
# files (character LM, tutorials, demo) and the ones that do not touch kernels stay out
SUITES = [
    "tests/test_cuda_backend.py",  # every op of the registry against the CPU, same inputs
    "tests/test_attention_fused.py",
    "tests/test_autograd.py",
    "tests/test_conv_ops.py",
    "tests/test_creation.py",
    "tests/test_fused_kernel.py",
    "tests/test_fused_kernels.py",
    "tests/test_graph.py",
    "tests/test_index_ops.py",
    "tests/test_linalg_ops.py",
    "tests/test_linear_fused.py",
    "tests/test_lowp_elementwise.py",
    "tests/test_lowp_matmul.py",
    "tests/test_losses.py",
    "tests/test_lowp_reduce.py",
    "tests/test_op_registry.py",
    "tests/test_reduce_ops.py",
    "tests/test_reduce_speed_paths.py",
    "tests/test_rnn_fused.py",
    "tests/test_shape_ops.py",
    "tests/test_sort_ops.py",
    "tests/test_unary_accuracy.py",
    "tests/optim",
    "tests/nn",
]
# ResNet-18 trained four steps eager and four in graph mode takes minutes on the emulator (batch
# norm's one-block-per-channel reductions switch through 512 fibers at each of their barriers);
# the MLP, CNN, LSTM and Transformer cases of the same tests run the same kernels
DESELECT = [
    "tests/test_graph.py::test_replayed_training_equals_eager[resnet18]",
    "tests/test_graph.py::test_memory_plan_never_aliases_live_tensors",
]


@pytest.mark.skipif(helpers.REQUESTED_DEVICE != "cpu",
                    reason="launched from the CPU session only (it starts its own session)")
@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_cuda_kernels_pass_the_suites_on_the_emulator(order):
    # Threads of a block run one at a time, in index order or in reverse: a kernel that reads
    # shared memory another thread writes, without a barrier in between, reads the emulator's
    # fill pattern in one of the two orders.
    helpers.emulated_cuda_library()  # build it here, so a compile error reads as one
    env = dict(os.environ, SINGA_TENSOR_DEVICE="emu-cuda", SINGA_TENSOR_EMU_ORDER=order)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-rfE", "-p", "no:cacheprovider", *SUITES,
         *(f"--deselect={t}" for t in DESELECT)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    lines = r.stdout.splitlines()
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    summary = re.search(r"(\d+) passed", lines[-1] if lines else "")
    assert r.returncode == 0 and summary and int(summary[1]) > 2000, (
        f"{len(failed)} failed on the emulated CUDA kernels (rerun with "
        f"SINGA_TENSOR_DEVICE=emu-cuda python -m pytest ...):\n" + "\n".join(failed[:40])
        + "\n" + "\n".join(lines[-30:]) + r.stderr[-3000:])
