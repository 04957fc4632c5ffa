#include "io/h5util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void h5_print_stack(void)
{
  H5Eprint2(H5E_DEFAULT, stderr);
}

void h5_quiet(void)
{
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* H5Ewalk2 callback: keep the quoted text of the deepest entry that quotes the system's
 * reason, as H5FDmpio ("MPI error string is '...'") and H5FDsec2 ("error message = '...'")
 * write it. */
struct reason {
  char *buf;
  size_t len;
};

static herr_t find_reason(unsigned n, const H5E_error2_t *e, void *data)
{
  (void)n;
  const struct reason *r = data;
  static const char *const marks[] = {"MPI error string is '", "error message = '"};
  for (int i = 0; i < 2 && e->desc; i++) {
    const char *p = strstr(e->desc, marks[i]);
    if (!p)
      continue;
    p += strlen(marks[i]);
    const char *q = strchr(p, '\'');
    snprintf(r->buf, r->len, "%.*s", q ? (int)(q - p) : (int)strlen(p), p);
  }
  return 0;
}

void h5_error_reason(char *buf, size_t len)
{
  struct reason r = {buf, len};
  buf[0] = '\0';
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_reason, &r);
}

int h5_has_attr(hid_t loc, const char *name)
{
  return (int)H5Aexists(loc, name);
}

static const char *class_name(H5T_class_t c)
{
  switch (c) {
  case H5T_INTEGER: return "integer";
  case H5T_FLOAT: return "float";
  case H5T_STRING: return "string";
  case H5T_COMPOUND: return "compound";
  case H5T_ENUM: return "enum";
  case H5T_ARRAY: return "array";
  default: return "other";
  }
}

/* Open an attribute and check its class and element count. */
static int open_attr(hid_t loc, const char *name, H5T_class_t want1, H5T_class_t want2, int nmin,
                     int nmax, hid_t *attr, int *count, const char *file, const char *key)
{
  int exists = h5_has_attr(loc, name);
  if (exists < 0)
    FAIL(STENCIL_ERR, "%s: cannot query key %s", file, key);
  if (exists == 0)
    FAIL(STENCIL_ERR, "%s: missing key %s", file, key);
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0)
    FAIL(STENCIL_ERR, "%s: cannot open key %s", file, key);
  hid_t t = H5Aget_type(a);
  hid_t s = H5Aget_space(a);
  H5T_class_t cls = H5Tget_class(t);
  int ndims = H5Sget_simple_extent_ndims(s);
  hssize_t n = H5Sget_simple_extent_npoints(s);
  H5Tclose(t);
  H5Sclose(s);
  int ok_class = cls == want1 || cls == want2;
  const char *want = want1 == H5T_STRING    ? "a string"
                     : want1 == H5T_INTEGER ? "an integer"
                                            : "a number";
  if (!ok_class || ndims > 1 || n < nmin || n > nmax) {
    H5Aclose(a);
    if (!ok_class)
      FAIL(STENCIL_ERR, "%s: key %s must be %s%s (found %s)", file, key, want,
           nmax > 1 ? " array" : "", class_name(cls));
    if (ndims > 1)
      FAIL(STENCIL_ERR, "%s: key %s must be %s (found %d dimensions)", file, key,
           nmax > 1 ? "a one-dimensional array" : "a scalar or a one-element array", ndims);
    if (nmin == nmax)
      FAIL(STENCIL_ERR, "%s: key %s must have %d element%s (found %lld)", file, key, nmin,
           nmin > 1 ? "s" : "", (long long)n);
    FAIL(STENCIL_ERR, "%s: key %s must have %d to %d elements (found %lld)", file, key, nmin, nmax,
         (long long)n);
  }
  *attr = a;
  if (count)
    *count = (int)n;
  return STENCIL_OK;
}

int h5_read_string(hid_t loc, const char *name, char *buf, size_t len, const char *file,
                   const char *key)
{
  hid_t a;
  CHECK(open_attr(loc, name, H5T_STRING, H5T_STRING, 1, 1, &a, NULL, file, key));
  hid_t t = H5Aget_type(a);
  /* HDF5 converts no string between character sets: read in the file's (h5py writes UTF-8). */
  const H5T_cset_t cset = H5Tget_cset(t);
  int status = STENCIL_OK, too_long = 0;
  if (H5Tis_variable_str(t) > 0) {
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, cset);
    char *s = NULL;
    if (H5Aread(a, mt, &s) < 0 || !s) {
      status = STENCIL_ERR;
    } else {
      if (strlen(s) >= len)
        status = too_long = STENCIL_ERR;
      else
        strcpy(buf, s);
      H5free_memory(s);
    }
    H5Tclose(mt);
  } else {
    size_t sz = H5Tget_size(t);
    if (sz >= len) {
      status = too_long = STENCIL_ERR;
    } else {
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, sz + 1);
      H5Tset_strpad(mt, H5T_STR_NULLTERM);
      H5Tset_cset(mt, cset);
      memset(buf, 0, len);
      if (H5Aread(a, mt, buf) < 0)
        status = STENCIL_ERR;
      H5Tclose(mt);
    }
  }
  H5Tclose(t);
  H5Aclose(a);
  if (too_long)
    FAIL(STENCIL_ERR, "%s: string key %s is longer than %zu bytes", file, key, len - 1);
  if (status)
    FAIL(STENCIL_ERR, "%s: cannot read string key %s", file, key);
  return STENCIL_OK;
}

int h5_read_int64s(hid_t loc, const char *name, int64_t *out, int nmin, int nmax, int *count,
                   const char *file, const char *key)
{
  hid_t a;
  int n = 0;
  CHECK(open_attr(loc, name, H5T_INTEGER, H5T_INTEGER, nmin, nmax, &a, &n, file, key));
  if (count)
    *count = n;
  /* HDF5 clips integers that do not fit the memory type: an unsigned value above 2^63 - 1
   * would read as 2^63 - 1. Read unsigned keys as such and refuse what does not fit. */
  hid_t t = H5Aget_type(a);
  const int is_unsigned = H5Tget_sign(t) == H5T_SGN_NONE;
  H5Tclose(t);
  herr_t e;
  if (is_unsigned) {
    uint64_t *u = malloc((size_t)(n > 0 ? n : 1) * sizeof *u);
    e = u ? H5Aread(a, H5T_NATIVE_UINT64, u) : -1;
    int bad = -1;
    for (int i = 0; e >= 0 && i < n; i++) {
      if (u[i] > (uint64_t)INT64_MAX && bad < 0)
        bad = i;
      out[i] = (int64_t)u[i];
    }
    const unsigned long long big = bad >= 0 ? (unsigned long long)u[bad] : 0;
    free(u);
    if (bad >= 0) {
      H5Aclose(a);
      FAIL(STENCIL_ERR, "%s: key %s = %llu does not fit a signed 64-bit integer", file, key, big);
    }
  } else {
    e = H5Aread(a, H5T_NATIVE_INT64, out);
  }
  H5Aclose(a);
  if (e < 0)
    FAIL(STENCIL_ERR, "%s: cannot read key %s as 64-bit integers", file, key);
  return STENCIL_OK;
}

int h5_read_doubles(hid_t loc, const char *name, double *out, int nmin, int nmax, int *count,
                    const char *file, const char *key)
{
  hid_t a;
  CHECK(open_attr(loc, name, H5T_FLOAT, H5T_INTEGER, nmin, nmax, &a, count, file, key));
  herr_t e = H5Aread(a, H5T_NATIVE_DOUBLE, out);
  H5Aclose(a);
  if (e < 0)
    FAIL(STENCIL_ERR, "%s: cannot read key %s as numbers", file, key);
  return STENCIL_OK;
}

static int write_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *v, int n)
{
  if (H5Aexists(loc, name) > 0 && H5Adelete(loc, name) < 0)
    FAIL(STENCIL_ERR, "cannot replace HDF5 attribute %s", name);
  hsize_t dims = (hsize_t)n;
  hid_t s = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dims, NULL);
  hid_t a = H5Acreate2(loc, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
  herr_t e = a < 0 ? -1 : H5Awrite(a, mtype, v);
  if (a >= 0)
    H5Aclose(a);
  H5Sclose(s);
  if (e < 0)
    FAIL(STENCIL_ERR, "cannot write HDF5 attribute %s", name);
  return STENCIL_OK;
}

int h5_write_string(hid_t loc, const char *name, const char *value)
{
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, strlen(value) + 1);
  H5Tset_strpad(t, H5T_STR_NULLTERM);
  int status = write_attr(loc, name, t, t, value, 1);
  H5Tclose(t);
  return status;
}

int h5_write_int64s(hid_t loc, const char *name, const int64_t *v, int n)
{
  return write_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, v, n);
}

int h5_write_doubles(hid_t loc, const char *name, const double *v, int n)
{
  return write_attr(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, v, n);
}

static int damaged = 0;

int h5_close_file(hid_t file)
{
  if (H5Fclose(file) >= 0)
    return STENCIL_OK;
  damaged = 1;
  return STENCIL_ERR;
}

int h5_damaged(void)
{
  return damaged;
}
