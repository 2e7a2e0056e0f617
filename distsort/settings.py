"""Every DISTSORT_* environment variable: the one table, and the one reader.

The package reads them only through value(), at the moment it needs them (a runtime is made, a
sort starts), never at import: a test sets one with monkeypatch.setenv. Launchers read theirs
themselves (`launch/`, and binding.py, which distsort-run loads without the package).
docs/settings.md is this table for people; tests/test_settings.py keeps the table, that page
and the code in step.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .binding import BIND_MODES
from .errors import DistsortError

USERS, CLUSTERS, BENCHMARKS, TESTS = "users", "clusters", "benchmarks", "tests"


@dataclass(frozen=True)
class Setting:
    default: str  # as it would be written in the environment; "" for none
    kind: type  # str, int, float or bool (written 0 or 1)
    who: str  # whom it is for: USERS ... TESTS
    read_by: str  # the module or script that reads it
    what: str
    choices: tuple = ()  # the words a str setting takes ("" too where its default is "")
    least: float = 0  # the smallest number a numeric setting takes


SETTINGS: dict[str, Setting] = {
    "DISTSORT_BACKEND": Setting("auto", str, USERS, "runtime.py", "gpu, cpu or auto (GPUs where "
                                "every rank sees one); the commands' --backend wins",
                                choices=("auto", "cpu", "gpu")),
    "DISTSORT_TRANSPORT": Setting("auto", str, USERS, "runtime.py", "how GPUs exchange rows: auto, "
                                  "nccl or ipc (transport/choice.py); ranks that share a GPU "
                                  "always use device copies", choices=("auto", "ipc", "nccl")),
    "DISTSORT_TIMEOUT": Setting("1800", float, USERS, "watchdog.py", "seconds one phase may take "
                                "before the job is aborted on every rank; 0: no limit"),
    "DISTSORT_PROGRESS": Setting("0", bool, USERS, "progress.py", "1: progress bars on rank 0 "
                                 "even where stderr is no terminal (launch/quickstart.sh sets it "
                                 "when its own terminal is one); --progress and --quiet win"),
    "DISTSORT_RANKS": Setting("", int, USERS, "launch/quickstart.sh", "ranks the quickstart "
                              "starts (default: one per visible GPU, 4 without GPUs)", least=1),
    "DISTSORT_KERNEL_CACHE": Setting("", str, CLUSTERS, "cuda_source.py", "folder of the compiled "
                                     "kernels (default: distsort/kernels in the package); "
                                     "`python -m distsort compile` fills it"),
    "DISTSORT_DEVICE": Setting("", int, CLUSTERS, "binding.py", "the GPU (index among those the "
                               "process sees) this rank uses; distsort-run --bind device sets "
                               "it (default: local rank mod GPUs)"),
    "DISTSORT_DEVICE_COUNT": Setting("", int, CLUSTERS, "binding.py", "GPUs on the node, where "
                                     "neither NVIDIA_VISIBLE_DEVICES nor /proc says"),
    "DISTSORT_LOCAL_RANK": Setting("", int, CLUSTERS, "binding.py", "this process's rank on its "
                                   "node, over what the launcher says"),
    "DISTSORT_BIND": Setting("visible", str, CLUSTERS, "launch/distsort-run", "how distsort-run "
                             "binds a rank to its GPU: visible, device or none (--bind)",
                             choices=BIND_MODES),
    "DISTSORT_DRY_RUN": Setting("0", bool, CLUSTERS, "launch/distsort-run", "1: distsort-run "
                                "prints what it would set and run, and runs nothing"),
    "DISTSORT_RUN_VERBOSE": Setting("0", bool, CLUSTERS, "launch/distsort-run", "1: "
                                    "distsort-run says on stderr what each rank was bound to"),
    "DISTSORT_RUN": Setting("distsort-run", str, CLUSTERS, "docker/entrypoint.sh, launch/slurm",
                            "path of distsort-run"),
    "DISTSORT_HOSTFILE": Setting("/etc/mpi/hostfile", str, CLUSTERS, "docker/entrypoint.sh",
                                 "the MPI hostfile whose hosts a Kubernetes MPIJob launcher "
                                 "waits to resolve"),
    "DISTSORT_DNS_TRIES": Setting("60", int, CLUSTERS, "docker/entrypoint.sh", "tries (2 s "
                                  "apart) to resolve each host of that hostfile"),
    "DISTSORT_IMAGE": Setting("", str, CLUSTERS, "launch/slurm/distsort.sbatch", "run every "
                              "Slurm task in this container image (pyxis)"),
    "DISTSORT_MOUNTS": Setting("", str, CLUSTERS, "launch/slurm/distsort.sbatch", "pyxis "
                               "--container-mounts (default: the submit directory)"),
    "DISTSORT_PYTHON": Setting("python3", str, CLUSTERS, "launch/slurm/distsort.sbatch", "the "
                               "Python with distsort installed"),
    "DISTSORT_ENGINE": Setting("", str, BENCHMARKS, "runtime.py", "the local sort engine: radix, "
                               "cub or numpy (default: the backend's fastest)",
                               choices=("", "radix", "cub", "numpy")),
    "DISTSORT_PINNED": Setting("register", str, BENCHMARKS, "memory.py", "how page-locked host "
                               "memory is made: register (cudaHostRegister) or alloc "
                               "(cudaHostAlloc); bench/history/pinned.py compares them",
                               choices=("register", "alloc")),
    "DISTSORT_MPI_CHUNK_BYTES": Setting("268435456", int, BENCHMARKS, "transport/mpi.py", "bytes "
                                        "of one MPI message of a host exchange (64 at least)",
                                        least=64),
    "DISTSORT_IPC_MIN_BYTES": Setting("16777216", int, BENCHMARKS, "transport/ipc.py", "exchanges "
                                      "of fewer bytes (the most any rank sends) go over NCCL or "
                                      "MPI, not CUDA IPC copies"),
    "DISTSORT_TOKEN": Setting("", str, USERS, "service/wire.py", "the shared secret of a service "
                              "on TCP (serve --tcp) and of its clients, where no --token-file "
                              "is given; never shown by info"),
    "DISTSORT_FAULT": Setting("", str, TESTS, "faults.py", "POINT:RANK[:term|:hang|:wait=PATH]: "
                              "kill, stop or hang that rank at that phase, or hold it there "
                              "until PATH exists (the failure and service tests)"),
    "DISTSORT_SHARED_GPU": Setting("fold", str, TESTS, "steps/fold.py", "where every rank runs "
                                   "on one GPU: fold (rank 0 sorts every row in memory) or split "
                                   "(each rank sorts its share, as on GPUs of their own: the "
                                   "multi-GPU code paths on one GPU)", choices=("fold", "split")),
    "DISTSORT_TEST_VENV": Setting(".venv-test", str, TESTS, "launch/test.sh", "the test suite's "
                                  "environment"),
    "DISTSORT_LINT_VENV": Setting("", str, TESTS, "launch/lint.sh", "the linters' private "
                                  "environment (default: ~/.cache/distsort-lint)"),
}


def value(name: str, env: Mapping[str, str] | None = None) -> Any:
    """The variable's value in `env` (default: this process's environment) as its kind, its
    default where unset or blank (None for a blank default of a number). DistsortError, naming
    the variable, where it cannot be read as its kind."""
    return _parsed(name, (os.environ if env is None else env).get(name, ""))


@functools.lru_cache(maxsize=256)  # each phase reads settings: parsing them each time cost
def _parsed(name: str, raw: str) -> Any:  # small calls a good part of their time
    setting = SETTINGS[name]
    text = raw.strip() or setting.default
    if setting.kind is str:
        if setting.choices and text not in setting.choices:
            words = ", ".join(c for c in setting.choices if c)
            raise DistsortError(f"{name}={text!r}: choose one of {words}")
        return text
    if not text:
        return None
    if setting.kind is bool:
        if text not in ("0", "1"):
            raise DistsortError(f"{name}={text!r}: write 1 or 0")
        return text == "1"
    try:
        number = setting.kind(text)
    except ValueError:
        raise DistsortError(f"{name}={text!r}: expected a {setting.kind.__name__} "
                            f"({setting.what})") from None
    if not math.isfinite(number) or number < setting.least:
        least = int(setting.least) if setting.least == int(setting.least) else setting.least
        raise DistsortError(f"{name}={text!r}: expected a finite number from {least} on")
    return number


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """DistsortError for the first distsort setting in env (default: this process's) that
    cannot be read, so that a command line says so once, agreed, before any work (the
    settings are read where they are needed, by each rank, inside its steps)."""
    env = os.environ if env is None else env
    for name in SETTINGS:
        if env.get(name, "").strip():
            value(name, env)
