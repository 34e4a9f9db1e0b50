"""The API reference (docs/api, Sphinx autodoc) builds from the docstrings, and its pages
document the public API; the guides it points to exist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("sphinx")


def test_api_reference_builds_and_covers_the_public_api(tmp_path):
    out = tmp_path / "html"
    r = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", "html",
                        str(ROOT / "docs/api"), str(out)], capture_output=True, text=True,
                       timeout=600)
    # -W: a docstring that renders wrongly (bad indentation, a stray |x| substitution) fails
    assert r.returncode == 0, r.stderr[-4000:]
    pages = {p.stem: p.read_text() for p in out.glob("*.html")}
    expected = {"tensors": ["Tensor", "manual_seed", "Function", "data_ptr", "is_contiguous"],
                "ops": ["matmul", "topk", "gather", "einsum", "softmax", "where",
                        "scaled_dot_product_attention"],
                "nn": ["Conv2d", "LSTM", "TransformerEncoderLayer", "Model", "RemovableHandle",
                       "register_parametrization", "spectral_norm", "parameters_to_vector"],
                "optim": ["SGD", "Adam", "DistOpt"],
                "data": ["DataLoader", "DistributedSampler", "IterableDataset",
                         "WeightedRandomSampler"],
                "devices": ["current_accelerator", "use_deterministic_algorithms", "benchmark"],
                "distributed": ["all_reduce", "init_process_group", "ParameterServer",
                                "DistributedDataParallel"],
                "onnx": ["export"],
                "graph": ["compile", "CompiledStep"]}
    for page, names in expected.items():
        for name in names:
            assert name in pages[page], f"{name} is missing from the {page} page"


def test_the_guides_exist():
    for name in ("architecture", "adding_an_op", "distributed", "onnx", "graph", "scaling"):
        assert (ROOT / "docs" / f"{name}.md").is_file(), name
