#!/usr/bin/env bash
# The prepared GPU check: on a machine with an NVIDIA GPU and no network, build singa_tensor
# with its CUDA backend, run the CUDA tests (parity with the CPU, then the whole suite on
# SINGA_TENSOR_DEVICE=cuda) and the CUDA benchmark against PyTorch. About 8 minutes on one H200.
#
#   tools/gpu_check.sh [WHEEL_DIR]
#
# WHEEL_DIR (default .whl) holds wheels of what the machine lacks for the build, for its Python
# (e.g. cffi, pycparser and scipy-openblas32 for CPython 3.12); they are installed into a private
# target folder, and the package is built there too. Logs go to $OUT (default /tmp/gpu_check).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
WHEELS=${1:-.whl}
PY=${PYTHON:-python3}
SITE=/tmp/st_site
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 ))s] $*"; }

stamp "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY --version
nvcc --version | tail -1

# mpi4py and mpich (the distributed tests) go to a prefix of their own: mpich's wheel puts
# libmpi and mpiexec in data folders that an install with --target leaves out
MPI_PREFIX=/tmp/st_mpi
mpi_wheels=$(ls "$WHEELS"/mpi4py-*.whl "$WHEELS"/mpich-*.whl 2>/dev/null)
other_wheels=$(ls "$WHEELS"/*.whl 2>/dev/null | grep -v -e '/mpi4py-' -e '/mpich-')
if [ -n "$other_wheels" ]; then
  stamp "installing carried wheels from $WHEELS"
  $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" $other_wheels || exit 1
fi
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
if [ -n "$mpi_wheels" ]; then
  stamp "installing mpi4py and mpich into $MPI_PREFIX"
  if $PY -m pip install -q --no-index --no-deps --no-compile --prefix "$MPI_PREFIX" \
      $mpi_wheels; then
    MPI_SITE=$($PY -c "import sysconfig; print(sysconfig.get_path('purelib', vars={'base': '$MPI_PREFIX', 'platbase': '$MPI_PREFIX'}))")
    export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$MPI_SITE
    export PATH=$MPI_PREFIX/bin:$PATH
    export LD_LIBRARY_PATH=$MPI_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi

# Machine code for the GPU at hand only: a third of the full build's compile time.
arch=$($PY -c "import cupy; print(''.join(map(str, cupy.cuda.Device(0).compute_capability)))" \
       2>/dev/null || echo 90)
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
# tests/test_cuda_build.py then expects this machine code only (no PTX) instead of the full list
export SINGA_TENSOR_EXPECT_CUDA_ARCHS="sm_$arch"
stamp "building for sm_$arch"
if ! $PY -m pip install -q --no-build-isolation --no-deps --no-compile --target "$SITE" \
    -Ccmake.define.SINGA_TENSOR_CUDA=ON \
    -Ccmake.define.SINGA_TENSOR_CUDA_ARCHITECTURES="${arch}-real" \
    -Cbuild-dir=/tmp/st_build . >"$OUT/build.log" 2>&1; then
  tail -60 "$OUT/build.log"
  exit 1
fi
stamp "built"

$PY - <<'PYEOF' 2>&1 | tee "$OUT/smoke.log"
import singa_tensor as st
print("cuda available:", st.cuda.is_available(), "devices:", st.cuda.device_count())
x = st.arange(10, dtype=st.float32, device="cuda")
print("sum of arange(10) on cuda:", (x * 2 + 1).sum().item(), "(expect 100.0)")
PYEOF

stamp "CUDA backend tests (parity with the CPU, transfers, errors, interchange)"
timeout 120 $PY -m pytest tests/test_cuda_backend.py tests/test_cuda_build.py tests/test_dlpack.py \
  -q -p no:cacheprovider -rfE --tb=short 2>&1 | tee "$OUT/cuda_tests.log" | tail -60

stamp "distributed: the NCCL backend on this GPU (its calls, then the collectives suite)"
if $PY -c "import mpi4py" 2>/dev/null; then
  timeout 150 $PY -m pytest tests/distributed/test_collectives.py -k nccl -q -p no:cacheprovider -rfEs \
    --tb=short 2>&1 | tee "$OUT/distributed.log" | tail -30
else
  echo "mpi4py not installed (carry its cp312 wheel and mpich's in $WHEELS): left out"
fi

stamp "whole suite on SINGA_TENSOR_DEVICE=cuda"
SINGA_TENSOR_DEVICE=cuda timeout 200 $PY -m pytest tests --ignore=tests/distributed -q -p no:cacheprovider -rf \
  --tb=line --maxfail=400 >"$OUT/suite.log" 2>&1
grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | cut -c1-220 | head -60
tail -3 "$OUT/suite.log"

stamp "bench/gpu.py --quick"
timeout 200 $PY bench/gpu.py --quick --only float32 --budget 130 2>&1 | tee "$OUT/bench.log"
stamp "bench/gpu.py --quick --only precision (bf16 autocast, TF32, GEMMs against PyTorch)"
timeout 150 $PY bench/gpu.py --quick --only precision --budget 100 2>&1 | tee "$OUT/amp.log"
stamp "fused attention against the composition and PyTorch's (--quick)"
timeout 60 $PY bench/bench_attention.py --device cuda --quick 2>&1 | tee "$OUT/attention.log"
stamp "host-side profile of the CNN training step"
timeout 60 $PY bench/gpu_profile.py cnn --steps 20 2>&1 | head -50 | tee "$OUT/profile.log"
stamp "done"
