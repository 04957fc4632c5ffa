#include "solvers/petsc/petsc_field.h"

#include <math.h>
#include <string.h>

#include "io/field_io.h"
#include "io/h5util.h"
#include "solvers/petsc/petsc_check.h"

/* Does the link path exist (every component)? */
static int has_path(hid_t file, const char *const *parts, int n)
{
  char path[256] = "";
  for (int i = 0; i < n; i++) {
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", parts[i]);
    if (H5Lexists(file, path, H5P_DEFAULT) <= 0)
      return 0;
  }
  return 1;
}

/* Rank 0's part of result_inspect: serial HDF5. */
static int inspect_file(const char *path, const struct config *c, struct result_info *info)
{
  if (H5Fis_hdf5(path) <= 0)
    FAIL(STENCIL_ERR, "--compare: %s is not a readable HDF5 file", path);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    FAIL(STENCIL_ERR, "--compare: cannot open %s", path);
  int status = STENCIL_OK;
  hid_t dset = H5Lexists(file, "/field", H5P_DEFAULT) > 0 ? H5Dopen2(file, "/field", H5P_DEFAULT)
                                                          : H5I_INVALID_HID;
  if (dset < 0) {
    log_error("--compare: %s has no dataset /field (expected a stencil result or checkpoint)",
              path);
    status = STENCIL_ERR;
  }
  if (!status) {
    hid_t t = H5Dget_type(dset), s = H5Dget_space(dset);
    const H5T_class_t cls = H5Tget_class(t);
    const size_t size = H5Tget_size(t);
    hsize_t dims[8] = {0};
    const int nd = H5Sget_simple_extent_ndims(s);
    if (nd > 0 && nd <= 8)
      H5Sget_simple_extent_dims(s, dims, NULL);
    H5Tclose(t);
    H5Sclose(s);
    /* [nz][ny][nx], or [ny][nx] in 2D. */
    int ok = 0;
    if (nd == 3)
      ok = (int64_t)dims[0] == c->shape[2] && (int64_t)dims[1] == c->shape[1] &&
           (int64_t)dims[2] == c->shape[0];
    else if (nd == 2)
      ok = c->shape[2] == 1 && (int64_t)dims[0] == c->shape[1] && (int64_t)dims[1] == c->shape[0];
    if (cls != H5T_FLOAT || (size != 4 && size != 8)) {
      log_error("--compare: %s: /field must hold float32 or float64 values", path);
      status = STENCIL_ERR;
    } else if (!ok) {
      log_error("--compare: %s: /field has %d dimensions [%llu][%llu][%llu] but the input's grid "
                "is [nz][ny][nx] = [%lld][%lld][%lld]",
                path, nd, (unsigned long long)dims[0], (unsigned long long)dims[1],
                (unsigned long long)dims[2], (long long)c->shape[2], (long long)c->shape[1],
                (long long)c->shape[0]);
      status = STENCIL_ERR;
    }
    info->elem = (int)size;
    H5Dclose(dset);
  }
  if (!status && h5_has_attr(file, "step") > 0)
    status = h5_read_int64s(file, "step", &info->step, 1, 1, NULL, path, "/step");
  if (!status && h5_has_attr(file, "backend") > 0)
    status = h5_read_string(file, "backend", info->backend, sizeof info->backend, path, "/backend");
  static const char *const time_path[] = {"parameters", "time"};
  static const char *const problem_path[] = {"parameters", "problem"};
  if (!status && has_path(file, time_path, 2) && has_path(file, problem_path, 2)) {
    hid_t gt = H5Gopen2(file, "/parameters/time", H5P_DEFAULT);
    hid_t gp = H5Gopen2(file, "/parameters/problem", H5P_DEFAULT);
    status = gt < 0 || gp < 0 ? STENCIL_ERR : STENCIL_OK;
    if (!status)
      status = h5_read_doubles(gt, "dt", &info->dt, 1, 1, NULL, path, "/parameters/time/dt");
    if (!status)
      status =
          h5_read_doubles(gp, "alpha", &info->alpha, 1, 1, NULL, path, "/parameters/problem/alpha");
    info->has_params = !status;
    if (gt >= 0)
      H5Gclose(gt);
    if (gp >= 0)
      H5Gclose(gp);
  }
  H5Fclose(file);
  return status;
}

int result_inspect(MPI_Comm comm, const char *path, const struct config *c,
                   struct result_info *info)
{
  int rank;
  CHECK_MPI(MPI_Comm_rank(comm, &rank));
  memset(info, 0, sizeof *info);
  info->step = -1;
  int status = rank == 0 ? inspect_file(path, c, info) : STENCIL_OK;
  CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  CHECK(status);
  CHECK_MPI(MPI_Bcast(info, (int)sizeof *info, MPI_BYTE, 0, comm));
  return STENCIL_OK;
}

int result_read(const struct petsc_heat *h, const char *path, Vec v)
{
  /* The project's collective reader of /field, into fp64 whatever the file stores. */
  struct decomp d;
  petsc_heat_decomp(h, &d);
  PetscScalar *va;
  CHECK_PETSC(VecGetArray(v, &va));
  int status = field_read(path, "/field", &h->cfg, &d, va, 0);
  CHECK_PETSC(VecRestoreArray(v, &va));
  if (status)
    log_error0("--compare: cannot read /field from %s", path);
  return status;
}

int result_write(const struct petsc_heat *h, const char *path, int64_t step, Vec v)
{
  struct decomp d;
  petsc_heat_decomp(h, &d);
  struct provenance prov;
  CHECK(provenance_init(&prov, d.cart, "petsc", "PETSc reference solver (stencil-petsc)", NULL,
                        NULL, 0));
  const struct field_meta meta = {step, (double)step * h->cfg.dt, &prov};
  const PetscScalar *va;
  CHECK_PETSC(VecGetArrayRead(v, &va));
  int status = field_write(path, &h->cfg, &d, &meta, va, NULL);
  CHECK_PETSC(VecRestoreArrayRead(v, &va));
  return status;
}

int field_diff_compute(const struct petsc_heat *h, Vec ref, Vec other, struct field_diff *d)
{
  const struct config *c = &h->cfg;
  double dv = 1.0;
  for (int a = 0; a < h->ndim; a++)
    dv *= c->spacing[a];
  Vec diff;
  PetscReal dmax, d2, rmax, r2;
  CHECK_PETSC(VecDuplicate(ref, &diff));
  CHECK_PETSC(VecWAXPY(diff, -1.0, ref, other)); /* diff = other - ref */
  CHECK_PETSC(VecNorm(diff, NORM_INFINITY, &dmax));
  CHECK_PETSC(VecNorm(diff, NORM_2, &d2));
  CHECK_PETSC(VecNorm(ref, NORM_INFINITY, &rmax));
  CHECK_PETSC(VecNorm(ref, NORM_2, &r2));
  CHECK_PETSC(VecDestroy(&diff));
  d->max_abs = dmax;
  d->l2_abs = d2 * sqrt(dv);
  d->ref_max = rmax;
  d->ref_l2 = r2 * sqrt(dv);
  /* Relative to a zero reference: 0 when equal, infinite otherwise. */
  d->max_rel = rmax > 0 ? dmax / rmax : (dmax > 0 ? INFINITY : 0.0);
  d->l2_rel = r2 > 0 ? d2 / r2 : (d2 > 0 ? INFINITY : 0.0);
  if (!isfinite(dmax) || !isfinite(d2))
    d->max_rel = d->l2_rel = INFINITY; /* NaN/Inf in the compared field is a failure */
  return STENCIL_OK;
}
