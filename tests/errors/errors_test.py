#!/usr/bin/python3
"""Error paths of stencil, one case per invocation, and inputs written by other tools.

  errors_test.py --mpiexec "mpiexec -n 2 ..." --nproc 2 --stencil PATH --stencil-input PATH
                 --workdir DIR CASE

Every error case checks:
  - the exit status equals the documented code (1 error, 2 usage, 3 non-finite field):
    mpiexec's, and that of every rank (each rank runs under rank_status.sh, which records it;
    on several ranks in a second run in which Open MPI does not kill the other ranks when
    one exits non-zero, so that every rank gets to report);
  - stderr holds exactly one error line (an error every rank sees is printed once, not once
    per rank) and it matches the expected text, which names the file, key or option;
  - the working directory (the input files and the output directory, names and bytes) is
    exactly as before the run.
The foreign-* cases write inputs with h5py / h5import and check that stencil gives, bit for
bit, the same /field as from the equivalent stencil-input file. Exit 0 on success.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import kill_session, session_alive  # noqa: E402
import corpus  # noqa: E402
from corpus import set_attr, with_keep  # noqa: E402
RUN_TIMEOUT = int(os.environ.get("STENCIL_TEST_RUN_TIMEOUT", 120))  # seconds; a hang (a rank waiting for another that left) fails the test


class Failure(Exception):
    pass


def require(cond, msg):
    if not cond:
        raise Failure(msg)


class Ctx:
    def __init__(self, a):
        self.mpiexec = shlex.split(a.mpiexec)
        self.nproc = a.nproc
        self.stencil = a.stencil
        self.gen = a.stencil_input
        shutil.rmtree(a.workdir, ignore_errors=True)
        self.run_dir = os.path.join(a.workdir, "run")  # cwd of every run; snapshotted
        self.status_dir = os.path.join(a.workdir, "status")
        os.makedirs(self.run_dir)
        os.makedirs(self.status_dir)

    def path(self, name):
        return os.path.join(self.run_dir, name)

    def make_input(self, name, *opts):
        """Write run/name with stencil-input (a small valid 3D problem unless opts change it)."""
        defaults = ["--shape", "12x10x8", "--spacing", "0.1", "--steps", "20", "--bc",
                    "x_lo=dirichlet:1", "--bc", "y=neumann", "--initial",
                    "gaussian:1:0.5,0.5,0.4:0.2", "--output-dir", "out"]
        r = subprocess.run([self.gen, "-o", name] + defaults + list(opts), cwd=self.run_dir,
                           capture_output=True, text=True)
        require(r.returncode == 0, f"stencil-input failed: {r.stderr}")
        return self.path(name)

    def edit(self, name, fn):
        with h5py.File(self.path(name), "r+") as f:
            fn(f)

    def write(self, name, data):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)

    def snapshot(self):
        """{relative path: bytes (files) or None (directories)} of run/."""
        out = {}
        for root, dirs, files in os.walk(self.run_dir):
            rel = os.path.relpath(root, self.run_dir)
            for d in dirs:
                out[os.path.normpath(os.path.join(rel, d)) + "/"] = None
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    out[os.path.normpath(os.path.join(rel, f))] = fh.read()
        return out

    def run(self, *args, keep_going=False, env=None):
        """Run stencil on the configured ranks; returns (mpiexec status, [rank statuses], stderr,
        stdout). Open MPI's mpiexec kills the other ranks as soon as one exits non-zero, so their
        statuses are only all recorded with keep_going, which turns that off (and with it the
        meaning of mpiexec's own status: it then exits 0). env: variables to add."""
        return self.finish(self.start(*args, keep_going=keep_going, env=env))

    def start(self, *args, keep_going=False, env=None):
        """Start what run runs; finish waits for it."""
        env = dict(os.environ, **(env or {}))
        if keep_going:
            env["OMPI_MCA_orte_abort_on_non_zero_status"] = "0"
        # A session of its own, so that a hung run can be ended with all its ranks.
        return subprocess.Popen(self.command(*args), cwd=self.run_dir, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)

    def finish(self, proc):
        """run's results of a started run, once mpiexec and every process it started have ended
        (mpiexec may return before its ranks: after a SIGTERM, for one)."""
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
            t0 = time.monotonic()
            while session_alive(proc.pid) and time.monotonic() - t0 < RUN_TIMEOUT:
                time.sleep(0.05)
        except subprocess.TimeoutExpired:
            out, err = "", ""
        if proc.returncode is None or session_alive(proc.pid):
            proc.terminate()  # mpiexec forwards this to its ranks
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            kill_session(proc.pid)
            proc.communicate()
            raise Failure(f"the run hung (no exit within {RUN_TIMEOUT} s)")
        ranks = self.statuses()
        print(f"exit {proc.returncode}, ranks {ranks}\n--- stdout\n{out}--- stderr\n{err}---",
              flush=True)
        return proc.returncode, ranks, err, out

    def command(self, *args):
        """The command line that runs stencil with args on the configured ranks, each rank under
        rank_status.sh (whose earlier records it removes)."""
        for f in os.listdir(self.status_dir):
            os.unlink(os.path.join(self.status_dir, f))
        cmd = self.mpiexec + ["/bin/sh", os.path.join(HERE, "rank_status.sh"), self.status_dir,
                              self.stencil] + list(args)
        print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        return cmd

    def statuses(self):
        """The exit statuses the ranks of the last command recorded."""
        ranks = []
        for f in sorted(os.listdir(self.status_dir)):
            if not f.startswith("status."):  # a rank killed before its rename (rank_status.sh)
                continue
            with open(os.path.join(self.status_dir, f)) as fh:
                ranks.append(int(fh.read().strip()))
        return ranks

    def expect_error(self, code, pattern, *args, warning=None):
        """Run with args; require exit code on mpiexec and every rank, one error line matching
        pattern (and, if given, one warning line matching warning), and run/ unchanged.
        On several ranks it runs twice: as users do (mpiexec's status) and with keep_going
        (every rank's status)."""
        before = self.snapshot()
        # The ranks agree on the status before any exits, so Open MPI's grace before it kills
        # the ranks that are left (1 s) would only slow each run down.
        env = {"OMPI_MCA_odls_base_sigkill_timeout": "0"}
        rc, ranks, err, _ = self.run(*args, env=env)
        require(rc == code, f"mpiexec exit status {rc}, expected {code}")
        self.check_messages(err, pattern, warning)
        self.check_unchanged(before)
        if self.nproc > 1:
            _, ranks, err, _ = self.run(*args, keep_going=True, env=env)
            self.check_messages(err, pattern, warning)
            self.check_unchanged(before)
        require(len(ranks) == self.nproc, f"{len(ranks)} of {self.nproc} ranks reported a status")
        require(all(s == code for s in ranks), f"rank exit statuses {ranks}, expected all {code}")

    def check_messages(self, err, pattern, warning):
        errors = [l for l in err.splitlines() if re.search(r"\berror:", l)]
        require(len(errors) == 1, f"expected exactly one error line, got {len(errors)}: {errors}")
        require(re.search(pattern, errors[0]), f"error line {errors[0]!r} does not match "
                f"{pattern!r}")
        if warning:
            warnings = [l for l in err.splitlines() if re.search(r"\bwarning:", l)]
            require(len(warnings) == 1 and re.search(warning, warnings[0]),
                    f"expected one warning matching {warning!r}, got {warnings}")

    def check_unchanged(self, before):
        after = self.snapshot()
        changed = sorted(k for k in set(before) | set(after) if before.get(k, 0) != after.get(k, 0))
        require(not changed, f"the run changed files or folders: {changed}")


# ---- cases: input files ---------------------------------------------------------------------

def case_missing_input(ctx):
    with_keep(ctx)
    ctx.expect_error(1, r"cannot read input file nothere\.h5: No such file or directory",
                     "nothere.h5")


def case_not_hdf5(ctx):
    with_keep(ctx)
    ctx.write("notes.h5", b"this is a text file, not HDF5\n" * 20)
    ctx.expect_error(1, r"notes\.h5 is not an HDF5 file", "notes.h5")


def case_missing_key(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: f["time"].attrs.__delitem__("dt"))
    ctx.expect_error(1, r"bad\.h5: missing key /time/dt", "bad.h5")


def case_mistyped_string(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/time/dt", "0.001"))
    ctx.expect_error(1, r"bad\.h5: key /time/dt must be a number \(found string\)", "bad.h5")


def case_mistyped_shape(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/grid/shape", np.array([12, 10, 8, 2], np.int64)))
    ctx.expect_error(1, r"bad\.h5: key /grid/shape must have 2 to 3 elements \(found 4\)",
                     "bad.h5")


def case_mistyped_integer(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/time/steps", 20.0))
    ctx.expect_error(1, r"bad\.h5: key /time/steps must be an integer \(found float\)", "bad.h5")


def case_steps_too_large(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/time/steps", np.uint64(2**64 - 1)))
    ctx.expect_error(1, r"bad\.h5: key /time/steps = 18446744073709551615 does not fit a "
                     r"signed 64-bit integer", "bad.h5")


def case_shape_two_dimensional(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/grid/shape", np.array([[12, 10, 8]], np.int64)))
    ctx.expect_error(1, r"bad\.h5: key /grid/shape must be a one-dimensional array \(found 2 "
                     r"dimensions\)", "bad.h5")


def case_unknown_key(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/time/t_end", 1.0))
    ctx.expect_error(1, r"bad\.h5: unknown key /time/t_end", "bad.h5")


def case_unknown_group(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: f.create_group("checkpoint"))
    ctx.expect_error(1, r"bad\.h5: unknown key /checkpoint", "bad.h5")


def case_initial_shape(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5", "--initial", "random:5")

    def wrong(f):
        del f["initial/field"]
        f["initial"].create_dataset("field", data=np.zeros((8, 10, 13)))
    ctx.edit("bad.h5", wrong)
    ctx.expect_error(1, r"bad\.h5: /initial/field has shape \[8 x 10 x 13\] but the grid needs "
                     r"\[nz\]\[ny\]\[nx\] = \[8\]\[10\]\[12\]", "bad.h5")


def case_nonpositive_size(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/grid/shape", np.array([12, 0, 8], np.int64)))
    ctx.expect_error(1, r"bad\.h5: /grid/shape\[1\] = 0 must be between 1 and 2147483648",
                     "bad.h5")


def case_negative_size(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/grid/shape", np.array([12, 10, -8], np.int64)))
    ctx.expect_error(1, r"bad\.h5: /grid/shape\[2\] = -8 must be between 1 and 2147483648",
                     "bad.h5")


def case_overflow_size(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    n = 1 << 31
    ctx.edit("bad.h5", lambda f: set_attr(f, "/grid/shape", np.array([n, n, n], np.int64)))
    ctx.expect_error(1, r"bad\.h5: /grid/shape 2147483648 x 2147483648 x 2147483648 has too many "
                     r"points", "bad.h5")


def case_extent_too_large(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/grid/shape", np.array([1 << 40, 4, 4], np.int64)))
    ctx.expect_error(1, r"bad\.h5: /grid/shape\[0\] = 1099511627776 must be between 1 and "
                     r"2147483648", "bad.h5")


def case_schema_name(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/schema", np.bytes_("stencil-output")))
    ctx.expect_error(1, r'bad\.h5: /schema = "stencil-output" but a stencil input has '
                     r'"stencil-input"', "bad.h5")


def case_schema_version(ctx):
    with_keep(ctx)
    ctx.make_input("bad.h5")
    ctx.edit("bad.h5", lambda f: set_attr(f, "/version", np.int64(3)))
    ctx.expect_error(1, r"bad\.h5: /version = 3 is not supported \(this build reads versions 1 "
                     r"to 2\)", "bad.h5")


# ---- cases: decomposition and output ------------------------------------------------------

def case_too_many_ranks(ctx):
    require(ctx.nproc == 4, "run this case on 4 ranks")
    with_keep(ctx)
    ctx.make_input("in.h5", "--shape", "3x10x8")
    ctx.expect_error(2, r"4 ranks along x but the grid has only 3 cells there", "--dims", "4x1x1",
                     "in.h5")


def case_output_under_file(ctx):
    ctx.make_input("in.h5")
    ctx.write("plain.txt", b"a regular file\n")
    ctx.expect_error(1, r"cannot (create|list) output directory plain\.txt/out: Not a directory",
                     "--output-dir", "plain.txt/out", "in.h5")


def case_output_under_proc(ctx):
    # As root, access(W_OK) says yes almost everywhere; /proc refuses new entries anyway.
    target = "/proc/stencil-test-out"
    ctx.make_input("in.h5")
    ctx.expect_error(1, r"cannot create output directory /proc/stencil-test-out", "--output-dir",
                     target, "in.h5")
    require(not os.path.exists(target), f"{target} exists after the run")


def case_output_proc_dir(ctx):
    # An existing directory where no file can be created: the probe must find out.
    ctx.make_input("in.h5")
    ctx.expect_error(1, r"output directory /proc/self is not writable", "--output-dir",
                     "/proc/self", "in.h5")


def case_existing_output(ctx):
    ctx.make_input("in.h5")
    with_keep(ctx)
    ctx.write("out/final.h5", b"the only copy of last week's result\n")
    ctx.expect_error(1, r"out/final\.h5 already exists; pass --overwrite", "in.h5")


def case_overwrite(ctx):
    ctx.make_input("in.h5")
    with_keep(ctx)
    ctx.write("out/final.h5", b"an old result, to be replaced\n")
    before = ctx.snapshot()
    rc, ranks, err, _ = ctx.run("--overwrite", "--quiet", "in.h5")
    require(rc == 0 and ranks == [0] * ctx.nproc, f"exit {rc}, ranks {ranks}")
    require(not re.search(r"\b(error|warning):", err), f"unexpected messages: {err}")
    after = ctx.snapshot()
    require(sorted(after) == sorted(list(before) + ["out/final.xdmf"]),
            f"files before {sorted(before)}, after {sorted(after)}")
    require(after["out/keep.dat"] == before["out/keep.dat"], "out/keep.dat changed")
    with h5py.File(ctx.path("out/final.h5"), "r") as f:
        require(f.attrs["step"] == 20, f"step attribute {f.attrs['step']}")
        require(f["field"].shape == (8, 10, 12), f"/field shape {f['field'].shape}")
        require(np.isfinite(f["field"][...]).all(), "non-finite values in /field")


# ---- cases: stability ---------------------------------------------------------------------

def stable_limit(h, ndim, alpha=1.0):
    """Largest stable dt of the 2nd-order explicit scheme: dt*alpha*sum(4/h^2) = 2."""
    return 2.0 / (alpha * ndim * 4.0 / (h * h))


def case_unstable_refused(ctx):
    with_keep(ctx)
    limit = stable_limit(0.1, 3)
    ctx.make_input("in.h5", "--dt", repr(1.05 * limit))
    ctx.expect_error(1, r"in\.h5: /time/dt = [0-9.e-]+ is unstable: dt\*alpha\*sum\(4/h\^2\) = "
                     r"2\.1 exceeds the limit 2 of the explicit scheme; use dt <= "
                     + re.escape(f"{limit:.6g}") + " or pass --allow-unstable", "in.h5")


def case_unstable_nan(ctx):
    with_keep(ctx)
    # dt 5000x the limit: the highest mode grows ~1e4 per step and overflows by step ~80;
    # the check every 100 steps must catch it at step 100 and write nothing.
    limit = stable_limit(0.1, 3)
    ctx.make_input("in.h5", "--dt", repr(5000 * limit), "--steps", "300")
    ctx.expect_error(3, r"the field has [0-9]+ non-finite values \(NaN or Inf\) at step 100 "
                     r"\(it was finite at step 0\).*Nothing was written", "--allow-unstable",
                     "in.h5", warning=r"exceeds the explicit stability limit.*--allow-unstable")


def case_initial_nan(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5", "--initial", "random:4")

    def poison(f):
        f["initial/field"][3, 4, 5] = np.nan
    ctx.edit("in.h5", poison)
    ctx.expect_error(3, r"in\.h5: the field at the start \(step 0, before any update\) has 1 "
                     r"non-finite values \(NaN or Inf\); check /initial/field", "in.h5")


def case_initial_nan_new_dir(ctx):
    """A run that fails before writing removes the output directories it created."""
    ctx.make_input("in.h5", "--initial", "random:4")

    def poison(f):
        f["initial/field"][3, 4, 5] = np.nan
    ctx.edit("in.h5", poison)
    ctx.expect_error(3, r"in\.h5: the field at the start \(step 0, before any update\) has 1 "
                     r"non-finite values", "--output-dir", "new/out", "in.h5")


# ---- cases: outputs that are inputs ---------------------------------------------------------

def case_input_is_output(ctx):
    with_keep(ctx)
    ctx.make_input("out/final.h5")
    ctx.expect_error(1, r"the final output out/final\.h5 is the input file out/final\.h5: the "
                     r"run would replace it", "--overwrite", "out/final.h5")


def case_input_in_output_dir(ctx):
    with_keep(ctx)
    ctx.make_input("out/snapshot_0000000000.h5")
    ctx.expect_error(1, r"the input out/snapshot_0000000000\.h5 lies in the output directory out "
                     r"under a name the run writes or deletes", "out/snapshot_0000000000.h5")


def case_input_is_lock(ctx):
    """An input named like the output directory's lock, old enough for a stale lock's take-over:
    no lock of stencil, so refused, never replaced."""
    with_keep(ctx)
    path = ctx.make_input("out/.stencil.lock")
    t = time.time() - 600
    os.utime(path, (t, t))
    ctx.expect_error(1, r"out/\.stencil\.lock is not a lock file of stencil \(it does not start "
                     r"with \"stencil output lock: one run writes this directory at a time\"\); "
                     r"move it away or choose another --output-dir", "out/.stencil.lock")


def case_report_is_input(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(1, r"--report-json in\.h5 would replace in\.h5", "--report-json", "in.h5",
                     "in.h5")


# ---- cases: command line ------------------------------------------------------------------

def case_unknown_option(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(2, r"unknown option --frobnicate", "--frobnicate", "in.h5")


def case_dims_0x(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(2, r'--dims expects PxQxR \(or PxQ in 2D\), got "0x"', "--dims", "0x",
                     "in.h5")


def case_dims_two_axes_3d(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(2, r"--dims names 2 axes but in\.h5 has a 3D grid \(nz = 8\): give PxQxR",
                     "--dims", "2x1", "in.h5")


def case_steps_negative(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(2, r'--steps expects an integer >= 0, got "-1"', "--steps", "-1", "in.h5")


def case_backend_foo(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(2, r'--backend expects cpu, cuda or auto, got "foo"', "--backend", "foo",
                     "in.h5")


# ---- --set overrides ------------------------------------------------------------------------

def case_set_unknown_key(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(1, r"in\.h5 with --set: unknown key /time/t_end", "--set", "time/dt=0.001",
                     "--set", "time/t_end=1", "in.h5")


def case_set_mistyped(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(1, r"in\.h5 with --set: key /grid/shape must be an integer array \(found "
                     r"float\)", "--set", "grid/shape=12,10,8.5", "in.h5")


def case_set_syntax(ctx):
    with_keep(ctx)
    ctx.make_input("in.h5")
    ctx.expect_error(2, r"--set expects KEY=VALUE .*got \"time/dt\"", "--set", "time/dt", "in.h5")


def case_set_equals_file(ctx):
    """--set gives, bit for bit, the run of a file that holds the values, and /parameters of
    the output is that file's description."""
    ctx.make_input("base.h5")
    changes = {"grid/shape": "14,9,6", "time/dt": "0.0015", "time/steps": "12",
               "grid/x_hi_value": "0.5", "grid/z_lo": "neumann", "grid/z_hi": "neumann"}
    ctx.make_input("ref.h5", "--shape", "14x9x6", "--dt", "0.0015", "--steps", "12", "--bc",
                   "x_hi=dirichlet:0.5", "--bc", "z=neumann")
    sets = [w for k, v in changes.items() for w in ("--set", f"{k}={v}")]
    ref, ref_attrs, _ = run_ok(ctx, "ref.h5", "out-ref")
    got, got_attrs, _ = run_ok(ctx, "base.h5", "out-set", *sets)
    require(ref.tobytes() == got.tobytes(), "/field of the run with --set differs from the file's")
    require(got_attrs["overrides"].decode() == " ".join(sets[1::2]),
            f"attribute overrides {got_attrs['overrides']!r}")

    def tree(path):
        with h5py.File(ctx.path(path), "r") as f:
            out = {}
            f["parameters"].visititems(lambda n, o: out.update(
                {f"{n}/{k}": np.asarray(v).tolist() for k, v in o.attrs.items()}))
            return out
    a, b = tree("out-ref/final.h5"), tree("out-set/final.h5")
    del a["output/directory"], b["output/directory"]  # --output-dir differs
    require(a == b, "/parameters differ: "
            f"{[(k, a.get(k), b.get(k)) for k in a | b if a.get(k) != b.get(k)]}")
    print(f"--set {' '.join(sets[1::2])}: the same /field and /parameters as the file's")

# ---- inputs written by other tools ----------------------------------------------------------

def reencode(src, dst, int_types, with_field=True):
    """Copy input src to dst the way a user's script would write it with h5py: strings as
    variable-length UTF-8, integers as int32 or int64 (int_types: key -> dtype, int32 when not
    listed), real numbers as numpy float64 arrays (1 element for a scalar), /initial/field as
    float32."""
    with h5py.File(src, "r") as s, h5py.File(dst, "w") as d:
        def copy_attrs(so, do, prefix):
            for k, v in so.attrs.items():
                key = f"{prefix}/{k}"
                if isinstance(v, (bytes, np.bytes_)):
                    do.attrs[k] = v.decode()  # h5py: variable-length UTF-8
                elif np.issubdtype(np.asarray(v).dtype, np.integer):
                    do.attrs.create(k, np.asarray(v), dtype=int_types.get(key, np.int32))
                else:
                    do.attrs.create(k, np.atleast_1d(np.asarray(v, np.float64)))
        copy_attrs(s, d, "")
        for name, g in s.items():
            dg = d.create_group(name)
            copy_attrs(g, dg, "/" + name)
            if "field" in g and with_field:
                dg.create_dataset("field", data=g["field"][...].astype(np.float32))
    with h5py.File(dst, "r") as d:  # the encodings the case claims
        require(h5py.check_string_dtype(d.attrs.get_id("schema").dtype).length is None,
                "schema is not a variable-length string")


def run_ok(ctx, inp, outdir, *opts):
    rc, ranks, err, _ = ctx.run("--quiet", "--output-dir", outdir, *opts, inp)
    require(rc == 0 and ranks == [0] * ctx.nproc, f"{inp}: exit {rc}, ranks {ranks}")
    require(not re.search(r"\b(error|warning):", err), f"unexpected messages: {err}")
    with h5py.File(ctx.path(f"{outdir}/final.h5"), "r") as f:
        return f["field"][...], dict(f.attrs), f["field"].dtype


def same_result(ctx, ref_input, other_input):
    ref, ref_attrs, ref_type = run_ok(ctx, ref_input, "out-ref")
    got, got_attrs, got_type = run_ok(ctx, other_input, "out-other")
    require(ref_type == got_type and ref.shape == got.shape,
            f"/field {got_type}{got.shape} vs {ref_type}{ref.shape}")
    require(ref.tobytes() == got.tobytes(),
            f"/field differs: max |diff| {np.max(np.abs(ref.astype(float) - got)):.3g}")
    for k in ("step", "time", "precision"):
        require(np.array_equal(ref_attrs[k], got_attrs[k]), f"attribute {k} differs")
    print(f"/field {got_type}{got.shape} identical, bit for bit")


def case_foreign_h5py_dataset(ctx):
    # fp32 with a float32 /initial/field: the reference stores the same float32 values.
    ctx.make_input("ref.h5", "--precision", "fp32", "--initial", "random:11", "--bc",
                   "z=periodic")
    reencode(ctx.path("ref.h5"), ctx.path("h5py.h5"), {"/time/steps": np.int64})
    with h5py.File(ctx.path("h5py.h5"), "r") as f:
        require(f["initial/field"].dtype == np.float32, "field is not float32")
        require(f["grid"].attrs["shape"].dtype == np.int32, "shape is not int32")
        require(f["time"].attrs["steps"].dtype == np.int64, "steps is not int64")
    same_result(ctx, "ref.h5", "h5py.h5")


def case_foreign_h5py_analytic(ctx):
    # 2D fp64, a Gaussian: every number and string re-encoded, int64 shape, int32 the rest.
    ctx.make_input("ref.h5", "--shape", "14x9", "--initial", "gaussian:2:0.7,0.4:0.3:0.5",
                   "--bc", "x=periodic", "--bc", "y_hi=dirichlet:0.25")
    reencode(ctx.path("ref.h5"), ctx.path("h5py.h5"), {"/grid/shape": np.int64})
    same_result(ctx, "ref.h5", "h5py.h5")


def case_foreign_h5import(ctx):
    # The attributes from h5py, /initial/field from h5import reading raw little-endian float32.
    ctx.make_input("ref.h5", "--precision", "fp32", "--initial", "random:12")
    reencode(ctx.path("ref.h5"), ctx.path("imported.h5"), {}, with_field=False)
    with h5py.File(ctx.path("ref.h5"), "r") as f:
        field = f["initial/field"][...]
    require(field.dtype == np.float32, "reference field is not float32")
    field.astype("<f4").tofile(ctx.path("field.bin"))
    nz, ny, nx = field.shape
    with open(ctx.path("field.cfg"), "w") as f:
        f.write(f"PATH initial/field\nINPUT-CLASS FP\nINPUT-SIZE 32\nINPUT-BYTE-ORDER LE\n"
                f"RANK 3\nDIMENSION-SIZES {nz} {ny} {nx}\nOUTPUT-CLASS FP\nOUTPUT-SIZE 32\n"
                f"OUTPUT-ARCHITECTURE IEEE\nOUTPUT-BYTE-ORDER LE\n")
    r = subprocess.run(["h5import", "field.bin", "-c", "field.cfg", "-o", "imported.h5"],
                       cwd=ctx.run_dir, capture_output=True, text=True)
    require(r.returncode == 0, f"h5import failed ({r.returncode}): {r.stdout}{r.stderr}")
    same_result(ctx, "ref.h5", "imported.h5")


CASES = {name[5:].replace("_", "-"): fn for name, fn in globals().items()
         if name.startswith("case_")}
CASES.update(corpus.CASES)


def arguments(doc, cases):
    """The command line of a test script that runs one of cases (also tests/faults)."""
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mpiexec", required=True, help="command prefix that starts the ranks")
    p.add_argument("--nproc", type=int, required=True, help="ranks that prefix starts")
    p.add_argument("--stencil", required=True)
    p.add_argument("--stencil-input", required=True)
    p.add_argument("--workdir", required=True, help="scratch directory (emptied first)")
    p.add_argument("case", choices=sorted(cases))
    return p


def main():
    if sys.argv[1:] == ["--list-corpus"]:  # for tests/errors/CMakeLists.txt
        print("\n".join(sorted(corpus.CASES)))
        return 0
    a = arguments(__doc__, CASES).parse_args()
    try:
        CASES[a.case](Ctx(a))
    except Failure as e:
        print(f"FAIL {a.case} ({a.nproc} rank{'s' if a.nproc > 1 else ''}): {e}")
        return 1
    print(f"ok {a.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
