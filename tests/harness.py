"""Shared pieces of the run-and-check test scripts (tests/*_test.py, tests/*/*_test.py):
a test failure, the check helper, and the harness that runs stencil-input and stencil through
the FindMPI launcher prefix ctest passes in --mpiexec."""
import os
import shlex
import shutil
import subprocess
import sys

RUN_TIMEOUT_S = 120


class TestFailure(Exception):
    pass


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
