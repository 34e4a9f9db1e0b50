"""Building C and C++ code against the library's kernel ABI.

`include_paths()` (PyTorch's name, `torch.utils.cpp_extension.include_paths`) gives the folder
to pass to a compiler's `-I` so that `#include <singa_tensor/singa_tensor.h>` (the kernel ABI)
and `#include <singa_tensor/functors.h>` (the per-element math, C++) resolve.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import singa_tensor

__all__ = ["include_paths"]

_HEADERS = ("singa_tensor.h", "functors.h")


def _installed_candidates() -> list[Path]:
    # An install puts the headers into <package>/include/singa_tensor/. An editable install
    # splits the package: its Python files stay in src/singa_tensor while what CMake installs
    # lands in site-packages/singa_tensor, so every folder of the package's __path__ counts,
    # and so does wherever the distribution's record of installed files puts the header.
    found = [Path(entry) / "include" for entry in singa_tensor.__path__]
    try:
        files = metadata.distribution("singa_tensor").files or []
    except metadata.PackageNotFoundError:
        return found
    return found + [Path(f.locate()).parent.parent for f in files
                    if f.name == _HEADERS[0] and f.parent.name == "singa_tensor"]


def _checkout_candidates() -> list[Path]:
    # Imported from a source checkout: <repo>/src/singa_tensor next to <repo>/cpp/include.
    return [Path(entry).resolve().parent.parent / "cpp" / "include"
            for entry in singa_tensor.__path__ if Path(entry).resolve().parent.name == "src"]


def include_paths() -> list[str]:
    """The folders holding the library's C headers, for a compiler's include path.

    Returns one folder that holds `singa_tensor/singa_tensor.h` and `singa_tensor/functors.h`:
    the package's own `include/` folder when the headers were installed with the package,
    otherwise the repository's `cpp/include` when the package is imported from a source
    checkout. Raises RuntimeError, naming every folder searched, when neither holds them.

    Example:
        >>> from pathlib import Path
        >>> from singa_tensor.utils.cpp_extension import include_paths
        >>> (include,) = include_paths()
        >>> header = Path(include) / "singa_tensor" / "singa_tensor.h"
        >>> "#define ST_UNARY_FLOAT_OPS" in header.read_text()
        True
    """
    searched: list[Path] = []
    for folder in _installed_candidates() + _checkout_candidates():
        if folder in searched:
            continue
        searched.append(folder)
        if all((folder / "singa_tensor" / name).is_file() for name in _HEADERS):
            return [str(folder)]
    headers = " and ".join(f"singa_tensor/{name}" for name in _HEADERS)
    raise RuntimeError(f"include_paths: the C headers of singa_tensor ({headers}) are in none "
                       f"of the folders searched: {', '.join(map(str, searched)) or 'none'}. "
                       f"Install the package with its headers or import it from a source "
                       f"checkout.")
