"""Plot a scaling run: weak and strong scaling efficiency, and the phases per P.

    python bench/plot_scaling.py bench/data/dist_sort/x8_scaling_run3.json \
        -o bench/plots/scaling_x8.png
"""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data")
    parser.add_argument("-o", "--output", default="bench/scaling.png")
    args = parser.parse_args()
    with open(args.data) as f:
        run = json.load(f)
    weak, strong = run["weak_per_rank_2^30"], run["strong_total_8x2^30"]
    fig, (eff, phases) = plt.subplots(1, 2, figsize=(10, 4))
    ps = sorted(int(p) for p in weak)
    eff.plot(ps, [weak["1"] / weak[str(p)] for p in ps], marker="o", label="weak (2^30 per GPU)")
    base = min(int(p) for p in strong)
    sp = sorted(int(p) for p in strong)
    eff.plot(sp, [strong[str(base)] * base / (strong[str(p)] * p) for p in sp], marker="s",
             label=f"strong (8x2^30, vs P={base})")
    eff.set(xlabel="GPUs (P)", ylabel="efficiency", ylim=(0, 1.05), xticks=ps)
    eff.legend()
    per = run["phases_ms_per_rank_2^30"]
    bottom = [0.0] * len(per)
    for phase in ("sample", "partition", "exchange", "finish"):
        ms = [per[p][phase] for p in sorted(per, key=int)]
        phases.bar([f"P={p}" for p in sorted(per, key=int)], ms, bottom=bottom, label=phase)
        bottom = [b + m for b, m in zip(bottom, ms)]
    phases.axhline(weak["1"], color="k", linestyle="--", label="1 GPU, 2^30 keys")
    phases.set(ylabel="ms", title="2^30 keys per GPU")
    phases.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
