// codegen/x86/x86.h — the parts of the x86-64 target (x86_target.c) that live in
// x86_link.c. Private to codegen/.
#ifndef CG_X86_H
#define CG_X86_H

#include "cg_internal.h"

// Adds @dlcc_plan (the plan blob), @dlcc_fns (the kernel table) and the exported descriptor
// @dlcc_artifact_v1 to the module.
void dl_cg__x86_add_artifact_globals(cg *c, const uint8_t *plan, size_t plan_len);
// Links the object code into a shared object: on DL_OK *out (malloc'd) holds its bytes.
DL_NODISCARD dl_status dl_cg__x86_link_object(cg *c, const dl_cg_options *o, const char *obj_data,
                                              size_t obj_len, uint8_t **out, size_t *out_len);

#endif
