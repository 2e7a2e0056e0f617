#!/usr/bin/env bash
# Run the main job: 4 MPI ranks sort the default data set (on GPUs if every rank has one, else CPUs),
# validate it and print a summary. Arguments go to `python -m distsort` (e.g. --count 2^30).
#
# Makes .venv on first use. Where an MPI stack is already importable (mpi4py; CuPy on GPU machines)
# the venv sees the system packages and nothing is reinstalled, so it works offline; elsewhere it
# installs distsort with mpi4py and the MPICH wheel from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  if python3 -c "import mpi4py.MPI" 2>/dev/null; then
    python3 -m venv --system-site-packages "$venv"
    "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  else
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q -e ".[mpich]"
  fi
fi
mpirun=$venv/bin/mpiexec
[ -x "$mpirun" ] || mpirun=$(command -v mpirun)
flags=()
if "$mpirun" --version 2>&1 | grep -q "Open MPI"; then
  flags+=(--oversubscribe)
  [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
fi
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
exec "$mpirun" "${flags[@]}" -n "${DISTSORT_RANKS:-4}" "$venv/bin/python" -m distsort "$@"
