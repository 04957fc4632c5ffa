"""Shared pieces of the run-and-check test scripts (tests/*_test.py, tests/*/*_test.py):
a test failure, the check helper, and the harness that runs stencil-input and stencil through
the FindMPI launcher prefix ctest passes in --mpiexec."""
import os
import shlex
import shutil
import signal
import subprocess
import sys

RUN_TIMEOUT_S = 120


class TestFailure(Exception):
    pass


def _parents():
    """{pid: (parent pid, session id)} of the processes now running."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
                fields = stat[stat.rindex(")") + 2:].split()
                out[int(d)] = (int(fields[1]), int(fields[3]))
            except (OSError, ValueError, IndexError):
                continue
    return out


def rank_pids(launcher_pid, exe):
    """Processes of the stencil executable descended from the launcher."""
    parent = {pid: pp for pid, (pp, _) in _parents().items()}
    exe_real = os.path.realpath(exe)
    pids = []
    for pid in parent:
        q = pid
        while q in parent and q != launcher_pid and q > 1:
            q = parent[q]
        if q != launcher_pid or pid == launcher_pid:
            continue
        try:
            if os.path.realpath(f"/proc/{pid}/exe") == exe_real:
                pids.append(pid)
        except OSError:
            continue
    return pids


def session_alive(sid):
    """Whether a process of session sid (a launcher started with start_new_session=True, its
    ranks and their wrappers) is still running."""
    return any(s == sid for _, s in _parents().values())


def check(cond, message):
    if not cond:
        raise TestFailure(message)


def run_command(args, harness_class):
    """Run the chosen sub-command (args.func) with a fresh harness_class(args): prints PASS and
    returns 0, or prints the failure on stderr and returns 1."""
    try:
        args.func(harness_class(args), args)
    except TestFailure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    print("PASS")
    return 0


class Harness:
    """Programs and a fresh scratch directory; commands run there with a time limit."""

    timeout = RUN_TIMEOUT_S

    def __init__(self, args):
        self.mpiexec = shlex.split(args.mpiexec)
        self.stencil = args.stencil
        self.stencil_input = args.stencil_input
        self.workdir = os.path.abspath(args.workdir)
        shutil.rmtree(self.workdir, ignore_errors=True)
        os.makedirs(self.workdir)

    def path(self, *names):
        return os.path.join(self.workdir, *names)

    def mpi_prefix(self, nproc):
        """The launcher command for nproc ranks (FindMPI: EXE NUMPROC_FLAG N PREFLAGS...)."""
        words = list(self.mpiexec)
        for i in range(1, len(words)):
            if words[i].isdigit():
                words[i] = str(nproc)
                return words
        raise TestFailure(f"cannot find the rank count in --mpiexec {self.mpiexec}")

    def execute(self, cmd, what, expect_status=0):
        try:
            p = subprocess.run(cmd, cwd=self.workdir, capture_output=True, text=True,
                               timeout=self.timeout)
        except subprocess.TimeoutExpired as e:
            raise TestFailure(f"{what}: timed out after {self.timeout} s: {shlex.join(cmd)}\n"
                              f"{e.stdout or ''}{e.stderr or ''}")
        if p.returncode != expect_status:
            raise TestFailure(f"{what}: exit status {p.returncode} (expected {expect_status}): "
                              f"{shlex.join(cmd)}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}")
        return p

    def make_input(self, name, gen_args):
        path = self.path(name + ".h5")
        self.execute([self.stencil_input, "-o", path, "--overwrite"] + gen_args,
                     f"stencil-input {name}")
        return path


def kill_session(sid):
    """SIGKILL every process of session sid."""
    for pid, (_, s) in _parents().items():
        if s == sid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
