"""Run a PyTorch script on singa_tensor with only its import lines changed.

    python examples/pytorch_ports/run.py examples/pytorch_ports/mnist_cnn.py [args...]

Every `import torch...` and `from torch... import ...` line is rewritten to import the same
names from singa_tensor (`import torch` becomes `import singa_tensor as torch`); nothing else
in the script changes. `--show` prints the rewritten import lines instead of running.
"""

from __future__ import annotations

import re
import runpy
import sys
import tempfile
from pathlib import Path

_IMPORT = re.compile(r"^(\s*)import torch(\.[\w.]+)?(\s+as\s+(\w+))?\s*$")
_FROM = re.compile(r"^(\s*)from torch(\.[\w.]+)?(\s+import\s+.*)$")


def swap_imports(source: str) -> str:
    """source with its torch imports pointing at singa_tensor."""
    out = []
    for line in source.splitlines(keepends=True):
        body = line.rstrip("\n")
        m = _IMPORT.match(body)
        if m:
            indent, sub, _, alias = m.groups()
            if sub and not alias:
                # `import torch.nn` binds the name torch: bind it to singa_tensor the same way
                body = f"{indent}import singa_tensor{sub}; import singa_tensor as torch"
            else:
                body = f"{indent}import singa_tensor{sub or ''} as {alias or 'torch'}"
        else:
            m = _FROM.match(body)
            if m:
                indent, sub, rest = m.groups()
                body = f"{indent}from singa_tensor{sub or ''}{rest}"
        out.append(body + ("\n" if line.endswith("\n") else ""))
    return "".join(out)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    show = argv[0] == "--show"
    if show:
        argv = argv[1:]
    script = Path(argv[0])
    swapped = swap_imports(script.read_text())
    if show:
        for line in swapped.splitlines():
            if "singa_tensor" in line:
                print(line)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / script.name
        path.write_text(swapped)
        sys.argv = [str(script)] + argv[1:]
        sys.path.insert(0, str(script.resolve().parent))
        runpy.run_path(str(path), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
