"""Run by ParaView's pvbatch (tests/paraview/paraview_test.py starts it under xvfb-run):

  pvbatch pv_probe.py OUT.json SLICE.png FILE.xdmf [FILE.xdmf ...]

Opens every XDMF file with ParaView's XDMF reader and writes, per file and time step, what
ParaView sees: the time, the data set type, its bounds, cell and point counts, and the name,
association (cell or point) and range of each array. Renders a slice through the middle of
the first file's last time step, coloured by u, to SLICE.png."""
import json
import sys

from paraview.simple import (ColorBy, GetActiveViewOrCreate, GetAnimationScene, Render,
                             ResetCamera, SaveScreenshot, Show, Slice, XDMFReader)

out_json, png, files = sys.argv[1], sys.argv[2], sys.argv[3:]
report = {}
for path in files:
    reader = XDMFReader(FileNames=[path])
    reader.UpdatePipelineInformation()
    steps = []
    for t in list(reader.TimestepValues) or [0.0]:
        reader.UpdatePipeline(t)
        info = reader.GetDataInformation()
        arrays = [{"name": a.GetName(), "association": kind, "range": list(a.GetRange())}
                  for kind, data in (("cell", reader.CellData), ("point", reader.PointData))
                  for a in data]
        steps.append({"time": t, "type": info.GetDataSetTypeAsString(),
                      "bounds": list(info.GetBounds()), "cells": info.GetNumberOfCells(),
                      "points": info.GetNumberOfPoints(), "arrays": arrays})
    report[path] = steps

# The picture: a slice normal to z (3D) through the middle, or the 2D field itself.
reader = XDMFReader(FileNames=[files[0]])
reader.UpdatePipelineInformation()
scene = GetAnimationScene()
scene.UpdateAnimationUsingDataTimeSteps()
scene.AnimationTime = list(reader.TimestepValues or [0.0])[-1]
reader.UpdatePipeline(scene.AnimationTime)
b = reader.GetDataInformation().GetBounds()
view = GetActiveViewOrCreate("RenderView")
shown = reader
if b[5] > b[4]:
    shown = Slice(Input=reader)
    shown.SliceType = "Plane"
    shown.SliceType.Origin = [(b[0] + b[1]) / 2, (b[2] + b[3]) / 2, (b[4] + b[5]) / 2]
    shown.SliceType.Normal = [0, 0, 1]
display = Show(shown, view)
ColorBy(display, ("CELLS", "u"))
display.RescaleTransferFunctionToDataRange(True)
display.SetScalarBarVisibility(view, True)
view.CameraPosition = [(b[0] + b[1]) / 2, (b[2] + b[3]) / 2, b[5] + 3 * (b[1] - b[0])]
view.CameraFocalPoint = [(b[0] + b[1]) / 2, (b[2] + b[3]) / 2, (b[4] + b[5]) / 2]
view.CameraViewUp = [0, 1, 0]
ResetCamera(view)
Render(view)
SaveScreenshot(png, view, ImageResolution=[800, 600])
with open(out_json, "w") as f:
    json.dump(report, f, indent=1)
