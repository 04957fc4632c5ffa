"""The corpus of bad inputs and command lines, generated from tables (tests/errors/errors_test.py
runs each case like its hand-written ones).

Every case starts from a valid input (stencil-input's defaults in Ctx.make_input, or a Poisson
input), changes one thing, and expects one exit status and one error message that names the
file and key, or the option, at fault. CASES maps a case's name to its function.
"""
import re

import numpy as np

NAN, INF = float("nan"), float("inf")


def set_attr(f, key, value, dtype=None):
    """Replace attribute key ("/group/name") with value (numpy picks the type unless dtype)."""
    group, name = key.rsplit("/", 1)
    g = f[group or "/"]
    if name in g.attrs:
        del g.attrs[name]
    g.attrs.create(name, value, dtype=dtype)


def with_keep(ctx):
    """An existing output directory holding a file the run must not touch."""
    ctx.write("out/keep.dat", b"results of an earlier run\n")


def drop(f, key):
    """Delete attribute or group key."""
    group, name = key.rsplit("/", 1)
    g = f[group or "/"]
    if name in g.attrs:
        del g.attrs[name]
    else:
        del g[name]


CASES = {}


def input_case(name, edit, code, message, gen=(), extra=()):
    """A case on bad.h5: stencil-input's file (with gen's options), changed by edit(f); the
    error line must read "bad.h5: " + message (a regular expression)."""
    def run(ctx):
        with_keep(ctx)
        ctx.make_input("bad.h5", *gen)
        ctx.edit("bad.h5", edit)
        ctx.expect_error(code, r"bad\.h5: " + message, *extra, "bad.h5")
    CASES[name] = run


def option_case(name, args, code, message, gen=()):
    """A case of the command line args with a valid in.h5 (stencil-input with gen's options)."""
    def run(ctx):
        with_keep(ctx)
        ctx.make_input("in.h5", *gen)
        ctx.expect_error(code, message, *args)
    CASES[name] = run


POISSON = ("--equation", "poisson", "--source", "sine:1:1,1,1", "--bc", "all=dirichlet:0",
           "--steps", "20")
GAUSS = ("--initial", "gaussian:1:0.5,0.5,0.4:0.2")  # the default, named for clarity
SINE = ("--initial", "sine:1:1,2,1")
CONST = ("--initial", "constant:0.5")
DATASET = ("--initial", "random:3")

# ---- a key missing ----------------------------------------------------------------------------
for key, gen in [("/schema", ()), ("/version", ()), ("/problem/equation", ()),
                 ("/problem/alpha", ()), ("/grid/shape", ()), ("/grid/spacing", ()),
                 ("/grid/x_lo", ()), ("/grid/y_hi", ()), ("/grid/z_lo", ()), ("/time/dt", ()),
                 ("/time/steps", ()), ("/initial/kind", ()), ("/initial/amplitude", GAUSS),
                 ("/initial/center", GAUSS), ("/initial/width", GAUSS), ("/initial/modes", SINE),
                 ("/initial/value", CONST), ("/solver/max_iterations", POISSON)]:
    input_case("missing" + key.replace("/", "-").replace("_", "-"),
               lambda f, key=key: drop(f, key), 1, f"missing key {re.escape(key)}", gen)

for group, gen, more in [("/problem", (), ""), ("/grid", (), ""), ("/time", (), ""),
                         ("/initial", (), ""),
                         ("/source", POISSON, r": the Poisson equation lap u = f needs f")]:
    input_case("missing-group" + group.replace("/", "-"), lambda f, g=group: drop(f, g), 1,
               f"missing group {re.escape(group)}{more}", gen)

# ---- a key of the wrong type --------------------------------------------------------------------
for key, value, want, found, gen in [
        ("/problem/alpha", "1", "a number", "string", ()),
        ("/grid/spacing", np.bytes_("0.1"), "a number array", "string", ()),
        ("/initial/width", "0.2", "a number", "string", GAUSS),
        ("/problem/equation", 1.0, "a string", "float", ()),
        ("/grid/x_lo", 0, "a string", "integer", ()),
        ("/initial/kind", 2.0, "a string", "float", ()),
        ("/problem/precision", 64, "a string", "integer", ()),
        ("/grid/shape", np.array([12.0, 10.0, 8.0]), "an integer array", "float", ()),
        ("/problem/order", 2.0, "an integer", "float", ()),
        ("/initial/modes", np.array([1.0, 2.0, 1.0]), "an integer array", "float", SINE)]:
    input_case("type" + key.replace("/", "-").replace("_", "-"),
               lambda f, key=key, value=value: set_attr(f, key, value), 1,
               f"key {re.escape(key)} must be {want} \\(found {found}\\)", gen)

# ---- a value out of range ---------------------------------------------------------------------
for name, key, value, message, gen in [
        ("dt-zero", "/time/dt", 0.0, "/time/dt = 0 must be positive and finite", ()),
        ("dt-negative", "/time/dt", -1e-3, "/time/dt = -0.001 must be positive and finite", ()),
        ("dt-nan", "/time/dt", NAN, "/time/dt = nan must be positive and finite", ()),
        ("dt-inf", "/time/dt", INF, "/time/dt = inf must be positive and finite", ()),
        ("alpha-zero", "/problem/alpha", 0.0, "/problem/alpha = 0 must be positive and finite",
         ()),
        ("alpha-nan", "/problem/alpha", NAN, "/problem/alpha = nan must be positive and finite",
         ()),
        ("spacing-zero", "/grid/spacing", np.array([0.1, 0.0, 0.1]),
         r"/grid/spacing\[1\] = 0 must be positive and finite", ()),
        ("spacing-negative", "/grid/spacing", np.array([0.1, 0.1, -0.1]),
         r"/grid/spacing\[2\] = -0.1 must be positive and finite", ()),
        ("spacing-inf", "/grid/spacing", np.array([INF, 0.1, 0.1]),
         r"/grid/spacing\[0\] = inf must be positive and finite", ()),
        ("spacing-count", "/grid/spacing", np.array([0.1, 0.1]),
         r"key /grid/spacing must have 3 elements \(found 2\)", ()),
        ("steps-negative", "/time/steps", np.int64(-5), "/time/steps = -5 must not be negative",
         ()),
        ("shape-x-one", "/grid/shape", np.array([1, 10, 8], np.int64),
         r"/grid/shape: x and y need at least 2 cells \(found 1 x 10\)", ()),
        ("order-three", "/problem/order", np.int64(3),
         r"/problem/order = 3 is not supported \(supported: 2, 4, 6, 8\)", ()),
        ("order-zero", "/problem/order", np.int64(0),
         r"/problem/order = 0 is not supported \(supported: 2, 4, 6, 8\)", ()),
        ("order-huge", "/problem/order", np.int64(1 << 40),
         r"/problem/order = 1099511627776 is not supported \(supported: 2, 4, 6, 8\)", ()),
        ("shape-below-radius", "/grid/shape", np.array([12, 10, 3], np.int64),
         r"/grid/shape\[2\] = 3 is smaller than the radius 4 of the order-8 stencil",
         ("--order", "8")),
        ("precision-fp16", "/problem/precision", np.bytes_("fp16"),
         r'key /problem/precision = "fp16" is not one of: fp64, fp32', ()),
        ("equation-wave", "/problem/equation", np.bytes_("wave"),
         r'key /problem/equation = "wave" is not one of: heat, poisson', ()),
        ("bc-robin", "/grid/y_lo", np.bytes_("robin"),
         r'key /grid/y_lo = "robin" is not one of: dirichlet, neumann, periodic', ()),
        ("bc-one-periodic", "/grid/x_hi", np.bytes_("periodic"),
         r"/grid/x_lo and /grid/x_hi: periodic must be set on both faces of an axis", ()),
        ("bc-value-nan", "/grid/x_lo_value", NAN, r"/grid/x_lo_value must be finite", ()),
        ("bc-value-inf", "/grid/z_hi_value", -INF, r"/grid/z_hi_value must be finite", ()),
        ("initial-kind-random", "/initial/kind", np.bytes_("random"),
         r'key /initial/kind = "random" is not one of: constant, sine, gaussian, dataset', ()),
        ("constant-nan", "/initial/value", NAN, r"/initial/value must be finite", CONST),
        ("gaussian-width-zero", "/initial/width", 0.0,
         r"/initial/width = 0 must be positive and finite", GAUSS),
        ("gaussian-width-negative", "/initial/width", -0.2,
         r"/initial/width = -0.2 must be positive and finite", GAUSS),
        ("gaussian-center-nan", "/initial/center", np.array([0.5, NAN, 0.4]),
         r"/initial/amplitude, /initial/offset and /initial/center must be finite", GAUSS),
        ("gaussian-center-count", "/initial/center", np.array([0.5, 0.5]),
         r"key /initial/center must have 3 elements \(found 2\)", GAUSS),
        ("sine-modes-negative", "/initial/modes", np.array([1, -2, 1], np.int64),
         r"/initial/modes\[1\] = -2 must not be negative", SINE),
        ("sine-amplitude-inf", "/initial/amplitude", INF,
         r"/initial/amplitude and /initial/offset must be finite", SINE),
        ("final-empty", "/output/final", np.bytes_(""),
         r'/output/final = "" must be a plain file name', ()),
        ("final-with-folder", "/output/final", np.bytes_("sub/final.h5"),
         r'/output/final = "sub/final.h5" must be a plain file name', ()),
        ("directory-empty", "/output/directory", np.bytes_(""),
         r"/output/directory must not be empty", ()),
        ("version-zero", "/version", np.int64(0),
         r"/version = 0 is not supported \(this build reads versions 1 to 2\)", ()),
        ("unknown-grid-key", "/grid/x_low", np.bytes_("dirichlet"), r"unknown key /grid/x_low",
         ()),
        ("unknown-root-key", "/author", np.bytes_("me"), r"unknown key /author", ()),
        ("tolerance-negative", "/solver/tolerance", -1e-6,
         r"/solver/tolerance = -1e-06 must be >= 0 and finite", POISSON),
        ("residual-every-negative", "/solver/residual_every", np.int64(-1),
         r"/solver/residual_every = -1 must not be negative", POISSON),
        ("omega-negative", "/solver/omega", -0.5,
         r"/solver/omega = -0.5 must be 0 \(automatic\) or positive and finite", POISSON),
        ("max-iterations-negative", "/solver/max_iterations", np.int64(-3),
         r"/solver/max_iterations = -3 must not be negative", POISSON)]:
    input_case("value-" + name, lambda f, key=key, value=value: set_attr(f, key, value), 1,
               message, gen)


# ---- groups in the wrong place, datasets --------------------------------------------------------
def time_in_poisson(f):
    g = f.create_group("time")
    g.attrs["dt"] = 0.1
    g.attrs["steps"] = np.int64(5)


def solver_in_heat(f):
    f.create_group("solver").attrs["max_iterations"] = np.int64(5)


def field_missing(f):
    del f["initial/field"]


def field_group(f):
    del f["initial/field"]
    f["initial"].create_group("field")


def field_strings(f):
    del f["initial/field"]
    f["initial"].create_dataset("field", data=np.array([b"a", b"b"]))


def field_1d(f):
    del f["initial/field"]
    f["initial"].create_dataset("field", data=np.zeros(960))


def field_value(value):
    def edit(f):
        f["initial/field"][2, 3, 4] = value
    return edit


input_case("group-time-in-poisson", time_in_poisson, 1,
           r"/time applies to the heat equation only; the Poisson equation iterates "
           r"/solver/max_iterations times", POISSON)
input_case("group-solver-in-heat", solver_in_heat, 1,
           r"/solver applies to the Poisson equation only")
input_case("group-unknown-in-initial", lambda f: f["initial"].create_group("extra"), 1,
           r"unknown key /initial/extra", DATASET)
input_case("dataset-missing", field_missing, 1,
           r'/initial/kind is "dataset" but /initial/field is missing', DATASET)
input_case("dataset-is-group", field_group, 1, r"/initial/field is not a dataset", DATASET)
input_case("dataset-strings", field_strings, 1, r"/initial/field must hold numbers", DATASET)
input_case("dataset-1d", field_1d, 1,
           r"/initial/field has shape \[960\] but the grid needs \[nz\]\[ny\]\[nx\] = "
           r"\[8\]\[10\]\[12\]", DATASET)
for name, value in [("nan", NAN), ("inf", INF), ("minus-inf", -INF)]:
    def run(ctx, value=value):
        with_keep(ctx)
        ctx.make_input("bad.h5", *DATASET)
        ctx.edit("bad.h5", field_value(value))
        ctx.expect_error(3, r"bad\.h5: the field at the start \(step 0, before any update\) has 1 "
                         r"non-finite values \(NaN or Inf\); check /initial/field", "bad.h5")
    CASES["dataset-" + name] = run


def omega_divergent(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5", *POISSON)
    ctx.edit("bad.h5", lambda f: set_attr(f, "/solver/omega", 1.5))
    ctx.expect_error(1, r"bad\.h5: /solver/omega = 1\.5 does not converge: the damped Jacobi "
                     r"iteration matrix", "bad.h5")


CASES["value-omega-divergent"] = omega_divergent


# ---- files that are not inputs ------------------------------------------------------------------
def file_case(name, make, message):
    def run(ctx):
        with_keep(ctx)
        make(ctx)
        ctx.expect_error(1, message, "bad.h5")
    CASES["file-" + name] = run


def truncated(ctx):
    ctx.make_input("full.h5", *DATASET)
    with open(ctx.path("full.h5"), "rb") as f:
        ctx.write("bad.h5", f.read()[:2048])


def empty_hdf5(ctx):
    import h5py
    h5py.File(ctx.path("bad.h5"), "w").close()


file_case("empty", lambda ctx: ctx.write("bad.h5", b""), r"bad\.h5 is not an HDF5 file")
file_case("directory", lambda ctx: ctx.write("bad.h5/inside", b"x"),
          r"bad\.h5 is not an HDF5 file")
file_case("truncated", truncated, r"cannot open HDF5 file bad\.h5")
file_case("empty-hdf5", empty_hdf5, r"bad\.h5: missing key /schema")

# ---- the command line --------------------------------------------------------------------------
for name, args, code, message, gen in [
        ("steps-word", ["--steps", "ten"], 2, r'--steps expects an integer >= 0, got "ten"', ()),
        ("steps-fraction", ["--steps", "1.5"], 2, r'--steps expects an integer >= 0, got "1\.5"',
         ()),
        ("checkpoint-every-negative", ["--checkpoint-every", "-1"], 2,
         r'--checkpoint-every expects an integer >= 0, got "-1"', ()),
        ("keep-checkpoints-negative", ["--keep-checkpoints", "-2"], 2,
         r'--keep-checkpoints expects an integer >= 0, got "-2"', ()),
        ("output-every-word", ["--output-every", "often"], 2,
         r'--output-every expects an integer >= 0, got "often"', ()),
        ("output-stride-zero", ["--output-stride", "0"], 2,
         r'--output-stride expects an integer >= 1, got "0"', ()),
        ("agree-every-zero", ["--agree-every", "0"], 2,
         r'--agree-every expects an integer >= 1, got "0"', ()),
        ("check-every-negative", ["--check-every", "-1"], 2,
         r'--check-every expects an integer >= 0, got "-1"', ()),
        ("walltime-minutes", ["--walltime", "1:99:00"], 2,
         r'--walltime expects HH:MM:SS, MM:SS or seconds, got "1:99:00"', ()),
        ("walltime-word", ["--walltime", "soon"], 2,
         r'--walltime expects a number of seconds >= 0, got "soon"', ()),
        ("io-timeout-negative", ["--io-timeout", "-5"], 2,
         r'--io-timeout expects a number of seconds >= 0, got "-5"', ()),
        ("checkpoint-interval-word", ["--checkpoint-interval", "x"], 2,
         r'--checkpoint-interval expects a number of seconds >= 0, got "x"', ()),
        ("progress-negative", ["--progress", "-1"], 2,
         r'--progress expects a number of seconds >= 0, got "-1"', ()),
        ("tolerance-negative", ["--tolerance", "-1"], 2,
         r'--tolerance expects a number >= 0, got "-1"', POISSON),
        ("tolerance-on-heat", ["--tolerance", "1e-6"], 2,
         r"--tolerance and --residual-every apply to the Poisson equation; in\.h5 solves the "
         r"heat equation", ()),
        ("checkpoint-mode-foo", ["--checkpoint-mode", "foo"], 2,
         r'--checkpoint-mode expects sync or background, got "foo"', ()),
        ("halo-transport-foo", ["--halo-transport", "foo"], 2,
         r'--halo-transport expects one of .*, got "foo"', ()),
        ("dims-four-axes", ["--dims", "1x1x1x1"], 2,
         r'--dims expects PxQxR \(or PxQ in 2D\), got "1x1x1x1"', ()),
        ("dims-letters", ["--dims", "axb"], 2, r'--dims expects PxQxR \(or PxQ in 2D\), got "axb"',
         ()),
        ("dims-product", ["--dims", "7x1x1"], 2, r"--dims 7x1x1 has 7 ranks but the run has [123]",
         ()),
        ("dims-z-on-2d", ["--dims", "1x1x5"], 2,
         r"--dims: a 2D grid \(nz = 1\) cannot be split along z \(asked for 5\)",
         ("--shape", "12x10")),
        ("output-dir-empty", ["--output-dir", ""], 2, r"--output-dir must not be empty", ()),
        ("value-missing", ["--steps"], 2, r"option --steps needs a value \(see --help\)", ()),
        ("report-is-output", ["--report-json", "out/checkpoint_0000000010.h5"], 1,
         r"--report-json out/checkpoint_0000000010\.h5 would replace an output of the run", ()),
        ("report-is-directory", ["--report-json", "out"], 1,
         r"--report-json out is not a regular file", ()),
        ("report-missing-folder", ["--report-json", "nothere/r.json"], 1,
         r"--report-json nothere/r\.json: cannot create it in nothere: No such file or directory",
         ()),
        ("dims-empty-axis", ["--dims", "2xx1"], 2,
         r'--dims expects PxQxR \(or PxQ in 2D\), got "2xx1"', ()),
        ("restart-missing-file", ["--restart", "nothere.h5"], 1,
         r"cannot read the checkpoint nothere\.h5: No such file or directory", ()),
        ("restart-latest-none", ["--restart", "latest"], 1,
         r"--restart latest: there is no checkpoint \(checkpoint_\*\.h5\) in out", ())]:
    input_last = [] if name == "value-missing" else ["in.h5"]
    option_case("option-" + name, ["in.h5"] + args if not input_last else args + input_last,
                code, message, gen)

# ---- the same checks through --set (the overrides are read like the file's keys) -------------
for name, args, message in [
        ("order-three", ["--set", "problem/order=3"],
         r"in\.h5 with --set: /problem/order = 3 is not supported \(supported: 2, 4, 6, 8\)"),
        ("final-with-folder", ["--set", "output/final=sub/final.h5"],
         r'in\.h5 with --set: /output/final = "sub/final\.h5" must be a plain file name'),
        ("final-is-input", ["--set", "output/final=in.h5", "--output-dir", ".", "--overwrite"],
         r"the final output \./in\.h5 is the input file in\.h5: the run would replace it")]:
    option_case("set-" + name, args + ["in.h5"], 1, message)
