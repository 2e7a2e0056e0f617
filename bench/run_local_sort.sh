#!/usr/bin/env bash
# On a GPU machine: the radix engine's GPU tests, then the digit width measurements (issue 3):
# bench/local_sort.py --digits (every width 7-11 against CUB in one run; about 6 minutes in all
# on one H200). FULL=1 also runs the full benchmark (2^20...2^30, every case, plot), PROFILE=1
# ncu and --tune. Logs and JSON figures go under $OUT (default ./bench_out). Extra arguments go
# to bench/local_sort.py (e.g. --runs 5).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench_out}
DIGITS=${DIGITS:-7,8,9,10,11}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv \
    >"$OUT/gpu.txt" 2>&1
# Compile every width's module first, side by side (CuPy caches them on disk for what follows),
# so that an NVRTC error ends the run at once.
pids=()
for bits in ${DIGITS//,/ }; do
    python3 -c "from distsort.local.radix import _module
_module($bits).get_function('radix_scan<$bits>')" >"$OUT/compile$bits.log" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do
    wait "$pid" || { cat "$OUT"/compile*.log; exit 1; }
done
timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -m gpu -p no:cacheprovider -q -rfE \
    --durations=15 tests/test_radix_gpu.py 2>&1 | tee "$OUT/tests.log"
tests=$?
timeout "${BENCH_TIMEOUT:-300}" python3 bench/local_sort.py --out "$OUT" --digits "$DIGITS" \
    "$@" 2>&1 | tee "$OUT/digits.log"
bench=$?
if [ "${FULL:-0}" = 1 ]; then
    timeout "${FULL_TIMEOUT:-300}" python3 bench/local_sort.py --out "$OUT" "$@" 2>&1 |
        tee "$OUT/bench.log"
    bench=$((bench || $?))
fi
if [ "${PROFILE:-0}" = 1 ]; then  # per-kernel figures (ours on 2^28 uint32 and uint64), tile sizes
    timeout "${PROFILE_TIMEOUT:-90}" ncu --clock-control none --section SpeedOfLight \
        -k regex:radix --launch-skip 6 --launch-count 16 python3 -c "
import cupy as cp
from distsort.local.radix import RadixEngine
e = RadixEngine(0)
x = cp.random.randint(0, 2**31, 1 << 28, dtype=cp.int64)
for dt in (cp.uint32, cp.uint32, cp.uint64):
    e.sort(x.astype(dt))
" >"$OUT/ncu.log" 2>&1
    timeout "${PROFILE_TIMEOUT:-90}" python3 bench/local_sort.py --out "$OUT" --tune 2>&1 |
        tee "$OUT/tune.log"
fi
echo "tests exit $tests, bench exit $bench"
exit $((tests || bench))
