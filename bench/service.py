"""A job through a warm service against a fresh mpirun of the same job, in one run (issue 41).

`python bench/service.py [--ranks 2] [--logs 20,24] [--reps 3] [--small 100] [--out DIR]
[--profile]`

For each size: `gen` writes uniform uint32 keys to a .npy; then, alternating, a fresh
`mpiexec -n RANKS python -m distsort sort in.npy -o out.npy` (wall clock, launch included) and
the same job submitted to a service started once (wall clock from submit to the answer, the
client's own start-up not counted: distsort.Client in this process), medians of --reps, every
output checked against np.sort. Then --small jobs of 2^10 keys back to back through the service.
Then --mix jobs from --clients clients at once, one in ten bad (a missing input, a path outside
the root, an unknown option), every good result compared with NumPy and every bad one checked
for a clear error, the service asked for its status after; the ranks' resident host memory
(and on GPUs, their device memory as nvidia-smi sees it) before the first job, after a warm-up
round of each kind, half way through the mix and after it.
Set DISTSORT_BACKEND to choose where the ranks sort (default: GPUs where every rank has one).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# The launchers' environment as this process found it: importing distsort starts MPI here, and
# Open MPI's mpirun refuses (silently) to start from an environment an MPI process has marked.
LAUNCH_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                          os.environ.get("PYTHONPATH", "")]))
sys.path.insert(0, str(ROOT))
import distsort  # noqa: E402


@functools.cache
def mpiexec() -> list[str]:
    """The launcher beside this Python (the mpich wheel's), else mpirun (Open MPI: several
    ranks a core allowed)."""
    here = Path(sys.executable).with_name("mpiexec")
    launcher = str(here) if here.exists() else "mpirun"
    return [launcher, "--oversubscribe"] if _open_mpi(launcher) else [launcher]


def _open_mpi(launcher: str) -> bool:
    try:
        return "Open MPI" in subprocess.run([launcher, "--version"], capture_output=True,
                                            text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def fresh(ranks: int, words: list[str], folder: str) -> float:
    """Seconds of a fresh mpirun of the job."""
    start = time.perf_counter()
    done = subprocess.run([*mpiexec(), "-n", str(ranks), sys.executable, "-m", "distsort",
                           *words], cwd=folder, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, env=LAUNCH_ENV)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(words)}: {done.stderr}")
    return seconds


def served(client, words: list[str]) -> float:
    start = time.perf_counter()
    reply = client.submit(words)
    seconds = time.perf_counter() - start
    if reply["state"] != "done":
        raise RuntimeError(f"{' '.join(words)}: {reply}")
    return seconds


def checked(folder: str) -> None:
    got, data = np.load(Path(folder, "out.npy")), np.load(Path(folder, "in.npy"))
    if not np.array_equal(got, np.sort(data)):
        raise AssertionError("the output is not the input sorted")


def rank_pids(root: int) -> list[int]:
    """The Python processes below the launcher's process root (the service's ranks)."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    below, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid]
        below += children
        frontier += children
    return [p for p in below if "python" in Path(f"/proc/{p}/comm").read_text(errors="replace")]


def memory(pids: list[int]) -> dict:
    """The ranks' resident host memory (kB, summed) and, where nvidia-smi runs, their GPU memory
    (MiB, summed)."""
    rss = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            rss += next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    gpu = None
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True)
        used = dict(line.split(", ") for line in out.stdout.strip().splitlines() if ", " in line)
        gpu = sum(int(used.get(str(pid), 0)) for pid in pids)
    return {"host_kB": rss, "gpu_MiB": gpu}


def mixed_jobs(count: int) -> list[tuple[list[str], str | None]]:
    """(words, the expected input's name or None for a bad job), one in ten bad."""
    bad = [["sort", "missing.npy", "-o", "never.npy"], ["sort", "mix0.npy", "-o", "/etc/x.npy"],
           ["sort", "mix0.npy", "-o", "never.npy", "--no-such-option"]]
    jobs = []
    for i in range(count):
        if i % 10 == 9:
            jobs.append((bad[i // 10 % len(bad)], None))
        else:
            source = f"mix{i % 4}.npy"
            order = ["--descending"] if i % 3 == 0 else []
            jobs.append((["sort", source, "-o", f"out_mix{i}.npy", "--quiet", *order], source))
    return jobs


def run_mix(client_of, count: int, clients: int) -> dict:
    """count jobs from `clients` clients at once; each good output checked, then removed."""
    inputs = {f"mix{k}.npy": np.load(f"mix{k}.npy") for k in range(4)}
    wrong: list[str] = []

    def one(job) -> float:
        words, source = job
        start = time.perf_counter()
        reply = client_of().submit(words)
        seconds = time.perf_counter() - start
        if source is None:
            if reply["state"] not in ("failed", "refused") or not reply["error"]:
                wrong.append(f"{words}: no clear error: {reply}")
            return seconds
        out = words[3]
        want = np.sort(inputs[source])[::-1 if "--descending" in words else 1]
        if reply["state"] != "done" or not np.array_equal(np.load(out), want):
            wrong.append(f"{words}: {reply['state']} {reply['error']}")
        os.unlink(out)
        return seconds

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        seconds = list(pool.map(one, mixed_jobs(count)))
    return {"jobs": count, "clients": clients, "wall_s": time.perf_counter() - start,
            "median_job_s": statistics.median(seconds), "wrong": wrong}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--logs", default="20,24")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--mix", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--profile", action="store_true", help="one rank under cProfile: its "
                    "functions by time spent, printed after the service stops")
    args = ap.parse_args()
    if args.profile and args.ranks != 1:
        ap.error("--profile profiles one rank: --ranks 1")
    folder = tempfile.mkdtemp(prefix="distsort-service-")
    os.chdir(folder)
    sock = os.path.join(folder, "s.sock")
    profile = os.path.join(folder, "rank0.prof")
    python = [sys.executable, *(["-m", "cProfile", "-o", profile] if args.profile else [])]
    service = subprocess.Popen([*mpiexec(), "-n", str(args.ranks), *python, "-m",
                                "distsort", "serve", "--socket", sock, "--root", folder],
                               stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                               env=LAUNCH_ENV)
    print(service.stdout.readline().strip(), flush=True)  # listening once it says so
    log: list[str] = []  # its log, a line a job, read as it comes: a full pipe would stop it
    threading.Thread(target=lambda: log.extend(service.stdout), daemon=True).start()
    client = distsort.Client(sock)
    ranks = rank_pids(service.pid)
    footprint = {"start": memory(ranks)}
    rows, mix = [], None
    try:
        for log in (int(x) for x in args.logs.split(",")):
            served(client, ["gen", "in.npy", "--count", str(1 << log), "--quiet"])
            job = ["sort", "in.npy", "-o", "out.npy", "--quiet"]
            times = {"fresh": [], "served": []}
            for _ in range(args.reps + 1):  # the first of each is a warm-up
                times["fresh"].append(fresh(args.ranks, job, folder))
                checked(folder)
                times["served"].append(served(client, job))
                checked(folder)
            med = {k: statistics.median(v[1:]) for k, v in times.items()}
            rows.append({"log": log, "median_s": med, "runs_s": times,
                         "fresh_over_served": med["fresh"] / med["served"]})
            print(f"2^{log}: fresh mpirun {med['fresh']:.3f} s, service {med['served']:.4f} s, "
                  f"x{med['fresh'] / med['served']:.1f}", flush=True)
        served(client, ["gen", "small.npy", "--count", "1024", "--quiet"])
        start = time.perf_counter()
        for i in range(args.small):
            served(client, ["sort", "small.npy", "-o", f"small{i % 2}.npy", "--quiet"])
        each = (time.perf_counter() - start) / max(args.small, 1)
        print(f"{args.small} jobs of 2^10 keys back to back: {each * 1e3:.1f} ms a job",
              flush=True)
        if args.mix:
            mix = mixed(client, sock, args, ranks, footprint)
    finally:
        client.shutdown()
        service.wait(timeout=120)
    if args.profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats("distsort", 40)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "service.json").write_text(json.dumps(
        {"ranks": args.ranks, "backend": os.environ.get("DISTSORT_BACKEND", "auto"),
         "rows": rows, "small_jobs": args.small, "small_job_s": each, "mix": mix,
         "memory": footprint}, indent=1))
    return 0


def mixed(client, sock: str, args, ranks, footprint: dict) -> dict:
    """--mix jobs from --clients clients, the ranks' memory measured around them."""
    for k in range(4):
        served(client, ["gen", f"mix{k}.npy", "--count", str(1000 + 7 * k), "--quiet",
                        "--dtype", ["uint32", "float64", "int16", "uint64"][k]])
    run_mix(lambda: distsort.Client(sock), 20, args.clients)  # a warm-up of every kind
    footprint["warm"] = memory(ranks)
    halves = []
    for half in ("half", "after"):  # a leak grows on; a pool or a list that fills does not
        halves.append(run_mix(lambda: distsort.Client(sock), args.mix // 2, args.clients))
        footprint[half] = memory(ranks)
    mix = {"jobs": args.mix, "clients": args.clients,
           "wall_s": sum(h["wall_s"] for h in halves),
           "median_job_s": statistics.median(h["median_job_s"] for h in halves),
           "wrong": [w for h in halves for w in h["wrong"]]}
    mix["still_up"] = client.status()["running"] is None
    print(f"{args.mix} jobs from {args.clients} clients, a tenth bad: {mix['wall_s']:.1f} s, "
          f"{len(mix['wrong'])} wrong, service up: {mix['still_up']}; memory "
          f"{footprint}", flush=True)
    for line in mix["wrong"][:10]:
        print("  wrong:", line)
    return mix


if __name__ == "__main__":
    sys.exit(main())
