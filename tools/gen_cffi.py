"""Emit the C source of a cffi API-mode extension from the kernel ABI header.

Run by CMake at build time:
    python gen_cffi.py <c-preprocessor> <header> <module name> <output.c>

The header is written with X-macros; the C preprocessor expands them into the plain
declarations that cffi's parser understands, so the binding can never drift from the header.
"""

import subprocess
import sys

import cffi


def expanded_declarations(cpp: list[str], header: str) -> str:
    out = subprocess.run(
        [*cpp, "-E", "-P", "-DST_CDEF", "-x", "c", header],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out


def main() -> None:
    compiler, header, module, output = sys.argv[1:5]
    ffi = cffi.FFI()
    ffi.cdef(expanded_declarations(compiler.split(";"), header))
    ffi.set_source(module, '#include "singa_tensor/singa_tensor.h"')
    ffi.emit_c_code(output)


if __name__ == "__main__":
    main()
