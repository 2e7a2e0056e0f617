#!/usr/bin/env bash
# Run the main job: MPI ranks sort the default data set (on GPUs where there are any, else CPUs),
# validate it and print a summary. One rank per visible GPU, 4 on CPUs, unless DISTSORT_RANKS
# says how many (ranks may outnumber GPUs: they share them). Arguments go to
# `python -m distsort` (e.g. --count 2^30).
#
# Where an MPI stack is already importable (mpi4py and NumPy; CuPy on GPU machines) it is used as
# it is, with nothing installed, so it works offline; elsewhere it makes .venv on first use with
# distsort, mpi4py and the MPICH wheel from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
if python3 -c "import mpi4py.MPI, numpy" 2>/dev/null; then
  # an MPI stack (and CuPy, on GPU machines) is importable already: use it as it is
  python=$(command -v python3)  # absolute: Open MPI's mpirun may put its own bin/ first on PATH
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  mpirun=$(command -v mpirun || command -v mpiexec) || {
    echo "quickstart: python3 imports mpi4py, but neither mpirun nor mpiexec is on PATH: add" \
      "your MPI's bin folder (e.g. ~/.local/bin, or load its module)" >&2
    exit 2
  }
else
  if [ ! -e .venv/.distsort-installed ]; then  # none yet, or an install cut short: again
    rm -rf .venv
    python3 -m venv .venv
    .venv/bin/python -m pip install -q -e ".[mpich]"
    touch .venv/.distsort-installed
    installed=1  # compiled below, on CPUs too: the C kernels, their timing, the bytecode
  fi
  python=.venv/bin/python
  mpirun=.venv/bin/mpiexec
  echo "quickstart: distsort is in .venv; to use it in this shell: source .venv/bin/activate"
fi
# the launcher pipes the ranks' stderr: tell rank 0 that a person is watching this terminal
[ -t 2 ] && export DISTSORT_PROGRESS="${DISTSORT_PROGRESS:-1}"
flags=()
if "$mpirun" --version 2>&1 | grep -q "Open MPI"; then
  flags+=(--oversubscribe -x PYTHONPATH -x NCCL_NVLS_ENABLE)
  [ -n "${DISTSORT_PROGRESS:-}" ] && flags+=(-x DISTSORT_PROGRESS)
  [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
fi
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
gpus=$("$python" -c "import cupy; print(cupy.cuda.runtime.getDeviceCount())" 2>/dev/null) || gpus=0
ranks_set=${DISTSORT_RANKS:-}
ranks_set=${ranks_set//[[:space:]]/}
if [ -n "$ranks_set" ] && ! [[ "$ranks_set" =~ ^[1-9][0-9]*$ ]]; then
  echo "quickstart: DISTSORT_RANKS='$DISTSORT_RANKS': give a whole number of ranks from 1 on" >&2
  exit 2
elif [ -n "$ranks_set" ]; then
  ranks=$ranks_set why="DISTSORT_RANKS=$ranks"
elif [ "$gpus" -gt 0 ]; then
  ranks=$gpus why="one per visible GPU; DISTSORT_RANKS=N to choose"
else
  ranks=4 why="no GPU visible: on the CPUs; DISTSORT_RANKS=N to choose"
fi
echo "quickstart: $ranks rank(s) ($why), $gpus GPU(s)"
# the CUDA kernels, compiled once into distsort's kernel cache (quick where they are there): on
# the job's ranks, at least 2, so that those of jobs on several ranks, laid out as this one, are
# there too; on CPUs once, when .venv is made (each rank of the job would build and time the C
# kernels, and with PYTHONDONTWRITEBYTECODE=1 compile every module, in every run)
if [ "$gpus" -gt 0 ] || [ -n "${installed:-}" ]; then
  "$mpirun" "${flags[@]}" -n $((ranks > 2 ? ranks : 2)) "$python" -m distsort compile
fi
exec "$mpirun" "${flags[@]}" -n "$ranks" "$python" -m distsort "$@"
