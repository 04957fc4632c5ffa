#!/usr/bin/python3
"""Checkpoint / restart / snapshot / shutdown tests of stencil, on real runs.

Usage (ctest passes the first four options, see tests/restart/CMakeLists.txt):

  restart_test.py --mpiexec "MPIEXEC -n N FLAGS" --stencil EXE --stencil-input EXE
                  --workdir DIR SUBCOMMAND

The rank count N in --mpiexec is replaced per run. Subcommands (exit 0 when every check
passes, 1 with "FAIL: ..." otherwise):

  equality   N steps straight == k steps + checkpoint + restart to N, bit for bit: on the
             same ranks, on other rank counts and on other --dims, 3D fp64 (periodic x) and
             2D fp32, with sync and background checkpoint writing; --keep-checkpoints keeps exactly the newest K; the restarted run's
             report and attributes count from the checkpoint's step; the final file's
             checksum attribute and the report's checksum are those of the straight run's field.
  sigkill    A real SIGKILL of every rank while a checkpoint is being written (made slow by
             the test-only --debug-checkpoint-delay), sync and background: no file under a checkpoint's name is
             damaged, the older checkpoint verifies, and --restart latest gives the
             uninterrupted answer bit for bit.
  signals    SIGUSR1 to mpirun (which forwards it), and SIGTERM sent straight to the ranks
             (as Slurm does; background writer): exit status 4, a checkpoint of the step where the ranks
             stopped, no final output; restarting gives the uninterrupted answer, and the
             snapshots/XDMF past the checkpoint are moved aside, never mixed.
             --walltime stops with status 4 and a checkpoint too.
  corrupt    Bytes flipped in /field's data in the file, and one value changed by one ulp
             through h5py: both refused by the order-independent checksum with a clear
             message, nothing in the output directory changes.
  foreign    --restart with an input file, a final output, a non-HDF5 file, a checkpoint of
             another grid or precision: each refused with its message, nothing written or
             changed; a fresh run into a directory with checkpoints is refused without
             --overwrite.
  xdmf       snapshots.xdmf and checkpoints.xdmf read by an XDMF reader written from the XDMF
             2 specification (xml + h5py: Domain / temporal collection / 3DCoRectMesh /
             ORIGIN_DXDYDZ / Attribute DataItem "file.h5:/path" relative to the XDMF file,
             centred on cells or nodes), every time
             step's field and coordinates checked against the checkpoint of that step
             (subsampled by --output-stride) and Time against step * dt; the snapshot
             files are bitwise the same on other ranks / --dims.
  plot       tools/plot_slice.py renders a slice of a checkpoint, a snapshot and an input
             to PNG files.
  history    --history-every: the rows are the norms of the snapshots of their steps and the
             report's at the end; a restart rewrites them to the last digit and keeps the
             earlier file; tools/plot_history.py draws them.
  overrides  A checkpoint of a run with --set: a restart without the overrides is refused
             naming the keys; with them and a later --set time/steps it equals the
             uninterrupted run bit for bit.
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness as BaseHarness, TestFailure, check, rank_pids  # noqa: E402

RUN_TIMEOUT_S = 120
EXIT_STOPPED = 4


class Harness(BaseHarness):
    def __init__(self, args):
        super().__init__(args)
        self.source = args.source

    def stencil_cmd(self, inp, nproc, out, extra):
        return self.mpi_prefix(nproc) + [self.stencil, inp, "--output-dir", out, "--quiet"] + extra

    def run(self, inp, nproc, out, extra=(), expect=0, what=None):
        return self.execute(self.stencil_cmd(inp, nproc, out, list(extra)),
                            what or f"stencil {out}", expect)

    def start(self, inp, nproc, out, extra=()):
        cmd = self.stencil_cmd(inp, nproc, out, list(extra))
        return subprocess.Popen(cmd, cwd=self.workdir, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(p, what, expect):
    try:
        out, err = p.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise TestFailure(f"{what}: timed out")
    if p.returncode != expect:
        raise TestFailure(f"{what}: exit status {p.returncode}, expected {expect}\n"
                          f"--- stdout\n{out}--- stderr\n{err}")
    return out, err


def wait_for(cond, what, p=None, limit=RUN_TIMEOUT_S):
    """Poll until cond() holds (not a timed assertion: the limit only bounds a hang)."""
    t0 = time.monotonic()
    while not cond():
        if p is not None and p.poll() is not None:
            out, err = p.communicate()
            raise TestFailure(f"the run ended (status {p.returncode}) before {what}\n"
                              f"--- stdout\n{out}--- stderr\n{err}")
        if time.monotonic() - t0 > limit:
            raise TestFailure(f"gave up waiting for {what}")
        time.sleep(0.02)


def field(path, name="field"):
    with h5py.File(path, "r") as f:
        return f[name][...]


def attrs(path):
    with h5py.File(path, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def steps_of(d, prefix):
    out = []
    for name in os.listdir(d) if os.path.isdir(d) else []:
        if name.startswith(prefix) and name.endswith(".h5") and name[len(prefix):-3].isdigit():
            out.append(int(name[len(prefix):-3]))
    return sorted(out)


def ckpt(d, step):
    return os.path.join(d, f"checkpoint_{step:010d}.h5")


def tree_digest(d):
    """name -> sha256 of every file under d (to show nothing changed)."""
    out = {}
    for root, _, files in os.walk(d):
        for name in files:
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, d)] = hashlib.sha256(f.read()).hexdigest()
    return out


def mix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def checksum(a):
    """The order-independent checksum of docs/user/output-format.md, recomputed here."""
    flat = np.ascontiguousarray(a).reshape(-1)
    bits = flat.view(np.uint64) if flat.dtype == np.float64 else \
        flat.view(np.uint32).astype(np.uint64)
    idx = np.arange(flat.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        spread = idx * np.uint64(0x9E3779B97F4A7C15)
        return int(np.sum(mix64(bits ^ spread), dtype=np.uint64))


def check_checkpoint_file(path, step, precision):
    a = attrs(path)
    check(a["schema"] == "stencil-checkpoint", f"{path}: schema {a['schema']}")
    check(int(a["step"]) == step, f"{path}: step {a['step']}, expected {step}")
    check(a["precision"] == precision, f"{path}: precision {a['precision']}")
    for key in ("version", "time", "backend", "code_version", "ranks", "rank_dims",
                "checksum", "checksum_kind"):
        check(key in a, f"{path}: missing attribute {key}")
    with h5py.File(path, "r") as f:
        check("parameters/grid" in f and "parameters/time" in f, f"{path}: no /parameters")
        data = f["field"][...]
    check(int(a["checksum"], 16) == checksum(data),
          f"{path}: the checksum attribute {a['checksum']} is not the checksum of /field "
          f"({checksum(data):016x})")
    return data


# ---- equality ------------------------------------------------------------------------------


def test_equality(h):
    cases = [
        ("3d", ["--shape", "29x19x13", "--spacing", "1,0.8,1.2", "--bc", "x=periodic",
                "--initial", "random:7", "--steps", "40"], "fp64", 2,
         [(2, None), (3, None), (4, "1x2x2"), (4, "2x2x1")]),
        ("2d", ["--shape", "45x31", "--precision", "fp32", "--bc", "y=neumann",
                "--initial", "random:5", "--steps", "40"], "fp32", 3,
         [(3, None), (1, None), (4, "4x1")]),
    ]
    for name, gen, precision, np0, restarts in cases:
        inp = h.make_input(name, gen)
        straight = h.path(f"{name}-straight")
        h.run(inp, np0, straight)
        ref = field(os.path.join(straight, "final.h5"))
        for i, (nproc, dims) in enumerate(restarts):
            out = h.path(f"{name}-restart{i}")
            mode = ["--checkpoint-mode", "background" if i == 1 else "sync"]
            h.run(inp, np0, out, ["--steps", "17", "--checkpoint-every", "4",
                                  "--keep-checkpoints", "2"] + mode)
            check(steps_of(out, "checkpoint_") == [12, 16],
                  f"{out}: --keep-checkpoints 2 left {steps_of(out, 'checkpoint_')}")
            check_checkpoint_file(ckpt(out, 16), 16, precision)
            extra = ["--restart", "latest", "--checkpoint-every", "10"] + mode
            if dims:
                extra += ["--dims", dims]
            report = os.path.join(out, "report.json")
            h.run(inp, nproc, out, extra + ["--report-json", report])
            got = field(os.path.join(out, "final.h5"))
            check(same_bits(got, ref),
                  f"{name}: 16 steps on {np0} ranks + restart on {nproc} ranks (--dims {dims}) "
                  f"differs from 40 straight steps: max |diff| "
                  f"{np.max(np.abs(got.astype(float) - ref.astype(float)))}")
            a = attrs(os.path.join(out, "final.h5"))
            check(int(a["step"]) == 40, f"final step {a['step']}")
            with open(report) as f:
                rep = json.load(f)
            check(rep["first_step"] == 16 and rep["steps"] == 40,
                  f"report first_step {rep['first_step']} steps {rep['steps']}")
            # The final field's checksum: its attribute is the data's, the report gives it.
            check(a.get("checksum") == f"{checksum(ref):016x}" == rep["checksum"],
                  f"{name}: final checksum attribute {a.get('checksum')}, report "
                  f"{rep['checksum']}, the straight run's field {checksum(ref):016x}")
            # The checkpoint of step 20 of the restarted run equals the straight run's field
            # at step 20 (same checksum, whatever the ranks).
            check(os.path.exists(ckpt(out, 20)), "no checkpoint at step 20 after restart")
            print(f"ok: {name} restart on {nproc} ranks --dims {dims} ({mode[1]}): bitwise "
                  "equal")
    # Restarting from the checkpoint of the end step runs no step and writes the final output.
    out = h.path("3d-restart0")
    os.remove(os.path.join(out, "final.h5"))
    h.run(h.path("3d.h5"), 2, out, ["--restart", ckpt(out, 40)])
    check(same_bits(field(os.path.join(out, "final.h5")),
                    field(os.path.join(h.path("3d-straight"), "final.h5"))),
          "restart at the end step differs")
    # --steps before the checkpoint's step is refused.
    p = h.run(h.path("3d.h5"), 2, out, ["--restart", "latest", "--steps", "5"], expect=1)
    check("past the end step 5" in p.stderr, f"no clear message: {p.stderr}")


# ---- SIGKILL during a checkpoint write -----------------------------------------------------


def test_sigkill(h):
    inp = h.make_input("kill", ["--shape", "40x24x16", "--bc", "z=periodic",
                                "--initial", "random:3", "--steps", "60"])
    ref_dir = h.path("kill-straight")
    h.run(inp, 2, ref_dir)
    ref = field(os.path.join(ref_dir, "final.h5"))
    for mode in ("sync", "background"):
        out = h.path(f"kill-run-{mode}")
        p = h.start(inp, 2, out, ["--checkpoint-every", "10", "--debug-checkpoint-delay", "1.5",
                                  "--checkpoint-mode", mode])
        wait_for(lambda: os.path.exists(ckpt(out, 10)), "the checkpoint of step 10", p)
        wait_for(lambda: os.path.exists(ckpt(out, 20) + ".partial"),
                 "the checkpoint of step 20 being written", p)
        pids = rank_pids(p.pid, h.stencil)
        check(len(pids) == 2, f"expected 2 rank processes, found {pids}")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        try:
            p.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            raise TestFailure("mpirun did not end after its ranks were killed")
        check(p.returncode != 0, "the killed run reported success")
        check(not os.path.exists(ckpt(out, 20)),
              "a checkpoint name appeared for the killed write")
        check(steps_of(out, "checkpoint_") == [10],
              f"checkpoints {steps_of(out, 'checkpoint_')}")
        check_checkpoint_file(ckpt(out, 10), 10, "fp64")
        h.run(inp, 3, out, ["--restart", "latest", "--checkpoint-every", "10"])
        check(not os.path.exists(ckpt(out, 20) + ".partial"), "the stale .partial was kept")
        got = field(os.path.join(out, "final.h5"))
        check(same_bits(got, ref), "restart after SIGKILL differs from the uninterrupted run")
        print(f"ok: SIGKILL during a {mode} checkpoint write; restart from latest is bitwise "
              "equal")


# ---- signals and --walltime ----------------------------------------------------------------


def check_series(h, out, steps, stride, dt):
    """The XDMF lists each snapshot step once, in order, matching the files."""
    grids = read_xdmf(os.path.join(out, "snapshots.xdmf"))
    got = [g["step"] for g in grids]
    check(got == steps, f"{out}: XDMF steps {got}, expected {steps}")
    check(steps_of(out, "snapshot_") == steps, f"{out}: snapshot files "
          f"{steps_of(out, 'snapshot_')}, expected {steps}")
    for g in grids:
        check(g["time"] == g["step"] * dt, f"XDMF time {g['time']} at step {g['step']}")


def test_signals(h):
    inp = h.make_input("sig", ["--shape", "32x20x12", "--initial", "random:11",
                               "--steps", "200"])
    with h5py.File(inp, "r") as f:
        dt = float(f["time"].attrs["dt"])
    ref_dir = h.path("sig-straight")
    h.run(inp, 2, ref_dir, ["--output-every", "10"])
    ref = field(os.path.join(ref_dir, "final.h5"))
    every = list(range(0, 201, 10))

    # SIGUSR1 to mpirun, which forwards it to the ranks.
    out = h.path("sig-usr1")
    p = h.start(inp, 2, out, ["--checkpoint-every", "50", "--output-every", "10",
                              "--agree-every", "5", "--debug-checkpoint-delay", "0.6",
                              "--keep-checkpoints", "1", "--history-every", "7"])
    wait_for(lambda: os.path.exists(ckpt(out, 50)), "the first checkpoint", p)
    p.send_signal(signal.SIGUSR1)
    _, err = finish(p, "SIGUSR1 run", EXIT_STOPPED)
    check("on SIGUSR1" in err and "--restart latest" in err, f"no stop message: {err}")
    stopped = steps_of(out, "checkpoint_")[-1]
    check(50 < stopped < 200, f"stopped at step {stopped}")
    check(not os.path.exists(os.path.join(out, "final.h5")), "a final output after a stop")
    check_checkpoint_file(ckpt(out, stopped), stopped, "fp64")
    # The history ends with the stop's step (a multiple of --agree-every 5, rarely one of 7),
    # the field of its checkpoint.
    rows = read_history(os.path.join(out, "history.csv"))
    check([int(r[0]) for r in rows] == sorted(set(range(0, stopped, 7)) | {stopped}),
          f"history steps {[r[0] for r in rows]} of a run stopped at {stopped}")
    check(float(rows[-1][3]) == float(np.max(np.abs(field(ckpt(out, stopped))))),
          f"the history's last max_abs {rows[-1][3]} is not the checkpoint's")
    check_series(h, out, [s for s in every if s <= stopped], 1, dt)
    # Make the restart supersede something: a snapshot past the checkpoint, as a run killed
    # after its last checkpoint leaves behind.
    later = stopped - stopped % 10 + 10
    shutil.copy(os.path.join(ref_dir, f"snapshot_{later:010d}.h5"),
                os.path.join(out, f"snapshot_{later:010d}.h5"))
    h.run(inp, 3, out, ["--restart", "latest", "--checkpoint-every", "50",
                        "--output-every", "10", "--history-every", "7"])
    check(same_bits(field(os.path.join(out, "final.h5")), ref),
          "SIGUSR1 + restart differs from the uninterrupted run")
    rows = read_history(os.path.join(out, "history.csv"))
    check([int(r[0]) for r in rows] == sorted(set(range(0, 201, 7)) | {stopped, 200}),
          f"history steps after the restart {[r[0] for r in rows]}")
    aside = [d for d in os.listdir(out) if d.startswith("superseded-")]
    check(len(aside) == 1 and os.path.exists(os.path.join(out, aside[0],
                                                          f"snapshot_{later:010d}.h5")),
          f"the later snapshot was not moved aside: {os.listdir(out)}")
    check_series(h, out, every, 1, dt)
    for s in every:
        check(same_bits(field(os.path.join(out, f"snapshot_{s:010d}.h5")),
                        field(os.path.join(ref_dir, f"snapshot_{s:010d}.h5"))),
              f"snapshot {s} differs from the uninterrupted run's")
    print(f"ok: SIGUSR1 -> checkpoint at step {stopped}, exit 4; restart bitwise equal, "
          "snapshots superseded and rewritten")

    # SIGTERM straight to the ranks (Slurm signals the tasks, not a launcher).
    out = h.path("sig-term")
    p = h.start(inp, 2, out, ["--checkpoint-every", "50", "--agree-every", "3",
                              "--debug-checkpoint-delay", "0.6", "--checkpoint-mode",
                              "background"])
    wait_for(lambda: os.path.exists(ckpt(out, 50)), "the first checkpoint", p)
    for pid in rank_pids(p.pid, h.stencil):
        os.kill(pid, signal.SIGTERM)
    _, err = finish(p, "SIGTERM run", EXIT_STOPPED)
    check("on SIGTERM" in err, f"no stop message: {err}")
    h.run(inp, 1, out, ["--restart", "latest"])
    check(same_bits(field(os.path.join(out, "final.h5")), ref), "SIGTERM + restart differs")
    print("ok: SIGTERM to the ranks (background writer) -> checkpoint, exit 4; restart bitwise "
          "equal")

    # --walltime: a run that cannot finish in time stops with a checkpoint.
    out = h.path("sig-walltime")
    big = h.make_input("wall", ["--shape", "32x20x12", "--initial", "random:11",
                                "--steps", "100000"])
    h.run(big, 2, out, ["--walltime", "00:00:03", "--checkpoint-every", "20",
                        "--debug-checkpoint-delay", "0.2", "--agree-every", "2"],
          expect=EXIT_STOPPED)
    last = steps_of(out, "checkpoint_")[-1]
    check(0 < last < 100000, f"walltime checkpoint at {last}")
    check_checkpoint_file(ckpt(out, last), last, "fp64")
    h.run(big, 2, out, ["--restart", "latest", "--steps", str(last + 7)])
    print(f"ok: --walltime stopped at step {last} with a checkpoint, exit 4")


# ---- corrupted checkpoints -----------------------------------------------------------------


def test_corrupt(h):
    inp = h.make_input("bad", ["--shape", "48x40x36", "--initial", "random:2", "--steps", "20"])
    out = h.path("bad-run")
    h.run(inp, 2, out, ["--checkpoint-every", "10", "--steps", "10"])
    os.remove(os.path.join(out, "final.h5"))
    good = ckpt(out, 10)
    data = check_checkpoint_file(good, 10, "fp64")

    # (a) flip bytes in the middle of /field's data in the file, below HDF5.
    broken = os.path.join(out, "checkpoint_flipped.h5")
    shutil.copy(good, broken)
    with h5py.File(broken, "r") as f:
        d = f["field"]
        offset, size = d.id.get_offset(), d.id.get_storage_size()
    check(offset is not None and size == data.nbytes, "/field is not stored contiguously")
    with open(broken, "r+b") as f:
        f.seek(offset + size // 2 + 3)
        b = f.read(3)
        f.seek(offset + size // 2 + 3)
        f.write(bytes(x ^ 0x5A for x in b))
    with h5py.File(broken, "r") as f:
        check(not same_bits(f["field"][...], data), "the flipped bytes missed the field")
    before = tree_digest(out)
    p = h.run(inp, 2, out, ["--restart", broken], expect=1)
    check("fails its checksum" in p.stderr and "damaged" in p.stderr,
          f"no clear message: {p.stderr}")
    check(tree_digest(out) == before, "the refused restart changed the output directory")

    # (b) change one value by the least amount, through HDF5.
    changed = os.path.join(out, "checkpoint_changed.h5")
    shutil.copy(good, changed)
    with h5py.File(changed, "r+") as f:
        v = f["field"][3, 4, 5]
        f["field"][3, 4, 5] = np.nextafter(v, np.inf)
    before = tree_digest(out)
    p = h.run(inp, 3, out, ["--restart", changed], expect=1)
    check("fails its checksum" in p.stderr, f"no clear message: {p.stderr}")
    check(tree_digest(out) == before, "the refused restart changed the output directory")

    # The intact checkpoint still works.
    os.remove(broken)
    os.remove(changed)
    h.run(inp, 2, out, ["--restart", good])
    print("ok: flipped bytes and a changed value are refused (checksum)")


# ---- foreign files -------------------------------------------------------------------------


def test_foreign(h):
    inp = h.make_input("f", ["--shape", "20x18x10", "--initial", "random:4", "--steps", "20"])
    other = h.make_input("g", ["--shape", "20x18x12", "--initial", "random:4", "--steps", "20"])
    fp32 = h.make_input("h", ["--shape", "20x18x10", "--initial", "random:4", "--steps", "20",
                              "--precision", "fp32"])
    src = h.path("f-src")
    h.run(inp, 2, src, ["--checkpoint-every", "10"])
    h.run(other, 2, h.path("g-src"), ["--checkpoint-every", "10"])
    text = h.path("notes.txt")
    with open(text, "w") as f:
        f.write("not a checkpoint\n")
    out = h.path("f-out")
    h.run(inp, 1, out, ["--checkpoint-every", "5", "--steps", "10"])
    before = tree_digest(out)
    cases = [
        (inp, "not a stencil checkpoint", "(this is an input file)"),
        (os.path.join(src, "final.h5"), "not a stencil checkpoint",
         "(this is a final output file)"),
        (text, "is not an HDF5 file", ""),
        (h.path("missing.h5"), "cannot read the checkpoint", ""),
        (ckpt(h.path("g-src"), 10), "does not match the input", "the grid shape"),
    ]
    for path, msg, detail in cases:
        p = h.run(inp, 2, out, ["--restart", path], expect=1, what=f"--restart {path}")
        check(msg in p.stderr and detail in p.stderr,
              f"--restart {path}: expected '{msg}' / '{detail}', got:\n{p.stderr}")
        check(tree_digest(out) == before, f"--restart {path} changed the output directory")
    p = h.run(fp32, 2, out, ["--restart", ckpt(src, 10)], expect=1)
    check("precision is fp64 in the checkpoint but fp32" in p.stderr, p.stderr)
    other_dt = h.make_input("k", ["--shape", "20x18x10", "--initial", "random:4", "--steps", "20",
                                  "--dt", "0.1", "--bc", "x_lo=dirichlet:1"])
    p = h.run(other_dt, 2, out, ["--restart", ckpt(src, 10)], expect=1)
    check("dt is 0.15 in the checkpoint but 0.1 in the input" in p.stderr and
          "the value on boundary x_lo is 0 in the checkpoint but 1 in the input" in p.stderr,
          f"dt / boundary mismatch not reported: {p.stderr}")
    check(tree_digest(out) == before, "a refused fp32 restart changed the output directory")
    # A fresh run into a directory holding another run's checkpoints.
    p = h.run(inp, 2, out, [], expect=1)
    check("of an earlier run; continue it with --restart latest" in p.stderr, p.stderr)
    check(tree_digest(out) == before, "a refused fresh run changed the output directory")
    h.run(inp, 2, out, ["--overwrite"])
    check(steps_of(out, "checkpoint_") == [], "--overwrite kept the old checkpoints")
    print("ok: foreign and mismatching files refused, nothing changed")


# ---- --set overrides ------------------------------------------------------------------------


def test_overrides(h):
    """A checkpoint records the input with its --set overrides (/parameters): a restart without
    them is refused, naming the key; with them, and with a later end step given by --set
    time/steps (a key that may change), it ends as the uninterrupted run does."""
    inp = h.make_input("o", ["--shape", "16x12x8", "--initial", "random:4", "--steps", "30"])
    with h5py.File(inp, "r") as f:
        dt = float(f["time"].attrs["dt"])
    sets = ["--set", f"time/dt={dt / 2!r}", "--set", "grid/x_hi=neumann"]
    out = h.path("o-out")
    h.run(inp, 2, out, sets + ["--steps", "20", "--checkpoint-every", "10"])
    check(attrs(ckpt(out, 20))["overrides"] == " ".join(sets[1::2]),
          f"checkpoint overrides {attrs(ckpt(out, 20))['overrides']!r}")
    before = tree_digest(out)
    p = h.run(inp, 2, out, ["--restart", "latest"], expect=1)
    for want in ("does not match the input", f"dt is {dt / 2!r} in the checkpoint but {dt!r}",
                 "boundary x_hi is neumann in the checkpoint but dirichlet"):
        check(want in p.stderr, f"refusal without the overrides lacks {want!r}:\n{p.stderr}")
    check(tree_digest(out) == before, "a refused restart changed the output directory")
    h.run(inp, 3, out, sets + ["--set", "time/steps=30", "--restart", "latest"])
    ref = h.path("o-ref")
    h.run(inp, 2, ref, sets + ["--set", "time/steps=30"])
    check(same_bits(field(os.path.join(out, "final.h5")), field(os.path.join(ref, "final.h5"))),
          "the restarted run with --set differs from the uninterrupted one")
    print("ok: a restart without the --set of its checkpoint is refused; with them it ends "
          "bit for bit as the uninterrupted run")


# ---- history --------------------------------------------------------------------------------


def read_history(path):
    with open(path) as f:
        lines = f.read().splitlines()
    check(lines[0] == "step,time,l2,max_abs,integral", f"{path}: header {lines[0]!r}")
    return [line.split(",") for line in lines[1:]]


def test_history(h):
    """--history-every 5 (with --check-every 7, so the history adds checks of its own): the
    rows are steps 0, 5, ..., 30, each with step x dt and the norms of that step's snapshot;
    the last row holds the report's norms exactly. A restart from step 10 into the same
    directory moves the earlier history aside and writes the same rows, to the last digit.
    tools/plot_history.py draws it (when matplotlib is there)."""
    inp = h.make_input("hi", ["--shape", "16x12x8", "--spacing", "0.5", "--initial", "random:6",
                              "--steps", "30"])
    with h5py.File(inp, "r") as f:
        dt = float(f["time"].attrs["dt"])
    out = h.path("hi-out")
    opts = ["--history-every", "5", "--check-every", "7"]
    h.run(inp, 2, out, opts + ["--output-every", "5", "--checkpoint-every", "10",
                               "--report-json", h.path("hi.json")])
    rows = read_history(os.path.join(out, "history.csv"))
    check([int(r[0]) for r in rows] == list(range(0, 31, 5)), f"history steps {rows}")
    cv = 0.5 ** 3
    for r in rows:
        step = int(r[0])
        u = field(os.path.join(out, f"snapshot_{step:010d}.h5")).astype(np.float64).ravel()
        l2, mx, integral = math.sqrt(math.fsum(u * u) * cv), float(np.max(np.abs(u))), \
            math.fsum(u) * cv
        tol = 2 * u.size * np.finfo(np.float64).eps
        check(float(r[1]) == step * dt, f"step {step}: time {r[1]}, expected {step * dt!r}")
        check(float(r[3]) == mx, f"step {step}: max_abs {r[3]}, snapshot {mx!r}")
        check(abs(float(r[2]) - l2) <= tol * l2 and
              abs(float(r[4]) - integral) <= tol * math.fsum(np.abs(u)) * cv,
              f"step {step}: l2 {r[2]}, integral {r[4]}; snapshot {l2!r}, {integral!r}")
    with open(h.path("hi.json")) as f:
        norms = json.load(f)["norms"]
    check([float(x) for x in rows[-1][2:]] == [norms["l2"], norms["max_abs"], norms["integral"]],
          f"last row {rows[-1]}, report {norms}")
    with open(os.path.join(out, "history.csv")) as f:
        before = f.read()
    h.run(inp, 2, out, opts + ["--restart", ckpt(out, 10)])
    with open(os.path.join(out, "history.csv")) as f:
        check(f.read() == before, "the restarted history differs from the uninterrupted one")
    aside = [d for d in os.listdir(out) if d.startswith("superseded-")]
    check(len(aside) == 1, f"superseded folders {aside}")
    with open(os.path.join(out, aside[0], "history.csv")) as f:
        check(f.read() == before, "the earlier history was not kept whole in " + aside[0])
    print(f"ok: {len(rows)} rows match the snapshots and the report; the restart rewrote them "
          "to the last digit and kept the earlier file")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    png = h.path("history.png")
    h.execute([sys.executable, os.path.join(h.source, "tools", "plot_history.py"),
               os.path.join(out, "history.csv"), "-o", png], "plot_history")
    with open(png, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 5000,
              f"{png} is not a PNG picture")
    print("ok: plot_history.py drew it")


# ---- XDMF ----------------------------------------------------------------------------------


def read_xdmf(path):
    """A reader of the XDMF 2 subset of the specification used for regular grids: a Domain
    whose Grid is a temporal Collection of Uniform grids, each with Time, a 3DCoRectMesh
    Topology (node counts), an ORIGIN_DXDYDZ Geometry (XML DataItems, slowest axis first) and
    Attributes whose DataItem is Format="HDF" "file:/dataset" (relative to the XDMF file) or
    Format="XML", centred on the cells (one fewer per axis than the nodes) or on the nodes. A
    2D dataset [ny][nx] is the plane of one z layer. Returns, per time step, its time, the
    attribute arrays (shaped as the datasets) and the coordinates of their values per axis
    (x, y[, z]): cell centres or node positions."""
    root = ET.parse(path).getroot()
    check(root.tag == "Xdmf", "root element is not Xdmf")
    domains = root.findall("Domain")
    check(len(domains) == 1, "expected one Domain")
    coll = domains[0].findall("Grid")
    check(len(coll) == 1 and coll[0].get("GridType") == "Collection" and
          coll[0].get("CollectionType") == "Temporal", "expected one temporal collection")
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for g in coll[0].findall("Grid"):
        check(g.get("GridType", "Uniform") == "Uniform", "a non-uniform grid")
        t = float(g.find("Time").get("Value"))
        topo = g.find("Topology")
        ttype = topo.get("TopologyType") or topo.get("Type")
        check(ttype == "3DCoRectMesh", f"topology {ttype}")
        nodes = [int(x) for x in topo.get("Dimensions").split()]
        check(len(nodes) == 3, "topology dimensions")
        geo = g.find("Geometry")
        gtype = geo.get("GeometryType") or geo.get("Type")
        check(gtype == "ORIGIN_DXDYDZ", f"geometry {gtype}")
        items = geo.findall("DataItem")
        check(len(items) == 2, "geometry needs origin and spacing")
        origin, spacing = (read_item(it, base) for it in items)
        fields, coords = {}, None
        for a in g.findall("Attribute"):
            center = a.get("Center")
            check(center in ("Cell", "Node"), f"attribute centre {center}")
            shift = 0.5 if center == "Cell" else 0.0
            arr = read_item(a.find("DataItem"), base)
            dims = [n - 1 for n in nodes] if center == "Cell" else nodes
            check(arr.size == math.prod(dims) and list(arr.shape) == dims[3 - arr.ndim:],
                  f"attribute shape {arr.shape} vs topology {nodes} ({center})")
            fields[a.get("Name")] = arr
            coords = [origin[k] + spacing[k] * (np.arange(dims[k]) + shift)
                      for k in range(3 - arr.ndim, 3)]
        step = int(g.get("Name").split()[-1])
        out.append({"step": step, "time": t, "fields": fields, "coords": coords[::-1]})
    return out


def read_item(item, base):
    dims = [int(x) for x in item.get("Dimensions").split()]
    kind = item.get("NumberType") or item.get("DataType") or "Float"
    prec = int(item.get("Precision", "4"))
    dtype = {("Float", 8): np.float64, ("Float", 4): np.float32}[(kind, prec)]
    fmt = item.get("Format", "XML")
    if fmt == "XML":
        return np.array([float(x) for x in item.text.split()], dtype=dtype).reshape(dims)
    check(fmt == "HDF", f"DataItem format {fmt}")
    fname, dset = item.text.strip().split(":", 1)
    check(not os.path.isabs(fname), f"{fname}: the XDMF must use relative paths")
    with h5py.File(os.path.join(base, fname), "r") as f:
        arr = f[dset][...]
    check(arr.dtype == dtype and arr.size == math.prod(dims) and
          list(arr.shape) == dims[len(dims) - arr.ndim:],
          f"{fname}:{dset} is {arr.dtype}{arr.shape}, the DataItem says {dtype}{dims}")
    return arr


def test_xdmf(h):
    for name, gen, stride in [
            ("x3", ["--shape", "23x17x11", "--spacing", "1,0.5,2", "--initial", "random:9",
                    "--steps", "30"], 2),
            ("x2", ["--shape", "30x21", "--precision", "fp32", "--initial", "random:9",
                    "--steps", "30"], 3)]:
        inp = h.make_input(name, gen)
        with h5py.File(inp, "r") as f:
            dt = float(f["time"].attrs["dt"])
            h_ax = [float(x) for x in np.atleast_1d(f["grid"].attrs["spacing"])]
        out = h.path(name + "-out")
        h.run(inp, 3, out, ["--output-every", "5", "--output-stride", str(stride),
                            "--checkpoint-every", "5", "--keep-checkpoints", "0"])
        grids = read_xdmf(os.path.join(out, "snapshots.xdmf"))
        check([g["step"] for g in grids] == list(range(0, 31, 5)),
              f"steps {[g['step'] for g in grids]}")
        initial = field(inp, "initial/field")
        for g in grids:
            s = g["step"]
            check(g["time"] == s * dt, f"time {g['time']} at step {s}")
            full = initial if s == 0 else field(ckpt(out, s))
            want = full[(slice(None, None, stride),) * full.ndim]
            got = g["fields"]["u"]
            check(same_bits(got, want), f"{name}: XDMF step {s} differs from the checkpoint")
            for axis, c in enumerate(g["coords"]):
                n = want.shape[full.ndim - 1 - axis]
                centres = (np.arange(n) * stride + 0.5) * h_ax[axis]
                check(np.allclose(c, centres, rtol=0, atol=1e-12 * h_ax[axis]),
                      f"axis {axis}: XDMF points are not the kept cell centres")
        # checkpoints.xdmf: every cell, the values at the cell centres (i + 1/2) h.
        cgrids = read_xdmf(os.path.join(out, "checkpoints.xdmf"))
        check([g["step"] for g in cgrids] == list(range(5, 31, 5)),
              f"checkpoints.xdmf steps {[g['step'] for g in cgrids]}")
        for g in cgrids:
            full = field(ckpt(out, g["step"]))
            check(g["time"] == g["step"] * dt and same_bits(g["fields"]["u"], full),
                  f"{name}: checkpoints.xdmf step {g['step']} differs from its checkpoint")
            for axis, c in enumerate(g["coords"]):
                centres = (np.arange(full.shape[full.ndim - 1 - axis]) + 0.5) * h_ax[axis]
                check(np.allclose(c, centres, rtol=0, atol=1e-12 * h_ax[axis]),
                      f"axis {axis}: checkpoints.xdmf cells are not the grid's cells")
        # The snapshot files do not depend on the decomposition.
        other = h.path(name + "-out-dims")
        dims = "2x2x1" if len(h_ax) == 3 else "1x4"
        h.run(inp, 4, other, ["--output-every", "5", "--output-stride", str(stride),
                              "--dims", dims])
        for g in grids:
            s = g["step"]
            check(same_bits(field(os.path.join(other, f"snapshot_{s:010d}.h5")), g["fields"]["u"]),
                  f"{name}: snapshot {s} on 4 ranks --dims {dims} differs from 3 ranks")
        print(f"ok: {name}: {len(grids)} XDMF steps match the checkpoints (stride {stride}); "
              f"snapshots equal on --dims {dims}")


# ---- plot ----------------------------------------------------------------------------------


def test_plot(h):
    inp = h.make_input("p", ["--shape", "24x20x10", "--initial", "gaussian:1:12,10,5:3",
                             "--steps", "10"])
    out = h.path("p-out")
    h.run(inp, 2, out, ["--checkpoint-every", "10", "--output-every", "10"])
    tool = os.path.join(h.source, "tools", "plot_slice.py")
    for src, extra in [(ckpt(out, 10), []), (os.path.join(out, "snapshot_0000000010.h5"),
                                             ["--axis", "x", "--index", "3"]),
                       (os.path.join(out, "final.h5"), ["--axis", "y"]),
                       (h.make_input("q", ["--shape", "30x20", "--initial", "random:1"]), [])]:
        png = src + ".png"
        h.execute([sys.executable, tool, src, "-o", png] + extra, f"plot_slice {src}")
        with open(png, "rb") as f:
            head = f.read(8)
        check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 2000,
              f"{png} is not a PNG picture")
    print("ok: plot_slice.py wrote PNG files")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--stencil", required=True)
    ap.add_argument("--stencil-input", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("test", choices=["equality", "sigkill", "signals", "corrupt", "foreign",
                                     "xdmf", "plot", "overrides", "history"])
    args = ap.parse_args()
    h = Harness(args)
    try:
        globals()["test_" + args.test](h)
    except TestFailure as e:
        print(f"FAIL: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
