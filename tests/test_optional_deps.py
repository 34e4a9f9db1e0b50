"""A missing optional package names the pip extra that brings it, and asking for a CUDA device
says which piece is missing: the CUDA library of this build, CuPy, or a GPU."""

from __future__ import annotations

import importlib.util
import sys

import pytest

import singa_tensor as st
from singa_tensor import backend, nn
from singa_tensor._optional import install_hint, missing, require


@pytest.fixture
def without(monkeypatch):
    """Make packages look uninstalled: `import name` raises ModuleNotFoundError."""

    def hide(*names):
        for name in names:
            for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                monkeypatch.delitem(sys.modules, mod)
            monkeypatch.setitem(sys.modules, name, None)

    return hide


def test_install_hint_names_the_extra():
    assert install_hint("onnx") == 'pip install "singa_tensor[onnx]" (or pip install onnx)'
    assert install_hint("sklearn.datasets") == \
        'pip install "singa_tensor[demo]" (or pip install scikit-learn)'
    assert install_hint("cupy") == 'pip install "singa_tensor[gpu]" (or pip install cupy-cuda13x)'
    assert install_hint("somepkg") == "pip install somepkg"
    err = missing("mpi4py", "dist.init_process_group")
    assert isinstance(err, ModuleNotFoundError) and err.name == "mpi4py"
    assert str(err) == ("dist.init_process_group needs the mpi4py package, which is not "
                        'installed: pip install "singa_tensor[mpi]" (or pip install mpi4py)')


def test_require_keeps_the_error_of_a_broken_installed_package(monkeypatch, tmp_path):
    (tmp_path / "brokenpkg").mkdir()
    (tmp_path / "brokenpkg" / "__init__.py").write_text("import a_module_that_is_not_there\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_module_that_is_not_there") as e:
        require("brokenpkg", "something")
    assert "needs the" not in str(e.value)


def test_onnx_entry_points_without_onnx_say_how_to_install_it(without):
    without("onnx")
    hint = r'pip install "singa_tensor\[onnx\]"'
    with pytest.raises(ModuleNotFoundError, match=rf"^st.onnx.export needs the onnx package, "
                                                  rf"which is not installed: {hint}"):
        st.onnx.export(nn.Linear(2, 2), st.ones(1, 2), None)
    with pytest.raises(ModuleNotFoundError, match=rf"^st.onnx.load needs the onnx .*{hint}"):
        st.onnx.load("model.onnx")
    with pytest.raises(ModuleNotFoundError, match=rf"^st.onnx.prepare needs the onnx .*{hint}"):
        st.onnx.prepare("model.onnx")


def test_load_digits_without_scikit_learn_names_the_demo_extra(without, monkeypatch):
    from singa_tensor.datasets import digits

    monkeypatch.setattr(digits.importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else
                        importlib.util.find_spec(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r'^load_digits \(its data file digits.csv.gz '
                       r'comes with scikit-learn\) needs the scikit-learn package, which is not '
                       r'installed: pip install "singa_tensor\[demo\]"'):
        digits.load_digits("train")


# ---- .to("cuda"): which piece is missing -------------------------------------------------------


def _binding_present(monkeypatch, present: bool):
    real = importlib.util.find_spec

    def find_spec(name, *args):
        if name == "singa_tensor.backend._cuda_ffi":
            return real("singa_tensor.backend._cpu_ffi") if present else None
        return real(name, *args)

    monkeypatch.setattr(backend.importlib.util, "find_spec", find_spec)


def test_cuda_without_the_cuda_library_says_it_is_not_built_and_why(monkeypatch):
    _binding_present(monkeypatch, False)
    msg = backend._unavailable("cuda", ModuleNotFoundError("No module named 'cupy'", name="cupy"))
    assert msg.startswith("the CUDA library is not part of this build")
    info = backend.build_info()
    if info is not None:
        assert f"({info.cuda_reason})" in msg
    assert 'SINGA_TENSOR_CUDA=ON pip install -e ".[gpu]"' in msg


def test_cuda_without_cupy_names_the_gpu_extra(monkeypatch):
    _binding_present(monkeypatch, True)
    msg = backend._unavailable("cuda", ModuleNotFoundError("No module named 'cupy'", name="cupy"))
    assert msg == 'CuPy is not installed: pip install "singa_tensor[gpu]" (or pip install ' \
                  'cupy-cuda13x)'
    other = ImportError("libfoo.so: cannot open shared object file")
    assert backend._unavailable("cuda", other) == str(other)


def test_to_cuda_names_the_missing_piece():
    if st.cuda.is_available():
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(RuntimeError) as e:
        st.ones(2).to("cuda")
    msg = str(e.value)
    assert msg.startswith("device cuda:0: the cuda backend is not available: "), msg
    if importlib.util.find_spec("singa_tensor.backend._cuda_ffi") is None:
        assert "the CUDA library is not part of this build" in msg
    elif importlib.util.find_spec("cupy") is None:
        assert "CuPy is not installed" in msg
    else:
        assert "no usable CUDA device" in msg
