"""Tensor methods come from one place: each op declares its own (ops/_registry.py
`bind_method`), nothing else patches Tensor, and type checkers see them through the generated
stub `_tensor_methods.pyi`."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import singa_tensor as st
from singa_tensor.ops import METHODS
from singa_tensor.ops._registry import bind_method

ROOT = Path(__file__).resolve().parents[1]


def _class_body_names() -> set[str]:
    tree = ast.parse((ROOT / "src" / "singa_tensor" / "tensor.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_every_tensor_attribute_is_defined_in_tensor_py_or_declared_by_an_op():
    own = _class_body_names() | {"__module__", "__qualname__", "__doc__", "__slots__",
                                 "__annotations__", "__orig_bases__", "__firstlineno__",
                                 "__static_attributes__", "__parameters__"}
    slots = set(st.Tensor.__slots__)
    extra = sorted(k for k in vars(st.Tensor) if k not in own and k not in METHODS
                   and k not in slots)
    assert not extra, f"set on Tensor from somewhere else: {extra}"


def test_every_declaration_is_bound():
    for name, d in METHODS.items():
        method = getattr(st.Tensor, name)
        if d.how == "plain":
            assert method is d.fn, name
        else:
            assert method.__name__ in (name, d.label), name


def test_methods_behave_like_their_functions():
    x = st.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert x.sum(dim=1).tolist() == st.sum(x, dim=1).tolist() == [-1.0, 7.0]
    assert (2 - x).tolist() == [[1.0, 4.0], [-1.0, -2.0]]  # reflected
    assert (x @ x).tolist() == st.matmul(x, x).tolist()
    assert x.clip(0.0, 2.0).tolist() == [[1.0, 0.0], [2.0, 2.0]]  # an alias
    y = x.clone()
    assert y.abs_() is y and y.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    y += 1
    assert y.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    leaf = st.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^add_: a leaf tensor that requires grad"):
        leaf += 1  # the operator reports the in-place op's name


def test_an_op_declared_after_import_is_bound_at_once():
    def _triple(x):
        return x * 3

    try:
        bind_method(_triple, "_test_triple", inplace="_test_triple_")
        x = st.tensor([1.0, 2.0])
        assert x._test_triple().tolist() == [3.0, 6.0]
        assert x._test_triple_() is x and x.tolist() == [3.0, 6.0]
        with pytest.raises(ValueError, match=r"Tensor._test_triple is declared twice"):
            bind_method(_triple, "_test_triple")
    finally:
        for name in ("_test_triple", "_test_triple_"):
            METHODS.pop(name, None)
            if hasattr(st.Tensor, name):
                delattr(st.Tensor, name)


def test_declarations_are_checked():
    with pytest.raises(ValueError, match="unknown inplace_kind 'sideways'"):
        bind_method(abs, "_x", inplace="_x_", inplace_kind="sideways")
    with pytest.raises(ValueError, match=r"Tensor.numel: declared by len but Tensor defines "
                                         r"it itself"):
        try:
            bind_method(len, "numel")
        finally:
            METHODS.pop("numel", None)


# ---- what type checkers see ---------------------------------------------------------------------


def _stub_tool():
    spec = importlib.util.spec_from_file_location("gen_tensor_stub",
                                                  ROOT / "tools" / "gen_tensor_stub.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_stub_is_up_to_date_with_the_declarations():
    tool = _stub_tool()
    assert tool.STUB.read_text() == tool.render(), (
        "src/singa_tensor/_tensor_methods.pyi is out of date: run python tools/gen_tensor_stub.py")
    assert "    def sum(self, dim: Any = ..., keepdim: Any = ..., *, dtype: Any = ...) -> Tensor" \
        in tool.STUB.read_text()


USER_SCRIPT = '''
import singa_tensor as st
from singa_tensor import nn


def loss_of(model: nn.Module, x: st.Tensor) -> st.Tensor:
    out: st.Tensor = model(x)
    return out.relu().sum() + x.mean()


x = st.randn(4, 3)
reveal_type(x.sum(dim=0))
reveal_type(x @ x.t())
reveal_type(x.relu_())
reveal_type(loss_of(nn.Linear(3, 2), x))
x.no_such_method()
'''


def test_mypy_strict_sees_tensor_methods(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    env = {"MYPYPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                        "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
                        str(script)], capture_output=True, text=True, env=env, timeout=600)
    lines = [ln.split(": ", 1)[1] for ln in p.stdout.splitlines() if ": " in ln]
    assert lines == [
        'note: Revealed type is "singa_tensor.tensor.Tensor"',
        'note: Revealed type is "singa_tensor.tensor.Tensor"',
        'note: Revealed type is "singa_tensor.tensor.Tensor"',
        'note: Revealed type is "singa_tensor.tensor.Tensor"',
        'error: "Tensor" has no attribute "no_such_method"  [attr-defined]',
    ], p.stdout + p.stderr
