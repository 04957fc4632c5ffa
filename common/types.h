#pragma once
/* Small enums shared by the input reader, the driver and the backends (no library types). */

enum precision { PREC_FP64 = 0, PREC_FP32 = 1 };
enum bc_kind { BC_DIRICHLET = 0, BC_NEUMANN = 1, BC_PERIODIC = 2 };
