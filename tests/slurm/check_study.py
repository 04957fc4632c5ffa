#!/usr/bin/env python3
"""Check a scaling-study CSV written by jobscripts/{weak,strong}-scaling.sh.

Each run solves a sine mode with zero Dirichlet boundaries, h = 1, alpha = 1 (the
stencil-input defaults; --dt given), so its discrete L2 norm is known exactly:

    u_n = A^n prod_a sin(pi (i_a + 1/2) / N_a),  A = 1 + dt sum_a -4 sin^2(pi / (2 N_a)),
    sum_i sin^2(pi (i + 1/2) / N) = N / 2  =>  L2 = A^n sqrt(prod_a N_a / 2).

Checked per precision: the rank counts, dims (product = ranks; weak: shape = size x dims),
shape, steps, backend and launcher of every row; each row against its JSON report; the
L2 norm against the formula above (fp64 1e-11, fp32 2e-5 relative); Gpts/s against
points x steps / loop time; efficiency and speedup against the smallest run; the checksum of
the final field against the report's, and in a strong study the same for every rank count
(the `bitwise` column: `reference`, then `equal`).

    check_study.py --csv F --study weak|strong --series S --ranks 1,2 --size 12x12x12
                   --steps 20 --dt 0.05 [--precisions fp64] [--backend cpu] [--launcher srun]
    check_study.py --json F --ranks 2 --shape ... --steps --dt   (a single run's report)
"""
import argparse
import csv
import json
import math
import sys

TOL = {"fp64": 1e-11, "fp32": 2e-5}
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)
    return cond


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def shape3(s):
    p = [int(v) for v in s.split("x")]
    return p + [1] * (3 - len(p))


def exact_l2(shape, steps, dt):
    lam = sum(-4.0 * math.sin(math.pi / (2 * n)) ** 2 for n in shape if n > 1)
    return (1 + dt * lam) ** steps * math.sqrt(math.prod(n / 2 for n in shape if n > 1))


def check_report(rep, where, ranks, shape, steps, dt, precision, backend):
    check(rep["ranks"] == ranks, f"{where}: ranks {rep['ranks']}, expected {ranks}")
    check(math.prod(rep["dims"]) == ranks, f"{where}: dims {rep['dims']} do not multiply to {ranks}")
    check(rep["shape"] == shape, f"{where}: shape {rep['shape']}, expected {shape}")
    check(rep["steps"] - rep["first_step"] == steps, f"{where}: {rep['steps']} steps, expected {steps}")
    check(rep["precision"] == precision, f"{where}: precision {rep['precision']}, expected {precision}")
    check(rep["backend"] == backend, f"{where}: backend {rep['backend']}, expected {backend}")
    check(rep["norms"]["nonfinite"] == 0, f"{where}: {rep['norms']['nonfinite']} non-finite values")
    want = exact_l2(shape, steps, dt)
    check(close(rep["norms"]["l2"], want, TOL[precision]),
          f"{where}: L2 {rep['norms']['l2']!r}, exact {want!r} (rel. tol {TOL[precision]})")
    pts = shape[0] * shape[1] * shape[2]
    check(rep["loop_seconds"] > 0, f"{where}: loop_seconds {rep['loop_seconds']}")
    if rep["loop_seconds"] > 0:
        g = pts * steps / rep["loop_seconds"] / 1e9
        check(close(rep["gpts_per_second"], g, 1e-6),
              f"{where}: {rep['gpts_per_second']} Gpts/s, but points x steps / loop = {g}")


def check_csv(a):
    with open(a.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["series"] == a.series]
    size = shape3(a.size or a.shape)
    for prec in a.precisions.split(","):
        nerr = len(errors)
        rs = sorted((r for r in rows if r["precision"] == prec), key=lambda r: int(r["ranks"]))
        ranks = [int(r["ranks"]) for r in rs]
        if not check(ranks == a.ranks, f"{prec}: CSV rows for ranks {ranks}, expected {a.ranks}"):
            continue
        g0 = p0 = None
        for r in rs:
            p = int(r["ranks"])
            where = f"{a.csv} {prec} ranks {p}"
            dims = shape3(r["dims"])
            shape = [s * d for s, d in zip(size, dims)] if a.study == "weak" else size
            check(r["study"] == a.study, f"{where}: study {r['study']}")
            check(r["shape"] == "x".join(map(str, shape)), f"{where}: shape {r['shape']}, expected {shape}")
            check(r["per_rank"] == ("x".join(map(str, size)) if a.study == "weak" else "-"),
                  f"{where}: per_rank {r['per_rank']}")
            check(int(r["points"]) == math.prod(shape), f"{where}: points {r['points']}")
            check(int(r["steps"]) == a.steps, f"{where}: steps {r['steps']}")
            check(r["backend"] == a.backend, f"{where}: backend {r['backend']}")
            check(r["launcher"] == a.launcher, f"{where}: launcher {r['launcher']}, expected {a.launcher}")
            check(int(r["nodes"]) == 1, f"{where}: nodes {r['nodes']}")
            with open(r["json"]) as f:
                rep = json.load(f)
            check_report(rep, where, p, shape, a.steps, a.dt, prec, a.backend)
            check("x".join(map(str, rep["dims"])) == r["dims"], f"{where}: dims differ from JSON")
            for key in ("loop_seconds", "gpts_per_second"):
                check(float(r[key]) == rep[key], f"{where}: {key} {r[key]} != JSON {rep[key]}")
            check(float(r["l2"]) == rep["norms"]["l2"], f"{where}: l2 differs from JSON")
            check(len(r["checksum"]) == 16 and r["checksum"] == rep["checksum"],
                  f"{where}: checksum {r['checksum']!r}, JSON {rep['checksum']!r}")
            # Strong: one problem, so one field, bit for bit (the first run is the reference).
            want = ("equal" if g0 is not None else "reference") if a.study == "strong" else ""
            check(r["bitwise"] == want, f"{where}: bitwise {r['bitwise']!r}, expected {want!r}")
            if a.study == "strong":
                check(r["checksum"] == rs[0]["checksum"],
                      f"{where}: checksum {r['checksum']}, the first run's {rs[0]['checksum']}")
            ov = rep["overlap"]
            check(r["hidden"] == (repr(ov["hidden"]) if ov else "") and (ov is None) == (p == 1),
                  f"{where}: hidden {r['hidden']!r}, JSON overlap {ov}")
            g = float(r["gpts_per_second"])
            if g0 is None:
                g0, p0 = g, p
                check(float(r["efficiency"]) == 1.0 and float(r["speedup"]) == 1.0,
                      f"{where}: the smallest run has efficiency {r['efficiency']}, speedup {r['speedup']}")
            else:
                check(close(float(r["efficiency"]), (g / p) / (g0 / p0), 1e-12),
                      f"{where}: efficiency {r['efficiency']}, expected {(g / p) / (g0 / p0)}")
                check(close(float(r["speedup"]), g / g0, 1e-12), f"{where}: speedup {r['speedup']}")
        if len(errors) == nerr:
            print(f"check_study.py: {a.study} {prec}: {len(rs)} rows OK "
                  f"(L2 exact, efficiency {', '.join(r['efficiency'][:6] for r in rs)})")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--csv")
    p.add_argument("--json")
    p.add_argument("--study", choices=["weak", "strong"])
    p.add_argument("--series")
    p.add_argument("--ranks", required=True, type=lambda s: [int(v) for v in s.split(",")])
    p.add_argument("--size", help="weak: cells per rank")
    p.add_argument("--shape", help="strong, or --json: global cells")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--dt", type=float, required=True)
    p.add_argument("--precisions", default="fp64")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--launcher", default="srun")
    a = p.parse_args()
    if a.json:
        with open(a.json) as f:
            rep = json.load(f)
        check_report(rep, a.json, a.ranks[0], shape3(a.shape), a.steps, a.dt, a.precisions, a.backend)
        if not errors:
            print(f"check_study.py: {a.json} OK (L2 exact)")
    else:
        if not (a.csv and a.study and a.series and (a.size or a.shape)):
            p.error("--csv needs --study, --series and --size or --shape")
        check_csv(a)
    for e in errors:
        print(f"check_study.py: FAIL: {e}", file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
