// ir/ir_internal.h — what the files of ir/ share and nobody else sees.
#ifndef DL_IR_INTERNAL_H
#define DL_IR_INTERNAL_H

#include "dl_ir.h"

// A param's initialiser as the IR diff shows it (ir_print.c, through the printer's own
// initialiser text): the effective seed always written, literals as a size and a data digest,
// "none" without an initialiser.
void dl_ir__init_text(dl_strbuf *b, const dl_ir_value *param);

#endif
