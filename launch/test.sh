#!/usr/bin/env bash
# Pass the tests: a fresh virtual environment with distsort, its test tools and the MPICH wheel,
# then lint (code, Dockerfile, shell scripts), the unit tests, and the MPI tests at 1, 2, 3 and 4 ranks (CPU backend; GPU tests are
# skipped where no GPU is found).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${DISTSORT_TEST_VENV:-.venv-test}
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e ".[test,mpich]"
export PATH="$PWD/$venv/bin:$PATH" DISTSORT_BACKEND=cpu
# every test's temporary files (pytest's, and each rank's) in one folder, gone when this ends
TMPDIR=$(mktemp -d)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
ruff check distsort tests bench examples launch
bash launch/lint.sh  # the Dockerfile (hadolint), shell scripts (shellcheck), launch/distsort-run
python -m pytest -q -p no:cacheprovider tests
# Rank 0 reports (without pytest-mpi's banner); the other ranks' output is kept and shown only
# where the run fails, so that the log does not hold every rank's copy of the same lines.
# shellcheck disable=SC2016  # expanded by each rank's own shell
quiet_ranks='r=${PMI_RANK:-0}; if [ "$r" = 0 ]; then exec "$@"; fi; exec "$@" >"$TMPDIR/rank$r.log" 2>&1'
for ranks in 1 2 3 4; do
  echo "== MPI tests on $ranks rank(s)"
  if ! mpiexec -n "$ranks" bash -c "$quiet_ranks" rank python -m pytest -q -p no:cacheprovider \
      --with-mpi -m mpi tests | awk '/MPI Information/ {skip = 1} !skip; /^mpi4py config/ {skip = 0}'
  then
    tail -n 30 "$TMPDIR"/rank*.log 2>/dev/null
    exit 1
  fi
done
