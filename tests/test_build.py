"""The build as a user meets it: SINGA_TENSOR_CUDA=AUTO|ON|OFF decides the CUDA library and says
why, the GPU query behind AUTO, the installed libraries name no path of the build machine, the
package reports what its build chose, and the CPU check at import."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import singa_tensor as st
from singa_tensor.backend import cpu_features

ROOT = Path(__file__).resolve().parents[1]


def _find_gpus():
    spec = importlib.util.spec_from_file_location("find_gpus", ROOT / "tools" / "find_gpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_nvidia_smi(folder: Path, body: str) -> None:
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


# ---- the GPU query of SINGA_TENSOR_CUDA=AUTO ---------------------------------------------------


def test_find_gpus_reads_nvidia_smi_when_the_driver_library_does_not_answer(tmp_path,
                                                                           monkeypatch):
    fg = _find_gpus()
    monkeypatch.setattr(fg, "from_driver", lambda: (None, "libcuda.so.1 does not load"))
    _fake_nvidia_smi(tmp_path, 'echo "NVIDIA H200, 9.0"\necho "NVIDIA A100-SXM4-80GB, 8.0"\n'
                               'echo "NVIDIA H200, 9.0"\n')
    monkeypatch.setenv("PATH", str(tmp_path))
    archs, why = fg.find()
    assert archs == ["80", "90"]
    assert why == ("found 3 GPUs through nvidia-smi: NVIDIA H200 (sm_90), "
                   "NVIDIA A100-SXM4-80GB (sm_80), NVIDIA H200 (sm_90)")


def test_find_gpus_says_why_there_is_none(tmp_path, monkeypatch):
    fg = _find_gpus()
    monkeypatch.setattr(fg, "from_driver", lambda: (None, "libcuda.so.1 does not load"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert fg.find() == ([], "no GPU: libcuda.so.1 does not load, and nvidia-smi is not on PATH")
    _fake_nvidia_smi(tmp_path, "echo 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert fg.find() == ([], "no GPU: libcuda.so.1 does not load, and nvidia-smi fails "
                             "(exit status 9)")
    _fake_nvidia_smi(tmp_path, "exit 0\n")
    assert fg.find() == ([], "no GPU: libcuda.so.1 does not load, and nvidia-smi lists no GPU")


def test_find_gpus_prints_architectures_then_the_reason(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    _fake_nvidia_smi(tmp_path, 'echo "Fake GPU, 9.0"\n')
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "find_gpus.py")], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    first, why = out.splitlines()
    if "libcuda.so.1" in why:  # a machine with a real driver answers first
        assert re.fullmatch(r"\d+(,\d+)*", first), out
    else:
        assert (first, why) == ("90", "found 1 GPU through nvidia-smi: Fake GPU (sm_90)")


# ---- what CMake decides ------------------------------------------------------------------------


def _configure(tmp_path: Path, env_extra: dict, *defines: str,
               build: str = "build") -> subprocess.CompletedProcess:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not on PATH")
    if importlib.util.find_spec("scipy_openblas32") is None:
        pytest.skip("scipy_openblas32 is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_TENSOR_")}
    env.update(env_extra)
    return subprocess.run([cmake, "-S", str(ROOT), "-B", str(tmp_path / build),
                           f"-DPython_EXECUTABLE={sys.executable}", *defines],
                          env=env, capture_output=True, text=True, timeout=300)


def _decision(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in p.stdout.splitlines() if "singa_tensor:" in ln and "CUDA library" in ln]
    assert len(lines) == 1, p.stdout + p.stderr
    return lines[0].partition("singa_tensor: ")[2]


def test_configure_honours_the_environment_variable(tmp_path):
    p = _configure(tmp_path, {"SINGA_TENSOR_CUDA": "off"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert _decision(p) == "not building the CUDA library: SINGA_TENSOR_CUDA=OFF"
    info = (tmp_path / "build" / "_build_info.py").read_text()
    assert 'cuda_mode = "OFF"' in info and "cuda_built = False" in info
    assert 'cpu_baseline = "x86-64-v3"' in info


def test_configure_auto_without_a_gpu_leaves_cuda_out_and_says_why(tmp_path):
    if _find_gpus().from_driver()[0]:
        pytest.skip("this machine has a GPU driver that answers")
    # PATH without nvidia-smi, but with cmake and the compilers
    p = _configure(tmp_path, {"SINGA_TENSOR_CUDA": "AUTO", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert _decision(p) == (
        "not building the CUDA library: SINGA_TENSOR_CUDA=AUTO and no GPU: libcuda.so.1 does "
        "not load, and nvidia-smi is not on PATH (SINGA_TENSOR_CUDA=ON builds it anyway)")


def test_configure_auto_with_a_gpu_builds_for_its_architecture(tmp_path):
    if _find_gpus().from_driver()[0]:
        pytest.skip("this machine has a GPU driver that answers")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_nvidia_smi(bin_dir, 'echo "Fake GPU, 8.6"\n')
    p = _configure(tmp_path, {"SINGA_TENSOR_CUDA": "AUTO",
                              "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"})
    assert p.returncode == 0, p.stdout + p.stderr
    line = _decision(p)
    found = "SINGA_TENSOR_CUDA=AUTO found 1 GPU through nvidia-smi: Fake GPU (sm_86)"
    # with nvcc the library is built for sm_86 only; without one AUTO leaves it out
    assert (re.fullmatch(rf"building the CUDA library: {re.escape(found)}, nvcc [\d.]+, "
                         r"architectures 86", line)
            or line == f"not building the CUDA library: {found}, but no CUDA compiler (nvcc) "
                       f"was found (SINGA_TENSOR_CUDA=ON builds it anyway)"), line


def test_configure_rejects_a_mode_it_does_not_know(tmp_path):
    p = _configure(tmp_path, {"SINGA_TENSOR_CUDA": "yes"})
    assert p.returncode != 0
    assert "SINGA_TENSOR_CUDA must be AUTO, ON or OFF, got 'yes'" in p.stderr
    p = _configure(tmp_path, {"SINGA_TENSOR_CUDA": "OFF"}, "-DSINGA_TENSOR_CPU_BASELINE=native",
                   build="other")
    assert p.returncode != 0
    assert "SINGA_TENSOR_CPU_BASELINE must be x86-64-v2, x86-64-v3 or x86-64-v4" in p.stderr


# ---- the installed package ---------------------------------------------------------------------


def _installed_libraries() -> list[Path]:
    from singa_tensor.backend import _cpu_ffi

    folder = Path(_cpu_ffi.__file__).parent
    return sorted(p for p in folder.iterdir() if p.suffix == ".so")


def test_installed_libraries_name_no_path_of_the_build_machine():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is not on PATH")
    libs = _installed_libraries()
    assert any(p.name == "libsinga_tensor_cpu.so" for p in libs), libs
    for lib in libs:
        out = subprocess.run([readelf, "-d", str(lib)], capture_output=True, text=True,
                             check=True).stdout
        for m in re.finditer(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out):
            for entry in m[1].split(":"):
                assert entry.startswith("$ORIGIN"), f"{lib.name}: search path {entry!r}"


def test_the_package_reports_what_its_build_chose():
    info = st.backend.build_info()
    assert info is not None, "the installed package has no _build_info.py"
    assert info.cpu_baseline in cpu_features.LEVELS
    assert info.cuda_mode in ("AUTO", "ON", "OFF")
    has_cuda_binding = importlib.util.find_spec("singa_tensor.backend._cuda_ffi") is not None
    assert info.cuda_built is has_cuda_binding
    assert info.cuda_reason.startswith(f"SINGA_TENSOR_CUDA={info.cuda_mode}")


def test_the_package_ships_its_type_information():
    from importlib.resources import files

    assert (files("singa_tensor") / "py.typed").is_file()


# ---- the CPU check at import -------------------------------------------------------------------


def test_cpu_check_names_what_the_cpu_lacks_and_how_to_build_for_it():
    avx_only = cpu_features.LEVELS["x86-64-v2"] | {"avx"}
    with pytest.raises(ImportError) as e:
        cpu_features.check("x86-64-v3", avx_only)
    msg = str(e.value)
    assert msg.startswith("singa_tensor: the CPU library of this build is compiled for "
                          "x86-64-v3, and this CPU lacks abm, avx2, bmi1, bmi2, f16c, fma, "
                          "movbe, xsave")
    assert "SINGA_TENSOR_CPU_BASELINE=x86-64-v2" in msg
    with pytest.raises(ImportError, match="compiled for x86-64-v2, and this CPU lacks sse4_2$"):
        cpu_features.check("x86-64-v2", cpu_features.LEVELS["x86-64-v2"] - {"sse4_2"})


def test_cpu_check_passes_or_stays_out_of_the_way():
    cpu_features.check("x86-64-v4", cpu_features.LEVELS["x86-64-v4"] | {"amx_tile"})
    cpu_features.check("x86-64-v3", None if cpu_features.cpu_flags() is None else
                       cpu_features.LEVELS["x86-64-v3"])
    cpu_features.check(None, set())  # a source tree that was never configured


def test_cpu_flags_are_read_from_cpuinfo(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "x86_64")
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 fma\n\n"
                 "processor\t: 1\nflags\t\t: fpu avx2 fma\n")
    assert cpu_features.cpu_flags(str(f)) == {"fpu", "avx2", "fma"}
    assert cpu_features.cpu_flags(str(tmp_path / "absent")) is None
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "aarch64")
    assert cpu_features.cpu_flags(str(f)) is None


def test_this_cpu_has_what_the_build_assumed():
    flags = cpu_features.cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo flags on this machine")
    assert cpu_features.missing(st.backend.build_info().cpu_baseline, flags) == []
