"""`python -m distsort info`: what this machine and MPI job give distsort to work with.

The backend and the transport between the ranks, the GPUs (through CuPy, where it imports), the
CUDA and NCCL versions, the MPI library and whether it is CUDA-aware, the package versions, and
for every rank its host and GPU binding.
Everything is looked up defensively: on a machine without CuPy, a driver or an MPI that says
nothing about CUDA, the answer is "none" or "unknown", never an exception.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from . import binding, settings
from .errors import DistsortError

#: Environment variables worth showing: they change how distsort, NCCL, UCX or the MPI behave.
SECRETS = ("DISTSORT_TOKEN",)  # set or not, never their values
ENV_PREFIXES = ("DISTSORT_", "NCCL_", "UCX_", "OMPI_MCA_", "MPIR_CVAR_", "CUDA_VISIBLE_DEVICES",
                "OPENBLAS_")
#: What Open MPI's mpirun hands every rank to find its daemon and its job (4.x; 5.x's PRRTE
#: uses PMIX_ names): not the user's settings, some twenty lines of them, left out (the
#: session folder's base, orte_tmpdir_base, and the binding, orte_bound_at_launch, stay).
LAUNCHER_PLUMBING = frozenset("OMPI_MCA_" + name for name in (
    "orte_hnp_uri", "orte_local_daemon_uri", "orte_ess_num_procs", "orte_ess_node_rank",
    "orte_app_num", "orte_num_nodes", "orte_launch", "orte_precondition_transports",
    "orte_top_session_dir", "orte_jobfam_session_dir", "ess_base_jobid", "ess_base_vpid",
    "ess_base_num_procs", "initial_wdir", "shmem_RUNTIME_QUERY_hint"))
LAUNCHER_SET = {"OMPI_MCA_ess": "^singleton", "OMPI_MCA_plm": "isolated",
                "OMPI_MCA_pmix": "^s1,s2,cray,isolated"}  # with these values


def _shown(name: str, value: str) -> bool:
    """Whether info lists this environment variable."""
    return (name.startswith(ENV_PREFIXES) and name not in LAUNCHER_PLUMBING
            and LAUNCHER_SET.get(name) != value)


def collect_info(comm=None) -> dict[str, Any]:
    """Everything `info` reports, as a JSON-ready dict. Collective over comm (default
    COMM_WORLD): every rank must call it; every rank gets the per-rank table."""
    from mpi4py import MPI

    comm = comm if comm is not None else MPI.COMM_WORLD
    gpus = gpu_info()
    mpi = mpi_info(comm)
    backend = backend_info(comm, gpus)
    ranks = rank_table(comm, len(gpus["devices"]))
    mine = ranks[comm.Get_rank()]["gpu"]
    device = gpus["devices"][mine]["bus_id"] if isinstance(mine, int) else None
    return {
        "distsort": _distsort_version(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "backend": backend,
        "transport": transport_info(comm, backend["selected"], device),
        "gpus": gpus,
        "nccl": nccl_info(),
        "mpi": mpi,
        "ranks": ranks,
        "environment": {k: "(set)" if k in SECRETS else v for k, v in sorted(os.environ.items())
                        if _shown(k, v)},
    }


def _setting_problem(name: str) -> str:
    """'' for a variable distsort reads and can read; else why not, for the env line (a typo
    in a name is otherwise ignored without a word); for a setting distsort made itself, so."""
    from . import DEFAULTS_SET

    if name in DEFAULTS_SET:
        return "   <- distsort's default for this launch (launch/README.md)"
    if not name.startswith("DISTSORT_"):
        return ""
    if name not in settings.SETTINGS:
        return "   <- not a distsort setting (docs/settings.md lists them)"
    try:
        settings.value(name)
    except DistsortError as exc:
        return f"   <- {exc}"
    return ""


def _distsort_version() -> str:
    try:
        from importlib.metadata import version

        return version("distsort")
    except Exception:  # not installed (run from a checkout)
        return "unknown"


def _module_version(name: str) -> str | None:
    try:
        module = __import__(name)
    except Exception:  # not installed, or broken: either way not usable
        return None
    return str(getattr(module, "__version__", "unknown"))


def package_versions() -> dict[str, str | None]:
    """Versions of the packages distsort runs on; None where one does not import."""
    return {name: _module_version(name) for name in ("numpy", "mpi4py", "cupy")}


def _cupy():
    """CuPy, or the reason it cannot be used."""
    try:
        import cupy

        return cupy, None
    except Exception as exc:  # ImportError, or a CUDA library that fails to load
        return None, f"CuPy not importable: {exc}"


def _cuda_version(code: int) -> str:
    return f"{code // 1000}.{code % 1000 // 10}"


def gpu_info(cupy=None) -> dict[str, Any]:
    """The GPUs this process sees (CUDA_VISIBLE_DEVICES applies), with CUDA versions."""
    reason = None
    if cupy is None:
        cupy, reason = _cupy()
    result: dict[str, Any] = {"devices": [], "cuda_runtime": None, "cuda_driver": None}
    if cupy is None:
        return {**result, "reason": reason}
    runtime = cupy.cuda.runtime
    try:
        count = runtime.getDeviceCount()
        result["cuda_runtime"] = _cuda_version(runtime.runtimeGetVersion())
        result["cuda_driver"] = _cuda_version(runtime.driverGetVersion())
    except Exception as exc:  # no driver, or no device
        return {**result, "reason": f"no usable CUDA GPU: {exc}"}
    result["devices"] = [_device(runtime, i) for i in range(count)]
    if not count:
        result["reason"] = "CUDA sees no GPU"
    return result


def _device(runtime, index: int) -> dict[str, Any]:
    props = runtime.getDeviceProperties(index)
    name = props["name"]
    return {
        "index": index,
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "memory_bytes": int(props["totalGlobalMem"]),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "bus_id": binding.bus_id(props),
    }


def nccl_version_string(code: int) -> str:
    """NCCL's version number as text: 22703 -> 2.27.3 (2.9 and later), 2708 -> 2.7.8 (before)."""
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def nccl_info() -> dict[str, Any]:
    """NCCL's version as CuPy loads it, or why there is none."""
    try:
        from cupy.cuda import nccl

        return {"version": nccl_version_string(int(nccl.get_version()))}
    except Exception as exc:  # no CuPy, or CuPy built or installed without NCCL
        return {"version": None, "reason": str(exc) or type(exc).__name__}


def backend_info(comm, gpus: Mapping[str, Any]) -> dict[str, Any]:
    """The backends this rank could use and the one a sort would pick (runtime.choose_backend)."""
    available = ["cpu"] + (["gpu"] if gpus["devices"] else [])
    requested = settings.value("DISTSORT_BACKEND")
    try:
        from mpi4py import MPI

        from .runtime import choose_backend

        selected = choose_backend(comm if comm is not None else MPI.COMM_WORLD, None)
    except Exception as exc:  # e.g. DISTSORT_BACKEND=gpu on a rank without a GPU
        selected = f"none: {exc}"
    from .local import lsd
    from .local.clib import library_path

    built = library_path()
    merge = built or "none (no C compiler here): CPU ranks sort what they receive"
    sort = "NumPy's (no C compiler here)" if built is None else _cpu_sort(lsd.wins(4),
                                                                          lsd.wins(4, 8))
    if built is not None:  # whose timing chose: compile's for the machine, or this process's
        sort += ("; as `compile` timed them" if lsd.stored_answers()
                 else "; timed by each process (`compile` times them once for the machine)")
    return {"available": available, "requested": requested, "selected": selected,
            "cpu_merge": merge, "cpu_sort": sort}


def _cpu_sort(keys: bool, pairs: bool) -> str:
    """Which sort CPU ranks run (lsd.wins: our radix sort won for keys, for pairs)."""
    if keys == pairs:
        return ("our radix sort (local/lsd.c: faster than NumPy's here)" if keys
                else "NumPy's (faster than our radix sort here)")
    if pairs:
        return ("NumPy's for keys (its SIMD sort is the faster here), our radix sort (local/lsd.c) "
                "for pairs and orders")
    return "our radix sort (local/lsd.c) for keys, NumPy's for pairs and orders (faster here)"


def transport_info(comm, backend: str, device: str | None = None) -> str:
    """How a sort's exchange would move the rows between the ranks: between CPUs what
    build.host_transport makes, on GPUs what transport/choice.py picks (device: the PCI address
    of this rank's GPU). Collective."""
    from mpi4py import MPI

    from .local import clib
    from .node import placement
    from .transport import choice
    from .transport.build import host_transport

    comm = comm if comm is not None else MPI.COMM_WORLD
    where = placement(comm, device)  # collective: before any branch
    if backend == "cpu":
        made, lib = host_transport(comm, where), clib.library()
        if not (made.name == choice.CMA and made.writes and lib is not None):
            return choice.DESCRIBED[made.name]
        return (f"{choice.DESCRIBED[made.name]}; plain keys on {lib.push_min_ranks()} to "
                f"{lib.push_max_ranks()} ranks written straight into their receivers' memory "
                "by the partition (process_vm_writev)")  # partition._pushes
    if backend != "gpu":
        return "none: no backend"
    try:
        setting = settings.value("DISTSORT_TRANSPORT")
        return choice.describe(choice.choose(setting, where), setting, where,
                               settings.value("DISTSORT_SHARED_GPU"))
    except Exception as exc:  # the sort would stop with the same message
        return f"none: {exc}"


def mpi_info(comm=None) -> dict[str, Any]:
    """The MPI library, its version and world, and whether it is CUDA-aware."""
    try:
        from mpi4py import MPI
    except Exception as exc:
        return {"library": None, "reason": f"mpi4py not importable ({exc})"}
    comm = comm if comm is not None else MPI.COMM_WORLD
    library = MPI.Get_library_version().strip()
    vendor, vendor_version = MPI.get_vendor()
    aware, how = cuda_awareness(vendor, library)
    return {
        "library": library.splitlines()[0].strip() if library else "unknown",
        "vendor": vendor,
        "vendor_version": ".".join(str(part) for part in vendor_version),
        "standard": "{}.{}".format(*MPI.Get_version()),
        "size": comm.Get_size(),
        "cuda_aware": aware,
        "cuda_aware_how": how,
    }


def cuda_awareness(
    vendor: str,
    library_version: str,
    env: Mapping[str, str] | None = None,
    query: Callable[[], int | None] | None = None,
    ompi_info: Callable[[], str | None] | None = None,
) -> tuple[str, str]:
    """("yes" | "no" | "unknown", how that was found out) for the loaded MPI library.

    MPIX_Query_cuda_support() answers where the library has it (Open MPI 4+, MPICH 4+); otherwise
    Open MPI's ompi_info says whether CUDA support was built in, and MPICH's configure line does.
    """
    env = os.environ if env is None else env
    if vendor == "MPICH" and env.get("MPIR_CVAR_ENABLE_GPU", "").strip() == "0":
        return "no", "MPIR_CVAR_ENABLE_GPU=0"
    answer = (query or mpix_query_cuda_support)()
    if answer is not None:
        return ("yes" if answer else "no"), f"MPIX_Query_cuda_support() returned {answer}"
    if vendor == "Open MPI":
        built = ompi_built_with_cuda((ompi_info or run_ompi_info)())
        if built is not None:
            return ("yes" if built else "no"), "ompi_info: mpi_built_with_cuda_support"
    if vendor == "MPICH":
        if re.search(r"--with-cuda(=|\s|$)", library_version):
            return "yes", "MPICH configured --with-cuda (MPIR_CVAR_ENABLE_GPU=0 turns it off)"
        return "unknown", "MPICH configure line names no CUDA"
    return "unknown", f"no CUDA query for {vendor or 'this MPI'}"


def mpix_query_cuda_support() -> int | None:
    """MPIX_Query_cuda_support() of the loaded MPI library, or None where it has none."""
    for library in _mpi_libraries():
        try:
            function = ctypes.CDLL(library).MPIX_Query_cuda_support
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_int
        function.argtypes = []
        return int(function())
    return None


def _mpi_libraries() -> list[str | None]:
    """The process's global symbols first, then every libmpi the process has mapped."""
    found: list[str | None] = [None]
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libmpi" in line}
    except OSError:
        paths = set()
    found += sorted(p for p in paths if os.path.basename(p).startswith("libmpi"))
    return found


def run_ompi_info() -> str | None:
    """`ompi_info --parsable --all`, or None where it cannot run."""
    program = shutil.which("ompi_info")
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, "--parsable", "--all"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def ompi_built_with_cuda(output: str | None) -> bool | None:
    """What ompi_info's mpi_built_with_cuda_support line says, or None where it is absent."""
    match = re.search(r"mpi_built_with_cuda_support:value:(\w+)", output or "")
    return None if match is None else match.group(1).lower() == "true"


def rank_table(comm, device_count: int) -> list[dict[str, Any]]:
    """Every rank's host, local rank and the GPU it would drive (collective)."""
    try:
        from mpi4py import MPI

        comm = comm if comm is not None else MPI.COMM_WORLD
    except Exception:  # no MPI: this process alone
        comm = None
    row = _rank_row(comm, device_count)
    rows = comm.allgather(row) if comm is not None else [row]
    return [{"rank": rank, **r} for rank, r in enumerate(rows)]


def _rank_row(comm, device_count: int) -> dict[str, Any]:
    """This rank's row, bound as runtime.bind_gpu binds: by the launcher's variables
    (DISTSORT_DEVICE, else the local rank they name), else by the rank's index on its node."""
    from .node import node_place

    node_rank = node_place(comm)[0] if comm is not None else None  # collective: before a branch
    try:
        local_rank = binding.local_rank_from_env(os.environ)
        gpu = binding.device_from_env(os.environ, device_count)
    except ValueError as exc:
        local_rank, gpu = None, f"error: {exc}"
    local_rank = node_rank if local_rank is None else local_rank
    if gpu is None and device_count and node_rank is not None:
        gpu = binding.device_for_rank(node_rank, device_count)
    return {
        "host": socket.gethostname(),
        "local_rank": local_rank,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu": gpu,
    }


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _gpu_lines(gpus: Mapping[str, Any]) -> list[str]:
    if not gpus["devices"]:
        return [f"GPUs        none ({gpus.get('reason', 'none found')})"]
    lines = [
        f"GPUs        {len(gpus['devices'])} (CUDA runtime {gpus['cuda_runtime']}, "
        f"driver {gpus['cuda_driver']})"
    ]
    for d in gpus["devices"]:
        lines.append(
            f"  {d['index']}: {d['name']}, {_gib(d['memory_bytes'])}, "
            f"compute capability {d['compute_capability']}"
        )
    return lines


def _mpi_lines(mpi: Mapping[str, Any]) -> list[str]:
    if mpi.get("library") is None:
        return [f"MPI         none ({mpi.get('reason')})"]
    return [
        f"MPI         {mpi['vendor']} {mpi['vendor_version']} (MPI {mpi['standard']}), "
        f"{mpi['size']} rank(s)",
        f"CUDA-aware  {mpi['cuda_aware']} ({mpi['cuda_aware_how']})",
    ]


def _rank_lines(ranks: list[Mapping[str, Any]]) -> list[str]:
    lines = ["ranks       rank  host                 local rank  GPU   CUDA_VISIBLE_DEVICES"]
    for r in ranks:
        local = "-" if r["local_rank"] is None else r["local_rank"]
        gpu = "-" if r["gpu"] is None else r["gpu"]
        visible = "(unset)" if r["cuda_visible_devices"] is None else r["cuda_visible_devices"]
        row = f"{r['rank']:<5} {r['host']:<20} {local!s:<11} {gpu!s:<5} {visible}"
        lines.append(" " * 12 + row)
    return lines


def format_info(d: Mapping[str, Any]) -> str:
    """collect_info's dict as the text `python -m distsort info` prints."""
    backend, nccl = d["backend"], d["nccl"]
    packages = ", ".join(f"{k} {v or '-'}" for k, v in d["packages"].items())
    lines = [
        f"distsort    {d['distsort']} (Python {d['python']})",
        f"backend     {backend['selected']}",
        f"            available here: {', '.join(backend['available'])}; requested: "
        f"{backend['requested']} (--backend or DISTSORT_BACKEND)",
        f"cpu merge   {backend['cpu_merge']}",
        f"cpu sort    {backend['cpu_sort']}",
        f"transport   {d['transport']}",
        *_gpu_lines(d["gpus"]),
        f"NCCL        {nccl['version'] or 'none (' + nccl.get('reason', '') + ')'}",
        *_mpi_lines(d["mpi"]),
        f"packages    {packages}",
    ]
    found = [f"{k}={v}{_setting_problem(k)}" for k, v in d["environment"].items()]
    lines += [f"env         {setting}" for setting in found or ["(none set)"]]
    return "\n".join(lines + _rank_lines(d["ranks"]))
