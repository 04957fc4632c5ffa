#!/usr/bin/env python3
"""Plot a scaling-study CSV (study_csv.py columns) to a PNG.

Left: throughput (Gpts/s) against ranks, log-log, each curve with its ideal (dotted:
baseline per-rank throughput times ranks). Right: efficiency (%) against ranks, with the
100% line. One curve per study, series, problem, precision, backend, transport, overlap and
stencil options (study_csv.py's GROUP).

    plot_scaling.py CSV [CSV...] -o scaling.png [--title TEXT] [--series NAME ...]

Needs matplotlib (Debian: python3-matplotlib, with /usr/bin/python3).
"""
import argparse
import csv
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter
except ImportError:
    sys.exit("plot_scaling.py: error: matplotlib is missing (Debian: apt install "
             "python3-matplotlib, then run this with /usr/bin/python3)")

from study_csv import curve


def label(row):
    size = f"{row['per_rank']}/rank" if row["study"] == "weak" else row["shape"]
    text = (f"{row['study']} {size} {row['steps']} steps {row['series']}: {row['precision']} "
            f"{row['backend']}")
    if row["transport"] != "default":
        text += f" {row['transport']}"
    if row["overlap"] != "default":
        text += f" overlap {row['overlap']}"
    if row["stencil_args"]:
        text += f" {row['stencil_args']}"
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", nargs="+")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.add_argument("--title", default=None)
    p.add_argument("--series", action="append", help="plot only these series (repeat)")
    a = p.parse_args()

    groups = {}
    for path in a.csv:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if a.series and r["series"] not in a.series:
                    continue
                groups.setdefault(curve(r), []).append(r)
    if not groups:
        sys.exit(f"plot_scaling.py: error: no rows to plot in {', '.join(a.csv)}")

    fig, (ax_g, ax_e) = plt.subplots(1, 2, figsize=(12, 4.8))
    all_ranks = set()
    for i, (_, rows) in enumerate(sorted(groups.items())):
        rows.sort(key=lambda r: int(r["ranks"]))
        ranks = [int(r["ranks"]) for r in rows]
        gpts = [float(r["gpts_per_second"]) for r in rows]
        eff = [100 * float(r["efficiency"]) for r in rows]
        all_ranks.update(ranks)
        color = f"C{i % 10}"
        marker = "os^vD<>ph*"[i % 10]
        ax_g.plot(ranks, gpts, marker=marker, color=color, label=label(rows[0]))
        # The baseline's per-rank rate (of another series' run with --baseline-series), from
        # the first row's efficiency against it.
        ideal = [gpts[0] / ranks[0] / (eff[0] / 100) * n for n in ranks]
        ax_g.plot(ranks, ideal, ":", color=color, alpha=0.6)
        ax_e.plot(ranks, eff, marker=marker, color=color, label=label(rows[0]))
        for n, e in zip(ranks, eff):
            ax_e.annotate(f"{e:.0f}", (n, e), textcoords="offset points", xytext=(0, 6),
                          ha="center", fontsize=7, color=color)

    ticks = sorted(all_ranks)
    for ax in (ax_g, ax_e):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("ranks (one per GPU on GPU nodes)")
        ax.grid(True, which="both", alpha=0.3)
    ax_g.set_yscale("log")
    ax_g.set_ylabel("throughput (Gpts/s, loop time only)")
    ax_g.set_title("throughput (dotted: ideal)")
    ax_e.axhline(100, color="k", lw=0.8)
    ax_e.set_ylabel("efficiency vs the smallest run (%)")
    ax_e.set_title("parallel efficiency")
    top = max(110.0, max(100 * float(r["efficiency"]) for rs in groups.values() for r in rs) + 10)
    ax_e.set_ylim(0, top)
    ax_e.legend(fontsize=7, loc="lower left")
    studies = sorted({k[0] for k in groups})
    fig.suptitle(a.title or f"stencil {' and '.join(studies)} scaling")
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)
    print(f"plot_scaling.py: wrote {a.output} ({len(groups)} curves)")


if __name__ == "__main__":
    main()
