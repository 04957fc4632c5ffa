#pragma once
/* Small enums shared by the input reader, the driver and the backends (no library types). */

enum precision { PREC_FP64 = 0, PREC_FP32 = 1 };
enum bc_kind { BC_DIRICHLET = 0, BC_NEUMANN = 1, BC_PERIODIC = 2 };

/* A reflecting face whose ghost cells mirror the interior with no offset (Neumann, or Dirichlet
 * with value 0: ghost = 0 - u). Without a source term, a star-stencil step maps such a mirrored
 * field to the mirror of the result, so several steps can run on ghost cells filled once
 * (tier 3 in 3D, docs/cluster-kernel.md "Homogeneous faces"). */
static inline int bc_homogeneous(enum bc_kind k, double value)
{
  return k == BC_NEUMANN || (k == BC_DIRICHLET && value == 0.0);
}
