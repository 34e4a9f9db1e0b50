"""Write the small files in tests/data that PyTorch itself produced, for the readers of
safetensors and PyTorch checkpoints to be tested against the real writers.

Run once with a Python that has torch and safetensors (never a dependency of singa_tensor or
its tests; the tests only read the files this writes):

    python tools/make_torch_fixtures.py

The values are simple on purpose: tests/test_safetensors.py and tests/test_torch_checkpoint.py
state them again and compare.
"""

from __future__ import annotations

import collections
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def main() -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
               "bias": torch.tensor([0.5, -1.0, 3.0], dtype=torch.bfloat16),
               "steps": torch.tensor([1, 2, 3]),
               "mask": torch.tensor([True, False]),
               "half": torch.tensor([1.5, -0.25], dtype=torch.float16)},
              str(DATA / "torch_written.safetensors"), metadata={"format": "pt"})

    base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    state = collections.OrderedDict([
        ("fc.weight", torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -0.125]])),
        ("fc.bias", torch.tensor([0.1, -0.2])),
        ("bn.num_batches_tracked", torch.tensor(7)),
        ("bf16", torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)),
        ("half", torch.tensor([1.5, -0.25], dtype=torch.float16)),
        ("mask", torch.tensor([True, False, True])),
        ("i32", torch.tensor([-3, 4], dtype=torch.int32)),
        ("base", base),
        ("view_t", base.t()),          # a transposed view of base's storage
        ("view_row", base[1]),         # a view at a storage offset
    ])
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]]))
        lin.bias.copy_(torch.tensor([0.5, -0.5]))
    ckpt = {"model": state, "linear": lin.state_dict(),  # a module's, with its _metadata
            "params": [torch.nn.Parameter(torch.ones(2))], "dtype": torch.float16,
            "size": torch.Size([2, 3]), "epoch": 3, "lr": 0.01, "name": "run-1", "best": None,
            "betas": (0.9, 0.999), "history": [1.5, 1.25], "flags": {"amp": False}}
    torch.save(ckpt, DATA / "torch_checkpoint.pt")
    torch.save(ckpt, DATA / "torch_checkpoint_legacy.pt", _use_new_zipfile_serialization=False)


if __name__ == "__main__":
    main()
