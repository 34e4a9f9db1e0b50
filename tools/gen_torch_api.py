"""Write tools/torch_api.json: PyTorch's public names per namespace, for tools/api_coverage.py.

Run once with PyTorch installed (it is never a dependency of the library or its tests):

    python tools/gen_torch_api.py            # writes tools/torch_api.json

A name is public when it does not start with an underscore and is not a submodule; Tensor's
and Module's entries are their public attributes.
"""

from __future__ import annotations

import importlib
import json
import os
import types

NAMESPACES = {
    "torch": "torch",
    "torch.Tensor": "torch.Tensor",
    "torch.nn": "torch.nn",
    "torch.nn.Module": "torch.nn.Module",
    "torch.nn.functional": "torch.nn.functional",
    "torch.nn.init": "torch.nn.init",
    "torch.nn.utils": "torch.nn.utils",
    "torch.optim": "torch.optim",
    "torch.optim.lr_scheduler": "torch.optim.lr_scheduler",
    "torch.utils.data": "torch.utils.data",
    "torch.linalg": "torch.linalg",
    "torch.distributions": "torch.distributions",
}


def _resolve(path: str):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def public_names(obj) -> list[str]:
    names = getattr(obj, "__all__", None) if isinstance(obj, types.ModuleType) else None
    if names is None:
        names = dir(obj)
    out = []
    for n in names:
        if n.startswith("_") and not (isinstance(obj, type) and n.startswith("__") and
                                      n in ("__getitem__", "__setitem__", "__format__")):
            continue
        try:
            v = getattr(obj, n)
        except Exception:  # noqa: BLE001 (a name that fails to load is not usable)
            continue
        if isinstance(v, types.ModuleType):
            continue
        out.append(n)
    return sorted(set(out))


def main() -> None:
    import torch

    data = {"torch_version": torch.__version__,
            "namespaces": {k: public_names(_resolve(v)) for k, v in NAMESPACES.items()}}
    # torch's __all__ leaves out the dtypes, which scripts use as torch.float32 etc.
    data["namespaces"]["torch"] = sorted(set(data["namespaces"]["torch"]) | {
        n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)
        and not n.startswith("_")})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_api.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    for k, v in data["namespaces"].items():
        print(f"{k}: {len(v)} names")


if __name__ == "__main__":
    main()
