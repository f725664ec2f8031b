// ir/ir_diag.c — the one diagnostic format for an error about a node, used by shape inference,
// autodiff, the reference evaluator and codegen: "[PREFIX]OP 'OUTPUT': MESSAGE" at the node's
// .dlg location (or at an explicit one).
#include "dl_ir.h"

#include <stdio.h>

void dl_ir_node_vdiag(dl_diags *d, dl_severity sev, const dl_ir_node *n, dl_src_loc loc,
                      const char *prefix, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const char *out = n->n_outputs && n->outputs[0] ? n->outputs[0]->name : "?";
    dl_diag(d, sev, loc.file ? loc : n->loc, "%s%s '%s': %s", prefix ? prefix : "",
            dl_ir_op_get_info(n->op)->name, out, msg);
}
