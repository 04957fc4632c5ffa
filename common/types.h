#pragma once
/* Small enums shared by the input reader, the driver and the backends (no library types). */

enum precision { PREC_FP64 = 0, PREC_FP32 = 1 };
enum bc_kind { BC_DIRICHLET = 0, BC_NEUMANN = 1, BC_PERIODIC = 2 };

/* A reflecting face whose ghost cells mirror the interior with no offset (Neumann, or Dirichlet
 * with value 0: ghost = 0 - u). Without a source term, a star-stencil step maps such a mirrored
 * field to the mirror of the result, so several steps can run on ghost cells filled once
 * (the fused kernels in 3D, docs/design/fused-kernels.md, "The 3D warp-row kernel"). */
static inline int bc_homogeneous(enum bc_kind k, double value)
{
  return k == BC_NEUMANN || (k == BC_DIRICHLET && value == 0.0);
}
