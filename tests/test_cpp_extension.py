"""include_paths() finds the kernel ABI headers: installed with the package (in any folder of
the package's __path__, as an editable install splits it), or in the source checkout; and says
where it looked when they are nowhere."""

from __future__ import annotations

import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

import singa_tensor
from singa_tensor.utils import cpp_extension
from singa_tensor.utils.cpp_extension import include_paths

REPO_INCLUDE = Path(__file__).resolve().parents[1] / "cpp" / "include"
HEADERS = ("singa_tensor.h", "functors.h")


def _installed_package(root: Path) -> Path:
    """A package folder laid out as an install leaves it: <package>/include/singa_tensor/*.h."""
    package = root / "site-packages" / "singa_tensor"
    (package / "include" / "singa_tensor").mkdir(parents=True)
    for name in HEADERS:
        shutil.copy(REPO_INCLUDE / "singa_tensor" / name, package / "include" / "singa_tensor")
    return package


def _no_distribution(name):
    raise metadata.PackageNotFoundError(name)


def test_the_folder_found_holds_the_headers():
    (include,) = include_paths()
    for name in HEADERS:
        assert (Path(include) / "singa_tensor" / name).is_file()
    installed = [Path(entry) / "include" for entry in singa_tensor.__path__]
    assert Path(include) in installed or Path(include) == REPO_INCLUDE, include


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_a_compiler_finds_both_headers_through_it(tmp_path):
    source = tmp_path / "uses_abi.cc"
    source.write_text("#include <singa_tensor/singa_tensor.h>\n"
                      "#include <singa_tensor/functors.h>\n"
                      "int main() { return 0; }\n")
    flags = [f"-I{folder}" for folder in include_paths()]
    proc = subprocess.run(["c++", "-std=c++17", "-fsyntax-only", *flags, str(source)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_headers_installed_with_the_package_come_first(tmp_path, monkeypatch):
    package = _installed_package(tmp_path)
    # as in an editable install: the Python files in one folder, what CMake installed in another
    monkeypatch.setattr(singa_tensor, "__path__", [str(tmp_path / "src" / "singa_tensor"),
                                                   str(package)])
    assert include_paths() == [str(package / "include")]


def test_headers_found_through_the_record_of_installed_files(tmp_path, monkeypatch):
    package = _installed_package(tmp_path)
    monkeypatch.setattr(singa_tensor, "__path__", [str(tmp_path / "elsewhere" / "singa_tensor")])

    class Distribution:  # what importlib.metadata reads from the dist-info RECORD
        files = [metadata.PackagePath(p) for p in (
            "singa_tensor/__init__.py", "singa_tensor/include/singa_tensor/functors.h",
            "singa_tensor/include/singa_tensor/singa_tensor.h")]

        def locate_file(self, path):
            return package.parent / path

    dist = Distribution()
    for f in dist.files:
        f.dist = dist
    monkeypatch.setattr(metadata, "distribution", lambda name: dist)
    assert include_paths() == [str(package / "include")]


def test_a_source_checkout_gives_its_cpp_include(tmp_path, monkeypatch):
    repo = tmp_path.resolve() / "repo"
    (repo / "src" / "singa_tensor").mkdir(parents=True)
    shutil.copytree(REPO_INCLUDE, repo / "cpp" / "include")
    monkeypatch.setattr(singa_tensor, "__path__", [str(repo / "src" / "singa_tensor")])
    monkeypatch.setattr(metadata, "distribution", _no_distribution)
    assert include_paths() == [str(repo / "cpp" / "include")]


def test_missing_headers_raise_naming_the_folders_searched(tmp_path, monkeypatch):
    repo = tmp_path.resolve() / "repo"
    package = repo / "src" / "singa_tensor"
    package.mkdir(parents=True)
    # one header alone is not enough: code built against the ABI may include either
    (repo / "cpp" / "include" / "singa_tensor").mkdir(parents=True)
    shutil.copy(REPO_INCLUDE / "singa_tensor" / "singa_tensor.h",
                repo / "cpp" / "include" / "singa_tensor")
    monkeypatch.setattr(singa_tensor, "__path__", [str(package)])
    monkeypatch.setattr(metadata, "distribution", _no_distribution)
    with pytest.raises(RuntimeError, match="singa_tensor/functors.h") as info:
        include_paths()
    message = str(info.value)
    assert message.startswith("include_paths:")
    assert str(package / "include") in message
    assert str(repo / "cpp" / "include") in message


def test_the_module_is_reachable_as_an_attribute():
    assert singa_tensor.utils.cpp_extension is cpp_extension
    assert cpp_extension.include_paths is include_paths
