#!/usr/bin/env bash
# One device call: GPU tests on 1 GPU and on every GPU under MPI, the default job, and the
# distributed benchmark at P = 1, 2, 4 (as many GPUs as the machine has). Logs go to $OUT.
# Usage (repo root, on the GPU machine; .whl carried with the pytest-mpi wheel):
#   bash bench/run_gpu.sh [steps...]   steps: tests mpitests quickstart shared bench bench4
#   partition cub4 pinned pcie external external4 examples scaling sample4 envab trace ab nccl4
#   bytecode (BYTECODE_ROUNDS) filejob (FILEJOB_COUNT, _RANKS, _REPS, _ARGS) timeline (TIMELINE_ARGS) ioprobe writeprobe (IOPROBE_SIZE) profile (PROFILE_RANKS; DISTSORT_SHARED_GPU passed on) abfile (AB_OLD, AB_ROUNDS, AB_RANKS)
#   cpuab (AB_OLD, CPUSORT_ARGS) imports (FILEJOB_COUNT, IMPORTS_DTYPE, IMPORTS_ARGS with @dir/v.npy the
#   values: where 2 ranks, folded and split, first import SciPy's sparse package)
#   steps cold tune trees apiab smallapi passprof codedprof (CODED_LOG) a2a ce fresh
#   ipctests fuzz (FUZZ_SEED, FUZZ_CASES, FUZZ_FILES: bench/fuzz.py with --backend gpu)
#   ipcalone take service (SERVICE_RANKS: 1 2, SERVICE_ARGS) (default: tests mpitests quickstart bench). external4: 4 ranks, 200GB
#   (EXTERNAL_TOTAL=100GB: less;
#   EXTERNAL_BUDGETS=48GB,default: sorts per budget, EXTERNAL_REPS=3 of each); envab: the
#   settings in AB_ENV (space-separated, VAR=value,VAR=value each) alternated twice; AB_ARGS:
#   more bench/dist_sort.py options for ab and envab (e.g. --per-rank 2^30); trace: the cases
#   in TRACE_CASES, with TRACE_ARGS (e.g. --per-rank 2^30 --reps 6);
#   DISTSORT_PINNED=alloc pins by cudaHostAlloc, not cudaHostRegister (bench/history/pinned.py)
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONPATH=$PWD:/tmp/site
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
gpus=$(nvidia-smi -L | wc -l)
mpi="mpirun --oversubscribe -x NCCL_NVLS_ENABLE -x PYTHONPATH -x PYTHONUNBUFFERED -x DISTSORT_ENGINE"
mpi="$mpi -x DISTSORT_TRANSPORT -x DISTSORT_IPC_MIN_BYTES"
steps=${*:-tests mpitests quickstart bench}
host_memory() {  # what the kernel would kill for: free memory, cgroup limit and OOM kills, locking
  grep -E "MemTotal|MemAvailable|Mlocked|AnonHugePages" /proc/meminfo | tr -s ' ' | paste -sd' '
  echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/{enabled,defrag} | paste -sd' ')"
  for f in memory.max memory.current memory.peak; do
    [ -r /sys/fs/cgroup/$f ] && echo "cgroup $f: $(cat /sys/fs/cgroup/$f)"
  done
  [ -r /sys/fs/cgroup/memory.events ] && grep -E "oom" /sys/fs/cgroup/memory.events | paste -sd' '
  echo "ulimit -l: $(ulimit -l); /dev/shm: $(df -h /dev/shm | tail -1 | tr -s ' ')"
}
nvidia-smi -L | tee "$OUT/gpus.txt"
for step in $steps; do
  echo "=== $step"
  case $step in
    tests) timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider tests/job/test_gpu.py \
             tests/test_gen.py tests/test_check.py tests/local/test_radix_gpu.py \
             tests/local/test_radix_numbers_gpu.py tests/local/test_graphs_gpu.py \
             tests/local/test_landing_gpu.py tests/local/test_digit_partition_gpu.py \
             tests/outofcore/test_external_gpu.py tests/job/test_oom_gpu.py \
             tests/job/test_byte_order.py tests/io/test_staging_gpu.py \
             tests/test_pinned_gpu.py tests/job/test_service_gpu.py tests/job/test_cold_gpu.py \
             --durations=15 > "$OUT/tests_full.log" 2>&1  # the slowest: where device time goes
           grep -aA17 "slowest" "$OUT/tests_full.log"; tail -5 "$OUT/tests_full.log" ;;
    mpitests) # ranks that share a GPU (fewer than 4): every count split (each rank sorts its
              # share: the multi-GPU code paths), then folded (rank 0 sorts all) at 3 ranks;
              # MPITEST_COUNTS="2 3" ... runs those counts only
              counts=$gpus; [ "$gpus" -lt 4 ] && counts="2 3 4 fold3"
              for n in ${MPITEST_COUNTS:-$counts}; do
                mode="split"; [ "${n#fold}" != "$n" ] && mode="fold" && n=${n#fold}
                echo "-- $n ranks on $gpus GPU(s), DISTSORT_SHARED_GPU=$mode"
                DISTSORT_SHARED_GPU=$mode timeout 300 $mpi -x DISTSORT_SHARED_GPU -n "$n" \
                  python3 -m pytest -q -x -m gpu -p no:cacheprovider \
                  --with-mpi tests/job/test_gpu.py tests/outofcore/test_external_gpu.py \
                  tests/job/test_byte_order.py tests/io/test_staging_gpu.py \
                  2>&1 | grep -av "^$" | grep -aE "passed|failed|Error|error|assert" | tail -30
              done ;;
    quickstart) timeout 200 bash launch/quickstart.sh --report "$OUT/job.json" \
                  2>&1 | grep -v "^-\|^$" | tail -20 ;;
    shared) # ranks that share the GPUs: the default job on 4, a file job on 3, and 4 ranks'
            # 4x2^28 (folded, and split) against one rank's 2^30 (bench/dist_sort.py, one run)
            /usr/bin/time -f "wall %e s" timeout 200 $mpi -n 4 python3 -m distsort 2>&1 | tail -7
            dir=$(mktemp -d)
            timeout 100 $mpi -n 3 python3 -m distsort gen "$dir/in.npy" --count 2^28 2>&1 | tail -1
            /usr/bin/time -f "wall %e s" timeout 200 $mpi -n 3 python3 -m distsort sort \
              "$dir/in.npy" -o "$dir/out.npy" --verify 2>&1 | tail -6
            rm -rf "$dir"
            for p in 1 4 4split 1 4 4split; do  # 4split: DISTSORT_SHARED_GPU=split
              mode="fold"; [ "${p%split}" != "$p" ] && mode="split"
              DISTSORT_SHARED_GPU=$mode timeout 200 $mpi -x DISTSORT_SHARED_GPU -n "${p%split}" \
                python3 bench/dist_sort.py --cases u32-4x2^28 --total 2^30 \
                --reps 5 --no-baselines --out "$OUT/shared_p$p" 2>&1 | tail -2
            done
            timeout 100 $mpi -n 1 python3 bench/dist_sort.py --cases u32-4x2^28 --total 2^30 \
              --reps 5 --out "$OUT/shared_base" 2>&1 | tail -1 ;;
    bench) for p in 1 2 4 8; do
             [ "$p" -le "$gpus" ] || continue
             timeout 300 $mpi -n "$p" python3 bench/dist_sort.py --out "$OUT" 2>&1 | tail -6
           done ;;
    filejob) timeout 300 $mpi -n 2 python3 -m distsort compile 2>&1 | tail -1
             timeout 500 python3 bench/file_job.py --count "${FILEJOB_COUNT:-2^30}" \
               --ranks "${FILEJOB_RANKS:-1}" --reps "${FILEJOB_REPS:-3}" --dir /tmp --out "$OUT" \
               ${FILEJOB_ARGS:-} \
               2>&1 | tail -20 ;;
    imports) dir=$(mktemp -d)  # the stacks where two ranks sharing the GPU first import modules a job need not
             python3 -m distsort gen "$dir/in.npy" --count "${FILEJOB_COUNT:-2^26}" --quiet \
               --dtype "${IMPORTS_DTYPE:-uint32}"
             python3 -c "import numpy, sys; numpy.save(sys.argv[1], numpy.arange(numpy.load(
               sys.argv[2], mmap_mode='r').size))" "$dir/v.npy" "$dir/in.npy"  # values: @dir/v.npy
             args=${IMPORTS_ARGS:---verify}
             for mode in fold split; do echo "-- DISTSORT_SHARED_GPU=$mode"
               DISTSORT_SHARED_GPU=$mode $mpi -x DISTSORT_SHARED_GPU -n 2 python3 \
                 bench/history/who_imports.py sort "$dir/in.npy" -o "$dir/out.npy" ${args//@dir/$dir} 2>&1 \
                 | grep -a -A30 "=== import\|after the job" | head -120
             done
             rm -rf "$dir" ;;
    timeline) dir=$(mktemp -d)  # where a one-rank job's wall goes outside its phases, its ends alternated
              python3 -m distsort gen "$dir/in.npy" --count "${FILEJOB_COUNT:-2^30}" --quiet
              timeout 400 python3 bench/history/job_timeline.py "$dir/in.npy" --reps 3 \
                --exits normal,fast --args "${FILEJOB_ARGS:-}" ${TIMELINE_ARGS:-} 2>&1 | tail -24
              rm -rf "$dir" ;;
    ioprobe) timeout 300 python3 bench/io_probe.py --size "${IOPROBE_SIZE:-4GiB}" --dir /tmp \
               --reps 3 --out "$OUT" 2>&1 | tail -30 ;;
    writeprobe) host_memory  # the writer's ways of writing an out-of-core job's output
                timeout 300 python3 bench/write_probe.py --size "${IOPROBE_SIZE:-8GiB}" --dir /tmp \
                  --reps 2 --out "$OUT" 2>&1 | tail -12 ;;
    bytecode) timeout 560 bash bench/bytecode_ab.sh ;;  # a job's start with the packages' bytecode and without
    abfile) dir=$(mktemp -d)  # the file job of the tree in $AB_OLD (.abold) and this one, alternated
            python3 -m distsort gen "$dir/in.npy" --count "${FILEJOB_COUNT:-2^30}" --quiet
            for tree in "${AB_OLD:-.abold}" .; do  # both byte-compiled: PYTHONDONTWRITEBYTECODE
              python3 -m compileall -q "$tree/distsort" > /dev/null  # would tax one tree alone
            done
            launch=""; [ -n "${AB_RANKS:-}" ] && launch="$mpi -n $AB_RANKS"  # else no launcher
            for i in $(seq 0 "${AB_ROUNDS:-3}"); do  # round 0: each tree's warm-up (its kernels)
              for tree in "${AB_OLD:-.abold}" .; do
                sync  # no dirty pages left (they would throttle the output's writes)
                # shellcheck disable=SC2086  # launch: words
                (cd "$tree" && PYTHONPATH=$PWD:/tmp/site /usr/bin/time -f "$tree round $i wall %e s" \
                  $launch python3 -m distsort sort "$dir/in.npy" -o "$dir/out.npy" ${FILEJOB_ARGS:-} \
                  --report "$dir/r.json" 2>&1 | grep -a "wall\|phases\|Error")
              done
            done
            python3 -m distsort check "$dir/in.npy" "$dir/out.npy" 2>&1 | tail -2
            rm -rf "$dir" ;;
    cpuab) for i in 1 2; do  # the CPU backend of the tree in $AB_OLD (.abold) and this one, alternated
             for tree in "${AB_OLD:-.abold}" .; do
               (cd "$tree" && DISTSORT_BACKEND=cpu timeout 280 python3 bench/cpu_sort.py \
                  ${CPUSORT_ARGS:---cases u32 --count 2^28 --ranks 4,8,16 --reps 3} \
                  --out "$OUT/cpuab_$(basename "$tree")_$i" 2>&1 | tail -6 | cut -c1-220 \
                  | sed "s|^|$tree $i: |")
             done
           done ;;
    profile) dir=$(mktemp -d)  # a file job under cProfile (the main thread's calls); with
             # PROFILE_RANKS=R, R ranks under mpirun, each writing profile.RANK.prof (rank 0 shown)
             python3 -m distsort gen "$dir/in.npy" --count "${FILEJOB_COUNT:-2^30}" --quiet
             ranks=${PROFILE_RANKS:-1}
             for i in 1 2; do  # the second run is profiled: page cache and kernels warm
               sync  # no dirty pages left (they would throttle the output's writes)
               if [ "$ranks" = 1 ]; then
                 /usr/bin/time -f "wall %e s" python3 -m cProfile -o "$OUT/profile.0.prof" \
                   -m distsort sort "$dir/in.npy" -o "$dir/out.npy" ${FILEJOB_ARGS:-} 2>&1 | tail -4
               else
                 /usr/bin/time -f "wall %e s" $mpi -x OUT ${DISTSORT_SHARED_GPU:+-x DISTSORT_SHARED_GPU} -n "$ranks" bash -c 'python3 -m cProfile \
                   -o "$OUT/profile.$OMPI_COMM_WORLD_RANK.prof" -m distsort sort "$@"' rank \
                   "$dir/in.npy" -o "$dir/out.npy" ${FILEJOB_ARGS:-} 2>&1 | tail -4
               fi
             done
             python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative')\
               .print_stats(45)" "$OUT/profile.0.prof" | tail -60 | cut -c1-150
             rm -rf "$dir" ;;
    steps) dir=$(mktemp -d)  # one rank's file job step by step; KvikIO beside ours if installed
           python3 -m distsort gen "$dir/in.npy" --count "${FILEJOB_COUNT:-2^30}" --quiet
           timeout 300 python3 bench/file_steps.py "$dir/in.npy" --reps 3 --out "$OUT" 2>&1 | tail -20
           rm -rf "$dir" ;;
    cold) # which kernels a fresh process still compiles after `compile` (names in the cubins),
          # at FILEJOB_RANKS ranks (DISTSORT_SHARED_GPU: how ranks beyond the GPUs share them)
          dir=$(mktemp -d); mkdir -p "$dir/h" "$dir/x" "$dir/c"
          python3 -m distsort gen "$dir/in.npy" --count "${FILEJOB_COUNT:-2^30}" --quiet
          HOME=$dir/h XDG_CACHE_HOME=$dir/x CUPY_CACHE_DIR=$dir/c timeout 200 $mpi -x HOME \
            -x XDG_CACHE_HOME -x CUPY_CACHE_DIR -x DISTSORT_SHARED_GPU -n "${FILEJOB_RANKS:-1}" \
            python3 -m distsort sort "$dir/in.npy" -o "$dir/out.npy" --report "$dir/r.json" \
            2>&1 | tail -4
          python3 -c "import json, sys; [print('rank', r['rank'], {k: round(v, 2) for k, v in \
            r['phases'].items()}) for r in json.load(open(sys.argv[1]))['per_rank']]" "$dir/r.json"
          find "$dir/h" "$dir/x" "$dir/c" -type f | head -40 | while read -r f; do
            python3 -c "import re, sys; names = re.findall(rb'[A-Za-z_][A-Za-z0-9_]{12,}', \
              open(sys.argv[1], 'rb').read()); print(sys.argv[1][-40:], sorted(set(names))[:6])" "$f"
          done
          rm -rf "$dir" ;;
    take) for b in 100 64 256; do  # rows taken in an order (TAKE_R: rows a lane, to compare)
            timeout 120 python3 bench/history/take_rows.py --bytes $b --rows $((2**25 * 100 / b)) \
              --rows-per-lane "${TAKE_R:-4,8}" --out "$OUT" 2>&1 | tail -30
          done ;;
    bench4) timeout 200 $mpi -n 4 python3 bench/dist_sort.py --out "$OUT" 2>&1 | tail -6 ;;
    envab) for i in 1 2; do  # environment settings alternated, all GPUs
             for setting in ${AB_ENV:-DISTSORT_TRANSPORT=auto DISTSORT_TRANSPORT=mpi}; do
               vars=(${setting//,/ }); echo "$setting"
               env "${vars[@]}" timeout 120 $mpi ${vars[@]/#/-x } -n "$gpus" python3 bench/dist_sort.py \
                 --cases "${AB_CASES:-u32-4x2^30,u64-4x2^29}" --no-baselines --reps 5 ${AB_ARGS:-} \
                 --out "$OUT/envab${i}_${setting//[=,]/_}" 2>&1 | grep -a "P=\|Error" | head -4
             done
           done ;;
    trace) for case in ${TRACE_CASES:-u32-4x2^30 u64-4x2^29}; do  # a GPU timeline of one sort
             timeout 100 $mpi -n "$gpus" python3 bench/pipeline_trace.py --case $case --out "$OUT" \
               --profile ${TRACE_ARGS:-} \
               2>&1 | tee "$OUT/trace_${case//^/_}.txt" | grep -a "Error" | head -3
           done ;;
    trees) for i in 1 2; do  # the tree in $AB_OLD (default .abold) and this one, alternated:
             # the local engine, and the whole sort at P=1 and at 3 ranks on the GPUs
             for tree in "${AB_OLD:-.abold}" .; do
               (cd "$tree" && echo "tree $tree" &&
                PYTHONPATH=$PWD:/tmp/site timeout 200 python3 bench/local_sort.py --min-log 28 \
                  --max-log 28 --runs 7 --cases uint32,float32,pairs-u32,argsort-u32 \
                  --out "$OUT/trees${i}_local_$(basename "$tree")" 2>&1 | grep -a "2^28\|Error"
                for p in 1 3; do
                  PYTHONPATH=$PWD:/tmp/site timeout 200 $mpi -n $p python3 bench/dist_sort.py \
                    --cases "${AB_CASES:-u32-4x2^30,u64-4x2^29}" --total 2^29 --no-baselines \
                    --reps 5 --out "$OUT/trees${i}_p${p}_$(basename "$tree")" 2>&1 \
                    | grep -a "P=\|Error" | head -4
                done)
             done
           done ;;
    smallapi) # issue 39's small sizes: host and device time of each way to sort (graphs.py),
              # the public API's layers, and bench/local_sort.py --api from 2^20 to 2^24
              timeout 200 python3 bench/history/small_sorts.py --logs 16,18,20,21,22,23 \
                --dtypes uint32,int32,argsort --json "$OUT/small_sorts.json" 2>&1 | tail -1
              timeout 60 python3 bench/history/api_layers.py --log 20
              timeout 300 python3 bench/local_sort.py --api --min-log 20 --max-log 24 --runs 7 \
                --cases uint32,int32,float32,argsort-u32 --out "$OUT/smallapi" 2>&1 \
                | grep -a "x[0-9]\|Error" ;;
    apiab) for i in 1 2; do  # small calls of the public API, the tree in .abold and this one
             for tree in "${AB_OLD:-.abold}" .; do
               (cd "$tree" && echo "tree $tree" &&
                for dtype in uint32 int32; do
                  PYTHONPATH=$PWD:/tmp/site timeout 100 python3 bench/api_overhead.py --log 20 \
                    --dtype $dtype 2>&1 | grep -a "distsort.sort\|Error"
                done
                PYTHONPATH=$PWD:/tmp/site timeout 200 python3 bench/local_sort.py --api \
                  --min-log 20 --max-log 24 --runs 7 --cases uint32,int32,float32,argsort-u32 \
                  --out "$OUT/apiab${i}_$(basename "$tree")" 2>&1 | grep -a "x[0-9]\|Error")
             done
           done ;;
    ab) for i in 1 2; do  # the tree in $AB_OLD (default ../.old) and this one, alternated
          for tree in "${AB_OLD:-../.old}" .; do
            (cd "$tree" && echo "tree $tree" &&
             PYTHONPATH=$PWD:/tmp/site timeout 120 $mpi -n "$gpus" python3 bench/dist_sort.py \
               --cases "${AB_CASES:-u32-4x2^30,u64-4x2^29}" --no-baselines --reps 5 ${AB_ARGS:-} \
               --out "$OUT/ab${i}_$(basename "$tree")" 2>&1 | grep -a "P=\|Error" | head -4)
          done
        done ;;
    fresh) # a fresh job of 2^20 keys on every GPU, launch included: the tree in $AB_OLD (if
           # set) and this one, alternated; each run's wall and its report's start and init
           dir=$(mktemp -d); python3 -m distsort gen "$dir/in.npy" --count 2^20 --quiet
           for i in 1 2 3; do
             for tree in ${AB_OLD:-} .; do
               (cd "$tree" && /usr/bin/time -f "$tree wall %e s" env PYTHONPATH=$PWD timeout 60 \
                  $mpi -n "$gpus" python3 -m distsort sort "$dir/in.npy" -o "$dir/out.npy" \
                  --quiet --report "$dir/r.json" && python3 -c "import json, sys; d = json.load(
                  open(sys.argv[1])); print(d['transport'], {k: round(v, 3) for k, v in
                  d['phases'].items() if v > 0.01})" "$dir/r.json")
             done
           done
           rm -rf "$dir" ;;
    nccl4) for setting in NCCL_DEBUG=WARN NCCL_MIN_NCHANNELS=32 NCCL_MIN_P2P_NCHANNELS=8 \
             NCCL_P2P_NVL_CHUNKSIZE=2097152 NCCL_BUFFSIZE=16777216 NCCL_P2P_READ_ENABLE=1; do
             echo "$setting"  # the plain all-to-all under one NCCL setting each
             timeout 60 $mpi -x "$setting" -n 4 python3 bench/dist_sort.py --cases u32-4x2^30 \
               --exchange-only --reps 5 2>&1 | tail -1
           done ;;
    sample4) timeout 100 $mpi -n 4 python3 bench/history/sample.py 2>&1 | tail -6 ;;
    ce) for k in 1 2; do  # an all-to-all by the copy engines (CUDA IPC) against NCCL's
          timeout 120 $mpi -n "$gpus" python3 bench/history/ce_probe.py --pieces $k --out "$OUT" 2>&1 | tail -40
        done ;;
    a2a) for run in 1 2; do  # the plain all-to-all: PyTorch's (ANCHORS.md) and ours, same bytes
           timeout 100 $mpi -n "$gpus" python3 bench/history/alltoall_torch.py 2>&1 | tail -1
           timeout 100 $mpi -n "$gpus" python3 bench/dist_sort.py --cases u32-4x2^30 --per-rank 2^30 \
             --exchange-only --reps 5 2>&1 | tail -1
         done ;;
    passprof) ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)  # why a pass waits
              timeout 200 "$ncu" --clock-control none -k regex:radix_onesweep --launch-skip 4 -c 2 \
                --section WarpStateStats --section Occupancy --section SpeedOfLight \
                --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
                python3 -c "import cupy as cp; from distsort.local.radix import RadixEngine as R
e = R(min_n=0); [e.sort(cp.random.randint(0, 2**32, 1 << 28, dtype=cp.uint32)) for _ in (0, 1)]" \
                >"$OUT/passprof.txt" 2>&1
              grep -aE "radix_onesweep|Duration|stalled|Warp Cycles|Eligible|Achieved Occ|Throughput" \
                "$OUT/passprof.txt" | awk '$NF != 0' | head -70 ;;
    codedprof) ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)  # each pass's
               # time, uint32 against int32 and float32 keys (the coded build's first and last)
               timeout 200 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
                 -k regex:radix_ python3 -c "import cupy as cp, numpy as np
from distsort.keys import NumericCodec as C; from distsort.local.radix import RadixEngine as R
e, x = R(min_n=0), cp.random.randint(0, 2**31, 1 << ${CODED_LOG:-20}, dtype=cp.int64) - 2**30
for t in (np.uint32, np.int32, np.float32): [e.sort(x.astype(t), codec=C(np.dtype(t))) for _ in (0, 1)]
" >"$OUT/codedprof.txt" 2>&1
               grep -aoE "radix_[a-z]+<[a-z ]+,|radix_scan|gpu__time_duration.sum +[a-z]+ +[0-9.]+" \
                 "$OUT/codedprof.txt" | awk '{print $NF}' | paste -sd' ' ;;
    ipcalone) for p in 2 4; do  # the copy-engine transport alone, its event waits skipped
                [ "$p" -le "$gpus" ] && timeout 100 $mpi -n $p python3 bench/history/ipc_transport.py 2>&1 \
                  | grep -a "P=\|Error"
              done ;;
    ipctests) timeout 200 $mpi -n "$gpus" python3 -m pytest -q -x -m gpu -p no:cacheprovider \
                --with-mpi tests/job/test_gpu.py -k ipc 2>&1 | grep -aE "passed|failed|Error|error|assert" \
                | tail -20 ;;
    partition) timeout 150 python3 bench/history/partition.py 2>&1 | tail -8 ;;
    tune) timeout 200 python3 bench/local_sort.py --tune --out "$OUT" 2>&1 | grep tune ;;
    cub4) DISTSORT_ENGINE=cub timeout 100 $mpi -n 4 python3 bench/dist_sort.py --cases \
            u32-4x2^30,u64-4x2^29 --no-baselines --out "$OUT/cub" 2>&1 | tail -3 ;;
    pinned) timeout 100 python3 bench/history/pinned.py --size 5GB --out "$OUT" 2>&1 | tail -14 ;;
    pcie) for p in 1 2 4 8; do  # copies both ways on every GPU at once (the runs phase)
            [ "$p" -le "$gpus" ] && timeout 60 $mpi -n "$p" python3 bench/history/pcie.py 2>&1 | tail -1
          done ;;
    external) host_memory
              timeout 150 python3 bench/external.py --total 8GB --budget-fraction 8 --reps 3 \
                --out "$OUT" 2>&1 | tail -14 ;;
    external4) host_memory
               vmstat 5 >"$OUT/vmstat.txt" 2>&1 & vmstat=$!  # CPU steal, paging, during the run
               timeout 540 $mpi ${DISTSORT_PINNED:+-x DISTSORT_PINNED} -n 4 python3 \
                 bench/external.py --total "${EXTERNAL_TOTAL:-200GB}" --device-memory \
                 "${EXTERNAL_BUDGETS:-default}" --reps "${EXTERNAL_REPS:-1}" --out "$OUT" 2>&1 \
                 | tail -24
               kill $vmstat; host_memory ;;
    service) for r in ${SERVICE_RANKS:-1 2}; do  # bench/service.py: a warm service against fresh mpiruns
               timeout 280 python3 bench/service.py --ranks "$r" --logs 20,24,28 --reps 3 \
                 --small 100 --out "$OUT/service_p$r" ${SERVICE_ARGS:-} 2>&1 | tail -6
             done ;;
    fuzz) for n in 1 2 3; do  # bench/fuzz.py on the GPUs: API calls at 1-3 ranks (split where
            # they share a GPU), then file jobs at 1-4 (FUZZ_SEED, FUZZ_CASES, FUZZ_FILES)
            DISTSORT_SHARED_GPU=split timeout 400 $mpi -x DISTSORT_SHARED_GPU -n "$n" python3 \
              bench/fuzz.py api "$((${FUZZ_SEED:-1} + n))" "${FUZZ_CASES:-100}" --backend gpu \
              2>&1 | tee "$OUT/fuzz_api_p$n.log" | tail -4
          done
          timeout 500 python3 bench/fuzz.py files "${FUZZ_SEED:-1}" "${FUZZ_FILES:-30}" \
            --backend gpu 2>&1 | tee "$OUT/fuzz_files.log" | tail -4 ;;
    examples) timeout 60 $mpi -n 2 python3 examples/library_sort.py 2>&1 | tail -4
              timeout 60 $mpi -n 2 launch/distsort-run --verbose python3 -m distsort info \
                2>&1 | tail -12 ;;
    scaling) for p in 1 2 4 8; do  # weak: 2^30 per GPU; strong: 8 x 2^30 in all
            [ "$p" -le "$gpus" ] || continue
            timeout 200 $mpi -n "$p" python3 bench/dist_sort.py --per-rank 2^30 \
              --cases u32-4x2^30 --no-baselines --reps 3 --out "$OUT" 2>&1 | tail -3
            [ "$p" -ge 2 ] && timeout 200 $mpi -n "$p" python3 bench/dist_sort.py --total 8*2^30 \
              --cases u32-4x2^30 --no-baselines --reps 3 --out "$OUT" 2>&1 | tail -3
          done ;;
  esac
done 2>&1 | tee "$OUT/run.log"
(cd "$OUT" && tar czf results.tgz --exclude results.tgz ./*)  # one file: the fetch takes at most 8
