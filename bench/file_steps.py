"""Where one rank's in-memory file job spends its time, step by step (wall clock, one process).

`python bench/file_steps.py IN.npy --out DIR` (IN: a .npy of keys in the page cache, e.g. from
`python -m distsort gen`): the runtime's start, the read into device memory (io/staging.py)
and into host memory, the sort, the temporary output's creation, the write from the device, the
commit (rename over an existing output, and to a new name), each --reps times (medians).
Where KvikIO is installed (kvikio-cu13), its CuFile reads the same bytes to the device and
writes them back, beside ours (KVIKIO_NTHREADS threads; set here to the I/O pool's count).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    start = time.perf_counter()
    from mpi4py import MPI

    import distsort
    from distsort.io import ShardWriter, detect_format, open_input
    from distsort.io.staging import load
    from distsort.runtime import get_runtime
    from distsort.workers import threads_for, use_threads

    comm = MPI.COMM_WORLD
    steps: dict[str, list[float]] = {"imports": [time.perf_counter() - start]}

    def timed(name: str, work, *args):
        began = time.perf_counter()
        result = work(*args)
        rt.backend.synchronize()
        steps.setdefault(name, []).append(time.perf_counter() - began)
        return result

    began = time.perf_counter()
    rt = get_runtime(comm)
    steps["runtime"] = [time.perf_counter() - began]
    use_threads(threads_for(rt.node_ranks))
    kvikio = kvikio_module(threads_for(rt.node_ranks))
    source = open_input(args.input, detect_format(args.input))
    out = os.path.join(os.path.dirname(os.path.abspath(args.input)), "steps_out.npy")
    for _ in range(args.reps):
        keys = timed("read to device", load, source, 0, source.count, rt.xp)
        timed("read to host", source.read, 0, source.count)
        shard = timed("sort", distsort.sort, keys, comm)
        writer = timed("create", ShardWriter, out, source.fmt, source.count, comm)
        timed("write from device", writer.write, 0, shard)
        timed("commit (replacing)" if os.path.exists(out) else "commit (new)", writer.commit)
        if kvikio:
            timed("read to device (KvikIO)", kvikio_read, kvikio, source, rt.xp)
            if os.path.exists(out + ".kvikio"):
                os.unlink(out + ".kvikio")
            timed("write from device (KvikIO)", kvikio_write, kvikio, out + ".kvikio", shard)
        del keys, shard
    os.unlink(out)
    if kvikio:
        os.unlink(out + ".kvikio")
    med = {name: statistics.median(t) for name, t in steps.items()}
    for name, value in med.items():
        print(f"{name:>20}: {value:7.3f} s  ({', '.join(f'{t:.3f}' for t in steps[name])})")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "file_steps.json"), "w") as f:
        json.dump({"input": args.input, "bytes": os.path.getsize(args.input), "seconds": steps,
                   "median": med}, f, indent=1)


def kvikio_module(threads: int):
    """kvikio where installed (else None), with `threads` threads in its pool."""
    os.environ.setdefault("KVIKIO_NTHREADS", str(threads))
    try:
        import kvikio
    except ImportError:
        return None
    return kvikio


def kvikio_read(kvikio, source, xp):
    """The input's elements' bytes in a new device array, by KvikIO's parallel pread."""
    buf = xp.empty(source.count * source.fmt.itemsize, xp.uint8)
    with kvikio.CuFile(source.path, "r") as f:
        f.pread(buf, buf.nbytes, source.offset).get()
    return buf


def kvikio_write(kvikio, path: str, array) -> None:
    """A device array's bytes into a new file, by KvikIO's parallel pwrite."""
    with kvikio.CuFile(path, "w") as f:
        f.pwrite(array, array.nbytes, 0).get()


if __name__ == "__main__":
    main()
