"""The PyTorch example ports (examples/pytorch_ports/) on PyTorch and on singa_tensor from the
same initial weights: the largest relative difference of their losses, and their times.

    python bench/bench_ports.py --torch-python /path/to/python-with-torch [--steps N] [NAME...]

Each script runs once under PyTorch (in its own process, with PyTorch's own environment),
which saves its initial weights; then under singa_tensor (examples/pytorch_ports/run.py, only
the imports changed), which loads them. Dropout is set to 0 (PORT_DROPOUT) so that both runs
draw nothing that differs; the scripts' other random draws come from numpy. The time is the
script's whole run (start-up and import included), best of --repeat runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PORTS = ROOT / "examples" / "pytorch_ports"


def scripts() -> list[Path]:
    return sorted(p for p in PORTS.glob("*.py") if p.name != "run.py")


def _run(cmd: list[str], env: dict) -> tuple[list[list[float]], float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    wall = time.perf_counter() - t0
    if r.returncode:
        return [], wall, (r.stderr.strip().splitlines() or ["failed"])[-1]
    losses = []
    for line in r.stdout.splitlines():
        if line.startswith("loss "):
            losses.append([float(v) for v in line.split()[2:] if _is_number(v)])
    return losses, wall, ""


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _env(extra: dict) -> dict:
    # each library with its own defaults: only the port's own variables are added
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORT_")}
    env.update(extra)
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-python", required=True,
                    help="a Python interpreter that has PyTorch installed")
    ap.add_argument("--steps", type=int, default=None, help="PORT_STEPS for every script")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    chosen = [s for s in scripts() if not args.names or s.stem in args.names]
    print(f"{'script':28s} {'steps':>5s} {'max rel diff':>13s} {'torch s':>8s} {'ours s':>8s} "
          f"{'ratio':>6s}")
    with tempfile.TemporaryDirectory() as tmp:
        for s in chosen:
            init = os.path.join(tmp, s.stem)
            common = {"PORT_DROPOUT": "0"}
            if args.steps:
                common["PORT_STEPS"] = str(args.steps)
            best_t = best_o = float("inf")
            for _ in range(args.repeat):
                ref, t_t, err_t = _run([args.torch_python, str(s)],
                                       _env({**common, "PORT_SAVE_INIT": init}))
                got, t_o, err_o = _run([sys.executable, str(PORTS / "run.py"), str(s)],
                                       _env({**common, "PORT_LOAD_INIT": init}))
                best_t, best_o = min(best_t, t_t), min(best_o, t_o)
            if err_t or err_o or len(ref) != len(got):
                why = err_t and f"torch: {err_t}" or err_o and f"ours: {err_o}" or (
                    f"{len(ref)} torch losses, {len(got)} ours")
                print(f"{s.stem:28s} failed: {why}")
                continue
            diff = max((abs(a - b) / max(abs(a), 1e-12) for r, g in zip(ref, got)
                        for a, b in zip(r, g)), default=0.0)
            print(f"{s.stem:28s} {len(ref):5d} {diff:13.2e} {best_t:8.2f} {best_o:8.2f} "
                  f"{best_o / best_t:6.2f}")


if __name__ == "__main__":
    main()
