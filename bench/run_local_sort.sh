#!/usr/bin/env bash
# On a GPU machine: the radix engine's GPU tests, then the local sort benchmark through the
# engine and through the public API (issues 3 and 39). Logs, the JSON figures and the plots go
# under $OUT (default ./bench_out; the API's in $OUT/api). Extra arguments go to both
# bench/local_sort.py runs (e.g. --max-log 28 --runs 5).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv \
    >"$OUT/gpu.txt" 2>&1
# Compile first, so that an NVRTC error ends the run at once.
python3 -c "from distsort.local.radix import compile_all; compile_all()" \
    2>&1 | tee "$OUT/compile.log" || exit 1
timeout "${TEST_TIMEOUT:-180}" python3 -m pytest -m gpu -p no:cacheprovider -q -rfE \
    tests/local/test_radix_gpu.py tests/local/test_radix_numbers_gpu.py 2>&1 | tee "$OUT/tests.log"
tests=$?
timeout "${BENCH_TIMEOUT:-300}" python3 bench/local_sort.py --out "$OUT" "$@" 2>&1 |
    tee "$OUT/bench.log"
bench=$?
timeout "${BENCH_TIMEOUT:-300}" python3 bench/local_sort.py --api --out "$OUT/api" "$@" 2>&1 |
    tee "$OUT/api.log"
bench=$((bench || $?))
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
