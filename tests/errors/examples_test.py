#!/usr/bin/python3
"""Regenerate every bundled example input from its documented command and compare.

inputs/examples.txt holds one `stencil-input -o NAME.h5 ...` command per line. For each line
this runs the built stencil-input in a scratch directory and compares the new file with the
committed inputs/NAME.h5:
  - h5diff: exit 0 (no difference in any dataset or attribute value) and no objects it could
    not compare (h5diff exits 0 when, e.g., a scalar became a 1-element array);
  - h5dump: the same text, which also covers names, datatypes (int32 vs int64, string kinds)
    and dataspaces that h5diff does not compare.
Before that it checks that the comparison itself finds planted differences, and that every
.h5 file in inputs/ has a command. Exit 0 when all match, 1 otherwise.
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys

import h5py

MAX_EXAMPLE_BYTES = 1 << 20


def h5dump_text(path):
    r = subprocess.run(["h5dump", path], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"h5dump {path} failed ({r.returncode}): {r.stderr.strip()}"
    lines = r.stdout.splitlines()
    # The first line names the file: HDF5 "path" {
    if not lines or not lines[0].startswith("HDF5 "):
        return None, f"h5dump {path}: unexpected output"
    return "\n".join(lines[1:]), None


def compare(committed, regenerated):
    """Return a list of differences (empty when the two files hold the same content)."""
    problems = []
    r = subprocess.run(["h5diff", committed, regenerated], capture_output=True, text=True)
    if r.returncode != 0:
        report = subprocess.run(["h5diff", "-r", committed, regenerated], capture_output=True,
                                text=True).stdout.splitlines()
        # Keep the objects that differ: drop each header followed by "0 differences found".
        keep = [l for i, l in enumerate(report) if l != "0 differences found" and
                not (i + 1 < len(report) and report[i + 1] == "0 differences found")]
        problems.append(f"h5diff exit {r.returncode} {r.stderr.strip()}\n  " +
                        "\n  ".join(keep[:24]))
    elif "not comparable" in r.stdout:
        problems.append(f"h5diff found objects it cannot compare: {r.stdout.strip()}")
    a, err_a = h5dump_text(committed)
    b, err_b = h5dump_text(regenerated)
    if err_a or err_b:
        problems.append(err_a or err_b)
    elif a != b:
        la, lb = a.splitlines(), b.splitlines()
        for i, (x, y) in enumerate(zip(la, lb)):
            if x != y:
                problems.append(f"h5dump differs at line {i + 2}:\n  committed:   {x.strip()}\n"
                                f"  regenerated: {y.strip()}")
                break
        else:
            problems.append(f"h5dump lengths differ: {len(la)} vs {len(lb)} lines")
    return problems


def parse_commands(path):
    """[(name, argv)] from examples.txt: one command per line, '#' comments."""
    out = []
    with open(path) as f:
        for num, line in enumerate(f, 1):
            argv = shlex.split(line, comments=True)
            if not argv:
                continue
            if argv[0] != "stencil-input":
                sys.exit(f"{path}:{num}: the command must start with stencil-input")
            names = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--output")]
            if len(names) != 1 or os.path.basename(names[0]) != names[0]:
                sys.exit(f"{path}:{num}: need exactly one -o NAME.h5 (a plain file name)")
            out.append((names[0], argv))
    return out


def self_check(sample, scratch):
    """The comparison must see planted changes h5diff alone would miss or catch."""
    def planted(name, edit):
        path = os.path.join(scratch, f"planted-{name}.h5")
        shutil.copy(sample, path)
        with h5py.File(path, "r+") as f:
            edit(f)
        return path

    def retype(f, key, fn):
        group, attr = key.rsplit("/", 1)
        g = f[group or "/"]
        v = g.attrs[attr]
        del g.attrs[attr]
        fn(g, attr, v)

    cases = {
        "value": lambda f: f["time"].attrs.modify("steps", f["time"].attrs["steps"] + 1),
        "int32": lambda f: retype(f, "/time/steps",
                                  lambda g, k, v: g.attrs.create(k, v, dtype="i4")),
        "array": lambda f: retype(f, "/time/dt", lambda g, k, v: g.attrs.create(k, [v])),
        "vlen": lambda f: retype(f, "/problem/equation",
                                 lambda g, k, v: g.attrs.create(k, v.decode())),
        "extra": lambda f: f["grid"].attrs.create("extra", 1.0),
    }
    bad = 0
    for name, edit in cases.items():
        if not compare(sample, planted(name, edit)):
            print(f"self-check: the comparison missed a planted change ({name})")
            bad = 1
    return bad


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--stencil-input", required=True, help="the built stencil-input program")
    p.add_argument("--inputs", required=True, help="the inputs/ folder of the source tree")
    p.add_argument("--workdir", required=True, help="scratch directory (emptied first)")
    a = p.parse_args()

    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    commands = parse_commands(os.path.join(a.inputs, "examples.txt"))
    listed = sorted(n for n, _ in commands)
    present = sorted(f for f in os.listdir(a.inputs) if f.endswith(".h5"))
    failed = 0
    if listed != present:
        print(f"inputs/*.h5 {present} and the files examples.txt makes {listed} differ")
        failed = 1
    for name, argv in commands:
        committed = os.path.join(a.inputs, name)
        r = subprocess.run([a.stencil_input] + argv[1:], cwd=a.workdir, capture_output=True,
                           text=True)
        regenerated = os.path.join(a.workdir, name)
        if r.returncode != 0 or not os.path.exists(regenerated):
            print(f"{name}: stencil-input failed ({r.returncode}): {r.stderr.strip()}")
            failed = 1
            continue
        if not os.path.exists(committed):
            print(f"{name}: not committed in inputs/")
            failed = 1
            continue
        size = os.path.getsize(committed)
        if size >= MAX_EXAMPLE_BYTES:
            print(f"{name}: {size} bytes; examples must stay under {MAX_EXAMPLE_BYTES}")
            failed = 1
        problems = compare(committed, regenerated)
        for msg in problems:
            print(f"{name}: {msg}")
        failed |= bool(problems)
        print(f"{name}: {'DIFFERS' if problems else 'identical'} ({size} bytes)")
    if commands:
        failed |= self_check(os.path.join(a.workdir, commands[0][0]), a.workdir)
    print("FAIL" if failed else f"all {len(commands)} examples match their commands")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
