/* h5same A.h5 B.h5: exit 0 when the /field datasets of two stencil output files have the same
 * shape, type and bytes; otherwise print the first difference and exit 1 (2 on a read error).
 * The GPU tests compare runs with it (no Python needed on the GPU host). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *read_field(const char *path, hsize_t dims[3], int *rank, size_t *elem)
{
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0)
    return NULL;
  hid_t d = H5Dopen2(f, "/field", H5P_DEFAULT);
  hid_t s = d < 0 ? -1 : H5Dget_space(d);
  hid_t t = d < 0 ? -1 : H5Dget_type(d);
  void *buf = NULL;
  if (s >= 0 && t >= 0) {
    *rank = H5Sget_simple_extent_ndims(s);
    dims[0] = dims[1] = dims[2] = 1;
    if (*rank >= 1 && *rank <= 3)
      H5Sget_simple_extent_dims(s, dims, NULL);
    *elem = H5Tget_size(t);
    const size_t n = (size_t)(dims[0] * dims[1] * dims[2]);
    buf = malloc(n * *elem);
    hid_t mem = *elem == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    if (buf && H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
      free(buf);
      buf = NULL;
    }
  }
  if (t >= 0)
    H5Tclose(t);
  if (s >= 0)
    H5Sclose(s);
  if (d >= 0)
    H5Dclose(d);
  H5Fclose(f);
  return buf;
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: h5same A.h5 B.h5\n");
    return 2;
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hsize_t da[3], db[3];
  int ra = 0, rb = 0;
  size_t ea = 0, eb = 0;
  void *a = read_field(argv[1], da, &ra, &ea), *b = read_field(argv[2], db, &rb, &eb);
  if (!a || !b) {
    fprintf(stderr, "h5same: cannot read /field of %s\n", !a ? argv[1] : argv[2]);
    return 2;
  }
  if (ra != rb || ea != eb || memcmp(da, db, sizeof da) != 0) {
    printf("h5same: %s and %s differ in shape or type\n", argv[1], argv[2]);
    return 1;
  }
  const size_t n = (size_t)(da[0] * da[1] * da[2]);
  for (size_t i = 0; i < n; i++)
    if (memcmp((char *)a + i * ea, (char *)b + i * ea, ea) != 0) {
      const double x = ea == 8 ? ((double *)a)[i] : ((float *)a)[i];
      const double y = ea == 8 ? ((double *)b)[i] : ((float *)b)[i];
      printf("h5same: %s and %s differ first at element %zu: %.17g vs %.17g\n", argv[1], argv[2], i,
             x, y);
      return 1;
    }
  free(a);
  free(b);
  return 0;
}
