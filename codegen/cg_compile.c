// codegen/cg_compile.c — the compile driver, the same for every target (cg_target.h): one LLVM
// context and module per compilation; the target machine; every node lowered in order through
// the target's lower_node, the train step built (lower_train.c), the plan blob built (plan.c),
// the target's finishing touches, the module verified and optimised (LLVM's default<On>
// pipeline), then the target packages it (x86-64: object code linked into an ELF shared object,
// then the checksum trailer; NVPTX: PTX text).
//
// Determinism: nothing here depends on addresses, time or paths; the module's source file name
// is fixed.
#include "cg_internal.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dl_cg_options_init(dl_cg_options *o) {
    memset(o, 0, sizeof *o);
    o->opt_level = 3;
}

const char *dl_cg_llvm_version(void) {
    static char buf[32];
    unsigned maj, min, pat;
    LLVMGetVersion(&maj, &min, &pat);
    snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, pat);
    return buf;
}

// Appends the checksum trailer (runtime/dlrt_format.h) to the linked object in *out.
static dl_status append_trailer(uint8_t **out, size_t *len) {
    size_t n = *len + sizeof(dlrt_artifact_trailer);
    uint8_t *p = dl_mem_realloc(*out, n);
    if (!p) {
        free(*out);
        *out = NULL;
        *len = 0;
        return DL_ERR_NOMEM;
    }
    dlrt_artifact_trailer t;
    memset(&t, 0, sizeof t);
    memcpy(t.magic, DLRT_TRAILER_MAGIC, sizeof t.magic);
    t.version = DLRT_FORMAT_VERSION;
    t.size = n;
    memcpy(p + *len, &t, sizeof t);
    dl_hash128 h = dl_hash128_of(p, n - 16);
    t.hash_lo = h.lo;
    t.hash_hi = h.hi;
    memcpy(p + *len, &t, sizeof t);
    *out = p;
    *len = n;
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// The driver

static dl_status memplan_cb(void *ctx, dlrt_plan_buffer *bufs, size_t n_buf,
                            uint64_t *out_arena_size) {
    dl_cg_memplan mp = {0};
    dl_status st = dl_cg__memplan(ctx, bufs, n_buf, &mp);
    *out_arena_size = mp.arena_size;
    dl_cg__memplan_fini(&mp);
    return st;
}

// The plan blob of the lowered module (plan.c reads the records, never LLVM objects).
static dl_status plan_build(cg *c, const char *target, uint8_t **out, size_t *out_len) {
    // The kernels' symbol names (LLVM keeps value names NUL-terminated), for the plan's kernel
    // table: what a device looks kernels up by.
    cg_cstr *fn_names = dl_mem_alloc((c->fns.len ? c->fns.len : 1) * sizeof *fn_names);
    if (!fn_names) {
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < c->fns.len; i++) {
        size_t len = 0;
        fn_names[i] = LLVMGetValueName2(c->fns.data[i], &len);
    }
    cg_plan_in in = {
        .m = c->m,
        .d = c->d,
        .target = target,
        .device = c->target->index_model == CG_INDEX_GPU_GRID ? DLRT_PLAN_DEVICE_CUDA
                                                              : DLRT_PLAN_DEVICE_CPU,
        .value_buf = c->value_buf,
        .n_fns = c->fns.len,
        .fn_names = {fn_names, c->fns.len},
        .kernels = {c->kernels.data, c->kernels.len},
        .args = {c->args.data, c->args.len},
        .infer_kernels = {c->infer_kernels.data, c->infer_kernels.len},
        .train_kernels = {c->train_kernels.data, c->train_kernels.len},
        .extra = {c->extra.data, c->extra.len},
        .states = {c->states.data, c->states.len},
        .hparams = {c->hparams.data, c->hparams.len},
        .hparam_names = {c->hparam_names.data, c->hparam_names.len},
        .has_train = c->has_train,
        .optimizer = c->optimizer,
        .hyper_buf = c->hyper_buf,
        .loss_buf = c->loss_buf,
        .seed_buf = c->seed_buf,
        .counter_buf = c->counter_buf,
        .seed_init = c->seed_init,
        .comm_grads = {c->comm_grads.data, c->comm_grads.len},
        .comm_at = c->comm_at,
        .isa = (c->isa & ~(uint32_t)DLRT_ISA_ON_USE) | c->isa_used,
        .memplan = memplan_cb,
        .memplan_ctx = c,
    };
    dl_status st = dl_cg__plan_build(&in, out, out_len);
    free(fn_names);
    return st;
}

static void cg_fini(cg *c) {
    if (c->b) {
        LLVMDisposeBuilder(c->b);
    }
    if (c->mod) {
        LLVMDisposeModule(c->mod);
    }
    if (c->tm) {
        LLVMDisposeTargetMachine(c->tm);
    }
    if (c->ctx) {
        LLVMContextDispose(c->ctx);
    }
    free(c->value_buf);
    free(c->tr_fold);
    free(c->cast_pp);
    free(c->fns.data);
    free(c->kernels.data);
    free(c->args.data);
    free(c->infer_kernels.data);
    free(c->train_kernels.data);
    free(c->node_k0);
    free(c->node_k1);
    free(c->gv_defer);
    for (size_t i = 0; i < c->strs.len; i++) {
        free(c->strs.data[i]);
    }
    free(c->strs.data);
    for (size_t i = 0; i < c->extra.len; i++) {
        free(c->extra.data[i].init);
    }
    free(c->extra.data);
    for (size_t i = 0; i < c->states.len; i++) {
        free(c->states.data[i].name);
    }
    free(c->states.data);
    free(c->hparams.data);
    free(c->hparam_names.data);
    free(c->seed_init);
    free(c->comm_grads.data);
}

// A fresh compilation state for target t: its LLVM context, module, builder and common types.
static void cg_init(cg *c, const dl_ir_module *m, dl_diags *d, const cg_target *t) {
    memset(c, 0, sizeof *c);
    c->m = m;
    c->d = d;
    c->target = t;
    c->ctx = LLVMContextCreate();
    c->mod = LLVMModuleCreateWithNameInContext("dlcc", c->ctx);
    LLVMSetSourceFileName(c->mod, "dlcc", 4);
    c->b = LLVMCreateBuilderInContext(c->ctx);
    c->t_void = LLVMVoidTypeInContext(c->ctx);
    c->t_i1 = LLVMInt1TypeInContext(c->ctx);
    c->t_i8 = LLVMInt8TypeInContext(c->ctx);
    c->t_i16 = LLVMInt16TypeInContext(c->ctx);
    c->t_i32 = LLVMInt32TypeInContext(c->ctx);
    c->t_i64 = LLVMInt64TypeInContext(c->ctx);
    c->t_f16 = LLVMHalfTypeInContext(c->ctx);
    c->t_f32 = LLVMFloatTypeInContext(c->ctx);
    c->t_f64 = LLVMDoubleTypeInContext(c->ctx);
    c->t_ptr = LLVMPointerTypeInContext(c->ctx, 0);
    LLVMTypeRef kps[3] = {c->t_ptr, c->t_i64, c->t_i64};
    c->t_kernel = LLVMFunctionType(c->t_void, kps, 3, 0);
}

// Adds the device image to the end of the plan blob (64-byte aligned, as dlrt_format.h wants it)
// and records it in the header.
static dl_status plan_attach_image(uint8_t **plan, size_t *plan_len, uint32_t kind,
                                   const uint8_t *image, size_t image_len) {
    size_t off = (*plan_len + 63) & ~(size_t)63, n = off + image_len;
    uint8_t *p = dl_mem_realloc(*plan, n);
    if (!p) {
        return DL_ERR_NOMEM;
    }
    memset(p + *plan_len, 0, off - *plan_len);
    memcpy(p + off, image, image_len);
    dlrt_plan_hdr h;
    memcpy(&h, p, sizeof h);
    h.image_kind = kind;
    h.off_image = off;
    h.size_image = image_len;
    h.total_size = n;
    memcpy(p, &h, sizeof h);
    *plan = p;
    *plan_len = n;
    return DL_OK;
}

// A device target's artifact: the plan with the device image in it, in a host container made by
// the x86-64 target (an ELF shared object exporting the descriptor, with no kernel table: the
// kernels are in the image) and the checksum trailer. The host part is generic x86-64 code (no
// instructions at all), so the artifact loads on any x86-64 host.
static dl_status package_device_artifact(const cg *dev, const dl_cg_options *o, uint8_t **plan,
                                         size_t *plan_len, const uint8_t *image, size_t image_len,
                                         uint8_t **out, size_t *out_len) {
    // The image: PTX text with its NUL (the driver's loader wants a C string).
    dl_status st = plan_attach_image(plan, plan_len, DLRT_IMAGE_PTX, image, image_len + 1);
    if (st != DL_OK) {
        return st;
    }
    cg h;
    cg_init(&h, dev->m, dev->d, &dl_cg__x86_64_target);
    dl_cg_options ho;
    dl_cg_options_init(&ho);
    ho.cpu = "x86-64";
    ho.opt_level = o->opt_level;
    if ((st = h.target->make_machine(&h, &ho)) == DL_OK &&
        (st = h.target->finish_module(&h, *plan, *plan_len)) == DL_OK &&
        (st = h.target->package(&h, &ho, out, out_len)) == DL_OK) {
        st = append_trailer(out, out_len);
    }
    cg_fini(&h);
    return st;
}

// The Transposes folded into product node x (dl_cg__transpose_folds) that no earlier kernel
// named, as "Transpose+" each, into `ops`; they are marked named (c->tr_fold 2), so each is
// counted once, in the first product that reads it.
static size_t name_folded(cg *c, const dl_ir_node *x, dl_strbuf *ops) {
    size_t n = 0;
    for (size_t a = 0; c->tr_fold && x->op == DL_IR_OP_MATMUL && a < x->n_inputs; a++) {
        for (const dl_ir_value *v = x->inputs[a]; v && v->def && c->tr_fold[v->def->id];
             v = v->def->inputs[0]) {
            if (c->tr_fold[v->def->id] == 1) {
                c->tr_fold[v->def->id] = 2;
                dl_strbuf_printf(ops, "Transpose+");
                n++;
            }
        }
    }
    return n;
}

// Lowers node `r` (c->node): through the target's hook, or, as the root of a fusion group,
// the group's nodes (in order, `r` last) as one kernel named by their ops joined by '+': a map
// over the elements, or a product (Gemm, MatMul, Conv) with the others as its epilogue. A
// product that reads folded Transposes is named with them too ("Transpose+MatMul").
static dl_status lower_group(cg *c, size_t r) {
    const dl_ir_module *m = c->m;
    const dl_ir_node *root = m->nodes.data[r];
    size_t n = 0;
    for (size_t i = 0; i < r; i++) {
        n += m->nodes.data[i]->fuse_root == root;
    }
    dl_strbuf ops = {0};
    if (n == 0 && name_folded(c, root, &ops) == 0) {
        return c->target->lower_node(c, root);
    }
    const dl_ir_node **g = dl_mem_alloc((n + 1) * sizeof *g);
    if (!g) {
        dl_strbuf_fini(&ops);
        return DL_ERR_NOMEM;
    }
    n = 0;
    size_t head = SIZE_MAX; // the group's product, convolution or MaxPoolGrad (at most one)
    for (size_t i = 0; i <= r; i++) {
        const dl_ir_node *x = m->nodes.data[i];
        if (x == root || x->fuse_root == root) {
            if (x->op == DL_IR_OP_GEMM || x->op == DL_IR_OP_MATMUL || x->op == DL_IR_OP_CONV ||
                x->op == DL_IR_OP_MAX_POOL_GRAD) {
                head = n;
            }
            g[n++] = x;
        }
    }
    // The head goes first (the lowerings take g[0] for it): members before it in node order
    // (a residual's Neg computed ahead of the Conv) read nothing it makes, so they may follow it.
    if (head != SIZE_MAX && head > 0) {
        const dl_ir_node *h = g[head];
        memmove(g + 1, g, head * sizeof *g);
        g[0] = h;
    }
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && g[0] != root) {
            (void)name_folded(c, g[0], &ops);
        }
        dl_strbuf_printf(&ops, "%s%s", i > 0 ? "+" : "", dl_ir_op_get_info(g[i]->op)->name);
    }
    dl_status st = ops.oom || !DL_VEC_PUSH(&c->strs, ops.data) ? DL_ERR_NOMEM : DL_OK;
    if (st != DL_OK) {
        dl_strbuf_fini(&ops);
    } else if (n == 1) { // a product alone, named with the Transposes it reads
        c->node_ops = ops.data;
        c->node_ops_elementwise = false;
        st = c->target->lower_node(c, root);
        c->node_ops = NULL;
    } else {
        c->node_ops = ops.data;
        c->node_ops_elementwise = head == SIZE_MAX;
        c->node_first = g[0];
        st = c->node_ops_elementwise              ? dl_cg__lower_fused(c, g, n)
             : g[0]->op == DL_IR_OP_CONV          ? dl_cg__lower_conv_fused(c, g, n)
             : g[0]->op == DL_IR_OP_MAX_POOL_GRAD ? dl_cg__lower_pool_grad_fused(c, g, n)
                                                  : dl_cg__lower_product_fused(c, g, n);
        c->node_ops = NULL;
        c->node_first = NULL;
    }
    free(g);
    return st;
}

// Compiles `m` for target `t` with checked options `o`: lowering, plan, finish, verify,
// optimise, package; for a device-image target, the artifact around the image unless
// `image_only` (dl_cg_emit_ptx: the PTX text alone).
static dl_status compile(const cg_target *t, const dl_ir_module *m, const dl_cg_options *o,
                         bool image_only, dl_diags *d, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    for (size_t i = 0; i < m->values.len; i++) {
        if (m->values.data[i]->type.rank < 0) {
            dl_diag(d, DL_SEV_ERROR, m->values.data[i]->loc,
                    "codegen: the type of '%s' is unknown (run shape inference first)",
                    m->values.data[i]->name);
            return DL_ERR_INVALID_ARG;
        }
    }
    cg c;
    cg_init(&c, m, d, t);
    dl_status st = t->make_machine(&c, o);
    uint8_t *plan = NULL;
    size_t plan_len = 0;
    if (st != DL_OK) {
        goto out;
    }
    c.value_buf = dl_mem_calloc(m->values.len ? m->values.len : 1, sizeof(uint32_t));
    if (!c.value_buf) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < m->values.len; i++) {
        c.value_buf[i] = (uint32_t)i; // one buffer per value; memplan.c places them
    }
    c.hyper_buf = c.loss_buf = c.seed_buf = c.counter_buf = UINT32_MAX;
    c.optimizer = DLRT_OPTIM_NONE;
    c.node_k0 = dl_mem_calloc(m->nodes.len ? m->nodes.len : 1, sizeof(uint32_t));
    c.node_k1 = dl_mem_calloc(m->nodes.len ? m->nodes.len : 1, sizeof(uint32_t));
    if (!c.node_k0 || !c.node_k1) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    // Every node is lowered once. Forward nodes [0, n_fwd) make the infer entry; the train step
    // (lower_train.c) reuses the LLVM functions of the forward nodes it needs.
    // A fusion group (passes/fusion.c) is lowered at its root as one kernel; its other members
    // get none (an empty kernel range).
    // A Transpose folded into the products that read it (dl_cg__transpose_folds) gets none
    // either.
    size_t n_fwd = m->has_backward ? m->n_fwd_nodes : m->nodes.len;
    if ((st = dl_cg__transpose_folds(&c)) != DL_OK) {
        goto out;
    }
    if (!o->no_prepack && (st = dl_cg__cast_prepacks(&c, n_fwd)) != DL_OK) {
        goto out;
    }
    for (size_t i = 0; i < m->nodes.len && st == DL_OK; i++) {
        c.node = m->nodes.data[i];
        DL_ASSERT(c.node->id == i);
        c.node_k0[i] = (uint32_t)c.kernels.len;
        c.prepack = !o->no_prepack && i < n_fwd;
        if (!c.node->fuse_root && !(c.tr_fold && c.tr_fold[i]) &&
            !(c.cast_pp && c.cast_pp[i] == 2)) {
            st = lower_group(&c, i);
        }
        // A lowering that guards kernels (cg_finite_check) clears the guard when it is done;
        // one that failed may have left it set.
        DL_ASSERT(st != DL_OK || c.guard.n == 0);
        c.guard = (cg_guard){0};
        c.node_k1[i] = (uint32_t)c.kernels.len;
        // A weight's Cast that the products' prepack kernels round (dl_cg__cast_prepacks): the
        // train step's forward only
        for (uint32_t k = c.node_k0[i]; c.cast_pp && c.cast_pp[i] == 1 && k < c.node_k1[i]; k++) {
            c.kernels.data[k].only = CG_ENTRY_TRAIN;
        }
        for (uint32_t k = c.node_k0[i]; st == DL_OK && i < n_fwd && k < c.node_k1[i]; k++) {
            if (c.kernels.data[k].only != CG_ENTRY_TRAIN && !DL_VEC_PUSH(&c.infer_kernels, k)) {
                st = DL_ERR_NOMEM;
            }
        }
    }
    c.node = NULL;
    c.prepack = false;
    if (st == DL_OK && c.gv_defer) { // the reader that was to apply it never came
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                "internal error: a product's epilogue was deferred "
                "to a reader that was not lowered");
        st = DL_ERR_BACKEND;
    }
    if (st == DL_OK && m->has_backward && m->train) {
        st = dl_cg__lower_train(&c);
    }
    if (st != DL_OK) {
        goto out;
    }
    char target[256];
    t->describe(o, target, sizeof target);
    if ((st = plan_build(&c, target, &plan, &plan_len)) != DL_OK) {
        goto out;
    }
    if ((st = t->finish_module(&c, plan, plan_len)) != DL_OK) {
        goto out;
    }
    char *err = NULL;
    if (LLVMVerifyModule(c.mod, LLVMReturnStatusAction, &err)) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "internal error: invalid LLVM IR: %s", err);
        LLVMDisposeMessage(err);
        st = DL_ERR_BACKEND;
        goto out;
    }
    LLVMDisposeMessage(err);
    char passes[32];
    snprintf(passes, sizeof passes, "default<O%d>",
             o->opt_level < 0   ? 0
             : o->opt_level > 3 ? 3
                                : o->opt_level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, o->opt_level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(po, o->opt_level >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, o->opt_level >= 2);
    LLVMErrorRef perr = LLVMRunPasses(c.mod, passes, c.tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (perr) {
        char *msg = LLVMGetErrorMessage(perr);
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "llvm: optimisation failed: %s", msg);
        LLVMDisposeErrorMessage(msg);
        st = DL_ERR_BACKEND;
        goto out;
    }
    st = t->package(&c, o, out, out_len);
    if (st == DL_OK && t->packaging == CG_PACKAGE_ELF_SO) {
        st = append_trailer(out, out_len);
    } else if (st == DL_OK && !image_only) {
        uint8_t *image = *out;
        size_t image_len = *out_len;
        *out = NULL;
        *out_len = 0;
        st = package_device_artifact(&c, o, &plan, &plan_len, image, image_len, out, out_len);
        free(image);
    }
out:
    free(plan);
    cg_fini(&c);
    return st;
}

dl_status dl_cg_compile(const dl_ir_module *m, const dl_cg_options *o, dl_diags *d, uint8_t **out,
                        size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    dl_cg_options def;
    if (!o) {
        dl_cg_options_init(&def);
        o = &def;
    }
    char oerr[256];
    dl_status st = dl_cg_options_check(o, oerr, sizeof oerr);
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", oerr);
        return st;
    }
    return compile(dl_cg__target_of(o), m, o, false, d, out, out_len);
}

dl_status dl_cg_emit_ptx(const dl_ir_module *m, const char *sm, dl_diags *d, char **out,
                         size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    dl_cg_options o;
    dl_cg_options_init(&o);
    o.target = "nvptx";
    o.cpu = sm ? sm : "sm_80";
    char oerr[256];
    dl_status st = dl_cg__nvptx_target.options_check(&o, oerr, sizeof oerr);
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", oerr);
        return st;
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    st = compile(&dl_cg__nvptx_target, m, &o, true, d, &bytes, &len);
    *out = (char *)bytes;
    *out_len = len;
    return st;
}
