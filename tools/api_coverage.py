"""How much of PyTorch's public API singa_tensor has, per namespace, by name.

    python tools/api_coverage.py              # the table
    python tools/api_coverage.py --missing    # and the missing names of each namespace
    python tools/api_coverage.py --json       # machine-readable

PyTorch's names come from tools/torch_api.json (written once by tools/gen_torch_api.py with
PyTorch installed; this tool needs no PyTorch). Names that singa_tensor leaves out on purpose
are listed, with the reason, in tools/api_scope.json and do not count. A name is present when
the corresponding singa_tensor object has the attribute; presence says nothing about
semantics, which the test suite checks.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# PyTorch's namespace -> ours
OURS = {
    "torch": "singa_tensor",
    "torch.Tensor": "singa_tensor.Tensor",
    "torch.nn": "singa_tensor.nn",
    "torch.nn.Module": "singa_tensor.nn.Module",
    "torch.nn.functional": "singa_tensor.nn.functional",
    "torch.nn.init": "singa_tensor.nn.init",
    "torch.nn.utils": "singa_tensor.nn.utils",
    "torch.optim": "singa_tensor.optim",
    "torch.optim.lr_scheduler": "singa_tensor.optim.lr_scheduler",
    "torch.utils.data": "singa_tensor.utils.data",
    "torch.linalg": "singa_tensor.linalg",
    "torch.distributions": "singa_tensor.distributions",
}

# the coverage each namespace should reach (issue targets); the others are reported only
TARGETS = {"torch": 0.80, "torch.Tensor": 0.90, "torch.nn": 0.90, "torch.nn.functional": 0.90,
           "torch.optim": 0.90, "torch.optim.lr_scheduler": 0.90, "torch.utils.data": 0.90,
           "torch.nn.init": 0.90, "torch.nn.utils": 0.90}


def _resolve(path: str):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj
    return None


def load(names_path: str | None = None, scope_path: str | None = None) -> tuple[dict, dict]:
    with open(names_path or os.path.join(HERE, "torch_api.json")) as f:
        names = json.load(f)
    with open(scope_path or os.path.join(HERE, "api_scope.json")) as f:
        scope = json.load(f)
    return names, scope


def out_of_scope(namespace: str, name: str, scope: dict) -> str | None:
    """The reason name is left out, or None."""
    for pattern, reason in scope.get(namespace, []) + scope.get("all", []):
        if fnmatch.fnmatchcase(name, pattern):
            return reason
    return None


def coverage(names: dict, scope: dict, ours: dict | None = None) -> dict:
    """namespace -> {"present": [...], "missing": [...], "excluded": {name: reason}, "ratio"}."""
    out = {}
    for ns, torch_names in names["namespaces"].items():
        obj = _resolve((ours or OURS)[ns])
        present, missing, excluded = [], [], {}
        for n in torch_names:
            reason = out_of_scope(ns, n, scope)
            if reason is not None:
                excluded[n] = reason
            elif obj is not None and hasattr(obj, n):
                present.append(n)
            else:
                missing.append(n)
        counted = len(present) + len(missing)
        out[ns] = {"present": present, "missing": missing, "excluded": excluded,
                   "ratio": len(present) / counted if counted else 1.0}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", action="store_true", help="list the missing names")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    names, scope = load()
    cov = coverage(names, scope)
    if args.json:
        json.dump(cov, sys.stdout, indent=1)
        print()
        return 0
    print(f"PyTorch {names['torch_version']} public names present in singa_tensor")
    print(f"{'namespace':28s} {'present':>8s} {'counted':>8s} {'coverage':>9s} "
          f"{'target':>7s} {'left out':>9s}")
    for ns, c in cov.items():
        counted = len(c["present"]) + len(c["missing"])
        target = f"{TARGETS[ns]:.0%}" if ns in TARGETS else "-"
        print(f"{ns:28s} {len(c['present']):8d} {counted:8d} {c['ratio']:9.1%} {target:>7s} "
              f"{len(c['excluded']):9d}")
    if args.missing:
        for ns, c in cov.items():
            if c["missing"]:
                print(f"\n{ns} missing ({len(c['missing'])}): {' '.join(c['missing'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
