#!/usr/bin/python3
"""Render a 2D slice of a stencil HDF5 file to PNG.

  tools/plot_slice.py FILE.h5 [-o OUT.png] [--dataset /field] [--axis z|y|x] [--index I]
                      [--vmin V] [--vmax V] [--cmap NAME]

FILE may be any stencil file: a final output, checkpoint or snapshot (/field) or an input
with a dataset initial field (/initial/field); the dataset is found in that order unless
--dataset names one. Arrays are [nz][ny][nx] (x fastest) or [ny][nx]. A 3D field is cut
normal to --axis (default z) at --index (default the middle); a 2D field is drawn whole.
Axes are in physical units (cell centres (i + 1/2) h, times the file's /stride if any),
using /grid/spacing of the file's /parameters group (or of the input itself).

Needs python3 with h5py, numpy and matplotlib (Debian: python3-h5py python3-numpy
python3-matplotlib).
"""

import argparse
import os
import sys

import h5py
import numpy as np


def find_dataset(f, name):
    if name:
        if name not in f:
            sys.exit(f"plot_slice: {f.filename} has no dataset {name}")
        return name
    for cand in ("field", "initial/field"):
        if cand in f and isinstance(f[cand], h5py.Dataset):
            return cand
    sys.exit(f"plot_slice: {f.filename} has neither /field nor /initial/field "
             "(pass --dataset)")


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("-o", "--output", help="PNG to write (default: FILE with .png)")
    ap.add_argument("--dataset")
    ap.add_argument("--axis", choices=["x", "y", "z"], default="z")
    ap.add_argument("--index", type=int)
    ap.add_argument("--vmin", type=float)
    ap.add_argument("--vmax", type=float)
    ap.add_argument("--cmap", default="viridis")
    args = ap.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with h5py.File(args.file, "r") as f:
        name = find_dataset(f, args.dataset)
        data = f[name][...].astype(np.float64)
        grid = f["parameters/grid"] if "parameters/grid" in f else f.get("grid")
        spacing = [1.0, 1.0, 1.0]
        if grid is not None and "spacing" in grid.attrs:
            sp = np.atleast_1d(grid.attrs["spacing"])
            spacing[:len(sp)] = [float(x) for x in sp]
        stride = int(f.attrs["stride"]) if "stride" in f.attrs else 1
        label = []
        for key in ("schema", "step", "time"):
            if key in f.attrs:
                label.append(f"{key} {text(f.attrs[key])}")
    if data.ndim == 3 and data.shape[0] == 1:
        data = data[0]
    if data.ndim not in (2, 3):
        sys.exit(f"plot_slice: {name} has {data.ndim} dimensions; expected 2 or 3")

    names = ["x", "y", "z"]
    if data.ndim == 3:
        axis = {"z": 0, "y": 1, "x": 2}[args.axis]
        n = data.shape[axis]
        index = n // 2 if args.index is None else args.index
        if not 0 <= index < n:
            sys.exit(f"plot_slice: --index {index} outside 0..{n - 1} along {args.axis}")
        img = np.take(data, index, axis=axis)
        kept = [a for a in (2, 1, 0) if a != axis]  # array axes, fastest first
        phys = [2 - a for a in kept]  # physical axes (0 = x) of the image's columns, rows
        where = (index * stride + 0.5) * spacing[2 - axis]
        label.append(f"{args.axis} = {where:g} (index {index})")
    else:
        img = data
        phys = [0, 1]
    ny, nx = img.shape
    hx, hy = stride * spacing[phys[0]], stride * spacing[phys[1]]
    extent = [0.5 * spacing[phys[0]] - hx / 2, 0.5 * spacing[phys[0]] + (nx - 0.5) * hx,
              0.5 * spacing[phys[1]] - hy / 2, 0.5 * spacing[phys[1]] + (ny - 0.5) * hy]

    fig, ax = plt.subplots(figsize=(6, 5), dpi=100)
    im = ax.imshow(img, origin="lower", extent=extent, cmap=args.cmap, vmin=args.vmin,
                   vmax=args.vmax, interpolation="nearest", aspect="equal")
    fig.colorbar(im, ax=ax, label=os.path.basename(name))
    ax.set_xlabel(names[phys[0]])
    ax.set_ylabel(names[phys[1]])
    ax.set_title(f"{os.path.basename(args.file)}\n" + ", ".join(label), fontsize=9)
    out = args.output or os.path.splitext(args.file)[0] + ".png"
    fig.tight_layout()
    fig.savefig(out)
    print(out)


if __name__ == "__main__":
    main()
