#include "io/xdmf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

void xdmf_grid_of(struct xdmf_grid *g, const char *file, const struct config *c, int64_t step,
                  int stride)
{
  memset(g, 0, sizeof *g);
  snprintf(g->file, sizeof g->file, "%s", file);
  g->step = step;
  g->time = c->dt > 0 ? (double)step * c->dt : (double)step;
  g->ndim = config_ndim(c);
  g->stride = stride > 1 ? stride : 1;
  g->elem = config_elem_size(c);
  for (int k = 0; k < g->ndim; k++)
    g->dims[k] = (c->shape[g->ndim - 1 - k] + g->stride - 1) / g->stride;
}

void xdmf_path_for(char *buf, size_t len, const char *h5path)
{
  const size_t n = strlen(h5path);
  const int h5 = n > 3 && strcmp(h5path + n - 3, ".h5") == 0;
  snprintf(buf, len, "%.*s.xdmf", (int)(h5 ? n - 3 : n), h5path);
}

/* "a b c" of v[0..n), exactly (%.17g). */
static void join_doubles(char *buf, size_t len, const double *v, int n)
{
  buf[0] = 0;
  for (int k = 0; k < n; k++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%.17g", k ? " " : "", v[k]);
}

/* "a b c" of v[0..n), each plus `plus`. */
static void join_ints(char *buf, size_t len, const int64_t *v, int n, int plus)
{
  buf[0] = 0;
  for (int k = 0; k < n; k++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%lld", k ? " " : "",
             (long long)(v[k] + plus));
}

/* One grid, always a 3D CoRectMesh: ParaView's XDMF reader puts a 2D mesh into the y-z plane,
 * so a 2D field is a layer of the plane z = 0: cell data one cell thick (z from -t/2 to t/2,
 * t = min(hx, hy)), point data on the plane itself. Extents, origin and spacing slowest axis
 * first (z y x). */
static void write_grid(FILE *f, const double spacing[3], const struct xdmf_grid *g,
                       const char *indent)
{
  const int cells = g->stride == 1; /* cell data on the node grid, else points at centres */
  const double t = spacing[0] < spacing[1] ? spacing[0] : spacing[1];
  int64_t data[3];
  double origin[3], step[3];
  for (int k = 0; k < 3; k++) {
    const int axis = 2 - k, flat = g->ndim == 2 && axis == 2;
    const double h = spacing[axis];
    data[k] = flat ? 1 : g->dims[k - (3 - g->ndim)];
    origin[k] = flat ? (cells ? -0.5 * t : 0.0) : (cells ? 0.0 : 0.5 * h);
    step[k] = flat ? t : (double)g->stride * h;
  }
  char data_dims[96], topo_dims[96], o[128], s[128];
  join_ints(data_dims, sizeof data_dims, data, 3, 0);
  join_ints(topo_dims, sizeof topo_dims, data, 3, cells);
  join_doubles(o, sizeof o, origin, 3);
  join_doubles(s, sizeof s, step, 3);
  fprintf(f,
          "%s<Grid Name=\"step %lld\" GridType=\"Uniform\">\n"
          "%s <Time Value=\"%.17g\"/>\n"
          "%s <Topology TopologyType=\"3DCoRectMesh\" Dimensions=\"%s\"/>\n"
          "%s <Geometry GeometryType=\"ORIGIN_DXDYDZ\">\n"
          "%s  <DataItem Name=\"Origin\" Dimensions=\"3\" NumberType=\"Float\" Precision=\"8\" "
          "Format=\"XML\">%s</DataItem>\n"
          "%s  <DataItem Name=\"Spacing\" Dimensions=\"3\" NumberType=\"Float\" Precision=\"8\" "
          "Format=\"XML\">%s</DataItem>\n"
          "%s </Geometry>\n"
          "%s <Attribute Name=\"u\" AttributeType=\"Scalar\" Center=\"%s\">\n"
          "%s  <DataItem Dimensions=\"%s\" NumberType=\"Float\" Precision=\"%d\" "
          "Format=\"HDF\">%s:/field</DataItem>\n"
          "%s </Attribute>\n"
          "%s</Grid>\n",
          indent, (long long)g->step, indent, g->time, indent, topo_dims, indent, indent, o, indent,
          s, indent, indent, cells ? "Cell" : "Node", indent, data_dims, g->elem, g->file, indent,
          indent);
}

int xdmf_write(const char *path, const double spacing[3], const struct xdmf_grid *g, int count,
               int temporal)
{
  char tmp[CONFIG_PATH_MAX + 400];
  snprintf(tmp, sizeof tmp, "%s.partial", path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    FAIL(STENCIL_ERR, "cannot create %s: %s", tmp, strerror(errno));
  fprintf(f, "<?xml version=\"1.0\" ?>\n<!DOCTYPE Xdmf SYSTEM \"Xdmf.dtd\" []>\n"
             "<Xdmf Version=\"2.0\">\n <Domain>\n");
  if (temporal)
    fprintf(f, "  <Grid Name=\"stencil\" GridType=\"Collection\" CollectionType=\"Temporal\">\n");
  for (int i = 0; i < count; i++)
    write_grid(f, spacing, &g[i], temporal ? "   " : "  ");
  if (temporal)
    fprintf(f, "  </Grid>\n");
  fprintf(f, " </Domain>\n</Xdmf>\n");
  int bad = ferror(f);
  bad |= fflush(f) != 0;
  bad |= fsync(fileno(f)) != 0;
  bad |= fclose(f) != 0;
  if (bad) {
    unlink(tmp);
    FAIL(STENCIL_ERR, "cannot write %s: %s", tmp, strerror(errno));
  }
  if (rename(tmp, path) != 0)
    FAIL(STENCIL_ERR, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
  return STENCIL_OK;
}
