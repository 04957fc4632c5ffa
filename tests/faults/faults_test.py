#!/usr/bin/python3
"""Faults a run must survive without hanging, crashing or losing a good file.

  faults_test.py --mpiexec "mpiexec -n 2 ..." --nproc 2 --stencil PATH --stencil-input PATH
                 --failwrite LIB --failmpi LIB --workdir DIR CASE

disk-full-* cases write into a small tmpfs mounted for the case (root only: without the right
to mount, the case is skipped with status 77); write-fails-* cases make one rank's writes fail
through the LD_PRELOAD interposer failwrite.c, quota-exceeded every rank's with EDQUOT;
exchange-fails-one-rank makes one rank's MPI_Waitall fail (failmpi.c) while the others wait;
outdir-vanished-* remove the output directory while the run steps; lock-* cases run beside
another run, or over the lock a run that ended left behind (lock-heartbeat watches the lock of
a run alone). Each checks the exit status of mpiexec and of every rank, the error message (the
file and the system's reason), that the run ends within the harness's time limit, and which
files exist afterwards: earlier checkpoints and snapshots intact and readable, no *.partial
left, nothing else. Exit 0 on success.
"""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "errors"))
from errors_test import Ctx, Failure, arguments, require  # noqa: E402
from harness import rank_pids  # noqa: E402


class Skip(Exception):
    pass


class FaultCtx(Ctx):
    def __init__(self, a):
        stale = os.path.join(a.workdir, "run", "fs")  # left mounted by a killed earlier run
        if os.path.ismount(stale):
            subprocess.run(["umount", "-l", stale])
        super().__init__(a)
        self.failwrite = a.failwrite
        self.failmpi = a.failmpi
        self.mounts = []

    def tmpfs(self, name, mib):
        """Mount a tmpfs of mib MiB at run/name."""
        p = self.path(name)
        os.makedirs(p)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", p],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip(f"cannot mount a tmpfs ({r.stderr.strip()}): run as root")
        self.mounts.append(p)
        return p

    def cleanup(self):
        for p in reversed(self.mounts):
            subprocess.run(["umount", "-l", p])

    def files(self, d):
        """Names of the files under run/d (relative to it); [] if it does not exist."""
        out = []
        for root, _, names in os.walk(self.path(d)):
            out += [os.path.relpath(os.path.join(root, n), self.path(d)) for n in names]
        return sorted(out)


def big_input(ctx, *opts):
    """64 x 64 x 40 fp64: a field file of 2.3 MB (1 MiB of alignment, 1.3 MB of data)."""
    return ctx.make_input("in.h5", "--shape", "64x64x40", "--steps", "100", *opts)


def expect_failure(ctx, pattern, *args, env=None, all_lines=False, fresh=None, during=None):
    """Run twice (mpiexec's status; every rank's status) and require exit status 1 and an error
    line matching pattern: exactly one, or with all_lines at least one and every one matching.
    fresh: an output directory removed before each run, so that both start alike. during: a
    function of the started process, called before waiting for its end."""
    for keep_going in (False, True):
        if keep_going and ctx.nproc == 1:
            break
        if fresh:
            shutil.rmtree(ctx.path(fresh), ignore_errors=True)
        p = ctx.start(*args, keep_going=keep_going, env=env)
        if during:
            during(p)
        rc, ranks, err, _ = ctx.finish(p)
        if not keep_going:
            require(rc == 1, f"mpiexec exit status {rc}, expected 1")
        if keep_going or ctx.nproc == 1:  # (mpiexec may end the others before they report)
            require(len(ranks) == ctx.nproc and all(s == 1 for s in ranks),
                    f"rank exit statuses {ranks}, expected {ctx.nproc} times 1")
        errors = [l for l in err.splitlines() if re.search(r"\berror:", l)]
        if all_lines:
            require(errors and all(re.search(pattern, l) for l in errors),
                    f"error lines {errors} do not all match {pattern!r}")
        else:
            require(len(errors) == 1 and re.search(pattern, errors[0]),
                    f"expected one error line matching {pattern!r}, got {errors}")


def require_files(ctx, d, names):
    got = ctx.files(d)
    require(got == sorted(names), f"files in {d}: {got}, expected {sorted(names)}")


def require_field(ctx, path, step, shape=(40, 64, 64)):
    with h5py.File(ctx.path(path), "r") as f:
        require(int(f.attrs["step"]) == step, f"{path}: step {f.attrs['step']}, expected {step}")
        require(f["field"].shape == shape, f"{path}: /field shape {f['field'].shape}")
        f["field"][...]


# ---- a full disk ----------------------------------------------------------------------------

def disk_full_checkpoint(ctx, *mode):
    ctx.tmpfs("fs", 3)
    big_input(ctx)
    expect_failure(ctx, r"cannot write fs/out/checkpoint_0000000020\.h5: No space left on device",
                   "--output-dir", "fs/out", "--checkpoint-every", "10", "--keep-checkpoints", "0",
                   *mode, "in.h5", fresh="fs/out")
    require_files(ctx, "fs/out", ["checkpoint_0000000010.h5", "checkpoints.xdmf"])
    require_field(ctx, "fs/out/checkpoint_0000000010.h5", 10)


def case_disk_full_checkpoint(ctx):
    disk_full_checkpoint(ctx)


def case_disk_full_background(ctx):
    disk_full_checkpoint(ctx, "--checkpoint-mode", "background")


def case_disk_full_snapshot(ctx):
    ctx.tmpfs("fs", 3)
    big_input(ctx)
    expect_failure(ctx, r"cannot write fs/out/snapshot_0000000010\.h5: No space left on device",
                   "--output-dir", "fs/out", "--output-every", "10", "in.h5", fresh="fs/out")
    require_files(ctx, "fs/out", ["snapshot_0000000000.h5", "snapshots.xdmf"])
    require_field(ctx, "fs/out/snapshot_0000000000.h5", 0)


def case_disk_full_final(ctx):
    ctx.tmpfs("fs", 1)
    big_input(ctx)
    expect_failure(ctx, r"cannot write fs/out/final\.h5: No space left on device",
                   "--output-dir", "fs/out", "in.h5")
    require_files(ctx, "fs/out", [])


def case_disk_full_overwrite(ctx):
    """--overwrite on a disk without room for the new file keeps the old one."""
    ctx.tmpfs("fs", 3)
    big_input(ctx)
    rc, _, err, _ = ctx.run("--output-dir", "fs/out", "--steps", "10", "in.h5")
    require(rc == 0, f"the first run failed ({rc}): {err}")
    expect_failure(ctx, r"cannot write fs/out/final\.h5: No space left on device",
                   "--output-dir", "fs/out", "--overwrite", "in.h5")
    require_files(ctx, "fs/out", ["final.h5", "final.xdmf"])
    require_field(ctx, "fs/out/final.h5", 10)


def case_disk_full_start(ctx):
    """A disk already full when the run starts."""
    ctx.tmpfs("fs", 3)
    big_input(ctx)
    os.makedirs(ctx.path("fs/out"))
    with open(ctx.path("fs/fill"), "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    expect_failure(ctx, r"cannot create fs/out/\.stencil\.lock: No space left on device",
                   "--output-dir", "fs/out", "--checkpoint-every", "10", "in.h5")
    require_files(ctx, "fs/out", [])


def case_disk_full_restart(ctx):
    """--restart latest onto a full disk: its next checkpoint, or its final field, does not
    fit; the checkpoint it restarted from stays."""
    ctx.tmpfs("fs", 3)
    big_input(ctx)
    ckpt = ["--output-dir", "fs/out", "--checkpoint-every", "10", "--keep-checkpoints", "0"]
    rc, _, err, _ = ctx.run(*ckpt, "in.h5")
    require(rc == 1, f"the first run ended with {rc}, expected 1 (the disk full at step 20)")
    require_files(ctx, "fs/out", ["checkpoint_0000000010.h5", "checkpoints.xdmf"])
    expect_failure(ctx, r"cannot write fs/out/checkpoint_0000000020\.h5: No space left on device",
                   *ckpt, "--restart", "latest", "in.h5")
    require_files(ctx, "fs/out", ["checkpoint_0000000010.h5", "checkpoints.xdmf"])
    require_field(ctx, "fs/out/checkpoint_0000000010.h5", 10)
    expect_failure(ctx, r"cannot write fs/out/final\.h5: No space left on device",
                   "--output-dir", "fs/out", "--restart", "latest", "--steps", "15", "in.h5")
    require_files(ctx, "fs/out", ["checkpoint_0000000010.h5", "checkpoints.xdmf"])
    require_field(ctx, "fs/out/checkpoint_0000000010.h5", 10)


# ---- a quota ---------------------------------------------------------------------------------

def case_quota_exceeded(ctx):
    """A quota hit by a checkpoint on every rank: at the reservation (where a quota refuses the
    allocation), one message with the system's reason; after it (writes refused later, as when
    another program used up the quota meanwhile), one message with the MPI library's reason.
    Either way status 1 and the checkpoint before intact."""
    big_input(ctx)
    env = {"LD_PRELOAD": ctx.failwrite, "FAILWRITE_MATCH": "checkpoint_0000000020",
           "FAILWRITE_ERRNO": "EDQUOT", "FAILWRITE_ALLOC": "1"}
    expect_failure(ctx, r"cannot write out/checkpoint_0000000020\.h5: Disk quota exceeded \(it "
                   r"needs up to 2\.5 MiB\)", "--checkpoint-every", "10", "in.h5", env=env,
                   fresh="out")
    require_files(ctx, "out", ["checkpoint_0000000010.h5", "checkpoints.xdmf"])
    require_field(ctx, "out/checkpoint_0000000010.h5", 10)
    env["FAILWRITE_ALLOC"] = "0"
    expect_failure(ctx, r"cannot write out/checkpoint_0000000020\.h5: MPI_ERR_IO: input/output "
                   r"error", "--checkpoint-every", "10", "in.h5", env=env, fresh="out")
    require_files(ctx, "out", ["checkpoint_0000000010.h5", "checkpoints.xdmf"])
    require_field(ctx, "out/checkpoint_0000000010.h5", 10)


# ---- a vanished output directory -------------------------------------------------------------

def remove_out_when_stepping(ctx):
    """A `during` for expect_failure: once the run prints its first progress line (it is in
    the loop, past every start-up write), remove its output directory."""
    def during(p):
        fd, seen, t0 = p.stdout.fileno(), b"", time.monotonic()
        while not re.search(rb"^step [0-9]+/", seen, re.M):
            require(time.monotonic() - t0 < 120, "gave up waiting for a progress line")
            if select.select([fd], [], [], 0.1)[0]:
                chunk = os.read(fd, 65536)
                require(chunk, "the run ended before its first progress line")
                seen += chunk
        shutil.rmtree(ctx.path("out"))
    return during


def case_outdir_vanished_checkpoint(ctx):
    """The output directory removed while the run steps; the next checkpoint (after 2 s of
    wall time) finds it gone."""
    big_input(ctx)
    expect_failure(ctx, r"cannot create out/checkpoint_[0-9]{10}\.h5\.partial: No such file or "
                   r"directory", "--steps", "100000000", "--progress", "0.1",
                   "--checkpoint-interval", "2", "in.h5", during=remove_out_when_stepping(ctx))
    require(not os.path.exists(ctx.path("out")), f"out reappeared: {ctx.files('out')}")


def case_outdir_vanished_final(ctx):
    """The output directory removed while the run steps; the final write finds it gone."""
    big_input(ctx)
    expect_failure(ctx, r"cannot create out/final\.h5\.partial: No such file or directory",
                   "--steps", "2000", "--progress", "0.1", "in.h5",
                   during=remove_out_when_stepping(ctx))
    require(not os.path.exists(ctx.path("out")), f"out reappeared: {ctx.files('out')}")


# ---- a write that fails on one rank only ------------------------------------------------------

def case_write_fails_one_rank(ctx):
    """The file system accepts the reservation, then refuses rank 1's part of the data: the
    ranks end in different collective calls of HDF5, and --io-timeout ends them."""
    require(ctx.nproc >= 2, "run this case on 2 or more ranks")
    big_input(ctx)
    env = {"LD_PRELOAD": ctx.failwrite, "FAILWRITE_MATCH": "checkpoint_0000000020",
           "FAILWRITE_RANK": "1", "FAILWRITE_ERRNO": "EIO"}
    expect_failure(ctx, r"the write of out/checkpoint_0000000020\.h5\.partial has not finished "
                   r"within 5 s \(--io-timeout\)|cannot write", "--checkpoint-every", "10",
                   "--io-timeout", "5", "in.h5", env=env, all_lines=True, fresh="out")
    # The ranks end without clean-up: the write's .partial and the run's lock stay (the next
    # run on this host takes the lock over).
    names = [n for n in ctx.files("out") if not n.endswith(".partial") and n != ".stencil.lock"]
    require(names == ["checkpoint_0000000010.h5", "checkpoints.xdmf"],
            f"files in out: {ctx.files('out')}")
    require_field(ctx, "out/checkpoint_0000000010.h5", 10)


def case_write_fails_all_ranks(ctx):
    """Every rank's writes to one checkpoint fail with EIO after the space was reserved: the
    ranks fail alike inside HDF5, one message gives the MPI library's reason, and the process
    ends without HDF5's clean-up of the damaged file (which crashed at MPI_Finalize)."""
    big_input(ctx)
    env = {"LD_PRELOAD": ctx.failwrite, "FAILWRITE_MATCH": "checkpoint_0000000020",
           "FAILWRITE_ERRNO": "EIO"}
    expect_failure(ctx, r"cannot write out/checkpoint_0000000020\.h5: MPI_ERR_IO: input/output "
                   r"error", "--checkpoint-every", "10", "in.h5", env=env, fresh="out")
    require_files(ctx, "out", ["checkpoint_0000000010.h5", "checkpoints.xdmf"])
    require_field(ctx, "out/checkpoint_0000000010.h5", 10)


# ---- an MPI call that fails on one rank ------------------------------------------------------

def case_exchange_fails_one_rank(ctx):
    """Rank 1's wait for its halo messages fails in the loop (about step 30); the other ranks go
    on to the next exchange and wait for rank 1's messages, which never come, or to the next
    agreement. Rank 1 reports the MPI error; a rank that waits STENCIL_ABORT_TIMEOUT seconds for
    the others to agree on an error says so, and the job is ended: no final output, the
    snapshots before the failure intact."""
    require(ctx.nproc >= 2, "run this case on 2 or more ranks")
    ctx.make_input("in.h5", "--shape", "24x20x18", "--steps", "400")
    env = {"LD_PRELOAD": ctx.failmpi, "FAILMPI_RANK": "1", "FAILMPI_AFTER": "30",
           "STENCIL_ABORT_TIMEOUT": "3"}
    shutil.rmtree(ctx.path("out"), ignore_errors=True)
    rc, _, err, _ = ctx.run("--output-every", "5", "--progress", "0", "in.h5", env=env)
    require(rc == 1, f"mpiexec exit status {rc}, expected 1")
    errors = [l for l in err.splitlines() if re.search(r"\berror:", l)]
    for pattern in (r"\[rank 1\] error: MPI call MPI_Waitall\(.*\) failed: MPI_ERR_OTHER",
                    r"\[rank \d+\] error: the other ranks did not reach the agreement on an "
                    r"error within STENCIL_ABORT_TIMEOUT"):
        require(any(re.search(pattern, l) for l in errors),
                f"no error line matching {pattern!r} in {errors}")
    require(not os.path.exists(ctx.path("out/final.h5")), "out/final.h5 written")
    names = ctx.files("out")
    require("snapshot_0000000020.h5" in names and not any(n.endswith(".partial") for n in names),
            f"files in out: {names}")
    require_field(ctx, "out/snapshot_0000000020.h5", 20, shape=(18, 20, 24))


# ---- one run per output directory ------------------------------------------------------------

def write_lock(ctx, host, pid, job="-", restarts=0, age=0):
    """An output lock of another run, last refreshed `age` seconds ago."""
    p = ctx.path("out/.stencil.lock")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(f"stencil output lock: one run writes this directory at a time\nhost {host}\n"
                f"pid {pid}\nslurm_job {job}\nslurm_restart_count {restarts}\n"
                f"started 2026-01-01T00:00:00Z\n")
    t = time.time() - age
    os.utime(p, (t, t))


def expect_takeover(ctx, warning, env=None):
    rc, ranks, err, _ = ctx.run("--steps", "10", "in.h5", env=env)
    require(rc == 0 and ranks == [0] * ctx.nproc, f"exit {rc}, ranks {ranks}: {err}")
    warnings = [l for l in err.splitlines() if re.search(r"\bwarning:", l)]
    require(len(warnings) == 1 and re.search(warning, warnings[0]),
            f"expected one warning matching {warning!r}, got {warnings}")
    require_files(ctx, "out", ["final.h5", "final.xdmf"])


def case_lock_busy(ctx):
    """A second run into the directory of a running one is refused and changes nothing."""
    ctx.make_input("in.h5")
    ctx.make_input("long.h5", "--shape", "16x16x16", "--steps", "100000000")
    first = subprocess.Popen(ctx.mpiexec + [ctx.stencil, "--quiet", "long.h5"],
                             cwd=ctx.run_dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        lock = ctx.path("out/.stencil.lock")
        for _ in range(300):
            if os.path.exists(lock):
                break
            time.sleep(0.1)
        require(os.path.exists(lock), "the first run did not take the lock")
        with open(lock) as f:
            held = f.read()
        before = ctx.snapshot()
        expect_failure(ctx, r"output directory out is in use by another run \(host \S+, pid "
                       r"[0-9]+, Slurm job -, started [0-9T:Z-]+; lock out/\.stencil\.lock "
                       r"refreshed [0-9]+ s ago\): wait for it to end, or choose another "
                       r"--output-dir", "--overwrite", "in.h5")
        require(first.poll() is None, "the first run ended")
        ctx.check_unchanged(before)
        with open(lock) as f:
            require(f.read() == held, "the lock changed")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def case_lock_heartbeat(ctx):
    """A running run refreshes its lock's modification time (every 10 s): the time moves on,
    the file and its text stay."""
    ctx.make_input("long.h5", "--shape", "16x16x16", "--steps", "100000000")
    p = ctx.start("--quiet", "long.h5")
    try:
        lock = ctx.path("out/.stencil.lock")
        wait_for(lambda: os.path.exists(lock), "the lock", p)
        before = os.stat(lock)
        with open(lock) as f:
            held = f.read()
        wait_for(lambda: os.stat(lock).st_mtime_ns > before.st_mtime_ns, "a refresh of the lock",
                 p)
        after = os.stat(lock)
        require(after.st_ino == before.st_ino, "the lock was replaced, not refreshed")
        with open(lock) as f:
            require(f.read() == held, "the lock's text changed")
        print(f"the lock was refreshed {(after.st_mtime_ns - before.st_mtime_ns) / 1e9:.1f} s "
              "after it was taken")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()


def case_lock_stale(ctx):
    ctx.make_input("in.h5")
    write_lock(ctx, "elsewhere", 12345, age=120)
    expect_takeover(ctx, r"taking over the lock out/\.stencil\.lock of the run on host "
                    r"elsewhere, pid 12345: it has not refreshed the lock for 1[2-9][0-9] s")


def case_lock_empty(ctx):
    """An empty lock (its text lost in a crash of its node) is a lock: taken over once stale."""
    ctx.make_input("in.h5")
    os.makedirs(ctx.path("out"))
    open(ctx.path("out/.stencil.lock"), "w").close()
    t = time.time() - 120
    os.utime(ctx.path("out/.stencil.lock"), (t, t))
    expect_takeover(ctx, r"taking over the lock out/\.stencil\.lock of the run on host \?, pid 0: "
                    r"it has not refreshed the lock for 1[2-9][0-9] s")


def case_lock_ended_process(ctx):
    ctx.make_input("in.h5")
    gone = subprocess.Popen(["true"])
    gone.wait()
    write_lock(ctx, socket.gethostname(), gone.pid)
    expect_takeover(ctx, rf"taking over the lock out/\.stencil\.lock of the run on host \S+, "
                    rf"pid {gone.pid}: its process {gone.pid} on this host has ended")


def case_lock_requeued(ctx):
    ctx.make_input("in.h5")
    write_lock(ctx, "node-that-failed", 4242, job="777", restarts=0)
    expect_takeover(ctx, r"pid 4242: it is an earlier start of this Slurm job 777 \(requeued\)",
                    env={"SLURM_JOB_ID": "777", "SLURM_RESTART_COUNT": "1"})


# ---- stop signals ---------------------------------------------------------------------------

STOP = (r"stopping at step ([0-9]+) of 100000000 on {sig}: checkpoint out/checkpoint_([0-9]{{10}})"
        r"\.h5 written; continue with --restart latest \(exit status 4, marker out/STOPPED\)")
TAKEOVER = (r"taking over the lock out/\.stencil\.lock of the run on host \S+, pid [0-9]+: its "
            r"process [0-9]+ on this host has ended")


def wait_for(cond, what, proc):
    """Poll until cond() holds; the limit only bounds a hang."""
    t0 = time.monotonic()
    while not cond():
        require(proc.poll() is None, f"the run ended before {what}")
        require(time.monotonic() - t0 < 120, f"gave up waiting for {what}")
        time.sleep(0.02)


def start_slow(ctx, delay, keep_going=False):
    """A long run on 16^3 cells whose checkpoints (every 50 steps) each take `delay` s more
    (the test-only --debug-checkpoint-delay); returns once the checkpoint of step 50 is
    complete, the ranks stepping on. keep_going: as for ctx.start."""
    ctx.make_input("long.h5", "--shape", "16x16x16", "--steps", "100000000")
    p = ctx.start("--debug-checkpoint-delay", str(delay), "--checkpoint-every", "50",
                  "--agree-every", "5", "--keep-checkpoints", "0", "long.h5",
                  keep_going=keep_going)
    wait_for(lambda: os.path.exists(ctx.path("out/checkpoint_0000000050.h5")),
             "the checkpoint of step 50", p)
    return p


def complete_checkpoints(ctx):
    return sorted(int(n[11:21]) for n in ctx.files("out")
                  if re.fullmatch(r"checkpoint_[0-9]{10}\.h5", n))


def lines(err, kind):
    return [l for l in err.splitlines() if re.search(rf"\b{kind}:", l)]


def marker(ctx):
    """The stop marker's keys, or None without one."""
    try:
        with open(ctx.path("out/STOPPED")) as f:
            return dict(l.rstrip("\n").split(" ", 1) for l in f.readlines()[1:])
    except FileNotFoundError:
        return None


def require_stopped(ctx, sig, err, out):
    """A stop on sig: one warning, the report's line, the marker; returns the step."""
    warnings = lines(err, "warning")
    m = re.search(STOP.format(sig=sig), warnings[0]) if len(warnings) == 1 else None
    require(m and m.group(1) == str(int(m.group(2))), f"expected one stop warning, got {warnings}")
    step = int(m.group(1))
    require(f"stopped        on {sig} at step {step}: checkpoint out/checkpoint_{step:010d}.h5, "
            "marker out/STOPPED; continue with --restart latest" in out,
            "the report has no stopped line")
    keys = marker(ctx)
    require(keys and keys["reason"] == sig and keys["step"] == str(step) and
            keys["checkpoint"] == f"checkpoint_{step:010d}.h5" and keys["exit_status"] == "4",
            f"stop marker {keys}")
    require(step > 50 and complete_checkpoints(ctx)[-1] == step,
            f"stopped at {step}; checkpoints {complete_checkpoints(ctx)}")
    require_field(ctx, f"out/checkpoint_{step:010d}.h5", step, (16, 16, 16))
    return step


def restart_after(ctx, step):
    """--restart latest to step + 10 completes, taking over the lock a killed run left; the
    stop marker and any .partial go."""
    rc, ranks, err, _ = ctx.run("--restart", "latest", "--steps", str(step + 10), "--quiet",
                                "long.h5")
    require(rc == 0 and ranks == [0] * ctx.nproc, f"restart: exit {rc}, ranks {ranks}")
    warnings = lines(err, "warning")
    require(not lines(err, "error") and all(re.search(TAKEOVER, w) for w in warnings) and
            len(warnings) <= 1, f"restart: unexpected messages {err}")
    names = [n for n in ctx.files("out") if not n.startswith("checkpoint_")]
    require(names == ["checkpoints.xdmf", "final.h5", "final.xdmf"],
            f"files in out besides checkpoints: {names}")
    require_field(ctx, "out/final.h5", step + 10, (16, 16, 16))


def case_signal_usr1(ctx):
    """SIGUSR1 to mpiexec, forwarded to the ranks and followed by nothing: a slow checkpoint
    completes, every rank exits 4, and so does mpiexec. On several ranks mpiexec ends the
    others as soon as the first exits, which may be before they record their status, so a
    first run checks mpiexec's status as users see it and a second (keep_going) every rank's."""
    if ctx.nproc > 1:
        p = start_slow(ctx, 1.5)
        p.send_signal(signal.SIGUSR1)
        rc, ranks, _, _ = ctx.finish(p)
        # A rank still in MPI_Finalize when another has exited may be ended by mpiexec's TERM.
        require(rc == 4 and 4 in ranks and all(s in (4, 128 + signal.SIGTERM) for s in ranks),
                f"exit {rc}, ranks {ranks}")
        shutil.rmtree(ctx.path("out"))
        os.unlink(ctx.path("long.h5"))
    p = start_slow(ctx, 1.5, keep_going=ctx.nproc > 1)
    p.send_signal(signal.SIGUSR1)
    rc, ranks, err, out = ctx.finish(p)
    require(rc == (0 if ctx.nproc > 1 else 4) and ranks == [4] * ctx.nproc,
            f"exit {rc}, ranks {ranks}")
    require(not lines(err, "error"), "error lines")
    step = require_stopped(ctx, "SIGUSR1", err, out)
    require(not [n for n in ctx.files("out") if n.endswith(".partial") or n == ".stencil.lock"],
            f"files in out: {ctx.files('out')}")
    restart_after(ctx, step)


def launcher_term(ctx, sig):
    """sig to mpiexec, which sends SIGTERM to the ranks and SIGKILL a second later, and returns
    its own status. The stop's checkpoint takes 3 s more: it is complete within that grace, with
    its marker, or it never appears under a checkpoint's name (its .partial is no checkpoint)."""
    p = start_slow(ctx, 3)
    p.send_signal(sig)
    rc, ranks, err, out = ctx.finish(p)
    require(rc != 0, "mpiexec reported success")
    require(not lines(err, "error"), "error lines")
    if marker(ctx):
        step = require_stopped(ctx, "SIGTERM", err, out)
        require(all(s == 4 for s in ranks), f"rank statuses {ranks}")
        print(f"the stop's checkpoint of step {step} was complete within the grace time")
    else:
        require(not lines(err, "warning"), f"a stop warning without its marker: {err}")
        require(complete_checkpoints(ctx) == [50], f"checkpoints {complete_checkpoints(ctx)}")
        others = [n for n in ctx.files("out") if not n.startswith("checkpoint_")]
        require(set(others) <= {".stencil.lock", "checkpoints.xdmf"},
                f"files in out: {ctx.files('out')}")
        require(all(s in (128 + signal.SIGKILL, 128 + signal.SIGTERM) for s in ranks),
                f"rank statuses {ranks}, expected none or killed")
        step = 50
        print("the ranks were killed in the stop's checkpoint: the newest is still step 50")
    require_field(ctx, "out/checkpoint_0000000050.h5", 50, (16, 16, 16))
    restart_after(ctx, step)


def case_signal_term(ctx):
    launcher_term(ctx, signal.SIGTERM)


def case_signal_int(ctx):
    launcher_term(ctx, signal.SIGINT)


def pending(pid, sig):
    """Whether signal sig waits to be delivered to process pid (or to its thread group)."""
    with open(f"/proc/{pid}/status") as f:
        masks = [int(l.split()[1], 16) for l in f if l.startswith(("SigPnd:", "ShdPnd:"))]
    return any(m >> (sig - 1) & 1 for m in masks)


def case_signal_twice(ctx):
    """SIGTERM to every rank (as Slurm sends it), and again while a slow checkpoint is being
    written (the stop's, or the one of step 100 still before it): each rank says so and ends at
    once; the newest checkpoint stays step 50."""
    p = start_slow(ctx, 5)
    pids = rank_pids(p.pid, ctx.stencil)
    require(len(pids) == ctx.nproc, f"rank processes {pids}")
    for q in pids:
        os.kill(q, signal.SIGTERM)
    # Two signals of a kind sent before the first is delivered arrive as one.
    wait_for(lambda: not any(pending(q, signal.SIGTERM) for q in pids), "the first SIGTERM", p)
    wait_for(lambda: any(n.endswith(".partial") for n in ctx.files("out")),
             "a checkpoint being written", p)
    for q in pids:
        os.kill(q, signal.SIGTERM)
    rc, ranks, err, _ = ctx.finish(p)
    require(rc != 0, "mpiexec reported success")
    errors = lines(err, "error")
    require(errors and all(re.search(r"a second SIGTERM: ending at once, without the checkpoint "
                                     r"\(one being written stays a \.partial, which no restart "
                                     r"reads\)", l) for l in errors), f"error lines {errors}")
    require(ranks and all(s == 128 + signal.SIGTERM for s in ranks), f"rank statuses {ranks}")
    require(marker(ctx) is None and complete_checkpoints(ctx) == [50],
            f"files in out: {ctx.files('out')}")
    require_field(ctx, "out/checkpoint_0000000050.h5", 50, (16, 16, 16))
    restart_after(ctx, 50)


CASES = {name[5:].replace("_", "-"): fn for name, fn in globals().items()
         if name.startswith("case_")}


def main():
    p = arguments(__doc__, CASES)
    p.add_argument("--failwrite", required=True, help="the interposer library (failwrite.c)")
    p.add_argument("--failmpi", required=True, help="the interposer library (failmpi.c)")
    a = p.parse_args()
    ctx = FaultCtx(a)
    try:
        CASES[a.case](ctx)
    except Skip as e:
        print(f"skip {a.case}: {e}")
        return 77
    except Failure as e:
        print(f"FAIL {a.case} ({a.nproc} rank{'s' if a.nproc > 1 else ''}): {e}")
        return 1
    finally:
        ctx.cleanup()
    print(f"ok {a.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
