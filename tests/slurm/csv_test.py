#!/usr/bin/env python3
"""Unit checks of jobscripts/study_csv.py (and, with --plot, plot_scaling.py).

    csv_test.py SOURCE_DIR WORKDIR [--plot]

Appends rows made from synthetic --report-json files and checks the CSV: header, values
copied from the report, efficiency and speedup against the smallest run of the same group
(exact in binary floating point for the numbers chosen), separate groups (another overlap,
precision, series, shape or step count), a group measured
against another series' smallest run (--baseline-series), the strong study's bitwise column
(the first run of a precision the reference, equal checksums, a differing one failing after its
row is written; weak rows empty), and refusals (a CSV with other columns, also by --check, a
report missing keys). --plot draws the CSV and checks the
PNG; it exits 77 (skip) when matplotlib is missing.
"""
import csv
import json
import os
import shutil
import subprocess
import sys

src, work = sys.argv[1], sys.argv[2]
plot = "--plot" in sys.argv[3:]
jobscripts = os.path.join(src, "jobscripts")
failures = []


def expect(what, got, want):
    if got == want:
        print(f"ok   {what}: {got!r}")
    else:
        print(f"FAIL {what}: got {got!r}, expected {want!r}")
        failures.append(what)


def report(name, ranks, dims, shape, gpts, precision="fp64", steps=10, checksum="00000000000000a1"):
    points = shape[0] * shape[1] * shape[2]
    rep = {
        "input": "in.h5", "backend": "cpu", "precision": precision, "ranks": ranks,
        "dims": dims, "threads_per_rank": 1, "shape": shape, "first_step": 0,
        "steps": steps, "time": 0.5, "loop_seconds": points * steps / gpts / 1e9,
        "gpts_per_second": gpts, "bytes_per_point": 16, "bandwidth_gb_per_second": 16 * gpts,
        "phases_seconds": {"compute_shell": 0.25, "halo_pack_post": 0.125,
                           "compute_inner": 0.5, "halo_wait_unpack": 0.0625, "checks": 0},
        "setup_seconds": 0.1, "initial_field_seconds": 0.01, "write_seconds": 0.2,
        "norms": {"l2": 1.5, "max_abs": 1, "integral": 0, "nonfinite": 0}, "output": "o.h5",
        "checksum": checksum, "overlap": None if ranks == 1 else {"clock": "host", "hidden": 0.75},
    }
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(rep, f)
    return path


def append(csv_path, json_path, study="weak", series="s1", overlap="default", check=True,
           baseline=None):
    cmd = [sys.executable, os.path.join(jobscripts, "study_csv.py"), "--csv", csv_path,
           "--json", json_path, "--study", study, "--series", series, "--overlap", overlap,
           "--per-rank", "8x8x8", "--launcher", "mpirun", "--stencil-args=--quiet"]
    if baseline:
        cmd += ["--baseline-series", baseline]
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
out = os.path.join(work, "study.csv")

append(out, report("p1", 1, [1, 1, 1], [8, 8, 8], 2.0))
append(out, report("p2", 2, [1, 1, 2], [8, 8, 16], 3.0))
append(out, report("p4", 4, [1, 2, 2], [8, 16, 16], 4.0))
# Another overlap setting starts its own group; its smallest run is 2 ranks.
append(out, report("q2", 2, [1, 1, 2], [8, 8, 16], 1.0), overlap="off")
append(out, report("q4", 4, [1, 2, 2], [8, 16, 16], 1.5), overlap="off")
# fp32 too.
append(out, report("f1", 1, [1, 1, 1], [8, 8, 8], 5.0, precision="fp32"))
# Another series: against its own smallest run, or with --baseline-series against s1's.
append(out, report("b4", 4, [2, 2, 1], [16, 16, 8], 6.0), series="s2")
append(out, report("c4", 4, [2, 2, 1], [16, 16, 8], 6.0), series="s3", baseline="s1")
# Other steps in the same series: another problem, its own curve; with --baseline-series of
# another problem, a warning says so.
append(out, report("n2", 2, [1, 1, 2], [8, 8, 16], 1.0, steps=20))

with open(out, newline="") as f:
    reader = csv.DictReader(f)
    header = reader.fieldnames
    rows = list(reader)
expect("columns", header[:8], ["study", "series", "date", "ranks", "nodes", "dims", "shape", "points"])
expect("rows", len(rows), 9)
expect("one header line", open(out).read().count("study,series,"), 1)
r = rows[1]
expect("row 2 copied values", (r["ranks"], r["dims"], r["shape"], r["points"], r["steps"],
                               r["precision"], r["backend"], r["per_rank"], r["launcher"]),
       ("2", "1x1x2", "8x8x16", "1024", "10", "fp64", "cpu", "8x8x8", "mpirun"))
expect("row 2 gpts, per rank", (float(r["gpts_per_second"]), float(r["gpts_per_rank"])), (3.0, 1.5))
expect("row 2 compute, halo", (float(r["compute_seconds"]), float(r["halo_seconds"])), (0.75, 0.1875))
expect("hidden: row 2, one rank's (no messages)", (r["hidden"], rows[0]["hidden"]), ("0.75", ""))
expect("row 2 stencil_args", r["stencil_args"], "--quiet")
expect("efficiency on", [float(x["efficiency"]) for x in rows[:3]], [1.0, 0.75, 0.5])
expect("speedup on", [float(x["speedup"]) for x in rows[:3]], [1.0, 1.5, 2.0])
expect("efficiency off", [float(x["efficiency"]) for x in rows[3:5]], [1.0, 0.75])
expect("fp32 baseline", float(rows[5]["efficiency"]), 1.0)
expect("a new series is its own baseline", float(rows[6]["efficiency"]), 1.0)
expect("--baseline-series s1", (float(rows[7]["efficiency"]), float(rows[7]["speedup"])),
       (0.75, 3.0))
expect("other steps: their own curve", float(rows[8]["efficiency"]), 1.0)
expect("weak rows: checksum copied, no bitwise check", (r["checksum"], r["bitwise"]),
       ("00000000000000a1", ""))
res = append(out, report("w2", 2, [1, 1, 2], [8, 8, 16], 1.0, steps=30), series="s4",
             baseline="s1")
expect("--baseline-series of another problem: a warning naming what differs",
       "no run of --baseline-series s1 is of this curve (its rows differ in steps)" in res.stderr,
       True)

# Strong scaling: every run of a precision against its first run's checksum, whatever its
# overlap; another shape is another problem.
strong = os.path.join(work, "strong.csv")
g = [16, 16, 16]
append(strong, report("s1", 1, [1, 1, 1], g, 2.0), study="strong")
append(strong, report("s2", 2, [1, 1, 2], g, 3.0), study="strong")
append(strong, report("s2off", 2, [1, 1, 2], g, 3.0), study="strong", overlap="off")
append(strong, report("t1", 1, [1, 1, 1], g, 4.0, precision="fp32", checksum="00000000000000b2"),
       study="strong")
append(strong, report("o2", 2, [1, 1, 2], [16, 16, 8], 3.0, checksum="00000000000000c3"),
       study="strong")
res = append(strong, report("s4", 4, [1, 2, 2], g, 4.0, checksum="00000000000000a0"),
             study="strong", check=False)
expect("a differing final field fails", (res.returncode != 0, "differs from the 1-rank run's" in
                                          res.stderr, "00000000000000a0 against 00000000000000a1"
                                          in res.stderr), (True, True, True))
with open(strong, newline="") as f:
    srows = list(csv.DictReader(f))
expect("bitwise column", [x["bitwise"] for x in srows],
       ["reference", "equal", "equal", "reference", "reference", "differs"])
expect("another shape in the series: its own curve (efficiency, speedup)",
       (float(srows[4]["efficiency"]), float(srows[4]["speedup"])), (1.0, 1.0))
# A differing run is no reference: a later series' smaller run that differs from the baseline
# series' run must not make its other runs "equal".
g8 = [8, 8, 8]
append(strong, report("c2", 2, [1, 1, 2], g8, 3.0, checksum="00000000000000c8"), study="strong",
       series="c")
for name, ranks, dims in (("d1", 1, [1, 1, 1]), ("d2", 2, [1, 2, 1])):
    append(strong, report(name, ranks, dims, g8, 2.0, checksum="00000000000000d8"),
           study="strong", series="d", baseline="c", check=False)
with open(strong, newline="") as f:
    srows = list(csv.DictReader(f))
expect("bitwise against the first run that does not differ",
       [x["bitwise"] for x in srows[6:]], ["reference", "differs", "differs"])

bad = os.path.join(work, "other.csv")
with open(bad, "w") as f:
    f.write("a,b\n1,2\n")
res = append(bad, report("p1", 1, [1, 1, 1], [8, 8, 8], 2.0), check=False)
expect("foreign CSV refused", (res.returncode != 0, "use a new --csv file" in res.stderr), (True, True))
check = [sys.executable, os.path.join(jobscripts, "study_csv.py"), "--check", "--csv"]
res = subprocess.run(check + [bad], capture_output=True, text=True)
expect("--check refuses it", (res.returncode != 0, "use a new --csv file" in res.stderr),
       (True, True))
res = subprocess.run(check + [out], capture_output=True, text=True)
expect("--check takes this version's CSV", (res.returncode, res.stderr), (0, ""))
res = subprocess.run(check + [os.path.join(work, "new.csv")], capture_output=True, text=True)
expect("--check takes a CSV yet to be written", (res.returncode, os.path.exists(
    os.path.join(work, "new.csv"))), (0, False))
broken = os.path.join(work, "broken.json")
with open(broken, "w") as f:
    json.dump({"ranks": 1}, f)
res = append(out, broken, check=False)
expect("incomplete report refused", (res.returncode != 0, "lacks dims, shape" in res.stderr),
       (True, True))

if plot:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("SKIP: matplotlib is missing")
        sys.exit(77)
    png = os.path.join(work, "study.png")
    subprocess.run([sys.executable, os.path.join(jobscripts, "plot_scaling.py"), out, "-o", png],
                   check=True)
    with open(png, "rb") as f:
        data = f.read()
    expect("PNG signature", data[:8], b"\x89PNG\r\n\x1a\n")
    # IHDR: width and height, big-endian, at bytes 16..24 (12 x 4.8 in at 120 dpi).
    expect("PNG size", (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")),
           (1440, 576))

if failures:
    sys.exit(f"csv_test.py: {len(failures)} checks failed")
print("csv_test.py: all checks passed")
