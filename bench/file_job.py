"""The job a user waits for, timed as whole processes (wall clock, launch included).

`python bench/file_job.py --count 2^30 --ranks 1 --out DIR` writes a .npy of random keys, then,
in rotation for --reps rounds (medians reported):
- floor: this process reads the input's bytes with 8 threads, then writes as many bytes;
  floor_fsync: the same, and fsync before the close (what makes the output durable);
  floor_mapped: 16 threads read, then copy the bytes into a shared mapping of the new file
  whose blocks fallocate reserved first (the way distsort writes where it can); the ratios use
  the faster of floor and floor_mapped;
- launch: `mpirun -n R python -m distsort info` (launch and imports alone, as issue 36 defines
  it; info also starts CUDA, or on CPUs times its radix sort against NumPy's: heavier than a
  job's own start); bare_launch: `... python -m distsort --version` (the launch, the imports and
  MPI's start, nothing more): check_gb_per_s_bare takes it out of check's wall instead;
- plain (GPU): a script that does np.load, cupy.sort, np.save; (CPU): np.load, np.sort, np.save;
- sort: `mpirun -n R python -m distsort sort IN -o OUT`; cold: the same in a fresh process whose
  HOME, XDG_CACHE_HOME and CUPY_CACHE_DIR are new empty folders (what every container starts
  with; distsort's kernel cache, filled by `mpirun -n 2 python -m distsort compile`, is in the
  package);
- verify: the sort with --verify (the last sort's, cold's and verify's --report phases are kept);
- check: `mpirun -n R python -m distsort check IN OUT`.
--cold-page-cache drops the files from the page cache (posix_fadvise) before every timed run.
Before every timed run the dirty pages are written out (os.sync, outside the clock): else an
output of 8 GiB, written while the last run's 8 GiB are still dirty, crosses the kernel's dirty
threshold (vm.dirty_ratio: 20% of the free and cached memory) and its writes are throttled to
the disk's speed (run 221).
Every sort's output is checked against np.sort once. A table and JSON (file_job_*.json).
Ratios: sort / (floor + launch) and sort / plain (issue 36's in-memory goals), floor / sort
(its out-of-core goal) and floor / (sort - launch): the same with the launch left out, which
alone is about the floor's time for 8 GiB on one H200 (bench/RESULTS.md, run 462).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from distsort.cli import parse_count  # noqa: E402

PLAIN = {
    "gpu": "import cupy, numpy as np, sys; a = np.load(sys.argv[1]); "
           "np.save(sys.argv[2], cupy.asnumpy(cupy.sort(cupy.asarray(a))))",
    "cpu": "import numpy as np, sys; np.save(sys.argv[2], np.sort(np.load(sys.argv[1])))",
}


def mpirun(ranks: int) -> list[str]:
    launcher = shutil.which("mpirun") or shutil.which("mpiexec")
    flags = []
    if "Open MPI" in subprocess.run([launcher, "--version"], capture_output=True,
                                    text=True).stdout:
        flags = ["--oversubscribe", "--allow-run-as-root", "-x", "PYTHONPATH", "-x", "HOME",
                 "-x", "XDG_CACHE_HOME", "-x", "CUPY_CACHE_DIR", "-x", "DISTSORT_BACKEND"]
    return [launcher, *flags, "-n", str(ranks), sys.executable, "-m", "distsort"]


def wall(cmd: list[str], env: dict, drop: list[str]) -> float:
    for path in drop:
        forget(path)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    return seconds


def forget(path: str) -> None:
    """Drop the file's pages from the page cache (a cold read next time)."""
    if os.path.exists(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def floor(path: str, out: str, threads: int = 8, piece: int = 64 << 20,
          sync: bool = False, mapped: bool = False) -> float:
    """Seconds to read the file's bytes with `threads` threads of preadv, then pwritev them
    into a new file (and fsync them: `sync`), or copy them into a shared mapping of it, its
    blocks allocated first (`mapped`). The buffer is faulted in and the last output
    removed before the clock starts, so that the floor is the copy through the kernel alone
    (truncating the last output inside the clock, an 8 GiB floor ranged 3.4-9.3 s)."""
    size = os.path.getsize(path)
    offsets = range(0, size, piece)
    buffer = np.ones(size, np.uint8)
    if os.path.exists(out):
        os.unlink(out)
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda o: os.preadv(fd, [buffer[o : o + piece]], o), offsets))
    os.close(fd)
    fd = os.open(out, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    if mapped:
        os.posix_fallocate(fd, 0, size)
        with mmap.mmap(fd, size) as m:
            target = np.frombuffer(m, np.uint8)
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda o: np.copyto(target[o : o + piece], buffer[o : o + piece]),
                              offsets))
            del target  # the mapping's export, gone before it closes
    else:
        os.ftruncate(fd, size)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda o: os.pwritev(fd, [buffer[o : o + piece]], o), offsets))
    if sync:
        os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - start



def _rate(nbytes: int, seconds: float) -> float | None:
    """GB/s, or None where the time left is none (a launch measured longer than the command)."""
    return nbytes / seconds / 1e9 if seconds > 0 else None

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=parse_count, default=2**30)
    parser.add_argument("--dtype", default="uint32")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--backend", choices=["gpu", "cpu"], default="gpu")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cold-page-cache", action="store_true")
    parser.add_argument("--device-memory", help="the sorts' budget (e.g. 2GiB: out of core)")
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    work = tempfile.mkdtemp(dir=args.dir)
    src, dst = os.path.join(work, "in.npy"), os.path.join(work, "out.npy")
    env = dict(os.environ, PYTHONPATH=ROOT, DISTSORT_BACKEND=args.backend,
               NCCL_NVLS_ENABLE="0", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    run = mpirun(args.ranks)
    subprocess.run([*run, "gen", src, "--count", str(args.count), "--dtype", args.dtype,
                    "--quiet"], env=env, check=True)
    drop = [src, dst] if args.cold_page_cache else []
    reports = {name: os.path.join(work, f"{name}.json") for name in ("sort", "cold", "verify")}
    budget = ["--device-memory", args.device_memory] if args.device_memory else []

    def cold() -> float:
        fresh = {k: tempfile.mkdtemp(dir=work) for k in ("HOME", "XDG_CACHE_HOME",
                                                          "CUPY_CACHE_DIR")}
        return wall([*run, "sort", src, "-o", dst, "--quiet", "--report", reports["cold"],
                     *budget], {**env, **fresh}, drop)

    cases = {
        "floor": lambda: (forget(src) if drop else None) or floor(src, dst),
        "floor_fsync": lambda: (forget(src) if drop else None) or floor(src, dst, sync=True),
        "floor_mapped": lambda: (forget(src) if drop else None) or floor(src, dst, 16,
                                                                         mapped=True),
        "launch": lambda: wall([*run, "info"], env, []),
        "bare_launch": lambda: wall([*run, "--version"], env, []),
        "plain": lambda: wall([sys.executable, "-c", PLAIN[args.backend], src, dst], env, drop),
        "sort": lambda: wall([*run, "sort", src, "-o", dst, "--quiet", "--report",
                              reports["sort"], *budget], env, drop),
        "cold": cold,
        "verify": lambda: wall([*run, "sort", src, "-o", dst, "--verify", "--quiet", "--report",
                                reports["verify"], *budget], env, drop),
        "check": lambda: wall([*run, "check", src, dst], env, drop),
    }
    if args.backend == "cpu":
        del cases["cold"]
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.reps):
        for name, case in cases.items():
            os.sync()  # no case pays for the writeback of the last one's output (see --help)
            times[name].append(case())
            if name == "sort":
                assert np.array_equal(np.load(dst, mmap_mode="r"), np.sort(np.load(src)))
    med = {name: statistics.median(t) for name, t in times.items()}
    best_floor = min(med["floor"], med["floor_mapped"])
    nbytes = os.path.getsize(src)
    result = {"count": args.count, "dtype": args.dtype, "ranks": args.ranks,
              "backend": args.backend, "cold_page_cache": args.cold_page_cache,
              "bytes": nbytes, "seconds": times, "median": med,
              "floor_best": best_floor,
              "sort_over_floor_plus_launch": med["sort"] / (best_floor + med["launch"]),
              "sort_over_plain": med["sort"] / med["plain"], "budget": args.device_memory,
              "floor_over_sort": best_floor / med["sort"],
              "floor_over_sort_after_launch": best_floor / max(med["sort"] - med["launch"], 1e-9),
              "verify_adds": med["verify"] / med["sort"] - 1,
              "check_gb_per_s": _rate(2 * nbytes, med["check"] - med["launch"]),
              "check_gb_per_s_bare": _rate(2 * nbytes, med["check"] - med["bare_launch"])}
    for name, path in reports.items():  # the last run's phases, as its summary lists them
        if not os.path.exists(path):
            continue
        with open(path) as f:
            result[f"{name}_phases"] = json.load(f)["phases"]
        print(f"{name} phases: " + "  ".join(f"{k} {v:.2f}" for k, v in
                                            result[f"{name}_phases"].items()))
    if "cold" in med:
        result["cold_minus_warm_s"] = med["cold"] - med["sort"]
    for name, value in med.items():
        print(f"{name:>7}: {value:7.2f} s  (runs {', '.join(f'{t:.2f}' for t in times[name])})")
    for key in ("sort_over_floor_plus_launch", "sort_over_plain", "floor_over_sort",
                "floor_over_sort_after_launch", "verify_adds", "check_gb_per_s",
                "check_gb_per_s_bare", "cold_minus_warm_s"):
        if result.get(key) is not None:
            print(f"{key}: {result[key]:.3f}")
    os.makedirs(args.out, exist_ok=True)
    tag = f"{args.backend}_p{args.ranks}_n{args.count}" + ("_coldpc" if drop else "") + \
        (f"_budget{args.device_memory}" if args.device_memory else "")
    with open(os.path.join(args.out, f"file_job_{tag}.json"), "w") as f:
        json.dump(result, f, indent=1)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
