"""The PyTorch example ports run on singa_tensor with only their imports changed, and learn.

Each script in examples/pytorch_ports/ is written for PyTorch; run.py rewrites its import
lines and nothing else. bench/bench_ports.py compares their losses with PyTorch's from the
same initial weights.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PORTS = ROOT / "examples" / "pytorch_ports"
SCRIPTS = sorted(p.stem for p in PORTS.glob("*.py") if p.name != "run.py")

_spec = importlib.util.spec_from_file_location("port_run", PORTS / "run.py")
port_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(port_run)

# steps per script: enough for the loss to fall, few enough for the test run
STEPS = {"time_sequence_prediction": 3, "regression": 120, "reinforce": 40, "dcgan": 12,
         "fast_neural_style": 8}


def test_there_are_at_least_ten_ports():
    assert len(SCRIPTS) >= 10, SCRIPTS


def test_only_import_lines_change():
    for name in SCRIPTS:
        source = (PORTS / f"{name}.py").read_text()
        swapped = port_run.swap_imports(source)
        old, new = source.splitlines(), swapped.splitlines()
        assert len(old) == len(new)
        changed = [(a, b) for a, b in zip(old, new) if a != b]
        assert changed, f"{name} imports nothing from torch"
        for a, b in changed:
            assert a.lstrip().startswith(("import torch", "from torch")), (name, a)
            assert "singa_tensor" in b and "torch" not in b.replace("as torch", ""), (name, b)


def test_swap_imports_forms():
    src = ("import torch\nimport torch.nn as nn\nfrom torch import nn, optim\n"
           "from torch.utils.data import DataLoader\nimport torchvision\nx = 'import torch'\n")
    assert port_run.swap_imports(src) == (
        "import singa_tensor as torch\nimport singa_tensor.nn as nn\n"
        "from singa_tensor import nn, optim\nfrom singa_tensor.utils.data import DataLoader\n"
        "import torchvision\nx = 'import torch'\n")


@pytest.mark.parametrize("name", SCRIPTS)
def test_port_runs_and_learns(name):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORT_")}
    env.update(PORT_DROPOUT="0", PORT_STEPS=str(STEPS.get(name, 15)))
    r = subprocess.run([sys.executable, str(PORTS / "run.py"), str(PORTS / f"{name}.py")],
                       env=env, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    losses = [float(line.split()[2]) for line in r.stdout.splitlines()
              if line.startswith("loss ")]
    assert len(losses) >= 2, r.stdout
    assert all(math.isfinite(v) for v in losses), losses
    if name == "reinforce":  # the policy loss is not a measure of progress: episode length is
        losses = [float(line.split()[4]) for line in r.stdout.splitlines()
                  if line.startswith("loss ")]
    if name == "dcgan":  # a two-player game: the losses need not fall, they must stay sane
        assert all(0.0 < v < 10.0 for v in losses), losses
        return
    k = max(1, len(losses) // 4)
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    assert last < first, f"{name}: the loss did not fall: {losses}"
