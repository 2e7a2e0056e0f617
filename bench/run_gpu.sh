#!/usr/bin/env bash
# One device call: GPU tests on 1 GPU and on every GPU under MPI, the default job, and the
# distributed benchmark at P = 1, 2, 4 (as many GPUs as the machine has). Logs go to $OUT.
# Usage (repo root, on the GPU machine; .whl carried with the pytest-mpi wheel):
#   bash bench/run_gpu.sh [steps...]   steps: tests mpitests quickstart bench scaling (default: all
#   but scaling)
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONPATH=$PWD:/tmp/site
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
gpus=$(nvidia-smi -L | wc -l)
mpi="mpirun --oversubscribe -x NCCL_NVLS_ENABLE -x PYTHONPATH -x PYTHONUNBUFFERED -x DISTSORT_ENGINE"
steps=${*:-tests mpitests quickstart bench}
nvidia-smi -L | tee "$OUT/gpus.txt"
for step in $steps; do
  echo "=== $step"
  case $step in
    tests) timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py \
             tests/test_gen.py tests/test_check.py 2>&1 | tail -25 ;;
    mpitests) timeout 300 $mpi -n "$gpus" python3 -m pytest -q -x -m gpu -p no:cacheprovider \
                --with-mpi tests/test_gpu.py 2>&1 | grep -v "^$" | tail -30 ;;
    quickstart) DISTSORT_RANKS=$gpus timeout 200 bash launch/quickstart.sh --report "$OUT/job.json" \
                  2>&1 | tail -8 ;;
    bench) for p in 1 2 4 8; do
             [ "$p" -le "$gpus" ] || continue
             timeout 300 $mpi -n "$p" python3 bench/dist_sort.py --out "$OUT" 2>&1 | tail -6
           done ;;
    scaling) for p in 1 2 4 8; do  # weak: 2^30 per GPU; strong: 8 x 2^30 in all
            [ "$p" -le "$gpus" ] || continue
            timeout 200 $mpi -n "$p" python3 bench/dist_sort.py --per-rank 2^30 \
              --cases u32-4x2^30 --no-baselines --reps 3 --out "$OUT" 2>&1 | tail -3
            [ "$p" -ge 2 ] && timeout 200 $mpi -n "$p" python3 bench/dist_sort.py --total 8*2^30 \
              --cases u32-4x2^30 --no-baselines --reps 3 --out "$OUT" 2>&1 | tail -3
          done ;;
  esac
done 2>&1 | tee "$OUT/run.log"
