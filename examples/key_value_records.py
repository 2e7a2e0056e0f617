"""Key-value sort with a record payload: uint64 keys, each carrying a 100-byte record.

    mpirun -n 4 python examples/key_value_records.py [--count-per-rank N]

`distsort.sort_pairs(keys, records)` moves every (n, 100) uint8 record along with its key. Each
record holds its key (bytes 0-7), its global input position (bytes 8-15) and 84 bytes derived
from both, so the result can be checked without gathering it: each rank checks that its keys are
in order and every record is intact and still with its key; the shards' boundaries, the total
count and "every input position comes out exactly once" are checked across ranks. A second,
stable sort on keys with many ties checks that equal keys keep their input order. Exit status 1
if anything is wrong.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import distsort

RECORD_SIZE = 100


def filler(keys: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """84 bytes a record derived from its key and position: a damaged record shows."""
    mixed = (keys ^ (positions * np.uint64(0x9E3779B97F4A7C15))).view(np.uint8)
    return np.tile(mixed.reshape(-1, 8), (1, 11))[:, : RECORD_SIZE - 16]


def make_records(keys: np.ndarray, first_position: int) -> np.ndarray:
    n = len(keys)
    positions = np.arange(first_position, first_position + n, dtype=np.uint64)
    records = np.empty((n, RECORD_SIZE), dtype=np.uint8)
    records[:, 0:8] = keys.view(np.uint8).reshape(n, 8)
    records[:, 8:16] = positions.view(np.uint8).reshape(n, 8)
    records[:, 16:] = filler(keys, positions)
    return records


def unpack(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keys, positions) as the records hold them."""
    keys = np.ascontiguousarray(records[:, 0:8]).view(np.uint64).ravel()
    positions = np.ascontiguousarray(records[:, 8:16]).view(np.uint64).ravel()
    return keys, positions


def local_problems(keys: np.ndarray, records: np.ndarray, stable: bool) -> list[str]:
    """What is wrong inside this rank's shard."""
    record_keys, positions = unpack(records)
    problems = []
    if np.any(keys[1:] < keys[:-1]):
        problems.append("keys out of order")
    if not np.array_equal(record_keys, keys):
        problems.append("a record is not with its key")
    if not np.array_equal(records[:, 16:], filler(record_keys, positions)):
        problems.append("a record's payload changed")
    ties = keys[1:] == keys[:-1]
    if stable and np.any(positions[1:][ties] < positions[:-1][ties]):
        problems.append("equal keys out of input order")
    return problems


def global_problems(comm: MPI.Comm, keys, records, total: int, stable: bool) -> list[str]:
    """What is wrong across the shards: boundaries, count, positions (collective)."""
    _, positions = unpack(records)
    ends = (keys[0], positions[0], keys[-1], positions[-1]) if len(keys) else None
    ends = [e for e in comm.allgather(ends) if e is not None]
    problems = []
    for (_, _, last_key, last_pos), (first_key, first_pos, _, _) in zip(ends, ends[1:]):
        if first_key < last_key or (stable and first_key == last_key and first_pos < last_pos):
            problems.append("shards out of order at a rank boundary")
    if comm.allreduce(len(keys)) != total:
        problems.append("the number of records changed")
    everything = comm.gather(positions, root=0)
    if everything is not None:
        seen = np.sort(np.concatenate(everything))
        if not np.array_equal(seen, np.arange(total, dtype=np.uint64)):
            problems.append("an input record is missing or duplicated")
    return problems


def sort_and_check(comm: MPI.Comm, keys: np.ndarray, what: str, stable: bool) -> bool:
    first = comm.exscan(len(keys)) or 0
    total = comm.allreduce(len(keys))
    records = make_records(keys, first)
    out_keys, out_records = distsort.sort_pairs(keys, records, comm, stable=stable)
    problems = local_problems(out_keys, out_records, stable)
    problems += global_problems(comm, out_keys, out_records, total, stable)
    problems = sorted({p for rank in comm.allgather(problems) for p in rank})
    if comm.rank == 0:
        verdict = "ok" if not problems else "WRONG: " + "; ".join(problems)
        print(f"{what}: {total} records of {RECORD_SIZE} bytes: {verdict}", flush=True)
    return not problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count-per-rank", type=int, default=100_000)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rng = np.random.default_rng(1000 + comm.rank)
    n = args.count_per_rank - 500 * comm.rank  # shards need not be the same size
    keys = rng.integers(0, 2**64, n, dtype=np.uint64)
    ok = sort_and_check(comm, keys, "sort_pairs, uint64 keys", stable=False)
    few = keys % np.uint64(16)  # 16 distinct keys: long runs of ties across ranks
    ok = sort_and_check(comm, few, "sort_pairs, stable, 16 distinct keys", stable=True) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
