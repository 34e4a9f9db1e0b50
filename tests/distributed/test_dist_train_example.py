"""examples/dist_train.py: one script, every training mode chosen by an argument, started by
the project's launcher; each mode must learn (test accuracy well above chance)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .mpi_run import needs_mpi

pytestmark = needs_mpi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("n, args", [
    (2, ["--mode", "allreduce"]),
    (3, ["--mode", "bsp"]),
    (4, ["--mode", "downpour", "--servers", "2"]),
    (4, ["--mode", "ssp", "--staleness", "1", "--groups", "2"]),
], ids=["allreduce", "bsp", "downpour", "ssp-groups"])
def test_every_mode_learns(n, args):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "singa_tensor.distributed.run", "-n", str(n),
                        os.path.join(ROOT, "examples", "dist_train.py"), "--epochs", "2"] + args,
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", p.stdout)]
    acc = float(re.search(r"test accuracy (\d\.\d+)", p.stdout).group(1))
    assert len(losses) == 2 and losses[1] < losses[0], p.stdout
    assert acc > 0.5, p.stdout
