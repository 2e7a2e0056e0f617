#!/usr/bin/env bash
# Entrypoint of the distsort image: runs its arguments (default: the image's CMD) so that each
# MPI rank drives its own GPU.
#
#   docker run --gpus all IMAGE                        # python -m distsort: demo sort on all GPUs
#   docker run --gpus all IMAGE python -m distsort info
#   docker run --gpus all IMAGE mpirun -n 4 distsort-run python -m distsort sort in.npy -o out.npy
#
# * NCCL_NVLS_ENABLE stays 0 unless the caller set it (docker run -e NCCL_NVLS_ENABLE=1).
# * As a Kubernetes MPIJob launcher (K_MPI_JOB_ROLE=launcher) it first waits until the workers
#   named in the hostfile resolve, so mpirun does not fail on DNS records not yet there.
# * The command runs under distsort-run, which binds one GPU per local rank; a launcher such as
#   mpirun is started unbound (the ranks it starts bind themselves through distsort-run).
set -euo pipefail

export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"

# wait_for_hosts HOSTFILE: wait (bounded) until every host in an MPI hostfile resolves.
wait_for_hosts() {
  local hostfile=$1 tries=${DISTSORT_DNS_TRIES:-60} host i
  [[ -r $hostfile ]] || return 0
  while read -r host _; do
    host=${host%%:*} # "host slots=4" (Open MPI) or "host:4" (MPICH)
    [[ -z $host || $host == \#* ]] && continue
    for ((i = 1; ; i++)); do
      getent hosts "$host" >/dev/null && break
      if ((i >= tries)); then
        echo "distsort-entrypoint: $host does not resolve yet; going on" >&2
        break
      fi
      sleep 2
    done
  done <"$hostfile"
}

if [[ ${K_MPI_JOB_ROLE:-} == launcher ]]; then
  wait_for_hosts "${DISTSORT_HOSTFILE:-/etc/mpi/hostfile}"
fi

exec "${DISTSORT_RUN:-distsort-run}" "$@"
