"""Optional dependencies: each is imported where it is first needed, and a missing one raises
an ImportError that names the pip extra bringing it.

Example:
    >>> from singa_tensor._optional import require
    >>> require("numpy", "this example").__name__
    'numpy'
"""

from __future__ import annotations

import importlib
from types import ModuleType

# import name -> (the package pip installs, the extra of singa_tensor that brings it)
EXTRAS: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "onnx"),
    "onnxruntime": ("onnxruntime", "onnx"),
    "PIL": ("pillow", "image"),
    "sklearn": ("scikit-learn", "demo"),
    "tqdm": ("tqdm", "demo"),
    "mpi4py": ("mpi4py", "mpi"),
    "cupy": ("cupy-cuda13x", "gpu"),
    "matplotlib": ("matplotlib", "notebook"),
}


def install_hint(module: str) -> str:
    """How to install the package that provides `module`: its extra, then the package."""
    top = module.partition(".")[0]
    package, extra = EXTRAS.get(top, (top, None))
    if extra is None:
        return f"pip install {package}"
    return f'pip install "singa_tensor[{extra}]" (or pip install {package})'


def missing(module: str, what: str) -> ModuleNotFoundError:
    """The error for `what` (an op or feature name) needing `module`, which is not installed."""
    top = module.partition(".")[0]
    package = EXTRAS.get(top, (top, None))[0]
    err = ModuleNotFoundError(f"{what} needs the {package} package, which is not installed: "
                              f"{install_hint(module)}")
    err.name = top
    return err


def require(module: str, what: str) -> ModuleType:
    """`module` imported, or ModuleNotFoundError naming `what` needs it and the extra to install.

    A module that is installed but fails inside its own imports keeps its original error."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.partition(".")[0] != module.partition(".")[0]:
            raise
        raise missing(module, what) from None
