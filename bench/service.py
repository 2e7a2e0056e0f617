"""A job through a warm service against a fresh mpirun of the same job, in one run (issue 41).

`python bench/service.py [--ranks 2] [--logs 20,24] [--reps 3] [--small 100] [--out DIR]`

For each size: `gen` writes uniform uint32 keys to a .npy; then, alternating, a fresh
`mpiexec -n RANKS python -m distsort sort in.npy -o out.npy` (wall clock, launch included) and
the same job submitted to a service started once (wall clock from submit to the answer, the
client's own start-up not counted: distsort.Client in this process), medians of --reps, every
output checked against np.sort. Then --small jobs of 2^10 keys back to back through the service.
Set DISTSORT_BACKEND to choose where the ranks sort (default: GPUs where every rank has one).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--logs", default="20,24")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="distsort-service-")
    os.chdir(folder)
    sock = os.path.join(folder, "s.sock")
    service = subprocess.Popen([*mpiexec(), "-n", str(args.ranks), sys.executable, "-m",
                                "distsort", "serve", "--socket", sock, "--root", folder],
                               stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                               env=LAUNCH_ENV)
    print(service.stdout.readline().strip(), flush=True)  # listening once it says so
    client = distsort.Client(sock)
    rows = []
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
    finally:
        client.shutdown()
        service.wait(timeout=120)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "service.json").write_text(json.dumps(
        {"ranks": args.ranks, "backend": os.environ.get("DISTSORT_BACKEND", "auto"),
         "rows": rows, "small_jobs": args.small, "small_job_s": each}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
