"""Every notebook in tutorials/ runs from top to bottom in a real Jupyter kernel (this
interpreter's), within two minutes, without an error. The notebooks are stored without outputs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A kernelspec named singa-tutorials that starts this very interpreter, found first."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "singa-tutorials"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "singa_tensor tutorials", "language": "python"}))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(root) + (os.pathsep + old if old else "")
    yield
    if old is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = old


def test_there_are_tutorials():
    assert len(NOTEBOOKS) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_tutorial_runs(path, kernel_env, tmp_path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, \
                f"{path.name} is stored with outputs; clear them before committing"
    env_mpl = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        client = nbclient.NotebookClient(nb, timeout=120, kernel_name="singa-tutorials",
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    finally:
        if env_mpl is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = env_mpl
