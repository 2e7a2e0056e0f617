#!/usr/bin/env bash
# A one-rank job's wall with and without the bytecode `distsort compile` writes for the packages
# a job imports (distsort/bytecode.py), alternated: run first on a machine whose packages have
# none (count printed), it compiles, then hides the __pycache__ folders compile made
# (renamed) for the "without" rounds. Cases: `mpirun -n 1 python -m distsort info`, `sort` of a
# 4 GiB .npy in memory, of an 8 GiB one with --device-memory 2GiB (out of core); page cache
# warm, dirty pages written out before each. Usage (repo root, GPU machine):
#   BYTECODE_ROUNDS=3 bash bench/bytecode_ab.sh
set -uo pipefail
mpi="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE -x PYTHONPATH -n 1"
dir=$(mktemp -d /tmp/bytecode_ab.XXXX)
site=$(python3 -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')
echo "site-packages $site: $(find "$site" -name '*.pyc' | wc -l) .pyc files; PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-}"
find "$site" -type d -name __pycache__ | sort > "$dir/before.txt"
/usr/bin/time -f "compile %e s" $mpi python3 -m distsort compile 2>&1 | tail -3
find "$site" -type d -name __pycache__ | sort > "$dir/after.txt"
comm -13 "$dir/before.txt" "$dir/after.txt" > "$dir/made.txt"
echo "compile made $(wc -l < "$dir/made.txt") __pycache__ folders ($(find "$site" -name '*.pyc' | wc -l) .pyc files now)"
python3 -m distsort gen "$dir/in4.npy" --count 2^30 --quiet
python3 -m distsort gen "$dir/in8.npy" --count 2^31 --quiet
toggle() {  # off: hide the folders compile made; on: put them back
  while read -r d; do
    if [ "$1" = off ]; then mv "$d" "$d.off"; else mv "$d.off" "$d"; fi
  done < "$dir/made.txt"
}
timed() {  # label, command...: wall seconds of the command
  local label=$1; shift
  rm -f "$dir/out.npy"; sync
  local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>"$dir/err.txt" || { echo "$label failed"; tail -3 "$dir/err.txt"; }
  t1=$(date +%s.%N); awk -v l="$label" -v a="$t0" -v b="$t1" 'BEGIN { printf "%-28s %.3f s\n", l, b - a }'
}
for round in $(seq "${BYTECODE_ROUNDS:-3}"); do
  for way in without with; do
    [ $way = without ] && toggle off
    timed "$round $way info" $mpi python3 -m distsort info
    timed "$round $way sort 4GiB" $mpi python3 -m distsort sort "$dir/in4.npy" -o "$dir/out.npy" --quiet
    timed "$round $way sort 8GiB ooc" $mpi python3 -m distsort sort "$dir/in8.npy" -o "$dir/out.npy" --quiet --device-memory 2GiB
    [ $way = without ] && toggle on
  done
done
rm -rf "$dir"
