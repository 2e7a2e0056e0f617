"""Where one radix sort's wall time goes between its kernels: `python bench/history/radix_gaps.py
[--case bits24-u32] [--n 2^28] [--reps 7]`.

CUDA events are recorded on the sort's stream around the driver's launches (the histogram and
scan, and each pass with its look-back flag zeroing), on fresh keys per run after a warm-up; an
event recorded while the GPU is idle completes when the host reaches it, so the spans between
launches are the time the GPU waited for the host. Prints the median of each span, in ms, and
checks the output is sorted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import cupy

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]
from local_sort import make_input, runners  # noqa: E402

from distsort.cli import parse_count  # noqa: E402
from distsort.local import radix  # noqa: E402


class Marks:
    """Events recorded on the current stream at named points of one sort."""

    def __init__(self):
        self.points: list[tuple[str, cupy.cuda.Event]] = []

    def mark(self, name: str) -> None:
        event = cupy.cuda.Event()
        event.record()
        self.points.append((name, event))

    def wrap(self, owner, attr: str, name: str) -> None:
        inner = getattr(owner, attr)

        def marked(*args, **kwargs):
            self.mark(f"{name} begins")
            out = inner(*args, **kwargs)
            self.mark(f"{name} ends")
            return out

        setattr(owner, attr, marked)

    def spans(self) -> list[tuple[str, float]]:
        self.points[-1][1].synchronize()
        pairs = zip(self.points, self.points[1:])
        return [(f"{a} -> {b}", cupy.cuda.get_elapsed_time(ea, eb)) for (a, ea), (b, eb) in pairs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="bits24-u32")
    ap.add_argument("--n", type=parse_count, default=1 << 28)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    ours = runners(cupy, args.case, radix.RadixEngine())[0]
    marks = Marks()
    marks.wrap(radix, "digit_counts", "histogram+scan")
    marks.wrap(radix, "_launch_pass", "pass")
    table: dict[str, list[float]] = {}
    for rep in range(args.reps + 1):
        inputs = make_input(cupy, args.case, args.n, rep)
        cupy.cuda.Device().synchronize()
        marks.points.clear()
        marks.mark("call")
        out = ours(*inputs)[0]
        marks.mark("return")
        spans = marks.spans()
        if not bool((out[1:] >= out[:-1]).all()):
            raise SystemExit(f"{args.case}: output not sorted")
        if rep:  # the first run is the warm-up
            for i, (name, ms) in enumerate(spans):
                table.setdefault(f"{i:2d} {name}", []).append(ms)
            table.setdefault("   total", []).append(sum(ms for _, ms in spans))
    print(f"{args.case} n={args.n}: median ms of {args.reps} sorts")
    for name, values in table.items():
        print(f"  {statistics.median(values):8.3f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
