"""Start a training script on N ranks: a thin wrapper over `mpiexec`.

Usage:
    python -m singa_tensor.distributed.run -n N [--hostfile F] [--servers K] [--timeout S]
        script.py [args...]
    python -m singa_tensor.distributed.run -n N ... -m package.module [args...]

The mpiexec next to the running Python (the one the `mpich` wheel installs) is preferred, then
the one on PATH. Every rank runs `python script.py args...` with the same Python as the
launcher; the script calls `dist.init_process_group()` and finds its rank there.

Options:
    -n N            number of ranks (processes) in all
    --hostfile F    the machines to use, one per line (`host` or `host:slots` for MPICH,
                    `host slots=K` for Open MPI); without it all ranks start on this machine
    --servers K     of the N ranks, K act as parameter servers (exported as SINGA_DIST_SERVERS
                    for `distributed.ParameterServer`)
    --timeout S     seconds a collective may wait for the other ranks before it raises
                    DistributedError (exported as SINGA_DIST_TIMEOUT; default 300)
    --dry-run       print the mpiexec command instead of running it

Several machines: install the same environment at the same path on each (or on a shared
file system), make sure they reach each other over ssh without a password, list them in a
hostfile and start from one of them:

    $ cat hosts
    node1:4
    node2:4
    $ python -m singa_tensor.distributed.run -n 8 --hostfile hosts train.py --epochs 10

The environment variables set here reach the ranks on every machine (MPICH passes the whole
environment; for Open MPI the launcher adds `-x` for each).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys


def find_mpiexec() -> str | None:
    """The mpiexec beside sys.executable, else the one on PATH; None if there is none."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def _is_open_mpi(mpiexec: str) -> bool:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "open mpi" in (out.stdout + out.stderr).lower()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m singa_tensor.distributed.run",
        description="Run a singa_tensor training script on N MPI ranks.")
    p.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    p.add_argument("--hostfile", help="file listing the machines to run on")
    p.add_argument("--servers", type=int, default=None,
                   help="how many of the ranks are parameter servers (SINGA_DIST_SERVERS)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a collective may wait (SINGA_DIST_TIMEOUT)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per rank (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS); on one "
                        "machine the default shares its cores among the ranks")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.add_argument("-m", dest="module", default=None, help="run a module, as python -m does")
    p.add_argument("script", nargs="?", help="the script to run on every rank")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def build_command(argv: list[str]) -> tuple[list[str], dict, bool]:
    """The mpiexec command line, the variables to export and whether this is a dry run, from
    the launcher's arguments.

    Example:
        >>> from singa_tensor.distributed import run
        >>> cmd, env, dry_run = run.build_command(["-n", "2", "--servers", "1",
        ...                                        "--threads", "4", "train.py"])
        >>> cmd[1:3], cmd[-1], env["SINGA_DIST_SERVERS"], env["OMP_NUM_THREADS"]
        (['-n', '2'], 'train.py', '1', '4')
    """
    p = _parser()
    a = p.parse_args(argv)
    if a.nproc < 1:
        p.error(f"-n must be at least 1, got {a.nproc}")
    if a.module is None and a.script is None:
        p.error("give the script to run (or -m module)")
    if a.module is not None and a.script is not None:
        a.args = [a.script] + a.args
    if a.servers is not None and not 0 <= a.servers < a.nproc:
        p.error(f"--servers must be between 0 and n - 1 = {a.nproc - 1}, got {a.servers}")
    if a.timeout is not None and not a.timeout > 0:
        p.error(f"--timeout must be a positive number of seconds, got {a.timeout}")
    if a.threads is not None and a.threads < 1:
        p.error(f"--threads must be at least 1, got {a.threads}")
    if a.hostfile is not None and not os.path.isfile(a.hostfile):
        p.error(f"--hostfile {a.hostfile}: no such file")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        p.error('mpiexec not found: pip install "singa_tensor[mpi]" (or pip install mpi4py '
                "mpich, or put an MPI's mpiexec on PATH)")
    env = {}
    if a.servers is not None:
        env["SINGA_DIST_SERVERS"] = str(a.servers)
    if a.timeout is not None:
        env["SINGA_DIST_TIMEOUT"] = repr(a.timeout)
    threads = a.threads
    if threads is None and a.hostfile is None and "OMP_NUM_THREADS" not in os.environ:
        # every rank's thread pool would otherwise take every core: n ranks on one machine
        # would run n times as many threads as it has cores
        threads = max(1, (os.cpu_count() or 1) // a.nproc)
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(threads)
    cmd = [mpiexec, "-n", str(a.nproc)]
    if a.hostfile is not None:
        cmd += ["-hostfile", a.hostfile]
    if env and a.hostfile is not None and _is_open_mpi(mpiexec):
        for k in env:
            cmd += ["-x", k]
    target = ["-m", a.module] if a.module is not None else [a.script]
    cmd += [sys.executable] + target + list(a.args)
    return cmd, env, a.dry_run


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; the exit status of mpiexec.

    Example:
        >>> from singa_tensor.distributed import run
        >>> run.main(["-n", "2", "train.py", "--epochs", "3"])  # doctest: +SKIP
        0
    """
    cmd, env, dry_run = build_command(sys.argv[1:] if argv is None else argv)
    if dry_run:
        print(" ".join(f"{k}={v}" for k, v in env.items()) + (" " if env else "")
              + " ".join(cmd))
        return 0
    full = dict(os.environ)
    full.update(env)
    proc = subprocess.Popen(cmd, env=full)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # mpiexec forwards the interrupt to the ranks; give them a moment, then end it
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
