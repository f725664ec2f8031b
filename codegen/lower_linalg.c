// codegen/lower_linalg.c — lowering of: MatMul Gemm.
// Not written yet: every op here reports that it is not supported by the cpu backend.
#include "cg_internal.h"

dl_status dl_cg__lower_linalg(cg *c, const dl_ir_node *n) {
    (void)n;
    cg_error(c, "not supported by the cpu backend yet");
    return DL_ERR_UNSUPPORTED;
}
