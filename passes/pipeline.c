// passes/pipeline.c — THE pass pipeline: one array, in order, that is the compiler's middle end.
// The driver, `dlcc compile` and `dlcc check` all run it (QBE's main loop, with its -d dumps and
// its ssacheck after each pass).
//
// `pipeline[]` below lists every pass with what it does; dl_pass_id (dl_pass.h) follows it
// (ORDER PASSES). A pass either rewrites the module (`run`) or belongs to the back end
// (`in_backend`): the memory plan and the schedule work on lowered kernels and buffers that
// exist only once codegen has lowered the module, so the pipeline hands the module to the
// back-end hook when it reaches the first of them and that hook runs both (codegen builds the
// neutral description and calls dl_pass_memplan, then orders the kernels). Without a hook
// (`dlcc check`) the pipeline stops before them.
//
// Invariants: after each pass that ran, dl_ir_verify holds (checked without NDEBUG, or with
// verify_each); a dump is dl_ir_print's text, so it parses back.
#include "dl_pass.h"

#include <stdlib.h>
#include <string.h>

typedef struct pass_def {
    const char *name;                               // as --dump-after spells it
    const char *what;                               // one line, printed in the dump's header
    dl_status (*run)(dl_ir_module *m, dl_diags *d); // NULL: a back-end pass
    bool in_backend;
} pass_def;

static dl_status run_shapes(dl_ir_module *m, dl_diags *d) {
    return dl_pass_shape(m, d);
}

// The training graph is derived once; a module that has it (a dump parsed back has no
// has_backward: its gradient nodes are plain nodes then) or no train block is left alone.
static dl_status run_autodiff(dl_ir_module *m, dl_diags *d) {
    if (!m->train || m->has_backward) {
        return DL_OK;
    }
    return dl_pass_autodiff(m, d);
}

// After autodiff: the forward and backward products are rewritten alike (docs/precision.md).
static dl_status run_precision(dl_ir_module *m, dl_diags *d) {
    if (!m->train || !m->train->has_precision || m->train->precision == DL_DT_FLOAT) {
        return DL_OK;
    }
    return dl_pass_precision(m, m->train->precision, d, NULL);
}

static dl_status run_simplify(dl_ir_module *m, dl_diags *d) {
    return dl_pass_simplify(m, d, NULL);
}

static dl_status run_fusion(dl_ir_module *m, dl_diags *d) {
    return dl_pass_fusion(m, d, NULL);
}

// ORDER PASSES: same order as dl_pass_id.
static const pass_def pipeline[] = {
    {"shapes", "shape and type inference", run_shapes, false},
    {"autodiff", "reverse-mode autodiff: the train step's graph", run_autodiff, false},
    {"precision", "mixed precision: autocast of matrix products", run_precision, false},
    {"simplify", "identity forwarding, CSE of pure nodes, dead node elimination", run_simplify,
     false},
    {"fusion", "operator fusion: elementwise groups, one kernel each", run_fusion, false},
    {"memplan", "memory plan over the lowered kernels, in the back end; the IR is unchanged", NULL,
     true},
    {"schedule", "kernel dependencies, in the back end; the IR is unchanged", NULL, true},
};
_Static_assert(sizeof pipeline / sizeof pipeline[0] == DL_PASS_COUNT, "ORDER PASSES");

const char *dl_pass_name(dl_pass_id p) {
    return (unsigned)p < DL_PASS_COUNT ? pipeline[p].name : "?";
}

bool dl_pass_from_name(const char *name, dl_pass_id *out) {
    for (size_t i = 0; i < DL_PASS_COUNT; i++) {
        if (strcmp(name, pipeline[i].name) == 0) {
            *out = (dl_pass_id)i;
            return true;
        }
    }
    return false;
}

const char *dl_pass_names(void) {
    return "shapes, autodiff, precision, simplify, fusion, memplan, schedule";
}

void dl_pass_pipeline_opts_init(dl_pass_pipeline_opts *o) {
    memset(o, 0, sizeof *o);
    o->dump_after = -1;
}

static bool wants_dump(const dl_pass_pipeline_opts *o, size_t p) {
    return o && o->dump && (o->dump_all || o->dump_after == (int)p);
}

// "# dlcc: IR after PASS (WHAT)\n", once the training graph exists a comment naming its roots
// (the text has no syntax for them), and the module's text.
static dl_status dump(const dl_ir_module *m, const dl_pass_pipeline_opts *o, size_t p) {
    char *text = NULL;
    DL_TRY(dl_ir_print(m, &text));
    dl_strbuf b = {0};
    dl_strbuf_printf(&b, "# dlcc: IR after %s (%s)\n", pipeline[p].name, pipeline[p].what);
    if (m->has_backward) {
        dl_strbuf_printf(
            &b, "# train step: loss %s; gradients:", m->train_loss ? m->train_loss->name : "?");
        const char *sep = " ";
        for (size_t i = 0; i < m->params.len && i < m->grads.len; i++) {
            if (m->grads.data[i]) {
                dl_strbuf_printf(&b, "%s%s: %s", sep, m->params.data[i]->name,
                                 m->grads.data[i]->name);
                sep = ", ";
            }
        }
        for (size_t i = 0; i < m->assigns.len; i++) {
            dl_strbuf_printf(&b, "%s %s := %s",
                             i ? "," : "; assigns:", m->assigns.data[i].param->name,
                             m->assigns.data[i].value->name);
        }
        dl_strbuf_printf(&b, "\n");
    }
    dl_pass_fusion_describe(m, &b); // the groups (none before the fusion pass has run)
    dl_strbuf_append(&b, text, strlen(text));
    free(text);
    if (b.oom) {
        dl_strbuf_fini(&b);
        return DL_ERR_NOMEM;
    }
    o->dump(o->dump_ctx, (dl_pass_id)p, b.data);
    dl_strbuf_fini(&b);
    return DL_OK;
}

static bool verify_on(const dl_pass_pipeline_opts *o) {
#ifdef NDEBUG
    return o && o->verify_each;
#else
    (void)o;
    return true;
#endif
}

dl_status dl_pass_pipeline_run(dl_ir_module *m, dl_pass_id first, dl_pass_id last,
                               const dl_pass_pipeline_opts *o, dl_diags *d) {
    bool backend_done = false;
    for (size_t p = (size_t)first; p <= (size_t)last && p < DL_PASS_COUNT; p++) {
        const pass_def *pd = &pipeline[p];
        if (pd->in_backend) {
            if (!o || !o->backend) {
                break; // nothing lowered: the back-end passes have nothing to work on
            }
            if (!backend_done) {
                DL_TRY(o->backend(o->backend_ctx, m, d));
                backend_done = true;
            }
        } else if (p == DL_PASS_FUSION && o && o->no_fusion) {
            for (size_t i = 0; i < m->nodes.len; i++) {
                m->nodes.data[i]->fuse_root = NULL;
            }
        } else {
            DL_TRY(pd->run(m, d));
            if (verify_on(o) && dl_ir_verify(m, d) != DL_OK) {
                dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                        "internal error: the IR after pass '%s' does not verify", pd->name);
                return DL_ERR_BACKEND;
            }
        }
        if (wants_dump(o, p)) {
            DL_TRY(dump(m, o, p));
        }
    }
    return DL_OK;
}
