"""An out-of-core file job: generate a file, sort it within a small memory budget, check it.

    mpirun -n 4 python examples/out_of_core_file.py [--count N] [--device-memory SIZE] [--dir D]

The same three steps as these commands, each run under mpirun:
    python -m distsort gen D/keys.npy --count N --dtype uint64 --dist uniform
    python -m distsort sort D/keys.npy -o D/sorted.npy --device-memory SIZE --verify
    python -m distsort check D/keys.npy D/sorted.npy
but from one program: every rank calls the command line's main() with the same arguments (each
command is collective). The budget is far below a rank's share of the file, so the sort takes the
out-of-core path: sorted runs that fit the budget, then a merge. Rank 0 then checks the output
file against NumPy on its own. Exit status 1 if any step fails or the output is wrong.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from mpi4py import MPI

from distsort.cli import main as distsort_main


def step(comm: MPI.Comm, argv: list[str]) -> bool:
    """Run `python -m distsort ARGV` on every rank; True if every rank succeeded."""
    if comm.rank == 0:
        print("$ python -m distsort " + " ".join(argv), flush=True)
    try:
        status = distsort_main(argv)
    except SystemExit as exc:  # argparse rejects its arguments this way
        status = exc.code if isinstance(exc.code, int) else 1
    ok = comm.allreduce(status == 0, op=MPI.LAND)
    if not ok and comm.rank == 0:
        print(f"  failed (exit status {status} on rank 0)", flush=True)
    return ok


def independent_check(keys: Path, output: Path) -> bool:
    """Rank 0 alone: is the output file exactly the input file sorted?"""
    expected = np.sort(np.load(keys, mmap_mode="r"))
    got = np.load(output, mmap_mode="r")
    ok = got.dtype == expected.dtype and np.array_equal(got, expected)
    print(f"NumPy's own check of {output.name}: {'ok' if ok else 'WRONG'}", flush=True)
    return ok


def run_job(comm: MPI.Comm, workdir: Path, count: int, budget: str) -> bool:
    keys, output = workdir / "keys.npy", workdir / "sorted.npy"
    steps = [
        ["gen", str(keys), "--count", str(count), "--dtype", "uint64", "--dist", "uniform"],
        ["sort", str(keys), "-o", str(output), "--device-memory", budget, "--verify"],
        ["check", str(keys), str(output)],
    ]
    for argv in steps:
        if not step(comm, argv):
            return False
    ok = independent_check(keys, output) if comm.rank == 0 else None
    return bool(comm.bcast(ok, root=0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2_000_000, help="keys in the file")
    parser.add_argument("--device-memory", default="4M", help="the sort's memory budget")
    parser.add_argument("--dir", help="where the files go (default: a temporary directory)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD

    workdir = args.dir or (tempfile.mkdtemp(prefix="distsort-example-") if comm.rank == 0 else None)
    workdir = Path(comm.bcast(workdir, root=0))
    if comm.rank == 0:
        size = args.count * 8 / 2**20
        print(f"{comm.size} rank(s), {args.count} uint64 keys ({size:.0f} MiB) in {workdir}, "
              f"memory budget {args.device_memory} per rank", flush=True)
    try:
        ok = run_job(comm, workdir, args.count, args.device_memory)
    finally:
        comm.Barrier()
        if comm.rank == 0 and not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    if comm.rank == 0:
        print("out-of-core file job: " + ("ok" if ok else "FAILED"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
