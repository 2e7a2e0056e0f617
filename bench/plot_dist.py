"""Plot bench/dist_sort.py results: phase breakdown per P and throughput against P.

    python bench/plot_dist.py RESULTS_DIR [-o bench/dist_sort.png]

RESULTS_DIR holds the dist_sort_p*.json files of one or more runs (one per P).
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PHASES = ("sample", "partition", "exchange", "finish")


def load(folder: str) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "dist_sort_p*.json"))):
        with open(path) as f:
            rows += json.load(f)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder")
    parser.add_argument("-o", "--output", default="bench/dist_sort.png")
    args = parser.parse_args()
    rows = load(args.folder)
    cases = sorted({r["case"] for r in rows})
    fig, axes = plt.subplots(1, len(cases), figsize=(4 * len(cases), 4), squeeze=False)
    for ax, case in zip(axes[0], cases):
        mine = sorted((r for r in rows if r["case"] == case), key=lambda r: r["ranks"])
        labels = [f"P={r['ranks']}" for r in mine]
        bottom = [0.0] * len(mine)
        for phase in PHASES:
            ms = [r["phases"].get(phase, 0.0) * 1e3 for r in mine]
            ax.bar(labels, ms, bottom=bottom, label=phase)
            bottom = [b + m for b, m in zip(bottom, ms)]
        one_gpu = [r.get("one_gpu_cupy_sort_s") for r in mine if r.get("one_gpu_cupy_sort_s")]
        if one_gpu:
            ax.axhline(one_gpu[0] * 1e3, color="k", linestyle="--", label="1 GPU cupy.sort")
        ax.set_title(case)
        ax.set_ylabel("ms (slowest rank per phase)")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
