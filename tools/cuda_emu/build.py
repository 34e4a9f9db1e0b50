"""Build the CUDA library's kernels (cuda/*.cu) for the CPU, to run them without a GPU.

The sources are compiled by the host C++ compiler against the emulated runtime of this
directory (cuda_runtime.h, runtime.cc): each `kernel<<<grid, block, shmem, stream>>>(args)` is
rewritten into a call of `emu::launch`, which runs every thread of the grid as a fiber, and
`extern __shared__` arrays point into the launch's dynamic shared memory. Nothing else in the
sources changes, so what runs is the CUDA library's own code: its indexing, its block and warp
reductions, its launch configurations (checked against the device limits), its error channel.

    python tools/cuda_emu/build.py [--out DIR] [--sanitize address,undefined]

prints the path of the built library. `load()` builds (once per content of the sources; the
result is cached under build/cuda_emu/) and returns (ffi, lib), bound through cffi with the
same declarations as the CUDA extension (`singa_tensor.h` with ST_CUDA_ABI, plus extra.h).
tests/helpers.py plugs it into the stand-in CUDA device (SINGA_TENSOR_DEVICE=emu-cuda).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CUDA = ROOT / "cuda"
INCLUDE = ROOT / "cpp" / "include"
HEADER = INCLUDE / "singa_tensor" / "singa_tensor.h"
EXTRA = CUDA / "extra.h"
FLAGS = ["-std=c++17", "-O2", "-fPIC", "-DST_CUDA_ABI", "-Wall", "-Wno-unused-variable"]


class TranslationError(RuntimeError):
    pass


def _match_back(text: str, end: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket that opens the one closing at text[end]."""
    depth = 0
    for i in range(end, -1, -1):
        if text[i] == close_ch:
            depth += 1
        elif text[i] == open_ch:
            depth -= 1
            if depth == 0:
                return i
    raise TranslationError(f"unbalanced {open_ch}{close_ch} before offset {end}")


def _match_forward(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket that closes the one opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    raise TranslationError(f"unbalanced {open_ch}{close_ch} after offset {start}")


_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"', re.S)


def _rewrite_launches(text: str, name: str) -> str:
    skip = [m.span() for m in _COMMENT_OR_STRING.finditer(text)]
    out, pos = [], 0
    while True:
        at = text.find("<<<", pos)
        while at >= 0 and any(a <= at < b for a, b in skip):
            at = text.find("<<<", at + 3)
        if at < 0:
            out.append(text[pos:])
            return "".join(out)
        # the kernel: a (qualified) name, maybe with template arguments, before `<<<`
        i = at - 1
        while i >= 0 and text[i].isspace():
            i -= 1
        if text[i] == ">":
            i = _match_back(text, i, "<", ">") - 1
        while i >= 0 and (text[i].isalnum() or text[i] in "_:"):
            i -= 1
        start = i + 1
        kernel = text[start:at].strip()
        if not kernel:
            raise TranslationError(f"{name}: no kernel name before <<< at offset {at}")
        close = text.find(">>>", at)
        config = text[at + 3:close]
        j = close + 3
        while text[j].isspace():
            j += 1
        if text[j] != "(":
            raise TranslationError(f"{name}: no argument list after >>> of {kernel}")
        end = _match_forward(text, j, "(", ")")
        args = text[j + 1:end - 1]
        span = text[start:end]
        kernel = " ".join(kernel.split())
        call = (f'::emu::launch("{kernel}", [=]() {{ {kernel}({args}); }}, {config})')
        # keep the line count, so that diagnostics point at the right lines of the .cu file
        call = call.replace("\n", " ") + "\n" * span.count("\n")
        out.append(text[pos:start])
        out.append(call)
        pos = end


_EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>, ]+?)\s+(\w+)\s*\[\s*\]\s*;")


_SHARED = re.compile(r"(?<!extern )__shared__\s+([^;]*);")
_DECLARATOR_NAME = re.compile(r"(\w+)\s*(?:\[[^\]]*\]\s*)*$")


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _fresh_shared(m: re.Match) -> str:
    # `__shared__ T a, b[4];` -> the statics, each filled with the 0xAB pattern by the first
    # thread of each block that reaches it (shared memory starts undefined in every block)
    names = []
    for part in _split_top_level(m[1]):
        found = _DECLARATOR_NAME.search(part.strip())
        if not found:
            raise TranslationError(f"cannot read the declaration `__shared__ {m[1]};`")
        names.append(found[1])
    fills = " ".join(f"::emu::fresh_shared(&{n}, sizeof({n}));" for n in names)
    return f"static {m[1]}; {fills}"


def translate(text: str, name: str) -> str:
    """The emulator's C++ for one CUDA source file."""
    text = _EXTERN_SHARED.sub(
        lambda m: f"{m[1]}* {m[2]} = reinterpret_cast<{m[1]}*>(::emu::dynamic_shared());", text)
    text = _SHARED.sub(_fresh_shared, text)
    return f'#line 1 "{name}"\n' + _rewrite_launches(text, name)


def _inputs() -> list[Path]:
    files = sorted(CUDA.glob("*.cu")) + sorted(CUDA.glob("*.cuh")) + sorted(CUDA.glob("*.h"))
    files += sorted((INCLUDE / "singa_tensor").glob("*.h"))
    files += [HERE / "cuda_runtime.h", HERE / "runtime.cc", Path(__file__).resolve()]
    return files


def _key(flags: list[str], cxx: str) -> str:
    h = hashlib.sha256()
    for f in _inputs():
        h.update(f.name.encode())
        h.update(f.read_bytes())
    h.update(" ".join([cxx, *flags]).encode())
    return h.hexdigest()[:16]


def compile_library(sources: list[Path], lib: Path, flags: list[str] | None = None,
                    include: list[Path] = (), jobs: int | None = None) -> Path:
    """Translate CUDA sources (.cu units, .cuh headers they include) next to `lib`, compile
    them with the emulated runtime and link the shared library `lib`."""
    cxx = os.environ.get("CXX", "g++")
    flags = list(FLAGS if flags is None else flags)
    src = lib.parent / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    units = []
    for f in sources:
        dest = src / (f.stem + ".cc" if f.suffix == ".cu" else f.name)
        dest.write_text(translate(f.read_text(), os.path.relpath(f, ROOT)))
        if f.suffix == ".cu":
            units.append(dest)
    units.append(HERE / "runtime.cc")
    base = [cxx, *flags, f"-I{HERE}", f"-I{src}", *(f"-I{d}" for d in include)]

    def compile_one(unit: Path) -> Path:
        obj = src / (unit.stem + ".o")
        r = subprocess.run([*base, "-c", str(unit), "-o", str(obj)], capture_output=True,
                           text=True)
        if r.returncode:
            raise RuntimeError(f"cuda_emu: compiling {unit.name} failed:\n{r.stderr}")
        return obj

    with ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        objs = list(pool.map(compile_one, units))
    tmp = lib.with_name(lib.name + ".tmp")
    r = subprocess.run([cxx, *flags, "-shared", *map(str, objs), "-o", str(tmp)],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"cuda_emu: linking failed:\n{r.stderr}")
    tmp.replace(lib)
    return lib


def build(out: Path | None = None, sanitize: str = "", jobs: int | None = None) -> Path:
    """Compile the emulated CUDA library; returns the path of the shared library. Reuses an
    earlier build of the same sources and flags."""
    flags = list(FLAGS)
    if sanitize:
        flags += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-g", "-DEMU_UCONTEXT"]
    key = _key(flags, os.environ.get("CXX", "g++"))
    out = Path(out) if out else ROOT / "build" / "cuda_emu" / key
    lib = out / "libst_cuda_emu.so"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.exists() and (out / "key").exists() and (out / "key").read_text() == key:
            return lib
        sources = [f for f in sorted(CUDA.iterdir()) if f.suffix in (".cu", ".cuh")]
        compile_library(sources, lib, flags, [CUDA, INCLUDE], jobs)
        (out / "key").write_text(key)
    return lib


def declarations() -> str:
    """The C declarations of the CUDA library's ABI, expanded as the CUDA extension's are."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from gen_cffi import expanded_declarations
    finally:
        sys.path.pop(0)
    cc = os.environ.get("CC", "gcc")
    return "\n".join(expanded_declarations([cc], str(h), ["ST_CUDA_ABI"])
                     for h in (HEADER, EXTRA))


def load(sanitize: str = ""):
    """(ffi, lib) of the emulated CUDA library, built first when needed."""
    import cffi

    path = build(sanitize=sanitize)
    ffi = cffi.FFI()
    ffi.cdef(declarations())
    return ffi, ffi.dlopen(str(path))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="build directory (default: build/cuda_emu/<key>)")
    p.add_argument("--sanitize", default="", help="-fsanitize= value, e.g. address,undefined")
    p.add_argument("--translate", metavar="FILE.cu", help="print one file's translation")
    args = p.parse_args()
    if args.translate:
        print(translate(Path(args.translate).read_text(), args.translate))
        return
    print(build(args.out, args.sanitize))


if __name__ == "__main__":
    main()
