// codegen/cg_target.c — the target registry: which target the options select, the option check
// every target shares (opt level, the target name), and the public descriptions and cache-key
// part, each asking the selected target (cg_target.h).
//
// The list `dlcc compile --target` shows is `targets` below: x86-64 (the default) and
// cuda[:sm_XX] (the NVPTX target, codegen/nvptx/; "nvptx" with --cpu sm_XX is the same target
// under its LLVM name, what dl_cg_emit_ptx uses).
#include "cg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const x86_levels[] = {"x86-64",    "x86-64-v2", "x86-64-v3",
                                         "x86-64-v4", "native",    NULL};

static const dl_cg_target_info targets[] = {
    {"x86-64", "x86-64 CPUs: an ELF .so that libdlrt runs (default: this machine's CPU)",
     x86_levels, true},
    {"cuda:sm_XX",
     "NVIDIA GPUs, e.g. cuda:sm_90 (cuda: sm_80): PTX in an artifact for a CUDA device", NULL,
     true},
};

const dl_cg_target_info *dl_cg_target_list(size_t *n_out) {
    *n_out = DL_ARRAY_LEN(targets);
    return targets;
}

static bool is_x86_64(const char *name) {
    return !name || !name[0] || strcmp(name, "x86-64") == 0;
}

static bool is_cuda(const char *name) {
    return name && (strcmp(name, "cuda") == 0 || strncmp(name, "cuda:", 5) == 0 ||
                    strcmp(name, "nvptx") == 0);
}

const cg_target *dl_cg__target_of(const dl_cg_options *o) {
    return is_x86_64(o->target) ? &dl_cg__x86_64_target
           : is_cuda(o->target) ? &dl_cg__nvptx_target
                                : NULL;
}

dl_status dl_cg_options_check(const dl_cg_options *o, char *err, size_t err_size) {
    if (o->opt_level < 0 || o->opt_level > 3) {
        snprintf(err, err_size, "optimisation level must be 0..3, got %d", o->opt_level);
        return DL_ERR_INVALID_ARG;
    }
    const cg_target *t = dl_cg__target_of(o);
    if (!t) {
        snprintf(err, err_size, "unknown target '%s' (known: x86-64, cuda:sm_XX)", o->target);
        return DL_ERR_INVALID_ARG;
    }
    return t->options_check(o, err, err_size);
}

void dl_cg_target_describe(const dl_cg_options *o, char *buf, size_t size) {
    dl_cg_options def;
    dl_cg_options_init(&def);
    if (!o) {
        o = &def;
    }
    const cg_target *t = dl_cg__target_of(o);
    if (!t) {
        def.cpu = o->cpu;
        def.features = o->features;
        o = &def;
        t = &dl_cg__x86_64_target;
    }
    t->describe(o, buf, size);
}

char *dl_cg_target_key(const dl_cg_options *o) {
    const cg_target *t = dl_cg__target_of(o);
    DL_ASSERT(t); // the options were checked
    char *part = t->key_part(o);
    if (!part) {
        return NULL;
    }
    size_t n = strlen(t->name) + strlen(part) + 2;
    char *k = dl_mem_alloc(n);
    if (k) {
        snprintf(k, n, "%s\n%s", t->name, part);
    }
    free(part);
    return k;
}
