"""docs/adding_an_op.md, followed to the letter: its composite becomes a registered op with a
Tensor method that matches its reference and differentiates twice; its kernel op's three lines
compile into the CPU library's sources and its declaration registers the op."""

from __future__ import annotations

import doctest
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.ops import METHODS, REGISTRY, elementwise

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "adding_an_op.md"


def _blocks(lang: str) -> list[str]:
    """The guide's fenced code blocks in lang, dedented, in order."""
    out = []
    for m in re.finditer(r"^( *)```" + lang + r"\n(.*?)^\1```", GUIDE.read_text(), re.M | re.S):
        indent = len(m[1])
        out.append("".join(line[indent:] for line in m[2].splitlines(keepends=True)))
    return out


def _declare(code: str):
    """Run a declaration of the guide in elementwise.py's namespace, as if added there; undo it
    afterwards. The library has ops of the guide's names (logaddexp, sinc): they step aside
    while the guide's declaration runs and come back with the undo."""
    names = set(re.findall(r'(?:composite|unary_op)\(\s*"(\w+)"', code))
    hidden_ops = {n: REGISTRY.pop(n) for n in names if n in REGISTRY}
    hidden_methods = {m: METHODS.pop(m) for m in list(METHODS)
                      if m in names or m[:-1] in names and m.endswith("_")}
    hidden_attrs = {m: st.Tensor.__dict__[m] for m in hidden_methods}
    for m in hidden_methods:
        delattr(st.Tensor, m)
    before_ops, before_methods = set(REGISTRY), set(METHODS)
    ns = dict(vars(elementwise))
    exec(compile(code, str(GUIDE), "exec"), ns)
    added_ops, added_methods = set(REGISTRY) - before_ops, set(METHODS) - before_methods

    def undo():
        for name in added_ops:
            REGISTRY.pop(name)
        for name in added_methods:
            METHODS.pop(name)
            delattr(st.Tensor, name)
        REGISTRY.update(hidden_ops)
        METHODS.update(hidden_methods)
        for m, attr in hidden_attrs.items():
            setattr(st.Tensor, m, attr)

    return ns, added_ops, added_methods, undo


def test_the_guide_counts_the_places_it_shows():
    python, cpp, c = _blocks("python"), _blocks("cpp"), _blocks("c")
    assert len(python) == 2 and len(cpp) == 1 and len(c) == 1


def test_the_composite_of_the_guide_is_a_whole_op(monkeypatch):
    ns, ops, methods, undo = _declare(_blocks("python")[0])
    try:
        assert ops == {"logaddexp"} and methods == {"logaddexp"}
        spec = REGISTRY["logaddexp"]
        assert spec.composite and spec.kind == "binary" and spec.reference is np.logaddexp
        fn = ns["logaddexp"]
        a = st.tensor([[-2.0, 0.5, 30.0]], dtype=st.float64, requires_grad=True)
        b = st.tensor([[1.0], [-40.0]], dtype=st.float64, requires_grad=True)
        np.testing.assert_allclose(a.logaddexp(b).detach().numpy(),
                                   np.logaddexp(a.detach().numpy(), b.detach().numpy()),
                                   rtol=1e-14)
        assert st.autograd.gradcheck(fn, (a, b))
        assert st.autograd.gradgradcheck(fn, (a, b))
        # its docstring example holds, once the name in __all__ has made it st.logaddexp
        monkeypatch.setattr(st, "logaddexp", fn, raising=False)
        runner = doctest.DocTestRunner()
        for test in doctest.DocTestFinder().find(fn, "logaddexp", globs={}):
            runner.run(test)
        assert runner.failures == 0 and runner.tries >= 3
    finally:
        undo()
    assert st.Tensor.logaddexp is REGISTRY["logaddexp"].fn  # the library's op is back


def _compiler() -> str:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    return cxx


def test_the_kernel_op_of_the_guide_compiles_into_the_library_sources(tmp_path):
    (functor,), (listed,) = _blocks("cpp"), _blocks("c")
    include = tmp_path / "include" / "singa_tensor"
    shutil.copytree(ROOT / "cpp" / "include" / "singa_tensor", include)
    functors = (include / "functors.h").read_text()
    last = list(re.finditer(r"^ST_UNARY_FUNCTOR\(.*\)$", functors, re.M))[-1]
    (include / "functors.h").write_text(functors[:last.end()] + "\n" + functor
                                        + functors[last.end():])
    header = (include / "singa_tensor.h").read_text()
    old = listed.strip().replace(" X(sinc, __VA_ARGS__)", "")
    assert old in header, "the guide's list line is not the end of ST_UNARY_FLOAT_OPS"
    (include / "singa_tensor.h").write_text(header.replace(old, listed.strip(), 1))
    cxx = _compiler()
    openblas = pytest.importorskip("scipy_openblas32").get_include_dir()
    declared = subprocess.run([cxx, "-E", "-P", "-x", "c", str(include / "singa_tensor.h")],
                              capture_output=True, text=True, check=True).stdout
    assert re.search(r"\bst_sinc_f32\s*\(", declared) and re.search(r"\bst_sinc_f64\s*\(",
                                                                     declared)
    for unit in ("elementwise.cc", "fused.cc"):
        p = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-fopenmp", "-march=x86-64-v3",
                            f"-I{tmp_path / 'include'}", f"-I{ROOT / 'cpp' / 'src'}",
                            f"-I{openblas}",
                            str(ROOT / "cpp" / "src" / unit)],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"{unit} with the guide's sinc:\n{p.stderr[-3000:]}"


def test_the_kernel_op_declaration_of_the_guide_registers_it():
    ns, ops, methods, undo = _declare(_blocks("python")[1])
    try:
        assert ops == {"sinc"} and methods == {"sinc", "sinc_"}
        spec = REGISTRY["sinc"]
        assert spec.kind == "unary" and spec.reference is np.sinc and spec.onnx is None
        assert spec.dtypes == ("float16", "bfloat16", "float32", "float64")
        # this build has no st_sinc kernel: the op says so instead of crashing
        with pytest.raises(TypeError, match=r"^sinc: not implemented for dtype float32 on cpu"):
            st.tensor([0.5]).sinc()
    finally:
        undo()
