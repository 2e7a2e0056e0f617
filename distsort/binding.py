"""Which GPU a rank drives, and the environment a rank starts with.

Each rank drives the GPU numbered (its rank among the processes of its node) modulo (the GPUs it
can see). The local rank comes from the launcher's environment. Everything here is a pure function
of an environment mapping (the GPU count is passed in), so the launch wrapper (launch/distsort-run),
the container entrypoint and the runtime all agree, and the tests need neither a GPU nor MPI.

This module imports nothing beyond the standard library: launch/distsort-run loads it by file path
before any MPI or CUDA library is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: Variables that carry a process's rank among the processes of its node, in the order they are
#: trusted. The MPI launchers' own come before Slurm's: under `mpirun` inside an sbatch job every
#: process inherits the batch step's SLURM_LOCALID=0.
LOCAL_RANK_VARS: tuple[str, ...] = (
    "DISTSORT_LOCAL_RANK",  # the user's override
    "OMPI_COMM_WORLD_LOCAL_RANK",  # Open MPI mpirun
    "MPI_LOCALRANKID",  # MPICH Hydra, Intel MPI
    "MV2_COMM_WORLD_LOCAL_RANK",  # MVAPICH2
    "PMIX_LOCAL_RANK",  # PMIx launchers (PRRTE)
    "PALS_LOCAL_RANKID",  # HPE Cray PALS
    "FLUX_TASK_LOCAL_ID",  # Flux
    "JSM_NAMESPACE_LOCAL_RANK",  # IBM jsrun
    "SLURM_LOCALID",  # Slurm srun
)

#: NCCL settings a rank starts with unless the user has set them. NVLink SHARP (NVLS) multicast is
#: off: it needs fabric-manager/IMEX support that many nodes and containers lack, and an all-to-all
#: does not use it. A user may still set NCCL_NVLS_ENABLE=1; we never set it to 1.
NCCL_DEFAULTS: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_DEBUG": "WARN",
}

#: Where a process was started by some launcher (or in a batch job), the variables that say so:
#: without any, the process is an MPI singleton, alone in its job.
LAUNCHED_VARS: tuple[str, ...] = LOCAL_RANK_VARS + (
    "OMPI_COMM_WORLD_SIZE", "OMPI_MCA_orte_ess_num_procs", "PMI_RANK", "PMI_SIZE", "PMI_FD",
    "PMIX_RANK", "PMIX_NAMESPACE", "SLURM_PROCID", "SLURM_JOB_ID", "ALPS_APP_PE",
)

#: Where the user chose how Open MPI's messages go, or gave it files of settings: their choice
#: stands (a variable set here would override those files).
USER_MPI_CHOICES: tuple[str, ...] = (
    "OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mca_base_param_files",
    "OMPI_MCA_mca_base_param_file_prefix",
)

#: The Open MPI settings of ranks that all run on one node: messages through shared memory by
#: the ob1 layer, whose start takes 0.03 s where UCX's takes 0.2 s; large messages copied
#: through the shared segment, not read out of the sender by the kernel (CMA), which
#: containers may refuse mid-job (distsort's own rows move by transport/cma.py or NCCL).
ONE_NODE_OPEN_MPI: dict[str, str] = {
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",  # Open MPI 4
    "OMPI_MCA_smsc": "^cma",  # Open MPI 5 (each ignores the other's names)
}
#: A process alone (an MPI singleton) also starts no daemon of Open MPI's (0.23 s to start
#: MPI, not 0.33): the daemon serves only processes that spawn others, and distsort spawns none.
SINGLETON_OPEN_MPI: dict[str, str] = {**ONE_NODE_OPEN_MPI, "OMPI_MCA_ess_singleton_isolated": "1"}


#: How a rank is bound: narrow CUDA_VISIBLE_DEVICES to its GPU, name the GPU in DISTSORT_DEVICE
#: (every GPU stays visible; distsort's runtime uses that index), or leave everything as it is.
BIND_MODES: tuple[str, ...] = ("visible", "device", "none")

#: Programs that start ranks rather than being one: the wrapper does not bind them, or every rank
#: they start would inherit one GPU.
LAUNCHERS: frozenset[str] = frozenset(
    {
        "mpirun",
        "mpiexec",
        "mpiexec.hydra",
        "mpiexec.gforker",
        "orterun",
        "prterun",
        "prun",
        "srun",
        "aprun",
        "jsrun",
        "flux",
        "sshd",
    }
)

_NO_DEVICE_MARKERS = ("-1", "NoDevFiles")  # CUDA stops at "-1"; Slurm writes NoDevFiles
_PROC_NVIDIA_GPUS = "/proc/driver/nvidia/gpus"


def _parse_index(name: str, value: str) -> int:
    try:
        index = int(value)
    except ValueError:
        index = -1
    if index < 0:
        raise ValueError(f"{name}={value!r} is not a non-negative integer; unset it or fix it")
    return index


def local_rank_from_env(env: Mapping[str, str]) -> int | None:
    """This process's rank among the processes of its node, or None when no launcher says.

    Raises ValueError when the first variable that is set does not hold a non-negative integer.
    """
    for name in LOCAL_RANK_VARS:
        value = env.get(name, "").strip()
        if value:
            return _parse_index(name, value)
    return None


def device_for_rank(local_rank: int, device_count: int) -> int:
    """The GPU (0-based, among those the process sees) that local rank local_rank drives."""
    if device_count < 1:
        raise ValueError(f"no GPU to bind local rank {local_rank} to (device count {device_count})")
    if local_rank < 0:
        raise ValueError(f"local rank must be non-negative, got {local_rank}")
    return local_rank % device_count


def visible_device_list(env: Mapping[str, str], device_count: int | None = None) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices or UUIDs).

    CUDA_VISIBLE_DEVICES, where set (even empty), is what a scheduler or the user allowed;
    otherwise all device_count GPUs of the node.
    """
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(i) for i in range(device_count or 0)]
    devices = []
    for entry in visible.split(","):
        entry = entry.strip()
        if not entry or entry in _NO_DEVICE_MARKERS:
            break
        devices.append(entry)
    return devices


def visible_devices_for(env: Mapping[str, str], device_count: int | None = None) -> str | None:
    """The CUDA_VISIBLE_DEVICES value that leaves this rank its one GPU, or None to leave it be.

    None when no launcher gives a local rank or no GPU is known. device_count (the node's GPUs)
    is only needed where CUDA_VISIBLE_DEVICES is unset. Applying it twice changes nothing.
    """
    local_rank = local_rank_from_env(env)
    devices = visible_device_list(env, device_count)
    if local_rank is None or not devices:
        return None
    return devices[device_for_rank(local_rank, len(devices))]


def device_from_env(env: Mapping[str, str], device_count: int) -> int | None:
    """The device index (among the device_count this process sees) for the runtime to use.

    DISTSORT_DEVICE, where set (by `distsort-run --bind device` or the user), wins; otherwise the
    local rank modulo device_count. None when neither says, or no GPU is seen.
    """
    explicit = env.get("DISTSORT_DEVICE", "").strip()
    if explicit:
        index = _parse_index("DISTSORT_DEVICE", explicit)
        if index >= device_count:
            raise ValueError(f"DISTSORT_DEVICE={index} but this process sees {device_count} GPU(s)")
        return index
    local_rank = local_rank_from_env(env)
    if local_rank is None or device_count < 1:
        return None
    return device_for_rank(local_rank, device_count)


def detect_device_count(env: Mapping[str, str], proc_dir: str = _PROC_NVIDIA_GPUS) -> int | None:
    """The node's NVIDIA GPUs without loading CUDA, or None where nothing says.

    DISTSORT_DEVICE_COUNT first; then NVIDIA_VISIBLE_DEVICES where a container runtime or the
    Kubernetes device plugin lists the GPUs it gave the container (they appear as 0..n-1); then
    the driver's /proc entries, one a GPU.
    """
    explicit = env.get("DISTSORT_DEVICE_COUNT", "").strip()
    if explicit:
        return _parse_index("DISTSORT_DEVICE_COUNT", explicit)
    given = env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if given in ("none", "void"):
        return 0
    if given and given != "all":
        return len([d for d in given.split(",") if d.strip()])
    try:
        return len(os.listdir(proc_dir))
    except OSError:
        return None


def is_launcher(program: str) -> bool:
    """Whether program (a command's first word) starts ranks rather than being one."""
    return os.path.basename(program) in LAUNCHERS


def launch_env(
    env: Mapping[str, str], mode: str = "visible", device_count: int | None = None
) -> dict[str, str]:
    """The variables to set (on top of env) before starting one rank: NCCL defaults the user has
    not set, and the GPU binding for mode (one of BIND_MODES)."""
    if mode not in BIND_MODES:
        raise ValueError(f"bind mode {mode!r} is not one of {', '.join(BIND_MODES)}")
    updates = {name: value for name, value in NCCL_DEFAULTS.items() if name not in env}
    if mode == "visible":
        visible = visible_devices_for(env, device_count)
        if visible is not None:
            updates["CUDA_VISIBLE_DEVICES"] = visible
    elif mode == "device" and "DISTSORT_DEVICE" not in env:
        local_rank = local_rank_from_env(env)
        devices = visible_device_list(env, device_count)
        if local_rank is not None and devices:
            updates["DISTSORT_DEVICE"] = str(device_for_rank(local_rank, len(devices)))
    return updates


def bus_id(props: Mapping) -> str:
    """A GPU's PCI address from its CUDA device properties, e.g. '0000:1b:00.0': the same in
    every process, whatever index CUDA_VISIBLE_DEVICES gives the GPU there."""
    return f"{props['pciDomainID']:04x}:{props['pciBusID']:02x}:{props['pciDeviceID']:02x}.0"


def mpi_defaults(env: Mapping[str, str], home: str | None = None) -> dict[str, str]:
    """The variables to set before MPI starts in a rank of distsort's command line: Open MPI's
    one-node settings where mpirun started every rank on this node from one command (ranks of
    one job must all take the same layer, or MPI_Init fails), its singleton settings where no
    launcher started this process, unless the user chose how messages go (USER_MPI_CHOICES, or
    a pml or btl in ~/.openmpi/mca-params.conf: home). Across nodes, where in doubt, and under
    other MPIs (which ignore these names), Open MPI's and the user's choices stand."""
    if any(name.startswith(USER_MPI_CHOICES) for name in env) or _layer_in_params(home):
        return {}
    size = env.get("OMPI_COMM_WORLD_SIZE")
    if not any(name in env for name in LAUNCHED_VARS):
        chosen = SINGLETON_OPEN_MPI
    elif (size is not None and size == env.get("OMPI_COMM_WORLD_LOCAL_SIZE")
          and env.get("OMPI_NUM_APP_CTX", "1") == "1"):
        chosen = ONE_NODE_OPEN_MPI
    else:
        return {}
    return {name: value for name, value in chosen.items() if name not in env}


#: Threads a rank's BLAS library may start, unless the user set them: OpenBLAS (NumPy's wheels)
#: starts a thread per core as NumPy is imported, and distsort calls no BLAS routine. Those
#: threads cost each rank 0.1 s of CPU time as it starts: four ranks on two cores waited 0.1-0.2
#: s longer for them (bench/RESULTS.md, session 53).
BLAS_DEFAULTS: dict[str, str] = {"OPENBLAS_NUM_THREADS": "1"}


def command_line_defaults(env: Mapping[str, str], home: str | None = None) -> dict[str, str]:
    """The variables distsort's command line sets in a rank before NumPy and MPI start:
    mpi_defaults and BLAS_DEFAULTS, each only where env does not set it."""
    blas = {name: value for name, value in BLAS_DEFAULTS.items() if name not in env}
    return {**mpi_defaults(env, home), **blas}


def _layer_in_params(home: str | None) -> bool:
    """Whether the user's Open MPI parameter file chooses a messaging layer (pml, btl); an
    unreadable file counts as one (nothing is overridden)."""
    path = os.path.join(home or os.path.expanduser("~"), ".openmpi", "mca-params.conf")
    try:
        with open(path, "rb") as f:
            return any(line.split(b"=")[0].strip() in (b"pml", b"btl") for line in f)
    except FileNotFoundError:
        return False
    except OSError:
        return True


def runs_command_line(orig_argv: list[str]) -> bool:
    """Whether an interpreter started with orig_argv (sys.orig_argv) runs distsort's command
    line: `python -m distsort ...` (or distsort.cli), or the `distsort` script."""
    args = iter(orig_argv[1:])
    for arg in args:
        if arg.startswith("--"):  # the long options: one takes a value
            if arg == "--check-hash-based-pycs":
                next(args, None)
            continue
        if arg == "-" or not arg.startswith("-"):  # the program: stdin, or a script
            return arg != "-" and os.path.basename(arg) == "distsort"
        for i, letter in enumerate(arg[1:], 1):  # flags, maybe several in one word (-Im)
            if letter in "cmXW":  # its value: the rest of the word, else the next word
                value = arg[i + 1:] or next(args, "")
                if letter in "cm":
                    return letter == "m" and value in ("distsort", "distsort.cli")
                break
    return False
