#!/usr/bin/python3
"""Verification of the Poisson solver and the higher-order stencils on real runs.

Usage (ctest passes the first four options, see tests/physics/CMakeLists.txt):

  physics_test.py --mpiexec "MPIEXEC -n N FLAGS" --stencil EXE --stencil-input EXE
                  --workdir DIR SUBCOMMAND [options]

Every subcommand exits 0 when all its checks pass, 1 with "FAIL: ..." otherwise. The numbers
and why the tolerances are right: docs/design/verification.md, "Poisson and higher-order stencils".

  order         Manufactured solutions on periodic grids (fp64): the error against the exact
                solution falls by about 2^p per refinement. poisson: lap u = f with
                f = prod sin(2 pi k x / L), u = -f / |k|^2 (2 pi / L)^2, solved to a residual far
                below the discretisation error. heat: u_t = alpha lap u from the same sine,
                a fixed small dt for every grid, compared with forward Euler in time on the
                exact (continuous) eigenvalue, so only the spatial error remains.
  boundary      Poisson with f = 1 and Dirichlet 0 on the x faces (periodic y): the reflected
                ghosts are second-order accurate, so every order converges at order 2 there.
  rate          Jacobi's convergence factor against theory: the slowest and the fastest
                eigenmodes of the iteration (computed here from the boundary kinds, an
                independent implementation of the symbol) decay by exactly |1 - omega mu| per
                iteration; the reported omega, mu_min, mu_max, rho equal the formulas; and
                from a random f the residual's rate over the last iterations tends to rho.
  exact-source  Heat with a source on a sine mode with zero Dirichlet faces (an eigenvector
                for every radius): after n steps the amplitude is exactly
                g^n a0 + dt f (1 - g^n) / (1 - g), g = 1 + dt alpha lambda_h (fp64, 1e-12).
  invariance    The final field is bit for bit the same for every rank count and --dims in
                --runs (a fixed iteration count for poisson), and the residual norms, which are
                reductions, agree to the rounding bound N eps.
  stability     Heat: dt = 0.999 x the order's limit runs and the checkerboard mode stays
                bounded, dt = 1.001 x is refused with the message naming the bound, and with
                --allow-unstable at 1.05 x the checkerboard grows. Poisson: omega = 1 (no
                damping) and omega = 1.001 x 2 / mu_max are refused, 0.999 x is accepted.
  compat        Pure Neumann / periodic Poisson: f with a non-zero mean is refused with the
                compatibility message; with mean(f) = 0 the output has mean 0 exactly
                (reproducibly, on 1 and 3 ranks).
  schema        Input version 2 and the version-1 files still read: a version-1 heat file runs
                and gives the bits of the same file as version 2; the keys version 2 adds are
                refused in a version-1 file; Poisson files without /source or with /time, a
                heat file with /solver, unknown /solver keys, order 3 and a grid smaller
                than the radius are refused with messages naming the key; the command-line
                overrides --tolerance, --residual-every and --steps act on Poisson and
                --tolerance is refused for heat.
"""

import argparse
import json
import math
import os
import re
import shutil
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness as BaseHarness, TestFailure, check, run_command  # noqa: E402

RUN_TIMEOUT_S = 240
EPS64 = 2.0 ** -53

# Central-difference weights of the second derivative (w_0; w_1 .. w_r), as exact fractions.
WEIGHTS = {
    2: [(-2, 1), (1, 1)],
    4: [(-5, 2), (4, 3), (-1, 12)],
    6: [(-49, 18), (3, 2), (-3, 20), (1, 90)],
    8: [(-205, 72), (8, 5), (-1, 5), (8, 315), (-1, 560)],
}


def weights(p):
    return [a / b for a, b in WEIGHTS[p]]


def symbol(p, theta):
    """sigma_p(theta) = w_0 + 2 sum_m w_m cos(m theta) (numpy, any shape)."""
    w = weights(p)
    return w[0] + sum(2 * w[m] * np.cos(m * np.asarray(theta)) for m in range(1, len(w)))


# ---- running the programs ------------------------------------------------------------------


class Harness(BaseHarness):
    timeout = RUN_TIMEOUT_S

    def run(self, inp, nproc, tag, extra=(), dims=None, expect_status=0):
        """Run stencil; returns (field or None, report or None, process)."""
        out = os.path.join(self.workdir, "out-" + tag)
        report = os.path.join(self.workdir, tag + ".json")
        cmd = self.mpi_prefix(nproc) + [self.stencil, inp, "--backend", "cpu", "--output-dir", out,
                                    "--overwrite", "--report-json", report] + list(extra)
        if dims:
            cmd += ["--dims", dims]
        p = self.execute(cmd, f"stencil {tag}", expect_status)
        if expect_status != 0:
            return None, None, p
        with open(report) as f:
            rep = json.load(f)
        with h5py.File(os.path.join(out, "final.h5"), "r") as f:
            field = f["field"][...]
        return field, rep, p


def set_dataset(path, group, values):
    """Make /<group> of an input file the dataset kind with the given field ([z][y][x])."""
    with h5py.File(path, "r+") as f:
        g = f[group]
        for k in list(g.attrs.keys()):
            del g.attrs[k]
        g.attrs["kind"] = "dataset"
        g.create_dataset("field", data=values)


def centres(n, h):
    return (np.arange(n) + 0.5) * h


def outer(vectors):
    """prod_a v_a(x_a) on the grid, axes [z][y][x] (vectors given x first)."""
    out = np.ones(())
    for v in vectors:
        out = np.multiply.outer(v, out)
    return out


def shape_args(shape, spacing):
    return ["--shape", "x".join(map(str, shape)), "--spacing", ",".join(repr(h) for h in spacing)]


# ---- order of accuracy ---------------------------------------------------------------------


def observed_orders(errors):
    return [math.log2(errors[i] / errors[i + 1]) for i in range(len(errors) - 1)]


def cmd_order(h, args):
    p, ndim = args.order, args.ndim
    sizes = [int(n) for n in args.sizes.split(",")]
    modes = [1, 1, 1][:ndim]  # sin(2 pi k x / L): even modes of the input's sin(k pi x / L)
    errors = []
    for n in sizes:
        shape, spacing = [n] * ndim, [1.0 / n] * ndim
        sine = ",".join(str(2 * k) for k in modes)
        k2 = sum((2 * math.pi * k) ** 2 for k in modes)  # |k|^2 (L = 1)
        x = centres(n, 1.0 / n)
        profile = outer([np.sin(2 * math.pi * k * x) for k in modes])
        if args.equation == "poisson":
            inp = h.make_input(f"p{n}", ["--equation", "poisson", "--order", str(p),
                                         "--bc", "all=periodic", "--source", f"sine:1:{sine}",
                                         "--steps", "1000000", "--tolerance", "1e-13",
                                         "--residual-every", "10"] + shape_args(shape, spacing))
            field, rep, _ = h.run(inp, 1, f"n{n}")
            check(rep["solver"]["converged"], f"n = {n}: Jacobi did not converge")
            exact = -profile / k2
        else:
            # dt fixed for all grids: 0.2 x the limit of the finest one; T = steps dt with
            # the mode decaying to about exp(-0.7) = 0.5.
            finest = sizes[-1]
            beta = -symbol(p, math.pi)
            dt = 0.2 * 2.0 / (beta * ndim * finest * finest)
            steps = round(0.7 / (dt * k2))
            inp = h.make_input(f"h{n}", ["--order", str(p), "--bc", "all=periodic",
                                         "--initial", f"sine:1:{sine}", "--dt", repr(dt),
                                         "--steps", str(steps)] + shape_args(shape, spacing))
            field, rep, _ = h.run(inp, 1, f"n{n}")
            # Forward Euler in time on the exact eigenvalue -|k|^2: only the spatial error of
            # lambda_h remains (the time-stepping is the same on both sides).
            exact = (1.0 - dt * k2) ** steps * profile
            check(0.2 < (1.0 - dt * k2) ** steps < 0.9, f"test set-up: decay "
                  f"{(1.0 - dt * k2) ** steps} (choose --steps)")
        err = float(np.max(np.abs(field - exact)))
        errors.append(err)
        print(f"order: {args.equation} p = {p} {ndim}D n = {n}: max error {err:.3e}" +
              (f", {rep['solver']['iterations']} iterations" if args.equation == "poisson"
               else ""))
    orders = observed_orders(errors)
    print(f"order: observed {', '.join(f'{o:.3f}' for o in orders)} (expected {p} +- "
          f"{args.slack})")
    # The leading error term is c (k h)^p (1 + O((k h)^2)): the observed order approaches p
    # from either side; the finest pair must be within the slack.
    check(abs(orders[-1] - p) <= args.slack, f"observed order {orders[-1]:.3f} on the finest "
          f"pair, expected {p} +- {args.slack}")
    check(all(o > p - 1 for o in orders), f"observed orders {orders}: not all above {p - 1}")


def cmd_boundary(h, args):
    """f = 1, u = 0 on x = 0, 1, periodic in y: u = x (x - 1) / 2."""
    p = args.order
    sizes = [int(n) for n in args.sizes.split(",")]
    errors = []
    for n in sizes:
        inp = h.make_input(f"b{n}", ["--equation", "poisson", "--order", str(p),
                                     "--bc", "x=dirichlet:0", "--bc", "y=periodic",
                                     "--source", "constant:1", "--steps", "1000000",
                                     "--tolerance", "1e-12", "--residual-every", "20"]
                           + shape_args([n, 4], [1.0 / n, 1.0]))
        field, rep, _ = h.run(inp, 1, f"n{n}")
        check(rep["solver"]["converged"], f"n = {n}: Jacobi did not converge")
        x = centres(n, 1.0 / n)
        exact = np.broadcast_to(x * (x - 1) / 2, field.shape)
        errors.append(float(np.max(np.abs(field - exact))))
    orders = observed_orders(errors)
    print(f"boundary: p = {p}, Dirichlet faces, f = 1: errors "
          f"{', '.join(f'{e:.3e}' for e in errors)}, observed orders "
          f"{', '.join(f'{o:.3f}' for o in orders)} (expected 2 +- 0.1)")
    check(all(abs(o - 2) <= 0.1 for o in orders[-1:]), f"observed order {orders[-1]:.3f}, "
          "expected 2 (the reflected ghosts are second-order accurate)")


# ---- convergence rate ----------------------------------------------------------------------


def axis_modes(kind, n, h):
    """(theta_lo, theta_hi, lowest mode, highest mode) of one axis; see solvers/poisson.h."""
    x = centres(n, h)
    L = n * h
    if kind == "dd":
        return (math.pi / n, math.pi, np.sin(math.pi * x / L), np.sin(n * math.pi * x / L))
    if kind == "nn":
        return (math.pi / n, (n - 1) * math.pi / n, np.cos(math.pi * x / L),
                np.cos((n - 1) * math.pi * x / L))
    if kind == "dn":
        return (0.5 * math.pi / n, (n - 0.5) * math.pi / n, np.sin(0.5 * math.pi * x / L),
                np.sin((n - 0.5) * math.pi * x / L))
    if kind == "nd":
        return (0.5 * math.pi / n, (n - 0.5) * math.pi / n, np.cos(0.5 * math.pi * x / L),
                np.cos((n - 0.5) * math.pi * x / L))
    if kind == "pp":
        check(n % 2 == 0, "test set-up: periodic axes need an even n here")
        # the checkerboard +-1: sin(pi x / h) = sin(pi (i + 1/2))
        return (2 * math.pi / n, math.pi, np.cos(2 * math.pi * x / L), np.sin(math.pi * x / h))
    raise TestFailure(f"unknown axis kind {kind}")


BC_ARGS = {"dd": ("dirichlet:0", "dirichlet:0"), "nn": ("neumann", "neumann"),
           "dn": ("dirichlet:0", "neumann"), "nd": ("neumann", "dirichlet:0"),
           "pp": ("periodic", "periodic")}


def cmd_rate(h, args):
    p = args.order
    shape = [int(n) for n in args.shape.split("x")]
    spacing = [float(s) for s in args.spacing.split(",")]
    kinds = args.axes.split(",")
    ndim = len(shape)
    check(len(kinds) == ndim and len(spacing) == ndim, "test set-up: one kind and h per axis")
    bc = []
    for a, k in enumerate(kinds):
        lo, hi = BC_ARGS[k]
        bc += ["--bc", f"{'xyz'[a]}_lo={lo}", "--bc", f"{'xyz'[a]}_hi={hi}"]
    base = ["--equation", "poisson", "--order", str(p), "--source", "constant:0"] + bc + \
        shape_args(shape, spacing)

    # The spectrum, computed here: mu = sum_a -sigma(theta_a) / h_a^2 / D.
    w0 = weights(p)[0]
    d = -w0 * sum(1 / hh ** 2 for hh in spacing)
    axes = [axis_modes(k, n, hh) for k, n, hh in zip(kinds, shape, spacing)]
    singular = all(k in ("nn", "pp") for k in kinds)
    lam_lo = [-symbol(p, ax[0]) / hh ** 2 for ax, hh in zip(axes, spacing)]
    lam_hi = [-symbol(p, ax[1]) / hh ** 2 for ax, hh in zip(axes, spacing)]
    # Singular: the slowest non-constant mode is the lowest mode of one axis, constant along
    # the others; otherwise the lowest mode of every axis (theta = 0 on axes that have it).
    if singular:
        a_slow = int(np.argmin(lam_lo))
        mu_min = lam_lo[a_slow] / d
        slow = outer([ax[2] if a == a_slow else np.ones_like(ax[2])
                      for a, ax in enumerate(axes)])
    else:
        mu_min = sum(l for l, k in zip(lam_lo, kinds) if k not in ("nn", "pp")) / d
        slow = outer([np.ones_like(ax[2]) if k in ("nn", "pp") else ax[2]
                      for ax, k in zip(axes, kinds)])
    mu_max = sum(lam_hi) / d
    fast = outer([ax[3] for ax in axes])
    omega = 2 / (mu_min + mu_max)
    rho = max(abs(1 - omega * mu_min), abs(1 - omega * mu_max))

    iters = args.iterations
    results = {}
    for name, mode in (("slowest", slow), ("fastest", fast)):
        inp = h.make_input(name, base + ["--steps", str(iters), "--tolerance", "0",
                                         "--residual-every", "1"])
        set_dataset(inp, "initial", mode)
        field, rep, _ = h.run(inp, args.nproc, name)
        s = rep["solver"]
        for key, want in (("omega", omega), ("mu_min", mu_min), ("mu_max", mu_max),
                          ("rho", rho)):
            check(math.isclose(s[key], want, rel_tol=1e-12), f"{name}: reported {key} "
                  f"{s[key]!r}, theory {want!r}")
        check(s["singular"] == singular, f"{name}: singular {s['singular']}")
        hist = np.array(s["history"])
        check(len(hist) == iters + 1 and hist[0][0] == 0 and hist[-1][0] == iters,
              f"{name}: history has {len(hist)} entries")
        factors = hist[1:, 1] / hist[:-1, 1]
        results[name] = factors
    # Each mode is an eigenvector: every iteration multiplies its residual by |1 - omega mu|.
    want = {"slowest": abs(1 - omega * mu_min), "fastest": abs(1 - omega * mu_max)}
    for name, f in results.items():
        worst = float(np.max(np.abs(f - want[name])))
        print(f"rate: p = {p} {args.shape} {args.axes}: {name} mode, factor per iteration "
              f"{f.min():.12f} .. {f.max():.12f}, theory {want[name]:.12f} (max deviation "
              f"{worst:.2e}, tolerance {args.mode_tol:g})")
        check(worst <= args.mode_tol, f"{name} mode: the residual factor per iteration "
              f"deviates from |1 - omega mu| = {want[name]!r} by {worst:.3e}")
    print(f"rate: omega = {omega:.12f}, mu in [{mu_min:.9g}, {mu_max:.9g}], rho = {rho:.12f} "
          f"(both extreme modes decay at rho when omega is optimal)")

    if args.random:
        # A random f excites every mode; the residual's rate tends to rho from below as the
        # faster modes die out (the second-slowest pair decays at least ~rho^1.5 here: after
        # rho^n = 1e-8 its share is below 1e-12). Stop there, far from the rounding floor: the
        # residual is computed to about eps D |u| (u ~ f / (D mu_min)), relative
        # eps / (mu_min 1e-8) < 1e-6, where the rate tends to 1.
        rng = np.random.default_rng(5)
        fvals = rng.uniform(-0.5, 0.5, tuple(reversed(shape)))
        if singular:
            fvals -= fvals.mean()
        n = math.ceil(math.log(1e-8) / math.log(rho))
        every = max(1, n // 10)
        n = every * 10
        inp = h.make_input("random", base + ["--steps", str(n), "--tolerance", "0",
                                             "--residual-every", str(every)])
        set_dataset(inp, "source", fvals)
        field, rep, _ = h.run(inp, args.nproc, "random")
        s = rep["solver"]
        last = s["rate_last"]
        print(f"rate: random f, {n} iterations: mean rate {s['rate_mean']:.9f}, over the last "
              f"{every} {last:.9f}, theory rho {rho:.9f} (relative gap "
              f"{(rho - last) / rho:.2e}, tolerance {args.random_tol:g})")
        check(abs(rho - last) / rho <= args.random_tol, f"the rate over the last {every} "
              f"iterations {last!r} is not within {args.random_tol} of rho = {rho!r}")


# ---- heat with a source: exact discrete solution ---------------------------------------------


def cmd_exact_source(h, args):
    p, shape = args.order, [int(n) for n in args.shape.split("x")]
    spacing = [float(s) for s in args.spacing.split(",")]
    ndim = len(shape)
    modes = [int(k) for k in args.modes.split(",")]
    lam = sum(symbol(p, k * math.pi / n) / hh ** 2 for k, n, hh in zip(modes, shape, spacing))
    # Initial amplitude; the source's, chosen so that the steady state -f / lambda is a0 / 2.
    a0 = 1.5
    fa = float(f"{-lam * a0 / 2:.6g}")
    beta = -symbol(p, math.pi)
    dt = 0.9 * 2.0 / (beta * sum(1 / hh ** 2 for hh in spacing))
    steps = args.steps
    inp = h.make_input("src", ["--order", str(p), "--bc", "all=dirichlet:0", "--initial",
                               f"sine:{a0}:{args.modes}", "--source",
                               f"sine:{fa}:{args.modes}", "--dt", repr(dt), "--steps",
                               str(steps)] + shape_args(shape, spacing))
    with h5py.File(inp, "r") as f:
        dt = float(f["time"].attrs["dt"])
    field, rep, _ = h.run(inp, args.nproc, "src", dims=args.dims)
    g = 1 + dt * lam
    amp = g ** steps * a0 + dt * fa * (1 - g ** steps) / (1 - g)
    profile = outer([np.sin(k * math.pi * centres(n, hh) / (n * hh))
                     for k, n, hh in zip(modes, shape, spacing)])
    err = float(np.max(np.abs(field - amp * profile))) / abs(amp)
    print(f"exact-source: p = {p} {ndim}D {args.shape}, modes {modes}, {steps} steps, "
          f"{args.nproc} ranks: g = {g:.9f}, amplitude {a0} -> {amp:.12f} (steady state "
          f"{-fa / lam:.6g}), max error / amplitude {err:.3e} (tolerance 1e-12)")
    check(abs(g ** steps) < 0.9, "test set-up: the mode barely changed")
    check(err <= 1e-12, f"max error relative to the amplitude {err:.3e} exceeds 1e-12")


# ---- decomposition invariance ----------------------------------------------------------------


def cmd_invariance(h, args):
    gen = ["--order", str(args.order), "--precision", args.precision] + \
        shape_args([int(n) for n in args.shape.split("x")],
                   [float(s) for s in args.spacing.split(",")])
    for bc in args.bc:
        gen += ["--bc", bc]
    extra = []
    if args.equation == "poisson":
        gen += ["--equation", "poisson", "--source", args.source, "--steps",
                str(args.iterations), "--tolerance", "0", "--residual-every",
                str(args.residual_every)]
        if args.initial:
            gen += ["--initial", args.initial]
    else:
        gen += ["--initial", args.initial, "--steps", str(args.iterations)]
        if args.source:
            gen += ["--source", args.source]
    inp = h.make_input("inv", gen)
    base = None
    for spec in args.runs:
        nproc, _, dims = spec.partition(":")
        field, rep, _ = h.run(inp, int(nproc), f"np{nproc}-{dims or 'auto'}", extra,
                              dims=dims or None)
        if base is None:
            base = (spec, field, rep)
            check(float(np.max(np.abs(field))) > 0, "the field is zero")
            continue
        bspec, bfield, brep = base
        if field.tobytes() != bfield.tobytes():
            ne = np.argwhere(field != bfield)
            raise TestFailure(f"{spec} differs from {bspec}: {len(ne)} cells, first at "
                              f"[z][y][x] = {ne[0].tolist()}, max |diff| "
                              f"{float(np.max(np.abs(field.astype(float) - bfield))):.3e}")
        if args.equation == "poisson":
            a, b = np.array(rep["solver"]["history"]), np.array(brep["solver"]["history"])
            check(a.shape == b.shape and np.array_equal(a[:, 0], b[:, 0]),
                  f"{spec}: residual checks at other iterations than {bspec}")
            # Sums of N non-negative terms in another order: relative difference <= N eps.
            tol = field.size * EPS64
            rel = float(np.max(np.abs(a[:, 1] - b[:, 1]) / np.maximum(b[:, 1], 1e-300)))
            check(rel <= tol, f"{spec}: residual norms differ from {bspec} by {rel:.3e} "
                  f"relative (bound {tol:.3e})")
            for key in ("iterations", "final_iteration"):
                check(rep["solver"][key] == brep["solver"][key], f"{spec}: {key} differs")
    what = f"{args.equation} order {args.order} {args.shape} {args.precision} {' '.join(args.bc)}"
    if args.equation == "poisson":
        s = base[2]["solver"]
        what += (f", {s['iterations']} iterations, residual {s['initial_residual']:.3e} -> "
                 f"{s['final_residual']:.3e}")
    print(f"invariance: {what}: {len(args.runs)} runs ({' '.join(args.runs)}) bit-identical")


# ---- stability limits -------------------------------------------------------------------------


def cmd_stability(h, args):
    p = args.order
    shape = [int(n) for n in args.shape.split("x")]
    spacing = [float(s) for s in args.spacing.split(",")]
    ndim = len(shape)
    beta = -symbol(p, math.pi)
    limit = 2.0 / (beta * sum(1 / hh ** 2 for hh in spacing))
    checker = outer([np.cos(math.pi * np.arange(n)) for n in shape])  # (-1)^(i+j+k)
    steps = 200

    def heat_input(name, factor):
        inp = h.make_input(name, ["--order", str(p), "--bc", "all=periodic", "--dt",
                                  repr(factor * limit), "--steps", str(steps),
                                  "--initial", "constant:0"] + shape_args(shape, spacing))
        set_dataset(inp, "initial", checker)
        return inp

    # Accepted just below the limit; the checkerboard (the mode of the spectral bound, for
    # even n) decays by |1 - s| per step, s = 0.999 x 2.
    field, rep, _ = h.run(heat_input("below", 0.999), 1, "below")
    growth = float(np.max(np.abs(field)))
    want = abs(1 - 0.999 * 2) ** steps
    check(math.isclose(growth, want, rel_tol=1e-9), f"dt = 0.999 limit: checkerboard "
          f"amplitude {growth!r} after {steps} steps, expected |1 - s|^n = {want!r}")
    # Refused just above it.
    _, _, proc = h.run(heat_input("above", 1.001), 1, "above", expect_status=1)
    bound = {2: "4", 4: "16/3", 6: "272/45", 8: "2048/315"}[p]
    pattern = (r"/time/dt = [0-9.e+-]+ is unstable: dt\*alpha\*sum\(" + re.escape(bound) +
               r"/h\^2\) = 2\.00[0-9]* exceeds the limit 2 .*use dt <= " +
               re.escape(f"{limit:.6g}"))
    check(re.search(pattern, proc.stderr), f"dt = 1.001 limit: message does not match "
          f"{pattern!r}:\n{proc.stderr}")
    # With --allow-unstable the checkerboard grows by |1 - s| = 1.1 per step.
    field, _, _ = h.run(heat_input("forced", 1.05), 1, "forced", ["--allow-unstable",
                                                                    "--steps", "40"])
    growth = float(np.max(np.abs(field)))
    check(math.isclose(growth, 1.1 ** 40, rel_tol=1e-9), f"dt = 1.05 limit: checkerboard grew "
          f"to {growth!r}, expected 1.1^40 = {1.1 ** 40!r}")
    print(f"stability: heat p = {p} {ndim}D: limit dt = {limit:.6g} (beta = {bound}); 0.999 x "
          f"runs (checkerboard x {want:.3e}), 1.001 x refused, 1.05 x forced grows 1.1^n")

    # Poisson: the Jacobi damping. Dirichlet faces: mu_max = beta / |w_0| exactly.
    w0 = -weights(p)[0]
    mu_max = beta / w0
    pbase = ["--equation", "poisson", "--order", str(p), "--bc", "all=dirichlet:0",
             "--source", "constant:1", "--steps", "50", "--tolerance", "0"] + \
        shape_args(shape, spacing)
    for name, omega, ok in (("omega-one", 1.0, False), ("omega-above", 1.001 * 2 / mu_max, False),
                            ("omega-below", 0.999 * 2 / mu_max, True)):
        inp = h.make_input(name, pbase + ["--omega", repr(omega)])
        _, _, proc = h.run(inp, 1, name, expect_status=0 if ok else 1)
        if not ok:
            check("does not converge" in proc.stderr and "spectral radius" in proc.stderr,
                  f"{name}: expected the convergence message:\n{proc.stderr}")
    print(f"stability: poisson p = {p}: omega = 1 refused (rho = {abs(1 - mu_max):.4f}), "
          f"1.001 x 2/mu_max refused, 0.999 x accepted (2/mu_max = {2 / mu_max:.6f})")


# ---- compatibility and the mean --------------------------------------------------------------


def cmd_compat(h, args):
    shape = [24, 18, 10]
    gen = ["--equation", "poisson", "--order", "4", "--steps", "300", "--tolerance", "0",
           "--bc", "x=periodic", "--bc", "y=neumann", "--bc", "z=periodic"] + \
        shape_args(shape, [1 / 24, 1 / 18, 0.1])
    # sin(pi x / L) has mean 2/pi along x: incompatible.
    bad = h.make_input("bad", gen + ["--source", "sine:1:1,0,0"])
    _, _, proc = h.run(bad, 2, "bad", expect_status=1)
    check(re.search(r"no face is Dirichlet, so lap u = f has a solution only if f has mean 0.*"
                    r"mean\(f\) = [0-9.e+-]+", proc.stderr),
          f"incompatible f: expected the compatibility message:\n{proc.stderr}")
    good = h.make_input("good", gen + ["--source", "sine:1:2,2,4", "--initial",
                                       "gaussian:3:0.3,0.5,0.5:0.2:1"])
    fields = []
    for nproc, dims in ((1, None), (3, "1x3x1")):
        field, rep, _ = h.run(good, nproc, f"good{nproc}", dims=dims)
        fields.append(field)
        s = rep["solver"]
        # u - m rounds each value once, by at most eps (max |u| + |m|); m itself is exact to
        # far below that (solvers/poisson.h, poisson_exact_sum).
        total = math.fsum(field.ravel())
        bound = field.size * EPS64 * (float(np.max(np.abs(field))) + abs(s["mean_removed"]))
        check(abs(total) <= bound, f"{nproc} ranks: the output's sum is {total!r}, more than "
              f"the rounding bound {bound:.3e}")
        check(abs(s["mean_removed"]) > 0.1, f"{nproc} ranks: mean removed {s['mean_removed']}; "
              "the initial field has mean > 1")
    check(fields[0].tobytes() == fields[1].tobytes(), "the mean-fixed field differs between 1 "
          "and 3 ranks")
    print(f"compat: mean(f) != 0 refused; with mean(f) = 0 the result has sum "
          f"{math.fsum(fields[0].ravel()):.3e} and is the same on 1 and 3 ranks "
          f"(mean {rep['solver']['mean_removed']:.6f} removed)")


# ---- the input schema ------------------------------------------------------------------------


def cmd_schema(h, args):
    heat = h.make_input("heat", ["--shape", "20x16", "--order", "4", "--bc", "all=neumann",
                                 "--initial", "gaussian:1:8,8:3", "--steps", "20"])
    v1 = os.path.join(h.workdir, "heat-v1.h5")
    shutil.copy(heat, v1)
    with h5py.File(v1, "r+") as f:
        check(int(f.attrs["version"]) == 2, f"stencil-input wrote version {f.attrs['version']}")
        f.attrs["version"] = np.int64(1)
    a, _, _ = h.run(heat, 1, "v2")
    b, _, _ = h.run(v1, 1, "v1")
    check(a.tobytes() == b.tobytes(), "the version-1 file gives another field")

    def refused(name, edit, pattern, extra=(), status=1):
        path = os.path.join(h.workdir, name + ".h5")
        shutil.copy(edit[0], path)
        with h5py.File(path, "r+") as f:
            edit[1](f)
        _, _, proc = h.run(path, 1, name, extra, expect_status=status)
        check(re.search(pattern, proc.stderr), f"{name}: expected /{pattern}/ in:\n{proc.stderr}")

    def add_source(f):
        g = f.create_group("source")
        g.attrs["kind"] = "constant"
        g.attrs["value"] = 1.0

    refused("v1-source", (v1, add_source), r"unknown key /source")
    pois = h.make_input("pois", ["--equation", "poisson", "--shape", "20x16", "--bc",
                                 "all=dirichlet:0", "--source", "constant:1", "--steps", "30"])
    pv1 = os.path.join(h.workdir, "pois-v1.h5")
    shutil.copy(pois, pv1)
    with h5py.File(pv1, "r+") as f:
        f.attrs["version"] = np.int64(1)
    refused("v1-solver", (pv1, lambda f: None), r"unknown key /solver")

    def drop_v2(f):
        del f["solver"]
        del f["source"]

    refused("v1-poisson", (pv1, drop_v2), r'key /problem/equation = "poisson" is not one of: heat')
    refused("no-source", (pois, lambda f: f.__delitem__("source")),
            r"missing group /source: the Poisson equation lap u = f needs f")
    refused("with-time", (pois, lambda f: f.copy(f["solver"], "time")),
            r"/time applies to the heat equation only")
    refused("heat-solver", (heat, lambda f: f.create_group("solver")),
            r"/solver applies to the Poisson equation only")
    refused("solver-key", (pois, lambda f: f["solver"].attrs.__setitem__("tol", 1.0)),
            r"unknown key /solver/tol")
    refused("alpha", (pois, lambda f: f["problem"].attrs.__setitem__("alpha", 1.0)),
            r"unknown key /problem/alpha")
    refused("order3", (heat, lambda f: f["problem"].attrs.__setitem__("order", np.int64(3))),
            r"/problem/order = 3 is not supported \(supported: 2, 4, 6, 8\)")
    small = h.make_input("small", ["--shape", "3x16", "--bc", "all=periodic", "--steps", "2"])
    refused("radius", (small, lambda f: f["problem"].attrs.__setitem__("order", np.int64(8))),
            r"/grid/shape\[0\] = 3 is smaller than the radius 4 of the order-8 stencil")
    refused("neg-tol", (pois, lambda f: f["solver"].attrs.__setitem__("tolerance", -1.0)),
            r"/solver/tolerance = -1 must be >= 0")
    refused("heat-tol", (heat, lambda f: None), r"--tolerance and --residual-every apply to "
            r"the Poisson equation", ["--tolerance", "1e-3"], status=2)
    # Overrides: --steps caps the iterations, --residual-every sets the checks, --tolerance
    # stops the iteration.
    _, rep, _ = h.run(pois, 1, "over", ["--steps", "25", "--residual-every", "5",
                                        "--tolerance", "0"])
    s = rep["solver"]
    check(s["iterations"] == 25 and s["residual_every"] == 5 and
          [int(x[0]) for x in s["history"]] == [0, 5, 10, 15, 20, 25],
          f"overrides: {s['iterations']} iterations, history {s['history']}")
    field, rep, _ = h.run(pois, 1, "tol", ["--steps", "100000", "--residual-every", "3",
                                           "--tolerance", "1e-3"])
    s = rep["solver"]
    check(s["converged"] and s["iterations"] % 3 == 0 and
          s["final_residual"] <= 1e-3 * s["rhs_norm"] and
          s["history"][-2][1] > 1e-3 * s["rhs_norm"],
          f"--tolerance 1e-3: converged {s['converged']} after {s['iterations']}, residual "
          f"{s['final_residual']} vs ||b|| {s['rhs_norm']}")
    # The run that stopped at iteration N writes iteration N's field (the CPU check has
    # computed iteration N + 1 into the other buffer by then): bit for bit that of N fixed.
    fixed, rep_n, _ = h.run(pois, 1, "tol-fixed", ["--steps", str(s["iterations"]),
                                                   "--residual-every", "3", "--tolerance", "0"])
    check(np.array_equal(field, fixed) and
          rep_n["solver"]["final_residual"] == s["final_residual"],
          f"--tolerance 1e-3 stopping at {s['iterations']}: the field or the final residual "
          f"differs from --steps {s['iterations']} --tolerance 0")
    print(f"schema: version 1 read (same bits), version-2 keys refused there, 10 bad inputs "
          f"refused with their key; overrides: --tolerance 1e-3 stopped at iteration "
          f"{s['iterations']}")


# ---- command line ----------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mpiexec", required=True)
    p.add_argument("--stencil", required=True)
    p.add_argument("--stencil-input", required=True)
    p.add_argument("--workdir", required=True)
    sub = p.add_subparsers(dest="command", required=True)

    sp = sub.add_parser("order")
    sp.add_argument("--equation", choices=("poisson", "heat"), required=True)
    sp.add_argument("--order", type=int, required=True)
    sp.add_argument("--ndim", type=int, default=2)
    sp.add_argument("--sizes", default="8,16,32")
    sp.add_argument("--slack", type=float, default=0.15)
    sp.set_defaults(func=cmd_order)

    sp = sub.add_parser("boundary")
    sp.add_argument("--order", type=int, required=True)
    sp.add_argument("--sizes", default="16,32,64")
    sp.set_defaults(func=cmd_boundary)

    sp = sub.add_parser("rate")
    sp.add_argument("--order", type=int, required=True)
    sp.add_argument("--shape", required=True)
    sp.add_argument("--spacing", required=True)
    sp.add_argument("--axes", required=True, help="per axis: dd, nn, dn, nd or pp")
    sp.add_argument("--iterations", type=int, default=60)
    sp.add_argument("--mode-tol", type=float, default=1e-9)
    sp.add_argument("--random", action="store_true")
    sp.add_argument("--random-tol", type=float, default=1e-6)
    sp.add_argument("--nproc", type=int, default=1)
    sp.set_defaults(func=cmd_rate)

    sp = sub.add_parser("exact-source")
    sp.add_argument("--order", type=int, required=True)
    sp.add_argument("--shape", required=True)
    sp.add_argument("--spacing", required=True)
    sp.add_argument("--modes", required=True)
    sp.add_argument("--steps", type=int, default=40)
    sp.add_argument("--nproc", type=int, default=1)
    sp.add_argument("--dims")
    sp.set_defaults(func=cmd_exact_source)

    sp = sub.add_parser("invariance")
    sp.add_argument("--equation", choices=("poisson", "heat"), required=True)
    sp.add_argument("--order", type=int, required=True)
    sp.add_argument("--shape", required=True)
    sp.add_argument("--spacing", required=True)
    sp.add_argument("--precision", default="fp64")
    sp.add_argument("--bc", action="append", required=True)
    sp.add_argument("--source")
    sp.add_argument("--initial")
    sp.add_argument("--iterations", type=int, default=40)
    sp.add_argument("--residual-every", type=int, default=5)
    sp.add_argument("--runs", nargs="+", required=True)
    sp.set_defaults(func=cmd_invariance)

    sp = sub.add_parser("stability")
    sp.add_argument("--order", type=int, required=True)
    sp.add_argument("--shape", required=True)
    sp.add_argument("--spacing", required=True)
    sp.set_defaults(func=cmd_stability)

    sp = sub.add_parser("compat")
    sp.set_defaults(func=cmd_compat)

    sp = sub.add_parser("schema")
    sp.set_defaults(func=cmd_schema)

    return run_command(p.parse_args(), Harness)


if __name__ == "__main__":
    sys.exit(main())
