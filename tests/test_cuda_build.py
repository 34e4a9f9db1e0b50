"""The CUDA library as built (no GPU needed): every CPU kernel has its CUDA twin, the binding
covers the whole CUDA ABI, and the machine code targets the promised architectures (all of
sm_80, sm_90 and compute_90 PTX unless SINGA_TENSOR_EXPECT_CUDA_ARCHS narrows them).

The library tests skip with a reason when the CUDA library was not built (no nvcc at build
time, or SINGA_TENSOR_CUDA=OFF)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "cpp" / "include" / "singa_tensor" / "singa_tensor.h"
EXTRA_HEADER = ROOT / "cuda" / "extra.h"


def _library_dirs() -> list[Path]:
    """Where the built libraries may be: the installed package (found without importing it, so
    this works while the package itself cannot be imported), then the build tree."""
    dirs = []
    spec = importlib.util.find_spec("singa_tensor")
    if spec is not None and spec.submodule_search_locations:
        dirs += [Path(p) / "backend" for p in spec.submodule_search_locations]
    dirs += sorted((ROOT / "build").glob("*/cpp")) + sorted((ROOT / "build").glob("*/cuda"))
    return dirs


def _find(name: str) -> Path | None:
    for d in _library_dirs():
        if (d / name).is_file():
            return d / name
    return None


CPU_LIB = _find("libsinga_tensor_cpu.so")
CUDA_LIB = _find("libsinga_tensor_cuda.so")

needs_cuda_lib = pytest.mark.skipif(
    CUDA_LIB is None,
    reason="libsinga_tensor_cuda.so was not built (no CUDA compiler at build time, or "
    "SINGA_TENSOR_CUDA=OFF)",
)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"`{name}` is not on PATH")
    return path


def _defined_symbols(lib: Path) -> set[str]:
    out = subprocess.run([_tool("nm"), "-D", "--defined-only", str(lib)], check=True,
                         capture_output=True, text=True).stdout
    return {f[2] for f in (line.split() for line in out.splitlines())
            if len(f) == 3 and f[1] == "T" and f[2].startswith("st_")}


def _declared_functions(header: Path, *defines: str) -> set[str]:
    """Function names the header declares once the C preprocessor has expanded its X-macros."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to preprocess the ABI header")
    out = subprocess.run([cc, "-E", "-P", *(f"-D{d}" for d in defines), "-x", "c", str(header)],
                         check=True, capture_output=True, text=True).stdout
    return set(re.findall(r"\b(st_\w+)\s*\(", out))


@needs_cuda_lib
def test_every_cpu_kernel_has_a_cuda_twin():
    assert CPU_LIB is not None, "libsinga_tensor_cpu.so not found beside the CUDA library"
    # the allocator and thread services exist only on the CPU (CUDA memory comes from CuPy)
    cpu_only = _declared_functions(HEADER) - _declared_functions(HEADER, "ST_CUDA_ABI")
    assert "st_free" in cpu_only and "st_add_f32" not in cpu_only
    kernels = _defined_symbols(CPU_LIB) - cpu_only
    assert len(kernels) > 300, f"implausibly few CPU kernels: {len(kernels)}"
    missing = sorted(kernels - _defined_symbols(CUDA_LIB))
    assert not missing, (f"{len(missing)} CPU kernels have no CUDA twin in {CUDA_LIB}: "
                         + " ".join(missing))


@needs_cuda_lib
def test_cuda_library_defines_its_whole_abi():
    declared = (_declared_functions(HEADER, "ST_CUDA_ABI")
                | _declared_functions(EXTRA_HEADER))
    assert {"st_cuda_device_count", "st_cuda_last_error", "st_cuda_clear_error"} <= declared
    missing = sorted(declared - _defined_symbols(CUDA_LIB))
    assert not missing, (f"{len(missing)} functions of the CUDA ABI are not defined in "
                         f"{CUDA_LIB}: " + " ".join(missing))


@needs_cuda_lib
def test_cffi_binding_was_built_beside_the_library():
    names = [p.name for p in CUDA_LIB.parent.iterdir()]
    assert any(n.startswith("_cuda_ffi.") and n.endswith(".so") for n in names), names


# ---- architectures ---------------------------------------------------------------------------
ELF_KIND, PTX_KIND = 2, 1
FATBIN_MAGIC = 0xBA55ED50


def _elf_section(data: bytes, wanted: str) -> bytes:
    """The contents of one section of a 64-bit little-endian ELF file."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not an ELF64 LE file"
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    for name, _, _, _, off, size in headers:
        end = data.index(b"\0", strtab + name)
        if data[strtab + name:end].decode() == wanted:
            return data[off:off + size]
    raise AssertionError(f"no {wanted} section")


def _fatbin_entries(lib: Path) -> list[list[tuple[str, int]]]:
    """[(kind, sm)] per fatbin container (one per .cu file) of the .nv_fatbin section.

    Without cuobjdump the container layout is read directly: a 16-byte header (magic, version,
    header size, payload size), then entries whose header holds the kind (1 PTX, 2 ELF) at byte
    0, its own size at byte 4, the payload size at byte 8 and the SM version at byte 28."""
    section = _elf_section(lib.read_bytes(), ".nv_fatbin")
    containers, pos = [], 0
    while pos + 16 <= len(section):
        magic, _, hsize, size = struct.unpack_from("<IHHQ", section, pos)
        if magic != FATBIN_MAGIC:  # containers are padded to an alignment
            pos += 8
            continue
        entries, e, end = [], pos + hsize, pos + hsize + size
        while e < end:
            kind, _, ehsize, payload = struct.unpack_from("<HHIQ", section, e)
            sm = struct.unpack_from("<I", section, e + 28)[0]
            entries.append(("ptx" if kind == PTX_KIND else "elf" if kind == ELF_KIND else "?", sm))
            e += ehsize + payload
        containers.append(entries)
        pos = end
    return containers


# The GPU check builds for the GPU at hand only and narrows this through the variable, e.g.
# "sm_90": that machine code and no PTX requirement.
DEFAULT_ARCHS = "sm_80,sm_90,compute_90"


def expected_architectures() -> set[tuple[str, int]]:
    """{("elf", 80), ("ptx", 90), ...} from SINGA_TENSOR_EXPECT_CUDA_ARCHS: comma-separated
    sm_NN (machine code) and compute_NN (PTX) names."""
    raw = os.environ.get("SINGA_TENSOR_EXPECT_CUDA_ARCHS", DEFAULT_ARCHS)
    want = set()
    for name in filter(None, (n.strip() for n in raw.split(","))):
        m = re.fullmatch(r"(sm|compute)_(\d+)", name)
        if m is None:
            raise ValueError(f"SINGA_TENSOR_EXPECT_CUDA_ARCHS: {name!r} is neither sm_NN nor "
                             f"compute_NN (got {raw!r})")
        want.add(("elf" if m[1] == "sm" else "ptx", int(m[2])))
    if not want:
        raise ValueError(f"SINGA_TENSOR_EXPECT_CUDA_ARCHS names no architecture: {raw!r}")
    return want


def test_expected_architectures_parse(monkeypatch):
    monkeypatch.delenv("SINGA_TENSOR_EXPECT_CUDA_ARCHS", raising=False)
    assert expected_architectures() == {("elf", 80), ("elf", 90), ("ptx", 90)}
    monkeypatch.setenv("SINGA_TENSOR_EXPECT_CUDA_ARCHS", " sm_90 ")
    assert expected_architectures() == {("elf", 90)}
    monkeypatch.setenv("SINGA_TENSOR_EXPECT_CUDA_ARCHS", "sm_90,arch=90")
    with pytest.raises(ValueError, match="'arch=90' is neither sm_NN nor compute_NN"):
        expected_architectures()


@needs_cuda_lib
def test_machine_code_for_expected_architectures():
    want = expected_architectures()
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump is not None:
        def listing(flag: str) -> str:
            return subprocess.run([cuobjdump, flag, str(CUDA_LIB)], check=True,
                                  capture_output=True, text=True).stdout

        # only the listings asked for: a narrowed build may hold no PTX at all
        listings = {kind: listing(f"--list-{kind}") for kind in {k for k, _ in want}}
        for kind, sm in sorted(want):
            # entries are named like libsinga_tensor_cuda.1.sm_90.cubin / .ptx
            assert re.search(rf"\bsm_{sm}\b", listings[kind]), (
                f"no {kind} for sm_{sm} in {CUDA_LIB}:\n{listings[kind]}")
        return
    containers = _fatbin_entries(CUDA_LIB)
    assert containers, "no fatbin containers in the .nv_fatbin section"
    for i, entries in enumerate(containers):
        assert want <= set(entries), f"fatbin container {i} holds {entries}, wanted {want}"
