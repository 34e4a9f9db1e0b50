"""Collection rules for the doctest run over src/: a module that needs an optional dependency
(CuPy for the CUDA backend, onnx for ONNX import and export, mpi4py for distributed training) is
left out when that dependency is not installed."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("cupy") is None:
    collect_ignore.append("src/singa_tensor/backend/cuda.py")
if importlib.util.find_spec("onnx") is None:
    collect_ignore.append("src/singa_tensor/onnx")
    collect_ignore.append("tests/onnx")
if importlib.util.find_spec("mpi4py") is None:
    collect_ignore += ["src/singa_tensor/distributed", "src/singa_tensor/optim/dist_opt.py",
                       "src/singa_tensor/nn/parallel.py", "tests/distributed"]
