"""Parameter-server step time: an MLP 64-256-256-10 (85,002 parameters), batch 32, one thread
per rank, against the same step without communication, in the same run.

    python bench/bench_ps.py            # 1 worker + 1 server (2 ranks), BSP and Downpour
    python bench/bench_ps.py -n 3       # 2 workers + 1 server
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = "SINGA_BENCH_PS_CHILD"


def _child(mode: str, steps: int) -> None:
    import singa_tensor as st
    import singa_tensor.distributed as dist
    import singa_tensor.nn.functional as F
    from singa_tensor import nn, optim

    st.set_num_threads(1)
    dist.init_process_group()
    st.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    x, y = st.randn(32, 64), st.randint(0, 10, (32,))
    ps = dist.ParameterServer(model, lambda p: optim.SGD(p, lr=0.05), mode=mode, servers=1,
                              timeout=60)
    if ps.is_server:
        ps.run_server()
    else:
        local = optim.SGD(model.parameters(), lr=0.0)  # the same work, no messages

        def plain():
            local.zero_grad()
            F.cross_entropy(model(x), y).backward()
            local.step()

        def remote():
            ps.step(F.cross_entropy(model(x), y))

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_train import time_steps

        times = {name: time_steps(fn, 5, steps) * 1e3
                 for name, fn in (("local", plain), ("ps", remote))}
        ps.close()
        if dist.get_rank() == 0:
            print(json.dumps(times), flush=True)
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2, help="ranks (the last one is the server)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--mode", default=None)
    args = ap.parse_args()
    if os.environ.get(_CHILD):
        _child(args.mode, args.steps)
        return 0
    print(f"ParameterServer, {args.n - 1} worker(s) + 1 server, MLP 64-256-256-10 b32, "
          f"median of {args.steps} steps (ms)")
    print(f"{'mode':<10}{'local step':>12}{'PS step':>10}{'PS/local':>10}")
    for mode in ("bsp", "downpour"):
        env = dict(os.environ, **{_CHILD: "1"})
        out = subprocess.run([sys.executable, "-m", "singa_tensor.distributed.run", "-n",
                              str(args.n), "--threads", "1", __file__, "--mode", mode,
                              "--steps", str(args.steps)], env=env, capture_output=True,
                             text=True, timeout=600)
        if out.returncode != 0:
            print(out.stdout, out.stderr, file=sys.stderr)
            return out.returncode
        t = json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1])
        print(f"{mode:<10}{t['local']:>12.2f}{t['ps']:>10.2f}{t['ps'] / t['local']:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
