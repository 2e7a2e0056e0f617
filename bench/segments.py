"""One GPU: the segmented exchange's kernels against what they replace (bench/RESULTS.md).

Sender: bucket counts + scatter (local/segments.py) of 2^log uint32 keys for 4 ranks (256
buckets) against the plain partition's count + scatter into 4 buckets (local/partition.py).
Receiver: the sorts of a rank's segments in CHUNKS chunks (4 sources' blocks, as the exchange
leaves them) against one radix sort of the same keys over their 30 varying bits.
CUDA events, a warm-up, fresh keys for every timed call, median of --reps; outputs checked.
Usage: python3 bench/segments.py [--log 30] [--reps 5] [--chunks 2]
"""

from __future__ import annotations

import argparse

import cupy as cp
import numpy as np

from distsort import segmented
from distsort.chunked import block_starts
from distsort.local import partition, segments
from distsort.local.radix import radix_sort

RANKS = 4


def timed(fn, fresh, reps: int) -> float:
    """Median ms of fn(fresh()) over reps calls, after one warm-up."""
    times = []
    for r in range(reps + 1):
        args = fresh()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        if r:
            times.append(cp.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def buckets_of_4() -> tuple:
    """(splitters, sbits, dests) of 4 ranks splitting uint32 keys into equal quarters."""
    quarter = np.arange(1, RANKS, dtype=np.uint64) << np.uint64(30)
    splitters = np.stack([quarter, np.zeros(RANKS - 1, np.uint64)], axis=1)
    sbits = segments.bucket_bits(RANKS)
    return splitters, sbits, segmented.ranges(splitters, np.uint32, sbits)


def sender(n: int, reps: int) -> dict:
    splitters, sbits, dests = buckets_of_4()
    out = cp.empty(n, dtype=cp.uint32)

    def fresh():
        return (cp.random.randint(0, 2**32, n, dtype=np.uint64).astype(cp.uint32),)

    def buckets(keys):
        part = segments.BucketPartition(keys, 0, splitters, dests, sbits)
        counts = cp.asnumpy(part.counts()).astype(np.int64)
        part.scatter(np.cumsum(counts) - counts, out)

    def plain(keys):
        partition.partition_keys(keys, 0, splitters, want_dest=False)

    part = segments.BucketPartition(fresh()[0], 0, splitters, dests, sbits)
    counts = cp.asnumpy(part.counts()).astype(np.int64)

    def count_only(keys):
        part.keys = keys
        part.counts()

    def scatter_only(keys):
        part.keys = keys
        part.scatter(np.cumsum(counts) - counts, out)

    keys = fresh()[0]
    buckets(keys)
    low = cp.maximum(out[: n // 8] >> 24, 1)  # destination 0, its first two segments merged
    assert bool((cp.diff(low) >= 0).all()), "not grouped by bucket"
    return {"bucket_ms": timed(buckets, fresh, reps), "count_ms": timed(count_only, fresh, reps),
            "scatter_ms": timed(scatter_only, fresh, reps),
            "partition4_ms": timed(plain, fresh, reps)}


def receiver(n: int, reps: int, chunks: int) -> dict:
    """A rank of 4 whose keys are [0, 2^30): 4 sources' blocks, each grouped by segment."""
    splitters, sbits, dests = buckets_of_4()
    per = n // RANKS
    state = {}

    def fresh():
        blocks = [cp.random.randint(0, 2**30, per, dtype=np.uint64).astype(cp.uint32)
                  for _ in range(RANKS)]
        parts = [segments.BucketPartition(b, 0, splitters, dests, sbits)
                 for b in blocks]
        table = np.stack([cp.asnumpy(p.counts())[: 1 << sbits] for p in parts]).astype(np.int64)
        cuts = segmented.chunk_cuts(table.sum(axis=0), chunks)
        received = segmented._per_chunk(table, cuts)
        starts = block_starts(received.T.copy(), 1024)
        incoming = cp.empty(int(starts[-1, -1] + received[-1, -1]), dtype=cp.uint32)
        inside = segmented._within(table, cuts)
        chunk = np.repeat(np.arange(chunks), np.diff(cuts))
        for s, part in enumerate(parts):
            bases = np.zeros(segments.BUCKETS, dtype=np.int64)
            bases[: 1 << sbits] = starts[chunk, s] + inside[s]
            part.scatter(bases, incoming)
        sorts = segmented._sorts(np.uint32, table, cuts, starts, received, dests[0])
        outgoing = cp.empty_like(incoming)
        state.update(incoming=incoming, outgoing=outgoing, sorts=sorts, keys=cp.concatenate(blocks))
        return sorts, incoming, outgoing

    def run(sorts, incoming, outgoing):
        for sort in sorts:
            sort.run(incoming, outgoing)

    segmented_ms = timed(run, fresh, reps)
    result = state["outgoing"] if state["sorts"][-1].in_scratch else state["incoming"]
    want = cp.sort(state["keys"])
    assert bool((result[:n] == want).all()), "segment sorts: wrong result"

    def whole(keys, scratch):
        radix_sort(keys, end_bit=30, overwrite=True, scratch=scratch)

    def fresh_whole():
        keys = cp.random.randint(0, 2**30, n, dtype=np.uint64).astype(cp.uint32)
        return keys, cp.empty_like(keys)

    return {"segment_sorts_ms": segmented_ms, "radix_30bit_ms": timed(whole, fresh_whole, reps),
            "passes": len(state["sorts"][0].passes), "chunks": chunks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=2)
    args = ap.parse_args()
    n = 1 << args.log
    print(f"segments 2^{args.log} uint32: sender {sender(n, args.reps)}")
    print(f"segments 2^{args.log} uint32: receiver {receiver(n, args.reps, args.chunks)}")


if __name__ == "__main__":
    main()
