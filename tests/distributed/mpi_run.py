"""Run a Python snippet on N MPI ranks (mpiexec from the `mpich` wheel) and collect the output.

Tests write the per-rank body as a string; each rank prints one JSON line prefixed with
`RESULT ` that the test reads back, keyed by rank. Ranks are oversubscribed on the CI's two
cores, so bodies stay small.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep
                       + os.environ.get("PATH", ""))

needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install mpich)")

PRELUDE = """
import json, sys
import numpy as np
import singa_tensor as st
import singa_tensor.distributed as dist

def report(value):
    # one write per line: with print(), mpiexec can splice another rank's output in between
    sys.stdout.write("RESULT " + json.dumps({"rank": dist.get_rank(), "value": value}) + "\\n")
    sys.stdout.flush()
"""


def run(n: int, body: str, timeout: float = 60.0, env: dict | None = None,
        args: list | None = None, check: bool = True) -> tuple[dict, subprocess.CompletedProcess]:
    """Run PRELUDE + body on n ranks; {rank: value} from their report() calls, and the process."""
    if MPIEXEC is None:  # pragma: no cover - guarded by needs_mpi
        pytest.skip("mpiexec not found")
    code = PRELUDE + textwrap.dedent(body)
    full_env = dict(os.environ)
    full_env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    full_env.update(env or {})
    cmd = [MPIEXEC, "-n", str(n), sys.executable, "-c", code] + list(args or [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    results: dict = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            results.setdefault(r["rank"], []).append(r["value"])
    if check and proc.returncode != 0:
        raise AssertionError(f"mpiexec -n {n} failed ({proc.returncode}):\n{proc.stdout}\n"
                             f"{proc.stderr}")
    return {k: v[0] if len(v) == 1 else v for k, v in results.items()}, proc
