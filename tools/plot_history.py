#!/usr/bin/python3
"""Plot the history of a stencil run (history.csv of --history-every) to PNG.

  tools/plot_history.py HISTORY.csv [MORE.csv ...] [-o OUT.png] [--x time|step] [--log]

Three panels against time (or the step: --x step, and always for Poisson, whose time is 0):
the L2 norm (sum u^2 dV)^(1/2), max |u| and the integral sum u dV of the field. Several files
are drawn as one curve each, labelled by their folder. Where a step appears twice (a file
copied by hand), the last row counts. --log draws the L2 norm and max |u| on a log scale.

Needs python3 with matplotlib (Debian: python3-matplotlib); the CSV is read with the standard
library.
"""

import argparse
import csv
import os
import sys

COLUMNS = ("step", "time", "l2", "max_abs", "integral")


def read(path):
    """{step: row} of the file, the row's values as floats."""
    rows = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            sys.exit(f"plot_history: {path}: expected the columns {','.join(COLUMNS)}, "
                     f"found {reader.fieldnames}")
        for row in reader:
            rows[int(row["step"])] = {k: float(row[k]) for k in COLUMNS}
    if not rows:
        sys.exit(f"plot_history: {path} has no rows")
    return [rows[s] for s in sorted(rows)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--output", help="PNG to write (default: the first file with .png)")
    ap.add_argument("--x", choices=["time", "step"], default="time")
    ap.add_argument("--log", action="store_true")
    args = ap.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for path in args.files:
        rows = read(path)
        x_key = args.x if any(r["time"] != 0 for r in rows) else "step"
        x = [r[x_key] for r in rows]
        label = os.path.basename(os.path.dirname(os.path.abspath(path))) or path
        for ax, key, title in zip(axes, ("l2", "max_abs", "integral"),
                                  ("L2 norm", "max |u|", "integral of u")):
            ax.plot(x, [r[key] for r in rows], marker=".", label=label)
            ax.set_title(title)
            ax.set_xlabel(x_key)
            ax.grid(True, alpha=0.3)
    if args.log:
        axes[0].set_yscale("log")
        axes[1].set_yscale("log")
    if len(args.files) > 1:
        axes[0].legend()
    fig.tight_layout()
    out = args.output or os.path.splitext(args.files[0])[0] + ".png"
    fig.savefig(out, dpi=100)
    print(f"plot_history: wrote {out}")


if __name__ == "__main__":
    main()
