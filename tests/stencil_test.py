#!/usr/bin/python3
"""Run-and-check tests of stencil: physics checks on real runs through the MPI launcher.

Usage (ctest passes the first four options, see tests/CMakeLists.txt, stencil_case()):

  stencil_test.py --mpiexec "MPIEXEC -n N FLAGS" --stencil EXE --stencil-input EXE
                  --workdir DIR SUBCOMMAND [options]

The --mpiexec prefix is FindMPI's command for N ranks; a subcommand that needs another rank
count replaces N (the first all-digit word after the launcher). The work directory is
emptied first and then holds the inputs, outputs and reports of the test.

Subcommands (each exits 0 when every check passes, 1 with "FAIL: ..." otherwise):

  exact         A sine mode with zero Dirichlet boundaries is an eigenvector of the discrete
                Laplacian of the cell-centred grid: after n steps its amplitude is exactly
                (1 + dt alpha lambda_h)^n, lambda_h = -sum_a (4 / h_a^2) sin^2(k_a pi / (2 n_a)).
                Checks max |u - u_exact| / amplitude <= tol: 1e-12 in fp64; in fp32 the
                rounding bound eps (1 + (2 + 2d) n) / g^n (see exact_tolerance()).
  invariance    The final /field is bit-for-bit the same for every rank count and --dims
                given in --runs (e.g. 1 2:2x1x1 4:4x1x1 4:1x2x2).
  conservation  Periodic / zero-flux boundaries: the total heat sum(u) after n steps equals
                the initial one to within the rounding bound of conservation_tolerance();
                max and min stay within the initial range and sum(u^2) does not grow
                (the update is a convex combination when c0 >= 0).

Runs use --backend cpu unless --backend says otherwise. Every run's --report-json and
output attributes are checked against its field too (steps, time, ranks, dims, backend,
Gpts/s > 0, L2 / max / integral norms, the /parameters group).
Input options (--shape, --spacing, --alpha, --dt, --steps, --precision, --bc, --initial) are
passed to stencil-input; see its --help.
"""

import argparse
import itertools
import json
import math
import os
import re
import socket
import subprocess
import sys

import h5py
import numpy as np

from harness import Harness as BaseHarness, TestFailure, check, run_command

# ---- running the programs ------------------------------------------------------------------


class Harness(BaseHarness):
    def __init__(self, args):
        super().__init__(args)
        self.backend = args.backend

    def default_nproc(self):
        for word in self.mpiexec[1:]:
            if word.isdigit():
                return int(word)
        raise TestFailure(f"cannot find the rank count in --mpiexec {self.mpiexec}")

    def run(self, inp, nproc, tag, dims=None, steps=None):
        """Run stencil on nproc ranks; returns (field, output attrs, report, run info)."""
        out = os.path.join(self.workdir, "out-" + tag)
        report_path = os.path.join(self.workdir, tag + ".json")
        cmd = self.mpi_prefix(nproc) + [self.stencil, inp, "--backend", self.backend,
                                         "--output-dir", out, "--quiet",
                                         "--report-json", report_path]
        if dims:
            cmd += ["--dims", dims]
        if steps is not None:
            cmd += ["--steps", str(steps)]
        self.execute(cmd, f"stencil run {tag}")
        version = self.execute([self.stencil, "--version"], "stencil --version").stdout
        version = version.split("\n")[0].removeprefix("stencil ")
        with open(report_path) as f:
            report = json.load(f)
        final = os.path.join(out, "final.h5")
        with h5py.File(final, "r") as f:
            field = f["field"][...]
            attrs = {k: decode(v) for k, v in f.attrs.items()}
            params = read_tree(f["parameters"])
        return Run(tag, nproc, dims, final, field, attrs, report, params, self.backend, version)


class Run:
    def __init__(self, tag, nproc, dims, path, field, attrs, report, params, backend, version):
        self.tag, self.nproc, self.dims, self.path = tag, nproc, dims, path
        self.backend, self.version = backend, version
        self.field, self.attrs, self.report, self.params = field, attrs, report, params


def decode(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def read_tree(group, prefix=""):
    """Every attribute under group as {"/path/name": value}."""
    out = {}
    for k, v in group.attrs.items():
        out[f"{prefix}/{k}"] = decode(v)
    for name, obj in group.items():
        if isinstance(obj, h5py.Group):
            out.update(read_tree(obj, f"{prefix}/{name}"))
    return out


# ---- the problem as the input file states it -----------------------------------------------


class Problem:
    """The values the run uses, read back from the input file (so defaults such as
    stencil-input's dt are the exact bits the solver sees)."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            self.tree = read_tree(f)
            self.initial_field = f["initial/field"][...] if "initial/field" in f else None
        t = self.tree
        shape = [int(x) for x in np.atleast_1d(t["/grid/shape"])]
        spacing = [float(x) for x in np.atleast_1d(t["/grid/spacing"])]
        self.ndim = 3 if len(shape) == 3 and shape[2] > 1 else 2
        self.shape = shape[:self.ndim]
        self.spacing = spacing[:self.ndim]
        self.alpha = float(t["/problem/alpha"])
        self.dt = float(t["/time/dt"])
        self.steps = int(t["/time/steps"])
        self.precision = t["/problem/precision"]
        self.dtype = np.float64 if self.precision == "fp64" else np.float32

    def initial_values(self):
        """The initial field in float64, [z][y][x] (analytic kinds to within rounding)."""
        t = self.tree
        kind = t["/initial/kind"]
        if kind == "dataset":
            return self.initial_field.astype(np.float64).reshape(self.file_shape())
        if kind == "constant":
            return np.full(self.file_shape(), float(t["/initial/value"]))
        x = [(np.arange(n) + 0.5) * hh for n, hh in zip(self.shape, self.spacing)]
        grid = np.meshgrid(*reversed(x), indexing="ij")[::-1]  # x, y(, z) arrays, [z][y][x]
        amplitude = float(t["/initial/amplitude"])
        offset = float(t.get("/initial/offset", 0.0))
        if kind == "sine":
            v = np.full(self.file_shape(), amplitude)
            for k, xa, n, hh in zip(np.atleast_1d(t["/initial/modes"]), grid, self.shape,
                                    self.spacing):
                if k != 0:
                    v = v * np.sin(k * math.pi * xa / (n * hh))
            return offset + v
        if kind == "gaussian":
            r2 = sum((xa - c) ** 2 for xa, c in zip(grid, np.atleast_1d(t["/initial/center"])))
            return offset + amplitude * np.exp(-r2 / (2 * float(t["/initial/width"]) ** 2))
        raise TestFailure(f"unknown /initial/kind {kind}")

    def boundaries(self):
        """"x_lo=dirichlet:1.5 x_hi=neumann ...", the faces of the axes in use."""
        words = []
        for axis in "xyz"[:self.ndim]:
            for side in ("lo", "hi"):
                face = f"{axis}_{side}"
                kind = self.tree[f"/grid/{face}"]
                value = self.tree.get(f"/grid/{face}_value")
                words.append(f"{face}={kind}" + (f":{value:g}" if kind == "dirichlet" else ""))
        return " ".join(words)

    def points(self):
        return math.prod(self.shape)

    def cell_volume(self):
        return math.prod(self.spacing)

    def file_shape(self):
        """The /field dataset shape: [nz][ny][nx], or [ny][nx] in 2D."""
        return tuple(reversed(self.shape))

    def coefficient_sum(self):
        """sum_a c_a = dt alpha sum_a 1/h_a^2; c0 = 1 - 2 sum_a c_a."""
        return sum(self.alpha * self.dt / (h * h) for h in self.spacing)


def eps_of(dtype):
    """Unit roundoff (half an ulp of 1) of the precision."""
    return float(np.finfo(dtype).eps) / 2


# ---- checks common to every run ------------------------------------------------------------


def check_run(prob, run, steps):
    """The output file, its attributes and the JSON report agree with the run and its field."""
    tag, f, a, r = run.tag, run.field, run.attrs, run.report
    check(f.dtype == prob.dtype, f"{tag}: /field is {f.dtype}, expected {prob.precision}")
    check(f.shape == prob.file_shape(), f"{tag}: /field has shape {f.shape}, "
          f"expected {prob.file_shape()}")
    check(np.all(np.isfinite(f)), f"{tag}: /field has non-finite values")
    check(a.get("schema") == "stencil-output", f"{tag}: schema {a.get('schema')}")
    check(a.get("step") == steps, f"{tag}: attribute step {a.get('step')}, expected {steps}")
    check(a.get("time") == steps * prob.dt, f"{tag}: attribute time {a.get('time')!r}, "
          f"expected {steps * prob.dt!r}")
    check(a.get("precision") == prob.precision, f"{tag}: attribute precision {a.get('precision')}")
    check(a.get("backend") == run.backend, f"{tag}: attribute backend {a.get('backend')}")
    check(a.get("ranks") == run.nproc, f"{tag}: attribute ranks {a.get('ranks')}, "
          f"expected {run.nproc}")
    dims = a.get("rank_dims")
    check(isinstance(dims, list) and len(dims) == 3 and math.prod(dims) == run.nproc,
          f"{tag}: attribute rank_dims {dims} for {run.nproc} ranks")
    if run.dims:
        want = [int(x) for x in run.dims.split("x")] + [1]
        check(dims == want[:3], f"{tag}: rank_dims {dims}, --dims {run.dims}")
    # /parameters holds the input description (the output directory and the step count are
    # the run's, overridden on the command line).
    for key, value in prob.tree.items():
        if key in ("/output/directory", "/time/steps"):
            continue
        got = run.params.get(key)
        check(np.array_equal(np.asarray(got), np.asarray(value)),
              f"{tag}: /parameters{key} = {got!r}, input has {value!r}")
    check(run.params.get("/time/steps") == steps, f"{tag}: /parameters/time/steps "
          f"{run.params.get('/time/steps')}, ran {steps}")

    # The record of the run: the same in the file and the report, the program's version.
    check(a.get("code_version") == r["version"] == run.version, f"{tag}: code_version "
          f"{a.get('code_version')!r}, report {r['version']!r}, stencil --version {run.version!r}")
    for key in ("date", "hosts", "backend", "gpus", "kernel"):
        check(a.get(key) == r[key], f"{tag}: attribute {key} {a.get(key)!r}, report {r[key]!r}")
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["date"]), f"{tag}: date {r['date']!r}")
    check(socket.gethostname() in r["hosts"].split(","), f"{tag}: hosts {r['hosts']!r}")
    check(r["kernel"] != "" and (r["gpus"] == "") == (run.backend == "cpu"),
          f"{tag}: kernel {r['kernel']!r}, gpus {r['gpus']!r} on backend {run.backend}")

    # The report.
    check(r["steps"] == steps and r["first_step"] == 0, f"{tag}: report steps {r['steps']} "
          f"(first {r['first_step']}), expected {steps}")
    check(r["time"] == steps * prob.dt, f"{tag}: report time {r['time']!r}")
    check(r["ranks"] == run.nproc and r["dims"] == dims, f"{tag}: report ranks {r['ranks']} dims "
          f"{r['dims']}, file says {run.nproc} {dims}")
    check(r["shape"] == prob.shape + [1] * (3 - prob.ndim), f"{tag}: report shape {r['shape']}")
    check(r["precision"] == prob.precision and r["backend"] == run.backend,
          f"{tag}: report precision {r['precision']} backend {r['backend']}")
    check(os.path.samefile(r["output"], run.path), f"{tag}: report output {r['output']}")
    if steps > 0:
        check(r["loop_seconds"] > 0 and r["gpts_per_second"] > 0,
              f"{tag}: report loop {r['loop_seconds']} s, {r['gpts_per_second']} Gpts/s")
        gpts = prob.points() * steps / r["loop_seconds"] / 1e9
        check(math.isclose(r["gpts_per_second"], gpts, rel_tol=1e-6),
              f"{tag}: report {r['gpts_per_second']} Gpts/s, points x steps / loop time = {gpts}")
    # The loop's phases over the ranks, and (CPU backend: one face exchange per step) the
    # messages and bytes each rank sent, exactly.
    for name, ph in r["phases"].items():
        ok = 0 <= ph["min"] <= ph["mean"] <= ph["max"] == r["phases_seconds"][name]
        if ph["mean"] > 0:
            ok = ok and math.isclose(ph["imbalance"], ph["max"] / ph["mean"], rel_tol=1e-8)
        check(ok, f"{tag}: phase {name} {ph}, max {r['phases_seconds'][name]}")
    # How much of the exchanges the other cells' update hid: the exposed part of each rank's
    # exchange time, on the host's clock (the CPU backend: packing, posting and the wait;
    # the whole from the packing to the end of the wait) or the device's. None without messages.
    ov, ph = r["overlap"], r["phases"]
    check((ov is None) == (r["halo"]["messages"]["max"] == 0 or r["halo"]["exchanges"] == 0),
          f"{tag}: overlap {ov} with halo {r['halo']}")
    if ov is not None:
        x, e = ov["exchange_seconds"], ov["exposed_seconds"]
        check(0 <= e["min"] <= e["mean"] <= e["max"] and 0 <= x["min"] <= x["mean"] <= x["max"] and
              all(e[k] <= x[k] for k in ("min", "mean", "max")) and
              0 <= ov["hidden_least_rank"] <= ov["hidden"] + 1e-9 <= 1 + 1e-9 and
              (x["mean"] == 0 or math.isclose(ov["hidden"], 1 - e["mean"] / x["mean"],
                                              rel_tol=1e-6, abs_tol=1e-9)),
              f"{tag}: overlap {ov}")
        if run.backend == "cpu":
            own = [ph[n]["mean"] for n in ("halo_pack_post", "compute_inner", "halo_wait_unpack")]
            check(ov["clock"] == "host" and
                  math.isclose(x["mean"], sum(own), rel_tol=1e-6, abs_tol=1e-9) and
                  math.isclose(e["mean"], own[0] + own[2], rel_tol=1e-6, abs_tol=1e-9),
                  f"{tag}: overlap {ov}, phases {ph}")
    if run.backend == "cpu":
        msgs, sent = expected_halo(prob, dims, steps)
        halo = r["halo"]
        check(halo["exchanges"] == steps, f"{tag}: {halo['exchanges']} exchanges in {steps} steps")
        for key, want in (("messages", msgs), ("bytes", sent)):
            got = halo[key]
            check([got["min"], got["max"], got["total"]] == [min(want), max(want), sum(want)] and
                  math.isclose(got["mean"], sum(want) / len(want)),
                  f"{tag}: halo {key} {got}, expected per rank {want}")

    # Norms of the final field. The sums are taken in another order than the solver's:
    # allow N eps of the sum of |u| (the bound on any summation order's error).
    u = f.astype(np.float64).ravel()
    cv = prob.cell_volume()
    n_eps = u.size * eps_of(np.float64) * 2
    norms = r["norms"]
    check(norms["nonfinite"] == 0, f"{tag}: report nonfinite {norms['nonfinite']}")
    check(norms["max_abs"] == float(np.max(np.abs(u))), f"{tag}: report max_abs "
          f"{norms['max_abs']!r}, field {float(np.max(np.abs(u)))!r}")
    integral = math.fsum(u) * cv
    check(abs(norms["integral"] - integral) <= n_eps * math.fsum(np.abs(u)) * cv + 1e-300,
          f"{tag}: report integral {norms['integral']!r}, field {integral!r}")
    l2 = math.sqrt(math.fsum(u * u) * cv)
    check(abs(norms["l2"] - l2) <= n_eps * l2 + 1e-300, f"{tag}: report l2 {norms['l2']!r}, "
          f"field {l2!r}")


def expected_halo(prob, dims, steps):
    """Per rank: the messages and bytes a CPU run sends, steps face exchanges of radius r (no
    edges or corners): one message per face with a neighbour rank (an axis spanned by one rank
    has none: its periodic wrap is a copy), of r x the block's face cells."""
    radius = int(prob.tree.get("/problem/order", 2)) // 2
    elem = np.dtype(prob.dtype).itemsize
    periodic = [prob.tree[f"/grid/{a}_lo"] == "periodic" for a in "xyz"[:prob.ndim]]
    sizes = [[n // p + (c < n % p) for c in range(p)] for n, p in zip(prob.shape, dims)]
    msgs, sent = [], []
    for coords in itertools.product(*(range(p) for p in dims[:prob.ndim])):
        block = [sizes[a][c] for a, c in enumerate(coords)]
        m = b = 0
        for a, c in enumerate(coords):
            p = dims[a]
            for has in (c > 0, c < p - 1):
                if p > 1 and (has or periodic[a]):
                    m += 1
                    b += radius * math.prod(block) // block[a] * elem
        msgs.append(m * steps)
        sent.append(b * steps)
    return msgs, sent


# ---- exact discrete solution ---------------------------------------------------------------


def exact_tolerance(prob, steps, g_n):
    """Max error allowed relative to the amplitude A g^n.

    fp64: 1e-12. fp32: each step evaluates v = c0 u, then v = fma(c_a, u- + u+, v)
    per axis (kernels/point.h) with 1 + 2d roundings, each at most eps M (M = max |u| <= A;
    the pair sums are <= 2M but are scaled by c_a <= 1/2), and the coefficients are rounded
    to float once (at most eps M more). With c0 >= 0 the update is a convex combination, so errors are not
    amplified in the max norm: |u_n - exact| <= eps A (1 + (2 + 2d) n), the first 1 for
    rounding the initial field. Relative to the amplitude A g^n that is the bound below.
    """
    if prob.dtype == np.float64:
        return 1e-12
    return eps_of(np.float32) * (1 + (2 + 2 * prob.ndim) * steps) / g_n


def cmd_exact(h, args):
    modes = [int(k) for k in args.modes.split(",")]
    gen = generator_args(args) + ["--bc", "all=dirichlet:0",
                                  "--initial", f"sine:{args.amplitude!r}:{args.modes}"]
    inp = h.make_input("exact", gen)
    prob = Problem(inp)
    check(len(modes) == prob.ndim and all(k >= 1 for k in modes),
          f"test set-up: need one mode >= 1 per axis, got {modes}")
    nproc = h.default_nproc()
    steps = prob.steps
    run = h.run(inp, nproc, f"np{nproc}", dims=args.dims)
    check_run(prob, run, steps)

    # lambda_h = -sum_a (4 / h_a^2) sin^2(k_a pi h_a / (2 L_a)), L_a = n_a h_a.
    lam = -sum(4.0 / (hh * hh) * math.sin(k * math.pi / (2 * n)) ** 2
               for k, n, hh in zip(modes, prob.shape, prob.spacing))
    g = 1.0 + prob.dt * prob.alpha * lam
    amplitude = args.amplitude * g ** steps
    # The profile prod_a sin(k_a pi x_a / L_a) at the cell centres x = (i + 1/2) h.
    profile = np.ones(())
    for k, n, hh in zip(modes, prob.shape, prob.spacing):
        x = (np.arange(n) + 0.5) * hh
        profile = np.multiply.outer(np.sin(k * math.pi * x / (n * hh)), profile)
    exact = amplitude * profile  # axes end up [z][y][x]: the file's order
    check(exact.shape == run.field.shape, f"internal: exact shape {exact.shape}")
    # The test is only meaningful if the mode has decayed visibly but not vanished.
    check(0.05 < g ** steps < 0.98, f"test set-up: g^n = {g ** steps} (choose steps/modes so "
          "that the amplitude changes but stays resolvable)")
    check(1 - 2 * prob.coefficient_sum() >= 0, "test set-up: c0 < 0 (dt above half the "
          "stability limit); the fp32 error bound assumes c0 >= 0")
    err = float(np.max(np.abs(run.field.astype(np.float64) - exact))) / abs(amplitude)
    tol = exact_tolerance(prob, steps, g ** steps)
    print(f"exact: {prob.ndim}D {'x'.join(map(str, prob.shape))} {prob.precision}, "
          f"{nproc} ranks dims {run.attrs['rank_dims']}, modes {modes}, {steps} steps: "
          f"g^n = {g ** steps:.6f}, max error / amplitude = {err:.3e} (tolerance {tol:.3e})")
    check(err <= tol, f"max error relative to the amplitude {err:.3e} exceeds {tol:.3e}")


# ---- decomposition invariance --------------------------------------------------------------


def cmd_invariance(h, args):
    inp = h.make_input("invariance", generator_args(args))
    prob = Problem(inp)
    steps = prob.steps
    initial = prob.initial_values()
    base = None
    for spec in args.runs:
        nproc, _, dims = spec.partition(":")
        run = h.run(inp, int(nproc), f"np{nproc}-{dims or 'auto'}", dims=dims or None)
        check_run(prob, run, steps)
        f = run.field
        if base is None:
            base = run
            # A field that did not evolve would compare equal trivially.
            change = float(np.max(np.abs(f.astype(np.float64) - initial)))
            check(change > 1e-3 * float(np.max(np.abs(initial))),
                  f"{run.tag}: the field hardly changed (max change {change:.3e})")
            continue
        if f.tobytes() != base.field.tobytes():
            ne = np.argwhere(f != base.field)
            at = ne[0].tolist() if len(ne) else "?"
            worst = float(np.max(np.abs(f.astype(np.float64) - base.field)))
            raise TestFailure(f"{run.tag} (dims {run.attrs['rank_dims']}) differs from "
                              f"{base.tag} (dims {base.attrs['rank_dims']}): {len(ne)} cells, "
                              f"first at [z][y][x] = {at}, max |diff| {worst:.3e}")
    print(f"invariance: {prob.ndim}D {'x'.join(map(str, prob.shape))} {prob.precision}, "
          f"{prob.boundaries()}, {steps} steps: {len(args.runs)} runs "
          f"({' '.join(args.runs)}) bit-identical")


# ---- conservation --------------------------------------------------------------------------


def conservation_tolerance(prob, steps, u0):
    """Relative tolerance on the total heat after `steps` steps.

    With periodic or zero-flux faces the weights of the update sum to one for every cell's
    contribution, so sum(u) is conserved exactly in exact arithmetic. Per step each cell's
    new value carries at most (1 + 2d) roundings of size eps M (M = max |u|, see
    exact_tolerance()), and the computed weights c0 + 2 sum c_a differ from 1 by at most
    about 3 eps (c0 = 1 - 2 sum c_a is rounded; in fp32 the coefficients too): in all at
    most (4 + 2d) eps M per cell and step, so |S_n - S_0| <= n (4 + 2d) eps N M. Relative
    to |S_0| = N |mean u0| (the test fields have a positive mean) that is the value below.
    This is the worst case; rounding errors of either sign mostly cancel in practice.
    """
    m = float(np.max(np.abs(u0)))
    mean = abs(float(np.mean(u0)))
    return steps * (4 + 2 * prob.ndim) * eps_of(prob.dtype) * m / mean


def cmd_conservation(h, args):
    inp = h.make_input("conservation", generator_args(args))
    prob = Problem(inp)
    faces = prob.boundaries()
    check("dirichlet" not in faces,
          f"test set-up: conservation needs periodic or neumann faces, got {faces}")
    check(1 - 2 * prob.coefficient_sum() >= 0, "test set-up: c0 < 0; the maximum principle "
          "and the error bound assume c0 >= 0")
    nproc = h.default_nproc()
    steps = prob.steps
    first = h.run(inp, nproc, "step0", dims=args.dims, steps=0)
    check_run(prob, first, 0)
    if prob.initial_field is not None:
        want = prob.initial_field.astype(prob.dtype).reshape(prob.file_shape())
        check(first.field.tobytes() == want.tobytes(), "step 0 differs from /initial/field")
    else:
        # The analytic field at the cell centres x = (i + 1/2) h (libm and numpy may differ
        # in the last bits; fp32 rounds once more).
        want = prob.initial_values()
        dev = float(np.max(np.abs(first.field - want)))
        check(dev <= 8 * eps_of(prob.dtype) * float(np.max(np.abs(want))),
              f"step 0 differs from the analytic initial field by {dev:.3e}")
    last = h.run(inp, nproc, "final", dims=args.dims)
    check_run(prob, last, steps)
    u0 = first.field.astype(np.float64)
    un = last.field.astype(np.float64)
    check(float(np.max(np.abs(un - u0))) > 1e-3 * float(np.max(np.abs(u0))),
          "the field hardly changed: the test would not see a broken update")
    s0, sn = math.fsum(u0.ravel()), math.fsum(un.ravel())
    rel = abs(sn - s0) / abs(s0)
    tol = conservation_tolerance(prob, steps, u0)
    # Discrete maximum principle and l2 decay (each step is a convex combination of
    # neighbours when c0 >= 0), to the same per-step rounding as above: at most
    # n (4 + 2d) eps M on the values, twice that relative on sum(u^2).
    per_step = (4 + 2 * prob.ndim) * eps_of(prob.dtype)
    slack = steps * per_step * float(np.max(np.abs(u0)))
    print(f"conservation: {prob.ndim}D {'x'.join(map(str, prob.shape))} {prob.precision}, "
          f"{faces}, {nproc} ranks dims {last.attrs['rank_dims']}, {steps} steps: sum {s0!r} -> {sn!r}, "
          f"relative change {rel:.3e} (tolerance {tol:.3e}); range [{u0.min():.6g}, "
          f"{u0.max():.6g}] -> [{un.min():.6g}, {un.max():.6g}]")
    check(rel <= tol, f"total heat changed by {rel:.3e} (relative), more than {tol:.3e}")
    check(un.max() <= u0.max() + slack and un.min() >= u0.min() - slack,
          f"the maximum principle is violated: range [{u0.min()!r}, {u0.max()!r}] became "
          f"[{un.min()!r}, {un.max()!r}] (slack {slack:.3e})")
    check(math.fsum((un * un).ravel()) <= math.fsum((u0 * u0).ravel()) * (1 + 2 * steps *
          per_step), "sum(u^2) grew")


# ---- threads per rank ----------------------------------------------------------------------


def rank_masks(h, launcher):
    """{rank: (host, CPUs of its affinity mask)} of the ranks the launcher starts."""
    script = ('echo "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}} $(hostname) '
              '$(grep Cpus_allowed_list /proc/self/status | cut -f2)"')
    p = h.execute(launcher + ["/bin/sh", "-c", script], "the ranks' CPU masks")
    out = {}
    for line in p.stdout.split("\n"):
        if not line.strip():
            continue
        rank, host, cpus = line.split()
        n = 0
        for part in cpus.split(","):
            lo, _, hi = part.partition("-")
            n += int(hi or lo) - int(lo) + 1
        out[int(rank)] = (host, cpus, n)
    return out


def cmd_threads(h, args):
    """Without OMP_NUM_THREADS each rank runs its share of the cores: the CPUs of its mask over
    the ranks of its node with the same mask (at least 1), as the launcher binds them (default,
    and with Open MPI also --bind-to none); with OMP_NUM_THREADS that many. The header and the
    JSON report say so."""
    nproc = h.default_nproc()
    inp = h.make_input("threads", ["--shape", "16x12x10", "--steps", "2"])
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    variants = [[]]
    version = subprocess.run([h.mpiexec[0], "--version"], capture_output=True, text=True)
    if re.search(r"Open MPI|OpenRTE", version.stdout + version.stderr):
        variants.append(["--bind-to", "none"])
    for flags in variants:
        launcher = h.mpi_prefix(nproc) + flags
        masks = rank_masks(h, launcher)
        check(sorted(masks) == list(range(nproc)), f"ranks {sorted(masks)}")
        share = {}  # rank: (threads, the header's reason)
        for rank, (host, cpus, n) in masks.items():
            same = sum(1 for o in masks.values() if o[:2] == (host, cpus))
            share[rank] = (max(1, n // same),
                           f"{n} cores shared by {same} ranks of the node" if same > 1 else
                           f"{n} core{'s' if n > 1 else ''} of its own")
        for omp in (None, "3"):
            e = dict(env, OMP_NUM_THREADS=omp) if omp else env
            report = h.path("threads.json")
            p = subprocess.run(launcher + [h.stencil, inp, "--backend", "cpu", "--output-dir",
                                           h.path("threads-out"), "--overwrite", "--report-json",
                                           report], cwd=h.workdir, capture_output=True, text=True,
                               env=e, timeout=h.timeout)
            check(p.returncode == 0, f"{flags} OMP_NUM_THREADS={omp}: exit {p.returncode}\n"
                  f"{p.stderr}")
            counts = [3] if omp else [t for t, _ in share.values()]
            lo, hi = min(counts), max(counts)
            count = str(lo) if lo == hi else f"{lo} to {hi}"
            why = "OMP_NUM_THREADS" if omp else share[0][1]
            line = (f"ranks        {nproc} = ", f", {count} thread{'s' if hi > 1 else ''} per rank "
                    f"({why}), backend cpu")
            got = [l for l in p.stdout.split("\n") if l.startswith(line[0])]
            check(len(got) == 1 and got[0].endswith(line[1]),
                  f"{flags} OMP_NUM_THREADS={omp}: header {got}, expected ...{line[1]}")
            with open(report) as f:
                r0 = json.load(f)["threads_per_rank"]
            check(r0 == (3 if omp else share[0][0]), f"report threads_per_rank {r0}")
            print(f"launcher {' '.join(flags) or '(default binding)'}, OMP_NUM_THREADS={omp}: "
                  f"masks {[masks[r][1] for r in range(nproc)]} -> {got[0].split(', ', 2)[2]}")


# ---- command line --------------------------------------------------------------------------


def generator_args(args):
    out = []
    for opt in ("shape", "spacing", "alpha", "dt", "steps", "precision", "initial"):
        v = getattr(args, opt, None)
        if v is not None:
            out += ["--" + opt, str(v)]
    for bc in getattr(args, "bc", None) or []:
        out += ["--bc", bc]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mpiexec", required=True, help="launcher command for N ranks")
    p.add_argument("--stencil", required=True)
    p.add_argument("--stencil-input", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--backend", default="cpu", help="stencil --backend (default cpu)")
    sub = p.add_subparsers(dest="command", required=True)

    def with_input(sp, initial=True, bc=True):
        sp.add_argument("--shape", required=True)
        sp.add_argument("--spacing")
        sp.add_argument("--alpha")
        sp.add_argument("--dt")
        sp.add_argument("--steps", required=True)
        sp.add_argument("--precision", default="fp64")
        if initial:
            sp.add_argument("--initial", required=True)
        if bc:
            sp.add_argument("--bc", action="append", required=True)
        return sp

    sp = with_input(sub.add_parser("exact", help="sine mode vs (1 + dt alpha lambda_h)^n"),
                    initial=False, bc=False)
    sp.add_argument("--modes", required=True, help="KX,KY[,KZ], each >= 1")
    sp.add_argument("--amplitude", type=float, default=1.0)
    sp.add_argument("--dims")
    sp.set_defaults(func=cmd_exact)

    sp = with_input(sub.add_parser("invariance", help="bitwise equal fields over decompositions"))
    sp.add_argument("--runs", nargs="+", required=True, help="NPROC[:DIMS] ...")
    sp.set_defaults(func=cmd_invariance)

    sp = with_input(sub.add_parser("conservation", help="total heat with periodic/zero flux"))
    sp.add_argument("--dims")
    sp.set_defaults(func=cmd_conservation)

    sp = sub.add_parser("threads", help="threads per rank: the share of the cores")
    sp.set_defaults(func=cmd_threads)

    return run_command(p.parse_args(), Harness)


if __name__ == "__main__":
    sys.exit(main())
