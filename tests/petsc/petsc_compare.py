#!/usr/bin/python3
"""One PETSc comparison test (label petsc; docs/design/verification.md).

Writes an input with stencil-input, runs stencil (CPU backend) on it, runs stencil-petsc
--compare on the result, and checks:
  - stencil-petsc's verdict and exit status (0, or 4 for a deliberately perturbed result),
  - its reported max difference against one computed here with numpy from the two files,
  - the difference against the tolerance and the worst-case rounding bound (heat), or the
    bound from the Jacobi stopping residual (Poisson), and for Poisson the residuals and ||b||
    stencil reported against those stencil-petsc recomputed,
  - the PETSc output file's layout (schema, step, shape, fp64),
  - optionally the implicit reference's time-discretisation error against the exact value
    for a sine mode (an eigenvector of the discrete Laplacian).
Prints the PETSc time beside the stencil CPU time (information only, never asserted).
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

import h5py
import numpy as np

EXIT_MISMATCH = 4


def run(cmd, expect=0):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if expect is not None and p.returncode != expect:
        fail(f"exit status {p.returncode}, expected {expect}: {' '.join(cmd)}")
    return p


def fail(msg):
    print("TEST FAILED:", msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg, flush=True)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def read_field(path):
    with h5py.File(path, "r") as f:
        return np.array(f["field"]), dict(f.attrs)


def perturb(src, dst, rel):
    """Copy src to dst with the largest-magnitude value multiplied by (1 + rel)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        d = f["field"]
        a = np.array(d)
        idx = np.unravel_index(np.argmax(np.abs(a)), a.shape)
        old = a[idx]
        a[idx] = old * (1 + rel)
        d[...] = a
        print(f"perturbed cell {idx}: {old!r} -> {a[idx]!r}")
        return abs(float(a[idx]) - float(old))


def sine_time_error(inp):
    """Exact max |explicit - exact-in-time| for a sine-mode input with zero Dirichlet:
    u = A phi with phi an eigenvector of the discrete Laplacian (eigenvalue lam), so the
    explicit amplitude is A (1 + dt alpha lam)^n and the exact one A exp(alpha lam n dt)."""
    with h5py.File(inp, "r") as f:
        g, t, ini = f["grid"].attrs, f["time"].attrs, f["initial"].attrs
        shape, h = list(g["shape"]), list(g["spacing"])
        dt, n, alpha = float(t["dt"]), int(t["steps"]), float(f["problem"].attrs["alpha"])
        amp, modes = float(ini["amplitude"]), list(ini["modes"])
    lam, phi = 0.0, np.ones(1)
    for a in range(len(shape)):
        L = shape[a] * h[a]
        lam += -4.0 / h[a] ** 2 * np.sin(modes[a] * np.pi * h[a] / (2 * L)) ** 2
        x = (np.arange(shape[a]) + 0.5) * h[a]
        phi = np.multiply.outer(np.sin(modes[a] * np.pi * x / L) if modes[a] else np.ones(shape[a]), phi)
    explicit = (1 + dt * alpha * lam) ** n
    exact = np.exp(alpha * lam * n * dt)
    return abs(amp) * abs(explicit - exact) * np.abs(phi).max()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True, help="command prefix that starts N ranks")
    ap.add_argument("--stencil", required=True)
    ap.add_argument("--stencil-input", required=True)
    ap.add_argument("--stencil-petsc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--input-args", required=True, help="options of stencil-input")
    ap.add_argument("--stencil-args", default="", help="extra options of stencil")
    ap.add_argument("--petsc-args", default="", help="extra options of stencil-petsc")
    ap.add_argument("--perturb", type=float, help="perturb the result by this relative amount; "
                    "stencil-petsc must then exit with status 4")
    ap.add_argument("--implicit-sine", action="store_true",
                    help="check the implicit reference against the exact time error of a sine mode")
    ap.add_argument("--wrong-grid-args", help="stencil-input options of a different grid: "
                    "comparing the result with it must fail with a message")
    a = ap.parse_args()

    w = a.workdir
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    mpi = shlex.split(a.mpiexec)
    inp = os.path.join(w, "in.h5")
    out = os.path.join(w, "out")
    run([a.stencil_input, "-o", inp] + shlex.split(a.input_args))
    run(mpi + [a.stencil, inp, "--backend", "cpu", "--output-dir", out, "--overwrite",
               "--report-json", os.path.join(w, "stencil.json")] + shlex.split(a.stencil_args))
    result = os.path.join(out, "final.h5")
    stencil_report = json.load(open(os.path.join(w, "stencil.json")))

    if a.wrong_grid_args:
        other = os.path.join(w, "other.h5")
        run([a.stencil_input, "-o", other] + shlex.split(a.wrong_grid_args))
        p = run(mpi + [a.stencil_petsc, other, "--compare", result, "--no-output"], expect=1)
        check("/field has" in p.stderr and "input's grid" in p.stderr,
              "a result of another grid is refused with a message naming /field and the grid")
        return

    compared = result
    injected = None
    if a.perturb is not None:
        compared = os.path.join(w, "perturbed.h5")
        injected = perturb(result, compared, a.perturb)

    petsc_out = os.path.join(w, "petsc.h5")
    petsc_json = os.path.join(w, "petsc.json")
    p = run(mpi + [a.stencil_petsc, inp, "--compare", compared, "--output", petsc_out,
                   "--overwrite", "--report-json", petsc_json] + shlex.split(a.petsc_args),
            expect=EXIT_MISMATCH if a.perturb is not None else 0)
    rep = json.load(open(petsc_json))
    cmp = rep["compare"]

    # The PETSc result file: stencil's layout, fp64, the same step.
    ref, ref_attrs = read_field(petsc_out)
    got, got_attrs = read_field(compared)
    check(text(ref_attrs["schema"]) == "stencil-output" and text(ref_attrs["backend"]) == "petsc",
          "PETSc result has schema stencil-output and backend petsc")
    check(ref.dtype == np.float64 and ref.shape == got.shape,
          f"PETSc result is fp64 of the result's shape {got.shape}")
    check(int(ref_attrs["step"]) == int(got_attrs["step"]) == rep["steps"],
          f"same step {rep['steps']} in both files")

    # The reported differences, recomputed here from the files.
    diff = got.astype(np.float64) - ref
    max_abs = float(np.abs(diff).max())
    max_rel = max_abs / float(np.abs(ref).max())
    dv = float(np.prod(stencil_report_spacing(inp)))
    l2_abs = float(np.sqrt((diff ** 2).sum() * dv))
    scale = float(np.abs(ref).max())
    check(abs(cmp["max_abs"] - max_abs) <= 1e-15 * scale,
          f"reported max |diff| {cmp['max_abs']:.6e} equals numpy's {max_abs:.6e}")
    check(abs(cmp["l2_abs"] - l2_abs) <= 1e-12 * max(l2_abs, 1e-300) + 1e-300,
          f"reported L2 |diff| {cmp['l2_abs']:.6e} equals numpy's {l2_abs:.6e}")

    if a.perturb is not None:
        check(not cmp["pass"] and "FAIL:" in p.stdout,
              f"perturbed result is caught (max rel {cmp['max_rel']:.3e} > rtol {cmp['rtol']:.1e})")
        # The difference is the injected one, up to rounding-level differences.
        check(abs(max_abs - injected) <= cmp["bound"] + 1e-3 * injected,
              f"the reported difference {max_abs:.6e} is the injected {injected:.6e}")
    else:
        check(cmp["pass"] and "PASS:" in p.stdout, "stencil-petsc reports PASS")
        check(max_rel <= cmp["rtol"], f"max relative difference {max_rel:.3e} <= rtol {cmp['rtol']:.3e}")
        check(max_abs <= cmp["bound"],
              f"max difference {max_abs:.3e} within the worst-case rounding bound {cmp['bound']:.3e}")
        if cmp["precision"] == "fp64" and rep["equation"] == "heat":
            check(cmp["rtol"] == 1e-12, "fp64 default tolerance is 1e-12")

    if rep["equation"] == "poisson":
        ps, js = rep["poisson"], stencil_report["solver"]
        check(js["converged"], "the Jacobi run converged")
        check(abs(ps["rhs_norm"] - js["rhs_norm"]) <= 1e-12 * js["rhs_norm"],
              f"||b|| {ps['rhs_norm']:.12e} equals stencil's {js['rhs_norm']:.12e}")
        check(abs(ps["jacobi_residual"] - js["tolerance"] * js["rhs_norm"]) <= 1e-12 * ps["jacobi_residual"],
              "the bound uses the Jacobi stopping residual /solver/tolerance x ||b||")
        check(ps["residual"] <= 1e-11 * ps["rhs_norm"],
              f"PETSc's residual {ps['residual']:.3e} <= 1e-11 ||b||")
        if a.perturb is None:
            check(abs(ps["file_residual"] - js["final_residual"]) <= 1e-3 * js["final_residual"],
                  f"residual of the compared field {ps['file_residual']:.6e} equals stencil's "
                  f"final residual {js['final_residual']:.6e}")
            check(cmp["l2_abs"] <= ps["bound_l2"],
                  f"L2 difference {cmp['l2_abs']:.3e} within (R_J + R_P) / lambda_min = {ps['bound_l2']:.3e}")
            # How tight the bound is (information only: it is tight when Jacobi's remaining
            # error lies along the slowest mode, looser when f barely excites that mode).
            print(f"bound tightness (information only): L2 difference / bound = "
                  f"{cmp['l2_abs'] / ps['bound_l2']:.3e}")

    if a.implicit_sine:
        exact = sine_time_error(inp)
        got_err = rep["implicit"]["max_abs"]
        check(abs(got_err - exact) <= 1e-3 * exact,
              f"implicit reference's time error {got_err:.6e} matches the exact {exact:.6e} "
              f"(rel. dev. {abs(got_err - exact) / exact:.1e})")

    if rep["equation"] == "poisson":
        print(f"time (information only): stencil cpu Jacobi loop {stencil_report['loop_seconds']:.6f} s "
              f"({stencil_report['steps']} iterations), PETSc CG+GAMG {rep['poisson']['solve_seconds']:.6f} s "
              f"({rep['poisson']['ksp_iterations']} iterations), {rep['ranks']} rank(s)")
        return
    print(f"time (information only): stencil cpu loop {stencil_report['loop_seconds']:.6f} s, "
          f"PETSc explicit loop {rep['loop_seconds']:.6f} s (MatMultAdd "
          f"{rep['matmult_seconds']:.6f} s), {rep['ranks']} rank(s), "
          f"{rep['shape'][0]}x{rep['shape'][1]}x{rep['shape'][2]}, {rep['steps']} steps")


def stencil_report_spacing(inp):
    """Cell size per axis in use (cell volume factors of the L2 norm)."""
    with h5py.File(inp, "r") as f:
        return [float(s) for s in f["grid"].attrs["spacing"]]


if __name__ == "__main__":
    main()
