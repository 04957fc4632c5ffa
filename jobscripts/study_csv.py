#!/usr/bin/env python3
"""Append one row to a scaling-study CSV from a stencil --report-json file.

Standard library only, so it runs with any Python 3 on a compute node. The study scripts
(weak-scaling.sh, strong-scaling.sh) call it once per run.

Efficiency is per-rank throughput relative to the smallest run (fewest ranks) already in
the CSV of the same curve (GROUP: study, series, problem, steps, precision, backend,
transport, overlap and stencil options):

    efficiency = (gpts / ranks) / (gpts_0 / ranks_0),   speedup = gpts / gpts_0

Gpts/s counts global points times steps over the loop time, so for weak scaling this is
the usual t_0 / t and for strong scaling (t_0 ranks_0) / (t ranks). Runs must therefore be
appended in increasing rank order (the scripts sort --ranks); the first row of a group is
its own baseline (efficiency 1). With --baseline-series, the smallest run of that series
counts too (e.g. rank grids of another shape measured against the same one-rank run).

A strong-scaling study solves one problem, so every run's final field must equal the first
run's of its precision bit for bit (same series or baseline series, shape and steps, any
backend, transport and overlap): the rows' `bitwise` column says `reference`, `equal` or
`differs` by the reports' checksums, and a differing run fails (exit status 1, after its row
is appended). Weak-scaling rows leave it empty.
"""
import argparse
import csv
import json
import os
import socket
import sys
import time

COLUMNS = [
    "study", "series", "date", "ranks", "nodes", "dims", "shape", "points", "per_rank",
    "precision", "backend", "transport", "overlap", "steps", "threads_per_rank",
    "loop_seconds", "gpts_per_second", "gpts_per_rank", "speedup", "efficiency",
    "bandwidth_gb_per_second", "compute_seconds", "halo_seconds", "hidden", "l2", "checksum",
    "bitwise", "launcher", "host", "stencil_args", "json",
]

# Rows with equal values here form one scaling curve: one problem (the size per rank of a
# weak study, the global shape of a strong one, the steps and stencil's options) run one way.
GROUP = ("study", "series", "per_rank", "steps", "precision", "backend", "transport", "overlap",
         "stencil_args")


def curve(row):
    """The key of row's scaling curve (GROUP, and the shape for a strong study)."""
    return tuple(str(row[k]) for k in GROUP) + ((str(row["shape"]),)
                                                if row["study"] == "strong" else ())


def fail(msg):
    sys.exit(f"study_csv.py: error: {msg}")


def read_rows(path):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            fail(f"{path} has columns {reader.fieldnames}, expected {COLUMNS}; "
                 "use a new --csv file")
        return list(reader)


def make_row(a, rep):
    need = ["ranks", "dims", "shape", "precision", "backend", "steps", "first_step",
            "loop_seconds", "gpts_per_second", "bandwidth_gb_per_second", "phases_seconds",
            "norms", "threads_per_rank"]
    missing = [k for k in need if k not in rep]
    if missing:
        fail(f"{a.json} lacks {', '.join(missing)}")
    if rep["loop_seconds"] <= 0 or rep["gpts_per_second"] <= 0:
        fail(f"{a.json}: loop_seconds {rep['loop_seconds']} and gpts_per_second "
             f"{rep['gpts_per_second']} must be positive (too few steps?)")
    ph = rep["phases_seconds"]
    overlap = rep.get("overlap")  # (None without messages, or from a version without it)
    shape = rep["shape"]
    return {
        "study": a.study,
        "series": a.series,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "ranks": rep["ranks"],
        "nodes": a.nodes,
        "dims": "x".join(str(d) for d in rep["dims"]),
        "shape": "x".join(str(n) for n in shape),
        "points": shape[0] * shape[1] * shape[2],
        "per_rank": a.per_rank,
        "precision": rep["precision"],
        "backend": rep["backend"],
        "transport": a.transport,
        "overlap": a.overlap,
        "steps": rep["steps"] - rep["first_step"],
        "threads_per_rank": rep["threads_per_rank"],
        "loop_seconds": repr(rep["loop_seconds"]),
        "gpts_per_second": repr(rep["gpts_per_second"]),
        "gpts_per_rank": repr(rep["gpts_per_second"] / rep["ranks"]),
        "bandwidth_gb_per_second": repr(rep["bandwidth_gb_per_second"]),
        "compute_seconds": repr(ph.get("compute_shell", 0.0) + ph.get("compute_inner", 0.0)),
        "halo_seconds": repr(ph.get("halo_pack_post", 0.0) + ph.get("halo_wait_unpack", 0.0)),
        "hidden": repr(overlap["hidden"]) if overlap else "",
        "l2": repr(rep["norms"]["l2"]),
        "checksum": rep.get("checksum") or "",
        "bitwise": "",
        "launcher": a.launcher,
        "host": socket.gethostname(),
        "stencil_args": a.stencil_args,
        "json": os.path.abspath(a.json),
    }


def bitwise_reference(row, rows, series):
    """The strong study's first run of this problem with a checksum (fewest ranks) that does not
    differ itself, or None."""
    same = [r for r in rows if r["study"] == "strong" and r["series"] in series
            and r["checksum"] and r["bitwise"] != "differs"
            and all(r[k] == str(row[k]) for k in ("precision", "shape", "steps"))]
    return min(same, key=lambda r: int(r["ranks"]), default=None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--csv", required=True)
    p.add_argument("--check", action="store_true",
                   help="only check that an existing CSV has this version's columns")
    p.add_argument("--json")
    p.add_argument("--study", choices=["weak", "strong"])
    p.add_argument("--series")
    p.add_argument("--baseline-series", default=None)
    p.add_argument("--per-rank", default="-")
    p.add_argument("--transport", default="default")
    p.add_argument("--overlap", default="default")
    p.add_argument("--launcher", default="")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--stencil-args", default="")
    a = p.parse_args()
    if a.check:
        read_rows(a.csv)
        return
    if not (a.json and a.study and a.series):
        p.error("--json, --study and --series are required (except with --check)")

    try:
        with open(a.json) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read the report {a.json}: {e}")
    row = make_row(a, rep)
    rows = read_rows(a.csv)
    series = {a.series, a.baseline_series or a.series}
    key = curve(row)
    group = [r for r in rows if r["series"] in series
             and curve(dict(r, series=row["series"])) == key]
    base = min(group, key=lambda r: int(r["ranks"]), default=None)
    if a.baseline_series and not any(r["series"] == a.baseline_series for r in group):
        keys = [k for k in GROUP + (("shape",) if a.study == "strong" else ()) if k != "series"]
        diffs = [[k for k in keys if r[k] != str(row[k])] for r in rows
                 if r["series"] == a.baseline_series]
        if diffs:
            diff = min(diffs, key=len)  # the baseline series' closest run
            print(f"study_csv.py: warning: no run of --baseline-series {a.baseline_series} "
                  f"is of this curve (its rows differ in {', '.join(diff)}); "
                  f"this series is its own baseline", file=sys.stderr)
    if base is None or int(base["ranks"]) >= row["ranks"]:
        speedup, eff = 1.0, 1.0
    else:
        g0, p0 = float(base["gpts_per_second"]), int(base["ranks"])
        g = rep["gpts_per_second"]
        speedup = g / g0
        eff = (g / row["ranks"]) / (g0 / p0)
    row["speedup"] = repr(speedup)
    row["efficiency"] = repr(eff)
    if a.study == "strong" and row["checksum"]:
        ref = bitwise_reference(row, rows, series)
        row["bitwise"] = ("reference" if ref is None
                          else "equal" if ref["checksum"] == row["checksum"] else "differs")

    new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    with open(a.csv, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            w.writeheader()
        w.writerow(row)
    print(f"   {row['ranks']:>5} ranks  dims {row['dims']:<9} shape {row['shape']:<15} "
          f"{row['precision']} {row['backend']} loop {rep['loop_seconds']:.4g} s  "
          f"{rep['gpts_per_second']:.4g} Gpts/s  efficiency {100 * eff:.1f}%"
          + (f"  final field {row['bitwise']}" if row["bitwise"] else ""))
    if row["bitwise"] == "differs":
        fail(f"{a.json}: the final field differs from the {ref['ranks']}-rank run's "
             f"({ref['json']}): checksum {row['checksum']} against {ref['checksum']}")


if __name__ == "__main__":
    main()
