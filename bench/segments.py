"""One GPU: the segmented exchange's kernels against what they replace (bench/RESULTS.md).

Sender: bucket counts + scatter (local/segments.py) of 2^log uint32 keys for --ranks ranks (256
buckets) against the plain partition's count + scatter into as many buckets (local/partition.py)
and against one onesweep radix pass over the same keys (what the scatter is built on).
Receiver: the plan (host ms, until the descriptors are on the device) and the sorts of a rank's
segments in CHUNKS chunks (4 sources' blocks, as the exchange leaves them) against one radix
sort of the same keys over their varying bits (32 - log2 ranks).
CUDA events, a warm-up, fresh keys for every timed call, median of --reps; outputs checked.
Usage: python3 bench/segments.py [--log 30] [--reps 5] [--chunks 2] [--ranks 4]
"""

from __future__ import annotations

import argparse
import time

import cupy as cp
import numpy as np

from distsort import segmented
from distsort.chunked import block_starts
from distsort.local import partition, segments
from distsort.local.radix import (
    KEYS_ONLY,
    WIDE_ROWS,
    _dummy,
    digit_counts,
    flag_words,
    onesweep,
    radix_sort,
    tile_keys,
)


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


def buckets_of(ranks: int) -> tuple:
    """(splitters, sbits, dests) of `ranks` (a power of two) splitting uint32 keys equally."""
    cuts = np.arange(1, ranks, dtype=np.uint64) << np.uint64(span_bits(ranks))
    splitters = np.stack([cuts, np.zeros(ranks - 1, np.uint64)], axis=1)
    sbits = segments.bucket_bits(ranks)
    return splitters, sbits, segmented.ranges(splitters, np.uint32, sbits)


def span_bits(ranks: int) -> int:
    """The varying bits of one rank's uint32 keys."""
    return 32 - (ranks - 1).bit_length()


def sender(n: int, reps: int, ranks: int) -> dict:
    splitters, sbits, dests = buckets_of(ranks)
    out = cp.empty(n, dtype=cp.uint32)
    radix_bases = cp.empty(256, dtype=cp.uint32)

    def fresh():
        """Fresh keys, their partition, its bucket bases, and their top digit's bases (untimed)."""
        keys = cp.random.randint(0, 2**32, n, dtype=np.uint64).astype(cp.uint32)
        part = segments.BucketPartition(keys, 0, splitters, dests, sbits)
        counts = cp.asnumpy(part.counts()).astype(np.int64)
        digit_counts(keys, np.uint32(0), (24, 32, 1), cp.zeros(256, cp.uint32), radix_bases)
        return keys, part, np.cumsum(counts) - counts

    def buckets(keys, part, bases):
        part = segments.BucketPartition(keys, 0, splitters, dests, sbits)
        counts = cp.asnumpy(part.counts()).astype(np.int64)
        part.scatter(np.cumsum(counts) - counts, out)

    def plain(keys, part, bases):
        partition.partition_keys(keys, 0, splitters, want_dest=False)

    def count_only(keys, part, bases):
        part.counts()

    def scatter_only(keys, part, bases):
        part.scatter(bases, out)

    def radix_pass(keys, part, bases):
        tiles = -(-n // tile_keys(4, "keys"))
        pass_args = (radix_bases, cp.zeros(1, cp.uint32), cp.zeros(flag_words(tiles, n), cp.uint32))
        dummy = _dummy(keys.device.id)
        onesweep((keys, dummy), (out, dummy), KEYS_ONLY, (24, 8), np.uint32(0), pass_args,
                 n >= WIDE_ROWS, tiles)

    keys, part, bases = fresh()
    buckets(keys, part, bases)
    low = cp.maximum(out[: n // (2 * ranks)] >> 24, 1)  # destination 0: its 2 first merged
    assert bool((cp.diff(low) >= 0).all()), "not grouped by bucket"
    radix_pass(keys, part, bases)
    assert bool((cp.diff(out >> 24) >= 0).all()), "radix pass: not grouped by top digit"
    return {"bucket_ms": timed(buckets, fresh, reps), "count_ms": timed(count_only, fresh, reps),
            "scatter_ms": timed(scatter_only, fresh, reps),
            "radix_pass_ms": timed(radix_pass, fresh, reps),
            "partition_ms": timed(plain, fresh, reps)}


def receiver(n: int, reps: int, chunks: int, ranks: int) -> dict:
    """Rank 0 of `ranks`, its keys in [0, 2^span): a block from every rank, grouped by segment."""
    splitters, sbits, dests = buckets_of(ranks)
    span = span_bits(ranks)
    per = n // ranks
    state, plans = {}, []

    def fresh():
        blocks = [cp.random.randint(0, 2**span, per, dtype=np.uint64).astype(cp.uint32)
                  for _ in range(ranks)]
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
        cp.cuda.get_current_stream().synchronize()
        began = time.perf_counter()
        sorts = segmented._sorts(np.uint32, table, cuts, starts, received, dests[0])
        cp.cuda.get_current_stream().synchronize()
        plans.append((time.perf_counter() - began) * 1e3)
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
        radix_sort(keys, end_bit=span, overwrite=True, scratch=scratch)

    def fresh_whole():
        keys = cp.random.randint(0, 2**span, n, dtype=np.uint64).astype(cp.uint32)
        return keys, cp.empty_like(keys)

    return {"segment_sorts_ms": segmented_ms, "plan_ms": float(np.median(plans)),
            "radix_ms": timed(whole, fresh_whole, reps),
            "passes": len(state["sorts"][0].passes), "chunks": chunks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=4, help="a power of two, 2 to 16")
    args = ap.parse_args()
    n, what = 1 << args.log, f"segments 2^{args.log} uint32, {args.ranks} ranks"
    print(f"{what}: sender {sender(n, args.reps, args.ranks)}")
    print(f"{what}: receiver {receiver(n, args.reps, args.chunks, args.ranks)}")


if __name__ == "__main__":
    main()
