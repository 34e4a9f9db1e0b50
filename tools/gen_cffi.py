"""Emit the C source of a cffi API-mode extension from the kernel ABI header.

Run by CMake at build time:
    python gen_cffi.py <c-preprocessor> <header> <module name> <output.c>
                       [--define NAME[=VALUE]]... [--header EXTRA_HEADER]...

The header is written with X-macros; the C preprocessor expands them into the plain
declarations that cffi's parser understands, so the binding can never drift from the header.
`--define` selects a variant of the ABI (the CUDA library is bound with ST_CUDA_ABI, which adds
the stream argument); it applies both to the declarations cffi parses and to the generated C
source, so the two always agree. `--header` adds a header of functions that only one library
has (found on the include path by its file name when the extension is compiled).
"""

import argparse
import os
import subprocess

import cffi


def expanded_declarations(cpp: list[str], header: str, defines: list[str] = ()) -> str:
    out = subprocess.run(
        [*cpp, "-E", "-P", "-DST_CDEF", *(f"-D{d}" for d in defines), "-x", "c", header],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out


def source_prelude(defines: list[str], extra_headers: list[str]) -> str:
    lines = []
    for d in defines:
        name, _, value = d.partition("=")
        lines.append(f"#define {name} {value or '1'}")
    lines.append('#include "singa_tensor/singa_tensor.h"')
    lines += [f'#include "{os.path.basename(h)}"' for h in extra_headers]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compiler", help="the C compiler (a ';'-separated command) to preprocess")
    parser.add_argument("header")
    parser.add_argument("module")
    parser.add_argument("output")
    parser.add_argument("--define", action="append", default=[], metavar="NAME[=VALUE]")
    parser.add_argument("--header", dest="extra_headers", action="append", default=[])
    args = parser.parse_args()
    cpp = args.compiler.split(";")
    ffi = cffi.FFI()
    for header in [args.header, *args.extra_headers]:
        ffi.cdef(expanded_declarations(cpp, header, args.define))
    ffi.set_source(args.module, source_prelude(args.define, args.extra_headers))
    ffi.emit_c_code(args.output)


if __name__ == "__main__":
    main()
