"""The CUDA library as built (no GPU needed): every CPU kernel has its CUDA twin, the binding
covers the whole CUDA ABI, and the machine code targets the promised architectures.

Skips with a reason when the CUDA library was not built (no nvcc at build time, or
SINGA_TENSOR_CUDA=OFF)."""

from __future__ import annotations

import importlib.util
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

pytestmark = pytest.mark.skipif(
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


def test_cuda_library_defines_its_whole_abi():
    declared = (_declared_functions(HEADER, "ST_CUDA_ABI")
                | _declared_functions(EXTRA_HEADER))
    assert {"st_cuda_device_count", "st_cuda_last_error", "st_cuda_clear_error"} <= declared
    missing = sorted(declared - _defined_symbols(CUDA_LIB))
    assert not missing, (f"{len(missing)} functions of the CUDA ABI are not defined in "
                         f"{CUDA_LIB}: " + " ".join(missing))


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


def test_machine_code_for_sm80_sm90_and_ptx_for_compute90():
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump is not None:
        def listing(flag: str) -> str:
            return subprocess.run([cuobjdump, flag, str(CUDA_LIB)], check=True,
                                  capture_output=True, text=True).stdout

        elf, ptx = listing("--list-elf"), listing("--list-ptx")
        assert "sm_80" in elf and "sm_90" in elf, elf
        assert "sm_90" in ptx, ptx
        return
    containers = _fatbin_entries(CUDA_LIB)
    assert containers, "no fatbin containers in the .nv_fatbin section"
    want = {("elf", 80), ("elf", 90), ("ptx", 90)}
    for i, entries in enumerate(containers):
        assert want <= set(entries), f"fatbin container {i} holds {entries}, wanted {want}"
