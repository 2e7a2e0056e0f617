"""`check --values --stable`: did equal keys keep their values in input order?

A sort of pairs is stable when the i-th value of each key in the output is the i-th value of
that key in the input. So every row is hashed with its key, its value and its rank among its
key's rows (how many rows of that key come before it), order-independently, and the input's sum
must equal the output's. In the sorted output a row's rank is its distance from the start of
its key's run, runs continuing across ranks. In the input it is its rank among its key's rows
on this rank plus the rows of that key on the ranks before; those counts meet at an owner rank
per key (one all-to-all there and one back), which adds them up in rank order.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .check import checksum, open_files
from .errors import DistsortError, agree
from .io import rank_range
from .io.staging import load
from .keys import NumericCodec, stand_ins
from .mix import splitmix64
from .transport import counts_received, displacements


def check_files(comm, input_path, output_path, fmt, values: tuple,
                values_format: tuple = (None, None)) -> tuple[bool, str]:
    """(stable?, one line for the user) for a sort's input and output (fmt: the input's, or
    None) and their values files (check --values --stable); each rank reads an even share of
    each, opened as check.run_check opens them. Collective."""
    def shares():
        files = open_files(input_path, output_path, fmt, values, values_format)
        if files[0].fmt.kind == "records":
            raise DistsortError("--stable checks keys with values: records carry their own")
        span = rank_range(files[0].count, comm.Get_rank(), comm.Get_size())
        loaded = [load(f, *span, np) for f in files]
        return [_codes(k, f.fmt.native_dtype) for k, f in zip(loaded[:2], files)] + loaded[2:]

    keys_in, keys_out, values_in, values_out = agree(comm, shares)
    before, after = stable_sums(comm, keys_in, values_in, keys_out, values_out)
    if before == after:
        return True, "stable: equal keys keep their values in input order"
    return False, ("not stable: the values of equal keys are not in their input order (or a "
                   "value left its key)")


def _codes(keys: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """uint64 codes, equal where the keys are (NumPy's equality: -0.0 is 0.0, NaN is NaN)."""
    stand = stand_ins(dtype, False)
    if stand is not None:
        return stand.encode(keys.view(dtype)).astype(np.uint64)
    return NumericCodec(dtype, canonical=True).encode(keys.view(dtype), np).astype(np.uint64)


def stable_sums(comm, keys_in, values_in, keys_out, values_out) -> tuple[int, int]:
    """The hashes of (key, rank among its key's rows, value) over the input's and the output's
    rows of all ranks. keys: this rank's share, as uint64 codes equal where the keys are."""
    mine_in = checksum(_with_ranks(keys_in, input_ranks(comm, keys_in)), np, values_in)
    mine_out = checksum(_with_ranks(keys_out, output_ranks(comm, keys_out)), np, values_out)
    sums = comm.allgather((mine_in, mine_out))
    return sum(s for s, _ in sums) % 2**64, sum(s for _, s in sums) % 2**64


def _with_ranks(keys: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    return np.stack([keys.astype(np.uint64), ranks.astype(np.uint64)], axis=1)


def _runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each run of equal keys, each row's run)."""
    n = len(sorted_keys)
    starts = np.ones(n, dtype=bool)
    starts[1:] = sorted_keys[1:] != sorted_keys[:-1]
    return np.flatnonzero(starts), np.cumsum(starts) - 1


def output_ranks(comm, keys: np.ndarray) -> np.ndarray:
    """Each row's rank among its key's rows, for keys sorted across the ranks."""
    first, run = _runs(keys)
    ranks = np.arange(len(keys)) - first[run] if len(keys) else np.zeros(0, np.int64)
    ends = (len(keys), keys[0] if len(keys) else None, keys[-1] if len(keys) else None,
            len(keys) - first[-1] if len(keys) else 0)
    key, length = None, 0  # the run that the ranks before this one end with
    for n, head, tail, trailing in comm.allgather(ends)[: comm.Get_rank()]:
        if n == 0:
            continue
        length = length + n if head == key and trailing == n else trailing
        key = tail
    if len(keys) and key is not None and keys[0] == key:
        ranks[run == 0] += length
    return ranks


def input_ranks(comm, keys: np.ndarray) -> np.ndarray:
    """Each row's rank among its key's rows in the input (ranks in order, rows in order)."""
    order = np.argsort(keys, kind="stable")
    first, run = _runs(keys[order])
    distinct = keys[order][first]
    counts = np.diff(np.append(first, len(keys)))
    before = _rows_on_earlier_ranks(comm, distinct, counts)
    ranks = np.empty(len(keys), np.int64)
    ranks[order] = np.arange(len(keys)) - first[run] + before[run]
    return ranks


def _rows_on_earlier_ranks(comm, distinct: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """For each of this rank's distinct keys, its rows on the ranks before: each key's counts go
    to an owner rank (by its hash), which adds them up in rank order and sends them back."""
    p = comm.Get_size()
    owner = (splitmix64(distinct.astype(np.uint64)) % np.uint64(p)).astype(np.int64)
    by = np.argsort(owner, kind="stable")
    sent = np.bincount(owner, minlength=p).astype(np.int64)
    got = counts_received(comm, sent)
    keys_got = _alltoallv(comm, distinct[by].astype(np.uint64), sent, got)
    counts_got = _alltoallv(comm, counts[by].astype(np.int64), sent, got)
    source = np.repeat(np.arange(p), got)
    order = np.lexsort((source, keys_got))  # by key, then by source rank
    first, run = _runs(keys_got[order])
    upto = np.cumsum(counts_got[order]) - counts_got[order]
    before = np.empty(len(order), np.int64)
    before[order] = upto - upto[first][run]
    back = _alltoallv(comm, before, got, sent)
    result = np.empty(len(distinct), np.int64)
    result[by] = back
    return result


def _alltoallv(comm, data: np.ndarray, sent: np.ndarray, got: np.ndarray) -> np.ndarray:
    """data's rows for rank j (sent[j] of them, in rank order) to rank j; got: rows from each."""
    out = np.empty(int(got.sum()), data.dtype)
    kind = MPI.UINT64_T if data.dtype == np.uint64 else MPI.INT64_T
    comm.Alltoallv([data, (sent, displacements(sent)), kind],
                   [out, (got, displacements(got)), kind])
    return out
