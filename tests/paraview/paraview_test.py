#!/usr/bin/python3
"""ParaView opens the XDMF files of a run and sees the field the HDF5 files hold.

  paraview_test.py --mpiexec "MPIEXEC -n N FLAGS" --stencil EXE --stencil-input EXE
                   --workdir DIR --pvbatch PVBATCH --xvfb-run XVFB_RUN

Runs a 3D fp64 problem (spacing 1, 0.5, 2 on 23 x 17 x 11 cells) on 3 ranks with
checkpoints and strided snapshots (--output-stride 2), and a 2D fp32 one on 2 ranks; then
ParaView's pvbatch (under xvfb-run) opens final.xdmf, checkpoints.xdmf and snapshots.xdmf of
both (tests/paraview/pv_probe.py). For every time step of every file it checks what ParaView
reports against the HDF5 data:
  - full-resolution files (final field, checkpoints): cell data on the node grid, bounds
    [0, n h] per axis, n cells, and the array's range equal to min and max of /field;
  - strided snapshots: point data at the kept cells' centres, bounds [h/2, ((m - 1) s + 1/2) h]
    with m the kept cells per axis, m points, the range of the snapshot's /field;
  - 2D: the plane z = 0, cells one cell thick (z from -t/2 to t/2, t = min(hx, hy));
  - the time steps: step x dt of the files present.
It also renders a slice of the 3D final field to PNG (checked to be a PNG of the asked size).
Exit 0 on success, 77 when pvbatch or xvfb-run is missing, 1 with "FAIL: ..." otherwise.
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness, TestFailure, check, run_command  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def expected(path, spacing, dt):
    """What ParaView must see of one field file."""
    with h5py.File(path, "r") as f:
        u = f["field"][...]
        stride = int(f.attrs.get("stride", 1))
        step = int(f.attrs["step"])
    dims = list(reversed(u.shape))  # x, y(, z)
    if stride == 1:
        bounds = [(0.0, n * h) for n, h in zip(dims, spacing)]
        assoc = "cell"
    else:
        bounds = [(0.5 * h, ((m - 1) * stride + 0.5) * h) for m, h in zip(dims, spacing)]
        assoc = "point"
    if len(dims) == 2:  # the plane z = 0: cells one cell (min(hx, hy)) thick, points on it
        t = min(spacing) if assoc == "cell" else 0.0
        bounds.append((-t / 2, t / 2))
    count = math.prod(dims)
    return {"time": step * dt, "bounds": bounds, "count": count, "association": assoc,
            "range": (float(u.min()), float(u.max())), "step": step}


def check_file(tag, xdmf, steps_seen, files, spacing, dt):
    want = [expected(f, spacing, dt) for f in files]
    check(len(steps_seen) == len(want), f"{tag}: ParaView sees {len(steps_seen)} time steps, "
          f"the directory holds {len(want)} files")
    for seen, w in zip(steps_seen, sorted(want, key=lambda w: w["step"])):
        where = f"{tag} step {w['step']}"
        check(math.isclose(seen["time"], w["time"], rel_tol=1e-15, abs_tol=0),
              f"{where}: time {seen['time']!r}, expected {w['time']!r}")
        check(seen["type"] == "vtkImageData", f"{where}: data set {seen['type']}")
        b = seen["bounds"]
        for axis, (lo, hi) in enumerate(w["bounds"]):
            ok = all(math.isclose(got, exp, rel_tol=1e-12, abs_tol=1e-12 * hi)
                     for got, exp in ((b[2 * axis], lo), (b[2 * axis + 1], hi)))
            check(ok, f"{where}: bounds along axis {axis} are {b[2 * axis:2 * axis + 2]}, "
                  f"expected [{lo!r}, {hi!r}]")
        count = seen["cells"] if w["association"] == "cell" else seen["points"]
        check(count == w["count"], f"{where}: {count} {w['association']}s, expected {w['count']}")
        arrays = [a for a in seen["arrays"] if a["name"] == "u"]
        check(len(arrays) == 1 and arrays[0]["association"] == w["association"],
              f"{where}: arrays {seen['arrays']}, expected u as {w['association']} data")
        check(tuple(arrays[0]["range"]) == w["range"], f"{where}: range of u "
              f"{arrays[0]['range']}, /field has {w['range']}")
    print(f"ok: {tag}: {len(want)} time step(s): bounds, {want[0]['association']} count and "
          f"range of u as in the HDF5 files")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def cmd_paraview(h, args):
    for tool in (args.pvbatch, args.xvfb_run):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not found (Debian: paraview python3-paraview xvfb xauth)")
            sys.exit(77)
    cases = [("x3", ["--shape", "23x17x11", "--spacing", "1,0.5,2", "--initial", "random:9",
                     "--steps", "12"], 3),
             ("x2", ["--shape", "30x21", "--spacing", "0.25", "--precision", "fp32",
                     "--initial", "gaussian:1:3.5,2.5:1", "--steps", "12"], 2)]
    xdmfs, checks = [], []
    for name, gen, nproc in cases:
        inp = h.make_input(name, gen)
        with h5py.File(inp, "r") as f:
            dt = float(f["time"].attrs["dt"])
            spacing = [float(x) for x in np.atleast_1d(f["grid"].attrs["spacing"])]
        ndim = 3 if len(gen[1].split("x")) == 3 else 2
        spacing = (spacing * 3)[:ndim] if len(spacing) == 1 else spacing[:ndim]
        out = h.path(name + "-out")
        h.execute(h.mpi_prefix(nproc) + [h.stencil, inp, "--backend", "cpu", "--quiet",
                                         "--output-dir", out, "--checkpoint-every", "4",
                                         "--keep-checkpoints", "2", "--output-every", "4",
                                         "--output-stride", "2"], f"stencil {name}")
        listing = sorted(os.listdir(out))
        for xdmf, prefix in (("final.xdmf", "final.h5"), ("checkpoints.xdmf", "checkpoint_"),
                             ("snapshots.xdmf", "snapshot_")):
            files = [os.path.join(out, n) for n in listing
                     if n.startswith(prefix) and n.endswith(".h5")]
            xdmfs.append(os.path.join(out, xdmf))
            checks.append((f"{name}/{xdmf}", xdmfs[-1], files, spacing, dt))
    report, png = h.path("paraview.json"), h.path("slice.png")
    p = h.execute([args.xvfb_run, "-a", args.pvbatch, os.path.join(HERE, "pv_probe.py"), report,
                   png] + xdmfs, "pvbatch")
    with open(report) as f:
        seen = json.load(f)
    for tag, xdmf, files, spacing, dt in checks:
        check(xdmf in seen, f"{tag}: not in ParaView's report\n{p.stdout}{p.stderr}")
        check_file(tag, xdmf, seen[xdmf], files, spacing, dt)
    w, hgt = png_size(png)
    check((w, hgt) == (800, 600) and os.path.getsize(png) > 10000,
          f"{png}: {w} x {hgt}, {os.path.getsize(png)} bytes: not the slice picture")
    print(f"ok: ParaView rendered a slice of the 3D final field to {png}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mpiexec", required=True)
    p.add_argument("--stencil", required=True)
    p.add_argument("--stencil-input", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--pvbatch", default="pvbatch")
    p.add_argument("--xvfb-run", default="xvfb-run")
    p.set_defaults(func=cmd_paraview)
    return run_command(p.parse_args(), Harness)


if __name__ == "__main__":
    sys.exit(main())
