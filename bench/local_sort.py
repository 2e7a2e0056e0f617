"""Local (one-GPU) sort benchmark: our radix engine against CUB in the same run.

CUB is what CuPy runs: cupy.sort for keys, cupy.argsort plus two gathers for key-value pairs.
Every timed call gets fresh random input (a new seed), timed with CUDA events after warm-up; the
median of --runs calls is reported, and every output is checked (ours equal to CUB's, both sorted).

    python3 bench/local_sort.py --out DIR [--min-log 20] [--max-log 30] [--runs 7] [--api]

Prints a G keys/s table and writes DIR/local_sort.json and DIR/local_sort.png. With --api the
cases run through the public API on one rank (distsort.sort, argsort, sort_pairs: encode, sort
and decode, as a user calls them; API_CASES) against cupy.sort / cupy.argsort, and every row
gets the key bytes moved per second beside a device-to-device copy's rate in the same run.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distsort.keys import NumericCodec  # noqa: E402
from distsort.local.radix import ITEMS, KEY_ITEMS, MIN_N, RadixEngine  # noqa: E402

CASES = ["uint32", "uint64", "int32", "float32", "int64", "float64", "pairs-u32", "argsort-u32",
         "bits24-u32"]
API_CASES = ["uint32", "int32", "float32", "uint64", "int64", "float64", "argsort-u32",
             "pairs-u32"]
CASE_NOTES = {
    "uint32": "cupy.sort vs ours.sort",
    "uint64": "cupy.sort vs ours.sort",
    "float32": "cupy.sort vs ours.sort(codec=NumericCodec): the codes taken in the passes",
    "float64": "cupy.sort vs ours.sort(codec=NumericCodec): the codes taken in the passes",
    "pairs-u32": "cupy.argsort + keys[o] + vals[o] vs ours.sort_pairs (uint32 keys and values)",
    "argsort-u32": "cupy.argsort vs ours.argsort (int64 result)",
    "bits24-u32": "uint32 keys with 24 varying bits: cupy.sort vs ours.sort(end_bit=24)",
    "int32": "cupy.sort vs ours.sort(codec=NumericCodec) (--api: distsort.sort)",
    "int64": "cupy.sort vs ours.sort(codec=NumericCodec) (--api: distsort.sort)",
}


@functools.cache
def _splitmix(cp):
    return cp.ElementwiseKernel(
        "uint64 seed",
        "T out",
        """
        unsigned long long z = (unsigned long long)i * 0x9E3779B97F4A7C15ull + seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        out = (T)(z ^ (z >> 31));
        """,
        "bench_splitmix",
    )


def random_words(cp, n: int, dtype, seed: int):
    """n pseudo-random unsigned words (splitmix64 of the index and seed): cheap, fresh per seed."""
    return _splitmix(cp)(
        np.uint64((seed * 0x632BE59BD9B4E019 + 1) % 2**64), cp.empty(n, dtype=dtype)
    )


def make_input(cp, case: str, n: int, seed: int) -> tuple:
    if case in ("uint32", "uint64"):
        return (random_words(cp, n, cp.dtype(case), seed),)
    if case in ("int32", "int64"):
        unsigned = cp.uint32 if case == "int32" else cp.uint64
        return (random_words(cp, n, unsigned, seed).view(case),)
    if case in ("float32", "float64"):
        rs = cp.random.RandomState(seed)
        return (rs.standard_normal(n, dtype=case),)
    keys = random_words(cp, n, cp.uint32, seed)
    if case == "bits24-u32":
        return (keys & cp.uint32(0xFFFFFF) | cp.uint32(0x5A000000),)
    if case == "pairs-u32":
        return keys, random_words(cp, n, cp.uint32, seed + 7777)
    return (keys,)


def runners(cp, case: str, eng: RadixEngine):
    """(ours, cub) for a case, each mapping the inputs to a tuple of outputs."""
    if case in ("int32", "int64", "float32", "float64"):
        codec = NumericCodec(np.dtype(case))
        return lambda x: (eng.sort(x, codec=codec),), lambda x: (cp.sort(x),)
    if case == "pairs-u32":

        def cub_pairs(k, v):
            order = cp.argsort(k)
            return k[order], v[order]

        return eng.sort_pairs, cub_pairs
    if case == "argsort-u32":
        return lambda x: (eng.argsort(x),), lambda x: (cp.argsort(x),)
    if case == "bits24-u32":
        return lambda x: (eng.sort(x, 0, 24),), lambda x: (cp.sort(x),)
    return lambda x: (eng.sort(x),), lambda x: (cp.sort(x),)


def api_runners(cp, case: str):
    """(distsort's public call, CUB's) for a case, each mapping the inputs to a tuple."""
    import distsort

    if case == "pairs-u32":

        def cub_pairs(k, v):
            order = cp.argsort(k)
            return k[order], v[order]

        return lambda k, v: tuple(distsort.sort_pairs(k, v, stable=True)), cub_pairs
    if case == "argsort-u32":
        return lambda x: (distsort.argsort(x),), lambda x: (cp.argsort(x),)
    return lambda x: (distsort.sort(x),), lambda x: (cp.sort(x),)


def copy_rate(cp, n: int, runs: int = 5) -> float:
    """GB/s (bytes read + written) of a device-to-device copy of n uint32 words: the rate every
    pass over the keys is held to."""
    src, dst = random_words(cp, n, cp.uint32, 1), cp.empty(n, dtype=cp.uint32)
    ms = statistics.median(timed(cp, lambda: dst.__setitem__(Ellipsis, src), ())[0]
                           for _ in range(runs + 1))
    return 2 * 4 * n / (ms * 1e6)


def timed(cp, fn, args) -> tuple[float, tuple]:
    start, end = cp.cuda.Event(), cp.cuda.Event()
    cp.cuda.Device().synchronize()
    start.record()
    out = fn(*args)
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end), out


def check(cp, case: str, inputs, ours, cub) -> None:
    """Ours must equal CUB's output (both are stable sorts); CUB's keys must be sorted."""
    for a, b in zip(ours, cub, strict=True):
        if a.shape != b.shape or not bool((a == b).all()):
            raise AssertionError(f"{case}: our output differs from CUB's")
    if case == "argsort-u32":
        keys = inputs[0][cub[0]]
    else:
        keys = cub[0]
    if keys.size > 1 and not bool((keys[1:] >= keys[:-1]).all()):
        raise AssertionError(f"{case}: CUB's output is not sorted")


def measure(cp, case: str, n: int, runs: int, warmup: int, eng: RadixEngine | None) -> dict:
    """Medians of ours and CUB's on fresh input per call; eng None: ours is the public API."""
    ours_fn, cub_fn = api_runners(cp, case) if eng is None else runners(cp, case, eng)
    times = {"ours": [], "cub": []}
    for r in range(warmup + runs):
        if r == warmup:
            times = {k: [] for k in times}
        inputs = make_input(cp, case, n, seed=1000 * r + n % 997)
        t_ours, out_ours = timed(cp, ours_fn, inputs)
        times["ours"].append(t_ours)
        t_cub, out_cub = timed(cp, cub_fn, inputs)
        times["cub"].append(t_cub)
        check(cp, case, inputs, out_ours, out_cub)
        del out_ours, out_cub, inputs
    med = {k: statistics.median(v) for k, v in times.items() if v}
    return {
        "case": case,
        "n": n,
        "ms": med,
        "gkeys": {k: n / (v * 1e6) for k, v in med.items()},
        "speedup": med["cub"] / med["ours"],
        "runs_ms": times,
    }


def table(rows: list[dict]) -> str:
    lines = [
        f"{'case':<12} {'log2 n':>6} {'ours Gk/s':>10} {'CUB Gk/s':>9} {'ours/CUB':>8}"
    ]
    for r in rows:
        g = r["gkeys"]
        lines.append(
            f"{r['case']:<12} {r['n'].bit_length() - 1:>6} {g['ours']:>10.2f} {g['cub']:>9.2f}"
            f" {r['speedup']:>8.2f}"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    for i, case in enumerate(dict.fromkeys(r["case"] for r in rows)):
        sel = [r for r in rows if r["case"] == case]
        x = [r["n"].bit_length() - 1 for r in sel]
        color = f"C{i}"
        ax.plot(x, [r["gkeys"]["ours"] for r in sel], "-o", color=color, label=f"{case} ours")
        ax.plot(x, [r["gkeys"]["cub"] for r in sel], "--x", color=color, label=f"{case} CUB")
    ax.set_xlabel("log2(keys)")
    ax.set_ylabel("G keys/s")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


TUNE_VARIANTS = [  # (look-back window, early counts, keys per thread of key-only passes for
    (4, 1, 24, 18, 3),  # 32-bit, 64-bit keys, blocks per SM their registers leave room for);
    (4, 1, 24, 18, 2),  # the first: the defaults. 64-bit keys take at most 18 (the tile's
    (4, 1, 28, 18, 2),  # static shared memory stays under 48 KB). Run 58 chose the keys per
    (4, 1, 32, 18, 2),  # thread at 3 blocks, session 46 tried the blocks
    (4, 1, 18, 16, 4),
    (4, 1, 24, 18, 4),
]


def tune(cp, log: int = 28, runs: int = 5) -> None:
    """Time our key sort at 2^log for several compile-time settings, each compiled apart."""
    import distsort.local.radix as rx

    keep = dict(rx.KEY_ITEMS), dict(rx.DEFINES)
    for window, early, items32, items64, blocks in TUNE_VARIANTS:
        rx.KEY_ITEMS.update({4: items32, 8: items64})
        rx.DEFINES.update({"RADIX_LOOKBACK_WINDOW": window, "RADIX_EARLY_COUNTS": early,
                           "RADIX_KEY_BLOCKS": blocks})
        rx._module.cache_clear()
        rx._kernel.cache_clear()
        eng = RadixEngine(min_n=0)
        for dtype in (cp.uint32, cp.uint64):
            times = []
            for r in range(runs + 1):
                x = random_words(cp, 1 << log, dtype, seed=r)
                t, out = timed(cp, eng.sort, (x,))
                times.append(t)
            assert bool((out == cp.sort(x)).all()), "tune: wrong result"
            med = statistics.median(times[1:])
            print(
                f"tune {cp.dtype(dtype).name} 2^{log} window {window} early {early} "
                f"items {items32}/{items64} blocks {blocks}: {med:.3f} ms",
                flush=True,
            )
    rx.KEY_ITEMS.update(keep[0])
    rx.DEFINES.update(keep[1])
    rx._module.cache_clear()
    rx._kernel.cache_clear()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--min-log", type=int, default=20)
    ap.add_argument("--max-log", type=int, default=30)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--tune", action="store_true", help="only time tile sizes (keys per thread)")
    ap.add_argument("--api", action="store_true",
                    help="time the public API (one rank) instead of the engine; API_CASES")
    args = ap.parse_args(argv)
    import cupy as cp

    if args.tune:
        tune(cp)
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    eng = None if args.api else RadixEngine(min_n=0)
    cases = API_CASES if args.api and args.cases == ",".join(CASES) else args.cases.split(",")
    copies = {log: copy_rate(cp, 1 << log) for log in range(args.min_log, args.max_log + 1)}
    rows, failures = [], []
    started = time.time()
    for case in cases:
        for log in range(args.min_log, args.max_log + 1):
            try:
                rows.append(measure(cp, case, 1 << log, args.runs, args.warmup, eng))
            except AssertionError as err:  # a wrong result: report it, go on with the next case
                print(f"FAILED {case} 2^{log}: {err}", flush=True)
                failures.append(f"{case} 2^{log}: {err}")
                break
            r = rows[-1]
            key_bytes = (1 << log) * cp.dtype(make_input(cp, case, 1, 0)[0].dtype).itemsize
            r["key_gbs"] = key_bytes / (r["ms"]["ours"] * 1e6)
            r["copy_gbs"] = copies[log]
            print(
                f"{case} 2^{log}: ours {r['ms']['ours']:.3f} ms, CUB {r['ms']['cub']:.3f} ms, "
                f"x{r['speedup']:.2f}; keys {r['key_gbs']:.0f} GB/s, copy {copies[log]:.0f} GB/s",
                flush=True,
            )
            cp.get_default_memory_pool().free_all_blocks()
    meta = {
        "device": device,
        "through": "the public API, one rank" if args.api else "the engine",
        "cupy": cp.__version__,
        "items_per_thread": ITEMS,
        "key_items_per_thread": KEY_ITEMS,
        "engine_min_n": MIN_N,
        "runs": args.runs,
        "warmup": args.warmup,
        "cases": CASE_NOTES,
        "seconds": time.time() - started,
        "failures": failures,
    }
    (args.out / "local_sort.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(table(rows))
    try:
        through = "distsort (public API)" if args.api else "ours"
        plot(rows, args.out / "local_sort.png", f"Local sort on {device}: {through} vs CUB")
    except ImportError as err:  # no matplotlib: the table and the JSON file still stand
        print(f"no plot: {err}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
