"""Every notebook in tutorials/ runs from top to bottom in a real Jupyter kernel (this
interpreter's), within two minutes, without an error, and leaves nothing behind: tutorials/
holds the same files afterwards, the kernel's working directory stays empty and the temporary
folders the notebooks make are gone once the kernel has shut down. Figures are drawn: every
plt.show() displays a PNG that is not blank, and notebook 02's curves and confusion matrix
show what they should. The notebooks are stored without outputs."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")
import matplotlib  # noqa: E402  (only once the skips above have passed)
import matplotlib.colors  # noqa: E402
import matplotlib.image  # noqa: E402

# The inline backend is what Jupyter uses by default: plt.show() sends the figure to the
# notebook as a PNG, and it needs no display. (With MPLBACKEND=Agg, plt.show() draws nothing.)
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The notebooks name their temporary folders singa_*; other files in TMPDIR belong to libraries
# (onnxruntime writes a .ses file there when it is imported).
TEMP_PREFIX = "singa_"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A kernelspec named singa-tutorials that starts this very interpreter, found first."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "singa-tutorials"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "singa_tensor tutorials", "language": "python"}))
    with _environ(JUPYTER_PATH=os.pathsep.join(filter(None, [str(root),
                                                             os.environ.get("JUPYTER_PATH")]))):
        yield


@contextmanager
def _environ(**values: str):
    """Set environment variables (which a kernel started inside inherits), then restore them."""
    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _snapshot(folder: Path) -> dict[str, str | None]:
    """Every path under `folder`, with a hash of each file's bytes (None for a folder)."""
    return {p.relative_to(folder).as_posix():
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in folder.rglob("*")}


@dataclass
class Run:
    notebook: object           # the executed notebook, outputs filled in by nbclient
    tutorials_before: dict
    tutorials_after: dict
    cwd_left: list[str]        # what is left in the kernel's working directory
    tmp_used: list[str]        # the notebook's folders in TMPDIR while the kernel ran
    tmp_left: list[str]        # the notebook's folders left in TMPDIR after the kernel shut down


@pytest.fixture(scope="module")
def run_notebook(kernel_env, tmp_path_factory):
    """Executes a notebook once per module (the tests share the result) in a fresh working
    directory, with TMPDIR pointing at a fresh folder of its own."""
    runs: dict[Path, Run] = {}

    def run(path: Path) -> Run:
        if path not in runs:
            root = tmp_path_factory.mktemp(path.stem)
            cwd, tmp = root / "cwd", root / "tmp"
            cwd.mkdir()
            tmp.mkdir()
            nb = nbformat.read(path, as_version=4)
            # one cell more at the end: what the notebook holds in TMPDIR while its kernel runs
            nb.cells.append(nbformat.v4.new_code_cell(
                "import json, os\n"
                f"print(json.dumps(sorted(n for n in os.listdir(os.environ['TMPDIR']) "
                f"if n.startswith({TEMP_PREFIX!r}))))"))
            before = _snapshot(TUTORIALS)
            with _environ(MPLBACKEND=INLINE_BACKEND, TMPDIR=str(tmp)):
                client = nbclient.NotebookClient(nb, timeout=120, kernel_name="singa-tutorials",
                                                 resources={"metadata": {"path": str(cwd)}})
                client.execute()  # shuts the kernel down at the end, as closing a notebook does
            probe = nb.cells.pop()
            runs[path] = Run(nb, before, _snapshot(TUTORIALS),
                             sorted(p.name for p in cwd.iterdir()),
                             json.loads(probe.outputs[0]["text"]),
                             sorted(p.name for p in tmp.glob(TEMP_PREFIX + "*")))
        return runs[path]

    return run


def _pngs(cell) -> list[bytes]:
    return [base64.b64decode(out["data"]["image/png"]) for out in cell.get("outputs", [])
            if out.get("output_type") in ("display_data", "execute_result")
            and "image/png" in out.get("data", {})]


def _decode(png: bytes, where: str) -> np.ndarray:
    """The PNG as an (H, W, 3) array of floats in [0, 1], checked not to be blank."""
    assert png[:8] == PNG_SIGNATURE, f"{where}: the image/png output is not a PNG"
    rgb = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    height, width = rgb.shape[:2]
    assert height >= 100 and width >= 100, f"{where}: a {width}x{height} image is too small"
    background = np.all(rgb > 0.98, axis=-1)
    assert background.mean() < 0.99, f"{where}: the image is (almost) all white"
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20, f"{where}: the image is flat"
    return rgb


def _pixels_near(rgb: np.ndarray, colour, tol: float = 0.03) -> int:
    return int(np.all(np.abs(rgb - np.asarray(colour[:3])) < tol, axis=-1).sum())


def _one_png(cell, what: str) -> bytes:
    pngs = _pngs(cell)
    assert len(pngs) == 1, f"the cell drawing {what} displayed {len(pngs)} images, expected one"
    return pngs[0]


def _cell(nb, snippet: str, name: str):
    cells = [c for c in nb.cells if c.cell_type == "code" and snippet in c.source]
    assert len(cells) == 1, f"{name}: expected one code cell containing {snippet!r}"
    return cells[0]


def test_there_are_tutorials():
    assert len(NOTEBOOKS) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_cell_has_a_unique_id(path):
    """nbformat 4.5 gives each cell an id; a cell without one is an error in later versions."""
    ids = [c.get("id") for c in json.loads(path.read_text())["cells"]]
    assert None not in ids and len(set(ids)) == len(ids)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_tutorial_runs_and_leaves_nothing_behind(path, run_notebook):
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, \
                f"{path.name} is stored with outputs; clear them before committing"
    run = run_notebook(path)

    before, after = run.tutorials_before, run.tutorials_after
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)
                     or (k in before) != (k in after))
    assert not changed, f"running {path.name} changed these paths in tutorials/: {changed}"
    assert not run.cwd_left, (f"{path.name} wrote {run.cwd_left} into its working directory; "
                              f"write into a folder made with tempfile instead")
    if "tempfile" in path.read_text():
        # its files went into a folder of its own under TMPDIR, not somewhere else
        assert run.tmp_used, (f"{path.name} made no {TEMP_PREFIX}* folder in TMPDIR; name its "
                              f"temporary folder with prefix={TEMP_PREFIX!r}...")
    assert not run.tmp_left, (f"{path.name} left {run.tmp_left} in the temporary directory "
                              f"after the kernel shut down")

    # every figure shown is drawn, and is more than an empty canvas
    for i, cell in enumerate(run.notebook.cells):
        if cell.cell_type == "code" and "plt.show()" in cell.source:
            pngs = _pngs(cell)
            assert pngs, f"{path.name}, cell {i}: plt.show() displayed no image"
            for png in pngs:
                _decode(png, f"{path.name}, cell {i}")


def test_digits_notebook_draws_its_curves_and_confusion_matrix(run_notebook):
    path = TUTORIALS / "02_cnn_on_digits.ipynb"
    nb = run_notebook(path).notebook

    curves = _cell(nb, 'title="training loss"', path.name)
    rgb = _decode(_one_png(curves, "the curves"), f"{path.name}, the curves")
    height, width = rgb.shape[:2]
    assert width > 2.5 * height, f"the curves are three panels side by side, got {width}x{height}"
    # loss, accuracy and learning rate each drawn in its colour, with a marker per epoch
    for colour in ("tab:blue", "tab:green", "tab:orange"):
        n = _pixels_near(rgb, matplotlib.colors.to_rgb(colour))
        assert n >= 300, f"the {colour} curve is missing from the figure ({n} pixels)"

    confusion = _cell(nb, 'title="confusion matrix (test set)"', path.name)
    rgb = _decode(_one_png(confusion, "the confusion matrix"), f"{path.name}, the confusion matrix")
    height, width = rgb.shape[:2]
    assert 0.7 < width / height < 1.4, f"the confusion matrix is square, got {width}x{height}"
    # the largest count, on the diagonal, is drawn in the darkest colour of the colour map
    darkest = matplotlib.colormaps["Blues"](1.0)
    n = _pixels_near(rgb, darkest, tol=0.05)
    assert n >= 1000, f"no cell of the matrix is drawn in the darkest blue ({n} pixels)"
