"""The launcher starts N ranks of a script with its arguments and exports the settings."""

import os
import subprocess
import sys

import pytest

from singa_tensor.distributed import run as launcher

from .mpi_run import needs_mpi

SCRIPT = """
import os, sys
import singa_tensor.distributed as dist
dist.init_process_group()
sys.stdout.write(f"RANK {dist.get_rank()}/{dist.get_world_size()} "
                 f"servers={os.environ.get('SINGA_DIST_SERVERS')} "
                 f"timeout={dist.get_communicator().timeout} args={sys.argv[1:]}\\n")
sys.stdout.flush()
"""


def _launch(args, tmp_path, timeout=60):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("SINGA_DIST_SERVERS", None)
    cmd = [sys.executable, "-m", "singa_tensor.distributed.run"] + args
    cmd = [str(script) if a == "SCRIPT" else a for a in cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@needs_mpi
def test_launcher_runs_every_rank_with_its_arguments(tmp_path):
    p = _launch(["-n", "2", "--servers", "1", "--timeout", "7", "SCRIPT", "--epochs", "3",
                 "-n", "5"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = sorted(line for line in p.stdout.splitlines() if line.startswith("RANK"))
    assert lines == [f"RANK {r}/2 servers=1 timeout=7.0 args=['--epochs', '3', '-n', '5']"
                     for r in range(2)]


@needs_mpi
def test_launcher_passes_the_exit_status(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys\nsys.exit(3)\n")
    p = subprocess.run([sys.executable, "-m", "singa_tensor.distributed.run", "-n", "2",
                        str(script)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0


@needs_mpi
def test_dry_run_shows_the_mpiexec_command(tmp_path, capsys):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n")
    assert launcher.main(["-n", "4", "--hostfile", str(hosts), "--servers", "2", "--dry-run",
                          "train.py", "--lr", "0.1"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("SINGA_DIST_SERVERS=2 ")
    assert f"-n 4 -hostfile {hosts} {sys.executable} train.py --lr 0.1" in line
    assert "mpiexec" in line
    cmd, env, dry = launcher.build_command(["-n", "2", "-m", "pkg.mod", "x"])
    assert cmd[-4:] == [sys.executable, "-m", "pkg.mod", "x"] and not dry


def test_ranks_share_the_cores_of_one_machine(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(launcher.os, "cpu_count", lambda: 8)
    _, env, _ = launcher.build_command(["-n", "2", "a.py"])
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "4"
    _, env, _ = launcher.build_command(["-n", "16", "a.py"])
    assert env["OMP_NUM_THREADS"] == "1"
    _, env, _ = launcher.build_command(["-n", "2", "--threads", "3", "a.py"])
    assert env["OMP_NUM_THREADS"] == "3"
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's own setting wins
    _, env, _ = launcher.build_command(["-n", "2", "a.py"])
    assert "OMP_NUM_THREADS" not in env


@pytest.mark.parametrize("args, message", [
    (["-n", "0", "a.py"], "-n must be at least 1, got 0"),
    (["-n", "2"], "give the script to run"),
    (["-n", "2", "--servers", "2", "a.py"], "--servers must be between 0 and n - 1 = 1, got 2"),
    (["-n", "2", "--timeout", "0", "a.py"], "--timeout must be a positive number of seconds"),
    (["-n", "2", "--threads", "0", "a.py"], "--threads must be at least 1, got 0"),
    (["-n", "2", "--hostfile", "/nonexistent/hosts", "a.py"], "/nonexistent/hosts: no such file"),
])
def test_launcher_rejects_bad_arguments(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        launcher.build_command(args)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


HOSTS_SCRIPT = """
import os
import singa_tensor as st
import singa_tensor.distributed as dist
from singa_tensor import nn, optim
dist.init_process_group()
rank = dist.get_rank()
t = st.tensor([float(rank)])
dist.all_reduce(t)
st.manual_seed(rank)  # DistOpt broadcasts rank 0's parameters
net = nn.Linear(3, 1)
opt = optim.DistOpt(optim.SGD(net.parameters(), lr=0.1))
opt((net(st.ones(2, 3) * (rank + 1)) ** 2).mean())
line = (f"HOST {os.environ.get('PMI_HOSTNAME') or os.environ.get('HOSTNAME')} rank={rank} "
        f"local={dist.get_local_rank()} sum={t.item():g} w={net.weight.sum().item():.6f}")
with open(os.path.join(os.path.dirname(__file__), f"rank{rank}.txt"), "w") as f:
    f.write(line)  # a file per rank: the ranks' stdout lines may interleave
"""


@needs_mpi
def test_a_hostfile_across_two_simulated_hosts(tmp_path):
    # two names for this machine make two "hosts" of two slots each; MPICH's fork launcher
    # (HYDRA_LAUNCHER=fork) starts their ranks without ssh, so ranks, local ranks and
    # collectives are laid out as on two real machines
    if launcher._is_open_mpi(launcher.find_mpiexec()):
        pytest.skip("the simulated hosts use MPICH's fork launcher")
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n127.0.0.1:2\n")
    script = tmp_path / "hosts_script.py"
    script.write_text(HOSTS_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1", HYDRA_LAUNCHER="fork")
    p = subprocess.run([sys.executable, "-m", "singa_tensor.distributed.run", "-n", "4",
                        "--hostfile", str(hosts), "--timeout", "60", str(script)],
                       capture_output=True, text=True, timeout=90, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = sorted((tmp_path / f"rank{r}.txt").read_text().split()[1:] for r in range(4))
    assert [r[1:3] for r in rows] == [["rank=2", "local=0"], ["rank=3", "local=1"],
                                      ["rank=0", "local=0"], ["rank=1", "local=1"]], rows
    assert [r[0] for r in rows] == ["127.0.0.1", "127.0.0.1", "localhost", "localhost"]
    assert {r[3] for r in rows} == {"sum=6"}
    assert len({r[4] for r in rows}) == 1  # one averaged step: the replicas stay equal
