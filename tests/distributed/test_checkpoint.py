"""A distributed run that checkpoints, stops and resumes in a new job ends where an
uninterrupted run ends: model, Adam moments and DistOpt's own state (sparse residuals) all come
back through st.save / st.load."""

from __future__ import annotations

import numpy as np

from .mpi_run import needs_mpi, run

pytestmark = needs_mpi

BODY = """
from singa_tensor import nn, optim
mode, steps, ckpt_in, ckpt_out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group(timeout=60)
rank, ws = dist.get_rank(), dist.get_world_size()
st.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
opt = optim.DistOpt(optim.Adam(list(model.parameters()), lr=0.05))
start = 0
if ckpt_in != "-":
    state = st.load(f"{ckpt_in}.{rank}")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = int(state["step"].item())
rng = np.random.default_rng(5)
X = rng.standard_normal((40, ws * 4, 6)).astype(np.float32)
Y = rng.standard_normal((40, ws * 4, 2)).astype(np.float32)
for step in range(start, start + steps):
    x = st.tensor(X[step, rank * 4:(rank + 1) * 4])
    y = st.tensor(Y[step, rank * 4:(rank + 1) * 4])
    loss = ((model(x) - y) ** 2).mean()
    if mode == "sparse":
        opt.backward_and_sparse_update(loss, spars=0.3, topK=True, corr=True)
    else:
        opt.backward_and_update(loss)
if ckpt_out != "-":
    st.save({"model": model.state_dict(), "opt": opt.state_dict(),
             "step": st.tensor(start + steps)}, f"{ckpt_out}.{rank}")
report([p.detach().numpy().ravel().tolist() for p in model.parameters()])
"""


def _params(res):
    return {r: np.concatenate([np.asarray(p) for p in v]) for r, v in res.items()}


def test_checkpoint_and_resume_give_the_uninterrupted_result(tmp_path):
    ck = str(tmp_path / "ck")
    for mode in ("full", "sparse"):
        straight, _ = run(2, BODY, args=[mode, "6", "-", "-"], timeout=90)
        run(2, BODY, args=[mode, "3", "-", ck], timeout=90)
        resumed, _ = run(2, BODY, args=[mode, "3", ck, "-"], timeout=90)
        a, b = _params(straight), _params(resumed)
        assert sorted(a) == [0, 1]
        for r in (0, 1):
            np.testing.assert_allclose(b[r], a[r], rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(a[0], a[1])  # replicas stay identical
