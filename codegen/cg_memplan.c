// codegen/cg_memplan.c — codegen's side of the memory plan: describes the lowered kernels and the
// plan's buffers neutrally (dl_pass_mem_desc, passes/dl_pass.h) and runs the planner
// (dl_pass_memplan, passes/memplan.c), then copies the offsets into the plan's buffer table.
//
// What stays here is what only the lowering knows: which kernels read each input at the element
// they write (the in-place candidates: the lone kernel of an elementwise node with one output,
// lower_elem.c's emit_map; UnaryGrad's flat loop), which buffers are the outputs and the train
// loss, and the kinds of the plan's buffers. The planner itself has no LLVM and no cg.
#include "cg_internal.h"
#include "dl_pass.h"

#include <stdlib.h>
#include <string.h>

// How the kernel of `op` reads an input of the output's dims (the op table's in-place column,
// ir/ir_ops.def): at the element it writes (SAME_DIMS), by flat index as UnaryGrad's loop does
// (FLAT), or otherwise (NO).
static dl_pass_mem_inplace inplace_of(uint32_t op) {
    switch (dl_ir_op_inplace((dl_ir_op)op)) {
    case DL_IR_INPLACE_ELEMENT:
        return DL_PASS_INPLACE_SAME_DIMS;
    case DL_IR_INPLACE_FLAT:
        return DL_PASS_INPLACE_FLAT;
    case DL_IR_INPLACE_NO:
        break;
    }
    return DL_PASS_INPLACE_NO;
}

static dl_pass_mem_kind kind_of(uint32_t buf_kind) {
    switch (buf_kind) {
    case DLRT_BUF_PARAM:
        return DL_PASS_MEM_PARAM;
    case DLRT_BUF_STATE:
    case DLRT_BUF_PACKED: // persists between infer calls: never shared
        return DL_PASS_MEM_STATE;
    case DLRT_BUF_INPUT:
        return DL_PASS_MEM_INPUT;
    case DLRT_BUF_CONST:
        return DL_PASS_MEM_CONST;
    default:
        DL_ASSERT(buf_kind == DLRT_BUF_TEMP);
        return DL_PASS_MEM_TEMP;
    }
}

dl_status dl_cg__memplan(cg *c, dlrt_plan_buffer *bufs, size_t n_buf, dl_cg_memplan *out) {
    memset(out, 0, sizeof *out);
    const dl_ir_module *m = c->m;
    size_t n_val = m->values.len, nk = c->kernels.len;
    dl_pass_mem_buffer *mb = dl_mem_calloc(n_buf ? n_buf : 1, sizeof *mb);
    dl_pass_mem_kernel *mk = dl_mem_calloc(nk ? nk : 1, sizeof *mk);
    uint32_t *params = dl_mem_calloc(m->params.len ? m->params.len : 1, sizeof *params);
    dl_status st = DL_OK;
    if (!mb || !mk || !params) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t b = 0; b < n_buf; b++) {
        mb[b] = (dl_pass_mem_buffer){.size = bufs[b].size,
                                     .kind = kind_of(bufs[b].kind),
                                     .type = b < n_val ? &m->values.data[b]->type : NULL};
    }
    for (size_t i = 0; i < m->outputs.len; i++) {
        mb[c->value_buf[m->outputs.data[i]->id]].is_pinned = true;
    }
    if (c->has_train && c->loss_buf != UINT32_MAX) {
        mb[c->loss_buf].is_pinned = true;
    }
    for (size_t k = 0; k < nk; k++) {
        const cg_kernel_rec *r = &c->kernels.data[k];
        bool lone = r->node != UINT32_MAX && c->node_k1[r->node] - c->node_k0[r->node] == 1;
        // A fused elementwise group (lower_elem.c) reads every external input of its dims at the
        // element it writes, whatever its root's op; a product with a fused epilogue does not
        // (its A and B).
        dl_pass_mem_inplace ip = !lone || r->n_out != 1 ? DL_PASS_INPLACE_NO
                                 : !r->ops              ? inplace_of(r->op)
                                 : r->ops_elementwise   ? DL_PASS_INPLACE_SAME_DIMS
                                                        : DL_PASS_INPLACE_NO;
        mk[k] = (dl_pass_mem_kernel){.args = &c->args.data[r->first_arg],
                                     .n_args = r->n_args,
                                     .n_out = r->n_out,
                                     .inplace = ip};
    }
    for (size_t i = 0; i < m->params.len; i++) {
        params[i] = c->value_buf[m->params.data[i]->id];
    }
    dl_pass_mem_desc desc = {.bufs = mb,
                             .n_bufs = n_buf,
                             .kernels = mk,
                             .n_kernels = nk,
                             .param_bufs = params,
                             .n_param_bufs = m->params.len,
                             .entry = {c->infer_kernels.data, c->train_kernels.data},
                             .n_entry = {c->infer_kernels.len, c->train_kernels.len},
                             .align = DLRT_BUFFER_ALIGN};
    st = dl_pass_memplan(&desc, &out->arena_size);
    for (size_t b = 0; st == DL_OK && b < n_buf; b++) {
        bufs[b].offset = mb[b].offset;
    }
out:
    free(mb);
    free(mk);
    free(params);
    if (st != DL_OK) {
        dl_cg__memplan_fini(out);
    }
    return st;
}

void dl_cg__memplan_fini(dl_cg_memplan *p) {
    memset(p, 0, sizeof *p);
}
