"""The package's modules import, at load, only from their own layer or the layers below it, as
docs/architecture.md draws them."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "singa_tensor"

# bottom to top; every other top-level module or subpackage is in the top layer
LAYERS = [
    {"_execution", "_optional", "dtype", "backend", "_fastpath"},
    {"tensor", "random", "_tensor_methods"},
    {"creation"},
    {"autograd", "_gradcheck"},
    {"ops"},
]
TOP = len(LAYERS)


def _layer(part: str) -> int:
    return next((i for i, names in enumerate(LAYERS) if part in names), TOP)


def _target(path: Path, node) -> list[list[str]]:
    """The modules (as name parts) an import statement of the package's file loads."""
    if isinstance(node, ast.Import):
        return [a.name.split(".") for a in node.names if a.name.split(".")[0] == "singa_tensor"]
    if node.level:
        base = list(path.relative_to(PACKAGE.parent).parts[:-1])
        base = base[:len(base) - (node.level - 1)]
    elif node.module and node.module.split(".")[0] == "singa_tensor":
        base = []
    else:
        return []
    module = base + (node.module.split(".") if node.module else [])
    return [module] if node.module else [module + [a.name] for a in node.names]


def _module_level_imports():
    """(importing module's top-level part, imported part or None for the package namespace,
    where) for every import that runs when a module loads."""
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if len(rel) < 2 or rel[1] == "__init__":
            continue  # the package namespace gathers everything
        for node in ast.parse(path.read_text()).body:  # `if TYPE_CHECKING:` blocks never run
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _target(path, node):
                    yield rel[1], (t[1] if len(t) > 1 else None), f"{path}:{node.lineno}"


def _upward() -> list[str]:
    out = []
    for importer, imported, where in _module_level_imports():
        if imported is None:  # `import singa_tensor as st`: the top layer's modules may
            if _layer(importer) < TOP:
                out.append(f"{where}: {importer} imports the package namespace")
            continue
        if _layer(imported) > _layer(importer):
            out.append(f"{where}: {importer} (layer {_layer(importer)}) imports {imported} "
                       f"(layer {_layer(imported)})")
    return out


def test_no_module_imports_a_higher_layer_at_load():
    upward = _upward()
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_import_that_runs_upward(monkeypatch):
    # were the ops at the bottom, their imports of autograd and tensor would run upward
    monkeypatch.setattr(sys.modules[__name__], "LAYERS",
                        [{"ops"}] + [layer - {"ops"} for layer in LAYERS])
    found = _upward()
    assert any(": ops (layer 0) imports autograd (layer 4)" in f for f in found), found
    assert any(": ops (layer 0) imports tensor (layer 2)" in f for f in found), found


def _run_time_upward() -> set[tuple[str, str]]:
    """(importer, imported) top-level parts for the imports inside functions that reach a higher
    layer (the package namespace's modules and the top layer are free to import anything)."""
    out = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if len(rel) < 2 or rel[1] == "__init__" and len(rel) == 2:
            continue
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                for t in _target(path, node):
                    if len(t) > 1 and _layer(rel[1]) < TOP and _layer(t[1]) > _layer(rel[1]):
                        out.add((rel[1], t[1]))
    return out


def _documented_run_time_calls() -> set[tuple[str, str]]:
    doc = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text()
    rows = set()
    for line in doc.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("module", "---"):
            rows.add((cells[0].removesuffix(".py"), cells[1]))
    return rows


def test_the_calls_that_reach_upward_at_run_time_are_the_documented_ones():
    found, documented = _run_time_upward(), _documented_run_time_calls()
    assert found, "the walk found no import inside a function: it is broken"
    assert found == documented, (f"not in docs/architecture.md: {sorted(found - documented)}; "
                                 f"documented but gone: {sorted(documented - found)}")
