"""examples/hybrid_parallel.py (SINGA's hybrid partitioning: the convolutional trunk
data-parallel over all ranks, the classifier tensor-parallel within groups), started by the
project's launcher: it must train as the unsplit model does on the whole batch in one process,
and send the bytes the communication plan says."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .mpi_run import needs_mpi

pytestmark = needs_mpi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ring(nbytes: int, ranks: int) -> int:
    return 2 * (ranks - 1) * nbytes // ranks


def planned(world: int, tp: int, b: int) -> tuple:
    """(hybrid, pure data parallel) bytes per rank and step, float32, from the layer sizes:
    conv 1->16 and 16->32 (3x3), then Linear(512, 256) and Linear(256, 10)."""
    trunk = (16 * 9 + 16) + (32 * 16 * 9 + 32)
    fc1, fc2_w, fc2_b = 512 * 256 + 256, 256 * 10, 10
    group_batch = tp * b
    hybrid = (ring(4 * trunk, world)                          # trunk gradients, world
              + (tp - 1) * 4 * b * 512                        # features into the group
              + ring(4 * group_batch * 10, tp)                # logits (RowParallelLinear)
              + ring(4 * group_batch * 512, tp)               # features' gradient (Column)
              + ring(4 * ((fc1 + fc2_w) // tp + fc2_b), world // tp))  # shards over groups
    return hybrid, ring(4 * (trunk + fc1 + fc2_w + fc2_b), world)


def _run(n: int, tp: int) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "singa_tensor.distributed.run", "-n", str(n),
                        os.path.join(ROOT, "examples", "hybrid_parallel.py"), "--tp", str(tp),
                        "--check", "--steps", "4", "--epochs", "1"],
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.mark.parametrize("n, tp", [(2, 2), (4, 2)], ids=["2-ranks-tp2", "4-ranks-tp2"])
def test_hybrid_trains_as_the_whole_batch_and_sends_the_planned_bytes(n, tp):
    out = _run(n, tp)
    diff = float(re.search(r"whole-batch single process\| over the parameters: (\S+)",
                           out).group(1))
    assert diff < 1e-5, out
    hybrid, data_parallel = (int(v.replace(",", "")) for v in re.search(
        r"bytes sent per step by rank 0: hybrid ([\d,]+), pure data parallel ([\d,]+)",
        out).groups())
    assert (hybrid, data_parallel) == planned(n, tp, 16), out
    assert hybrid < data_parallel
    assert "steps 4, bytes per step all equal: True" in out, out


def test_the_plan_by_hand():
    # 2 ranks, one group of 2: 19,200 B of trunk gradients, 32,768 of features, 1,280 of
    # logits, 65,536 of feature gradient; no shard all-reduce (one group)
    assert planned(2, 2, 16) == (118_784, 554_792)
