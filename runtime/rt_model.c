// runtime/rt_model.c — loading artifacts: dlopen (from a file, or from memory through an
// anonymous memfd so nothing touches the disk), the exported descriptor, and validation of the
// plan. The plan is untrusted input: every count, offset, id and size is checked here, once, so
// sessions and steps can index without checks. Format 5 (dlrt_format.h) adds what a device needs
// to find and launch kernels: the plan's device kind, a device image section, kernel symbol
// names (non-empty, unique) and launch data, each checked against the device kind; and op names
// as strings, which the runtime only shows. Format 8's prepacked weights (PACKED buffers and the
// prepack kernels that fill them) are held to the rules that let a session skip those kernels
// (validate_kernels). Any other format version is refused with a message that says to
// recompile.
#define _GNU_SOURCE // memfd_create
#include "dl_base.h"
#include "rt_internal.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Thread_local char last_error[1024];

dlrt_status rt__fail(dlrt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

const char *dlrt_last_error(void) {
    return last_error;
}

size_t rt__dtype_size(uint32_t dtype) {
    static const size_t sizes[DLRT_DT_COUNT] = {4, 2, 2, 4, 8, 1};
    return dtype < DLRT_DT_COUNT ? sizes[dtype] : 0;
}

// a + b <= limit without overflow.
static bool fits(uint64_t a, uint64_t b, uint64_t limit) {
    return a <= limit && b <= limit - a;
}

static bool table_ok(const dlrt_plan_hdr *h, uint64_t off, uint64_t n, uint64_t elem) {
    if (n != 0 && elem > UINT64_MAX / n) {
        return false;
    }
    return off % 8 == 0 && fits(off, n * elem, h->total_size);
}

static dlrt_status corrupt(const char *what) {
    return rt__fail(DLRT_ERR_CORRUPT, "corrupt artifact: %s", what);
}

// A name of the strings table: inside it, non-empty unless `empty_ok`, and free of NUL bytes
// (names are copied into C strings; an embedded NUL would make two names look alike).
static bool name_ok(const dlrt_plan_hdr *h, const char *strings, uint64_t off, uint64_t len,
                    bool empty_ok) {
    return (len > 0 || empty_ok) && fits(off, len, h->size_strings) &&
           memchr(strings + off, 0, (size_t)len) == NULL;
}

// The message for an artifact of another format version (`what` names it, e.g. "the artifact").
static dlrt_status wrong_version(const char *what, uint32_t version) {
    return rt__fail(DLRT_ERR_UNSUPPORTED,
                    "%s has format version %u; this runtime reads version %u: recompile it with "
                    "this dlcc (dlcc compile; the compilation cache recompiles by itself, its key "
                    "includes the format)",
                    what, version, DLRT_FORMAT_VERSION);
}

// AMX from CPUID leaf 7 (EDX bit 24: the tile registers, bit 22: tdpbf16ps). Whether the OS
// lets this process use them is amx_permit's question.
static int cpu_has_amx(uint32_t bit) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        return 0;
    }
    return bit == DLRT_ISA_AMXTILE ? (d >> 24) & 1 : (d >> 22) & 1;
}

// Linux hands a process the AMX tile state (8 KiB more per thread's saved state) only when it
// asks (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16); the first tile instruction of a process
// that did not ask dies of SIGILL. The permission is the process's, for all its threads, and
// asking again is harmless.
#define DLRT_ARCH_REQ_XCOMP_PERM 0x1023
#define DLRT_XFEATURE_XTILEDATA  18

static dlrt_status amx_permit(const char *target, size_t target_len) {
    if (syscall(SYS_arch_prctl, DLRT_ARCH_REQ_XCOMP_PERM, DLRT_XFEATURE_XTILEDATA) != 0) {
        int e = errno;
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "the artifact was compiled for %.*s and uses AMX tiles, which the kernel "
                        "does not grant this process (arch_prctl ARCH_REQ_XCOMP_PERM: %s; Linux "
                        "5.16 or later is needed); recompile it with --cpu and --features that "
                        "leave out amx-tile",
                        (int)target_len, target, strerror(e));
    }
    return DLRT_OK;
}

// Refuses an artifact whose code needs instructions this CPU lacks (it would die of SIGILL).
static dlrt_status check_isa(const dlrt_plan_hdr *h, const char *target, size_t target_len) {
    static const struct isa_name {
        uint32_t bit;
        const char *name;
    } isas[] = {
        {DLRT_ISA_AVX, "avx"},           {DLRT_ISA_AVX2, "avx2"},
        {DLRT_ISA_FMA, "fma"},           {DLRT_ISA_F16C, "f16c"},
        {DLRT_ISA_AVX512F, "avx512f"},   {DLRT_ISA_AVX512BW, "avx512bw"},
        {DLRT_ISA_AVX512DQ, "avx512dq"}, {DLRT_ISA_AVX512VL, "avx512vl"},
        {DLRT_ISA_BMI2, "bmi2"},         {DLRT_ISA_AVX512BF16, "avx512bf16"},
        {DLRT_ISA_AMXTILE, "amx-tile"},  {DLRT_ISA_AMXBF16, "amx-bf16"},
    };
    const struct isa_name *p;
    if (h->isa & ~(uint32_t)DLRT_ISA_KNOWN) {
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "the artifact was compiled for %.*s and uses instruction-set extensions "
                        "this runtime does not know (isa bits 0x%x); use the libdlrt of the dlcc "
                        "that compiled it",
                        (int)target_len, target, h->isa & ~(uint32_t)DLRT_ISA_KNOWN);
    }
    __builtin_cpu_init();
    for (p = isas; p < isas + sizeof isas / sizeof isas[0]; p++) {
        if (!(h->isa & p->bit)) {
            continue;
        }
        // __builtin_cpu_supports needs a string literal, hence the explicit switch.
        int have = 0;
        switch (p->bit) {
        case DLRT_ISA_AVX:
            have = __builtin_cpu_supports("avx");
            break;
        case DLRT_ISA_AVX2:
            have = __builtin_cpu_supports("avx2");
            break;
        case DLRT_ISA_FMA:
            have = __builtin_cpu_supports("fma");
            break;
        case DLRT_ISA_F16C:
            have = __builtin_cpu_supports("f16c");
            break;
        case DLRT_ISA_AVX512F:
            have = __builtin_cpu_supports("avx512f");
            break;
        case DLRT_ISA_AVX512BW:
            have = __builtin_cpu_supports("avx512bw");
            break;
        case DLRT_ISA_AVX512DQ:
            have = __builtin_cpu_supports("avx512dq");
            break;
        case DLRT_ISA_AVX512VL:
            have = __builtin_cpu_supports("avx512vl");
            break;
        case DLRT_ISA_BMI2:
            have = __builtin_cpu_supports("bmi2");
            break;
        case DLRT_ISA_AVX512BF16:
            have = __builtin_cpu_supports("avx512bf16");
            break;
        case DLRT_ISA_AMXTILE:
        case DLRT_ISA_AMXBF16:
            have = cpu_has_amx(p->bit);
            break;
        default:
            break;
        }
        if (!have) {
            return rt__fail(DLRT_ERR_UNSUPPORTED,
                            "the artifact was compiled for %.*s and uses %s, which this CPU lacks; "
                            "recompile it on this machine (or with --cpu/--features it supports)",
                            (int)target_len, target, p->name);
        }
    }
    if (h->isa & DLRT_ISA_AMXTILE) {
        return amx_permit(target, target_len);
    }
    return DLRT_OK;
}

static bool is_buffer(const dlrt_model *m, uint32_t b, uint32_t kind, uint64_t size) {
    return b < m->hdr->n_buffers && m->buffers[b].kind == kind && m->buffers[b].size == size;
}

// Format 2: the train step's header fields and the hparam table (after the tables are set).
static dlrt_status validate_train(dlrt_model *m) {
    const dlrt_plan_hdr *h = m->hdr;
    if (!table_ok(h, h->off_hparams, h->n_hparams, sizeof(dlrt_plan_hparam))) {
        return corrupt("the hparam table lies outside the plan");
    }
    m->hparams = (const dlrt_plan_hparam *)(m->plan + h->off_hparams);
    if (h->entry_count[DLRT_ENTRY_TRAIN_STEP] == 0) {
        if (h->n_hparams != 0 || h->hyper_buffer != UINT32_MAX || h->counter_buffer != UINT32_MAX) {
            return corrupt("train step state without a train step");
        }
        return DLRT_OK;
    }
    if (h->optimizer > DLRT_OPTIM_RMSPROP) {
        return corrupt("unknown optimizer");
    }
    if (!is_buffer(m, h->hyper_buffer, DLRT_BUF_STATE, DLRT_HP_COUNT * sizeof(double))) {
        return corrupt("bad hyper-parameter buffer");
    }
    if (h->loss_buffer >= h->n_buffers ||
        (m->buffers[h->loss_buffer].size != 4 && m->buffers[h->loss_buffer].size != 2)) {
        return corrupt("bad loss buffer");
    }
    if (h->seed_buffer != UINT32_MAX &&
        !is_buffer(m, h->seed_buffer, DLRT_BUF_STATE, sizeof(float))) {
        return corrupt("bad loss seed buffer");
    }
    if (h->counter_buffer != UINT32_MAX &&
        !is_buffer(m, h->counter_buffer, DLRT_BUF_STATE, sizeof(int64_t))) {
        return corrupt("bad rng counter buffer");
    }
    for (uint32_t i = 0; i < h->n_hparams; i++) {
        const dlrt_plan_hparam *p = &m->hparams[i];
        if (p->index >= DLRT_HP_COUNT ||
            (p->flags & ~(uint32_t)(DLRT_HPF_SETTABLE | DLRT_HPF_STATE | DLRT_HPF_OUTPUT)) != 0 ||
            !name_ok(h, m->strings, p->name_off, p->name_len, false)) {
            return corrupt("bad hparam record");
        }
    }
    return DLRT_OK;
}

// Format 6: the data-parallel all-reduce point. Each record names a distinct buffer of its
// dtype's size times numel (a gradient TEMP buffer, or with accumulation a STATE accumulator)
// and a param; comm_at lies inside the train entry. Nothing without a train step.
static dlrt_status validate_grads(dlrt_model *m) {
    const dlrt_plan_hdr *h = m->hdr;
    if (h->reserved6 != 0 || !table_ok(h, h->off_grads, h->n_grads, sizeof(dlrt_plan_grad))) {
        return corrupt("the gradient table lies outside the plan");
    }
    m->grads = (const dlrt_plan_grad *)(m->plan + h->off_grads);
    if (h->comm_at > h->entry_count[DLRT_ENTRY_TRAIN_STEP] || h->n_grads > m->n_params ||
        (h->entry_count[DLRT_ENTRY_TRAIN_STEP] == 0 && h->n_grads != 0)) {
        return corrupt("bad all-reduce point");
    }
    for (uint32_t i = 0; i < h->n_grads; i++) {
        const dlrt_plan_grad *g = &m->grads[i];
        if (g->buffer >= h->n_buffers || g->param >= m->n_params || g->dtype >= DLRT_DT_COUNT ||
            g->reserved != 0 || g->numel > (UINT64_C(1) << 48) ||
            g->numel * rt__dtype_size(g->dtype) != m->buffers[g->buffer].size ||
            (m->buffers[g->buffer].kind != DLRT_BUF_TEMP &&
             m->buffers[g->buffer].kind != DLRT_BUF_STATE)) {
            return corrupt("bad gradient record");
        }
        for (uint32_t j = 0; j < i; j++) {
            if (m->grads[j].buffer == g->buffer) {
                return corrupt("a gradient buffer is listed twice");
            }
        }
    }
    return DLRT_OK;
}

typedef struct arena_span {
    uint64_t off, end;
    bool exclusive;
} arena_span;

static int cmp_arena_span(const void *a, const void *b) {
    const arena_span *p = a, *q = b;
    return p->off < q->off ? -1 : p->off > q->off ? 1 : 0;
}

// Format 3: the memory plan. Every buffer lies inside the arena at an aligned offset, and INPUT,
// PARAM, CONST, STATE and (format 8) PACKED buffers overlap no other buffer (TEMP buffers may
// share memory with each other: the compiler's liveness analysis decided it, and a wrong decision
// gives wrong numbers, never an access outside the arena). A PACKED buffer must keep its bytes
// between the infers that skip its prepack kernel, so no other buffer may ever write over it.
// Buffers sorted by offset: an exclusive buffer must start at or after the end of every earlier
// one, any buffer at or after the end of every earlier exclusive one.
static dlrt_status validate_arena(const dlrt_model *m) {
    const dlrt_plan_hdr *h = m->hdr;
    if (h->arena_size > (UINT64_C(1) << 48)) {
        return corrupt("arena larger than 2^48 bytes");
    }
    arena_span *sp = dl_mem_alloc((h->n_buffers ? h->n_buffers : 1) * sizeof *sp);
    if (!sp) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    dlrt_status st = DLRT_OK;
    for (uint32_t i = 0; i < h->n_buffers; i++) {
        const dlrt_plan_buffer *b = &m->buffers[i];
        if (b->offset % DLRT_BUFFER_ALIGN != 0 || !fits(b->offset, b->size, h->arena_size)) {
            st = corrupt("buffer outside the arena or misaligned");
            goto out;
        }
        if (b->size > 0) {
            sp[n++] = (arena_span){b->offset, b->offset + b->size, b->kind != DLRT_BUF_TEMP};
        }
    }
    qsort(sp, n, sizeof *sp, cmp_arena_span);
    uint64_t end_all = 0, end_excl = 0;
    for (size_t i = 0; i < n; i++) {
        if (sp[i].off < end_excl || (sp[i].exclusive && sp[i].off < end_all)) {
            st = corrupt("an input, param, constant, state or packed buffer overlaps another "
                         "buffer");
            goto out;
        }
        end_all = sp[i].end > end_all ? sp[i].end : end_all;
        if (sp[i].exclusive) {
            end_excl = sp[i].end > end_excl ? sp[i].end : end_excl;
        }
    }
out:
    free(sp);
    return st;
}

// Format 5: a kernel's launch data. CPU kernels are split over [0, range) by the executor and
// carry zeros; a CUDA kernel needs a grid and a block of at least one in every dimension, within
// CUDA's limits (1024 threads per block, 65535 blocks in y and z, at most 256 KiB of dynamic
// shared memory, above any current GPU's).
static bool launch_ok(uint32_t device, const dlrt_plan_fn *f) {
    if (device == DLRT_PLAN_DEVICE_CPU) {
        return f->grid[0] == 0 && f->grid[1] == 0 && f->grid[2] == 0 && f->block[0] == 0 &&
               f->block[1] == 0 && f->block[2] == 0 && f->shared_bytes == 0;
    }
    for (int d = 0; d < 3; d++) {
        if (f->grid[d] == 0 || f->block[d] == 0 || f->block[d] > 1024) {
            return false;
        }
    }
    uint64_t threads = (uint64_t)f->block[0] * f->block[1] * f->block[2];
    return threads <= 1024 && f->grid[0] <= INT32_MAX && f->grid[1] <= 65535 &&
           f->grid[2] <= 65535 && f->shared_bytes <= 256u * 1024u;
}

typedef struct name_ref {
    const char *p;
    uint32_t len;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    return c != 0 ? c : x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

// Kernel symbol names are unique: a device finds kernels by name, so two table entries of one
// name would run one kernel's code under the other's signature (and its extents).
static dlrt_status check_unique_names(const dlrt_model *m, const dlrt_plan_fn *sig) {
    uint32_t n = m->hdr->n_fns;
    name_ref *r = dl_mem_alloc((n ? n : 1) * sizeof *r);
    if (!r) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t f = 0; f < n; f++) {
        r[f] = (name_ref){m->strings + sig[f].name_off, sig[f].name_len};
    }
    qsort(r, n, sizeof *r, cmp_name_ref);
    dlrt_status st = DLRT_OK;
    for (uint32_t f = 1; f < n && st == DLRT_OK; f++) {
        if (cmp_name_ref(&r[f - 1], &r[f]) == 0) {
            st = corrupt("two kernels have the same symbol name");
        }
    }
    free(r);
    return st;
}

// Format 5: the device kind and the device image. The CPU runs host code and has no image; a
// device kind with an image needs one of a known kind, 64-byte aligned inside the plan.
static dlrt_status validate_device(const dlrt_plan_hdr *h) {
    if (h->device >= DLRT_PLAN_DEVICE_COUNT) {
        return corrupt("unknown device kind");
    }
    if (h->image_kind > DLRT_IMAGE_PTX || h->off_image % 64 != 0 ||
        !fits(h->off_image, h->size_image, h->total_size)) {
        return corrupt("the device image lies outside the plan");
    }
    bool want_image = h->device != DLRT_PLAN_DEVICE_CPU;
    if (want_image != (h->image_kind != DLRT_IMAGE_NONE) || want_image != (h->size_image != 0)) {
        return corrupt("the device image does not fit the device kind");
    }
    return DLRT_OK;
}

// Format 8: kernel `i`, flagged DLRT_KERNEL_F_PREPACK, which the session skips in most infers
// (rt_exec.c): it is in the infer entry and no other, writes something, and waits only for other
// prepack kernels, so it can run first and skipping it drops no order between the kernels that
// do run. `entries`: the entry points it is in (bit 1 << DLRT_ENTRY_*).
static dlrt_status check_prepack_kernel(const dlrt_model *m, uint32_t i, unsigned entries) {
    const dlrt_plan_kernel *k = &m->kernels[i];
    const uint32_t *deps = (const uint32_t *)(m->plan + m->hdr->off_deps);
    if (entries & (1u << DLRT_ENTRY_TRAIN_STEP)) {
        return corrupt("a prepack kernel is in the train step");
    }
    if (!(entries & (1u << DLRT_ENTRY_INFER))) {
        return corrupt("a prepack kernel is not in the infer entry");
    }
    if (k->n_out == 0) {
        return corrupt("a prepack kernel writes nothing");
    }
    for (uint32_t j = 0; j < k->n_deps; j++) {
        if (!(m->kernels[deps[k->first_dep + j]].flags & DLRT_KERNEL_F_PREPACK)) {
            return corrupt("a prepack kernel waits for a kernel that is not a prepack kernel");
        }
    }
    return DLRT_OK;
}

// Format 8: argument `a` (buffer `bid`) of kernel `i`, when the kernel is a prepack kernel or the
// buffer a PACKED one. A prepack kernel writes PACKED buffers only and reads PARAM and CONST
// buffers only; a PACKED buffer is written by one kernel, a prepack one (its bytes then change
// only when the session runs that kernel), and no train step kernel touches it (the train step
// runs between infers that skip the prepack kernels). writer[b]: the kernel that writes PACKED
// buffer b (UINT32_MAX: none so far).
static dlrt_status check_packed_arg(const dlrt_model *m, uint32_t i, uint32_t a, uint32_t bid,
                                    unsigned entries, uint32_t *writer) {
    const dlrt_plan_kernel *k = &m->kernels[i];
    bool is_prepack = (k->flags & DLRT_KERNEL_F_PREPACK) != 0, is_out = a < k->n_out;
    uint32_t kind = m->buffers[bid].kind;
    if (kind == DLRT_BUF_PACKED && (entries & (1u << DLRT_ENTRY_TRAIN_STEP))) {
        return corrupt("a train step kernel reads or writes a packed buffer");
    }
    if (is_out && kind != DLRT_BUF_PACKED) {
        return corrupt("a prepack kernel writes a buffer that is not a packed buffer");
    }
    if (is_out && !is_prepack) {
        return corrupt("a kernel that is not a prepack kernel writes a packed buffer");
    }
    if (is_out) {
        if (writer[bid] != UINT32_MAX && writer[bid] != i) {
            return corrupt("two kernels write one packed buffer");
        }
        writer[bid] = i;
        return DLRT_OK;
    }
    if (is_prepack && kind != DLRT_BUF_PARAM && kind != DLRT_BUF_CONST) {
        return corrupt("a prepack kernel reads a buffer that is not a param or constant");
    }
    return DLRT_OK;
}

// Format 4: the kernel table's signatures, and every kernel record against its signature. The
// code of kernel-table entry f iterates over [0, fns[f].range) and reaches at most extents[a]
// bytes from argument a (codegen records them): a record must use it with the same range and
// argument counts, and give every argument a buffer at least that large (buffers lie inside the
// arena: validate_arena), so no kernel touches memory outside the arena. A kernel writes only
// TEMP buffers, in the train step also PARAM and STATE ones, and a prepack kernel of the infer
// entry PACKED ones only (format 8: check_prepack_kernel, check_packed_arg): never an INPUT
// (which may be caller memory, bound zero-copy) or a CONST.
static dlrt_status validate_kernels(const dlrt_model *m, const dlrt_kernel_fn *fns) {
    const dlrt_plan_hdr *h = m->hdr;
    if (!table_ok(h, h->off_fns, h->n_fns, sizeof(dlrt_plan_fn)) ||
        !table_ok(h, h->off_fn_extents, h->n_fn_extents, sizeof(uint64_t))) {
        return corrupt("the kernel signature table lies outside the plan");
    }
    const dlrt_plan_fn *sig = (const dlrt_plan_fn *)(m->plan + h->off_fns);
    const uint64_t *ext = (const uint64_t *)(m->plan + h->off_fn_extents);
    for (uint32_t f = 0; f < h->n_fns; f++) {
        if (sig[f].range < 1 || sig[f].range > RT_MAX_RANGE || sig[f].n_out > sig[f].n_args ||
            !fits(sig[f].first_extent, sig[f].n_args, h->n_fn_extents) || (fns && !fns[f])) {
            return corrupt("bad kernel signature");
        }
        if (!name_ok(h, m->strings, sig[f].name_off, sig[f].name_len, false)) {
            return corrupt("a kernel's symbol name is empty or outside the strings");
        }
        if (!launch_ok(h->device, &sig[f])) {
            return corrupt("a kernel's launch data does not fit its device");
        }
    }
    dlrt_status nst = check_unique_names(m, sig);
    if (nst != DLRT_OK) {
        return nst;
    }
    for (uint32_t i = 0; i < h->n_args; i++) {
        if (m->args[i] >= h->n_buffers) {
            return corrupt("kernel argument names no buffer");
        }
    }
    // The entry points each kernel is in (bit 1 << DLRT_ENTRY_*; an infer kernel may write TEMP
    // buffers only, a prepack one PACKED ones only), and each PACKED buffer's writer.
    uint8_t *in_entry = dl_mem_calloc(h->n_kernels ? h->n_kernels : 1, 1);
    uint32_t *writer = dl_mem_alloc((h->n_buffers ? h->n_buffers : 1) * sizeof *writer);
    if (!in_entry || !writer) {
        free(in_entry);
        free(writer);
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t b = 0; b < h->n_buffers; b++) {
        writer[b] = UINT32_MAX;
    }
    dlrt_status st = DLRT_OK;
    for (int e = 0; e < DLRT_ENTRY_COUNT; e++) {
        for (uint32_t j = 0; j < h->entry_count[e]; j++) {
            in_entry[m->entry_kernels[h->entry_first[e] + j]] |= (uint8_t)(1u << e);
        }
    }
    for (uint32_t i = 0; i < h->n_kernels && st == DLRT_OK; i++) {
        const dlrt_plan_kernel *k = &m->kernels[i];
        const dlrt_plan_fn *g = &sig[k->fn];
        bool is_infer = (in_entry[i] & (1u << DLRT_ENTRY_INFER)) != 0;
        bool is_prepack = (k->flags & DLRT_KERNEL_F_PREPACK) != 0;
        if (k->n_args != g->n_args || k->n_out != g->n_out || k->range != g->range) {
            st = corrupt("a kernel record disagrees with its compiled kernel (arguments or range)");
            break;
        }
        if (is_prepack && (st = check_prepack_kernel(m, i, in_entry[i])) != DLRT_OK) {
            break;
        }
        for (uint32_t a = 0; a < k->n_args; a++) {
            uint32_t bid = m->args[k->first_arg + a];
            const dlrt_plan_buffer *b = &m->buffers[bid];
            if (b->size < ext[g->first_extent + a]) {
                st = corrupt("a kernel argument's buffer is smaller than the kernel reaches");
                break;
            }
            if (is_prepack || b->kind == DLRT_BUF_PACKED) {
                if ((st = check_packed_arg(m, i, a, bid, in_entry[i], writer)) != DLRT_OK) {
                    break;
                }
                continue;
            }
            if (a < k->n_out && b->kind != DLRT_BUF_TEMP &&
                (is_infer || (b->kind != DLRT_BUF_PARAM && b->kind != DLRT_BUF_STATE))) {
                st = corrupt("a kernel writes an input, constant, param or state buffer it must "
                             "not write");
                break;
            }
        }
    }
    for (uint32_t b = 0; b < h->n_buffers && st == DLRT_OK; b++) {
        if (m->buffers[b].kind == DLRT_BUF_PACKED && writer[b] == UINT32_MAX) {
            st = corrupt("no prepack kernel writes a packed buffer");
        }
    }
    free(in_entry);
    free(writer);
    return st;
}

// The plan [m->plan, + plan_size) for a kernel table of n_fns entries (fns: their addresses, or
// NULL when there is no code, as when fuzzing): header, tables, ids, sizes, names, the memory
// plan, the kernels against their signatures, the train step. Sets m's table pointers and counts.
static dlrt_status validate(dlrt_model *m, uint64_t plan_size, uint32_t n_fns,
                            const dlrt_kernel_fn *fns) {
    if (plan_size < sizeof(dlrt_plan_hdr) || (uintptr_t)m->plan % 8 != 0) {
        return corrupt("plan smaller than its header or misaligned");
    }
    const dlrt_plan_hdr *h = (const dlrt_plan_hdr *)m->plan;
    if (memcmp(h->magic, DLRT_PLAN_MAGIC, 8) != 0) {
        return corrupt("bad plan magic");
    }
    if (h->version != DLRT_FORMAT_VERSION) {
        return wrong_version("the plan", h->version);
    }
    if (h->hdr_size != sizeof *h || h->total_size != plan_size) {
        return corrupt("plan header sizes disagree");
    }
    if (!table_ok(h, h->off_buffers, h->n_buffers, sizeof(dlrt_plan_buffer)) ||
        !table_ok(h, h->off_tensors, h->n_tensors, sizeof(dlrt_plan_tensor)) ||
        !table_ok(h, h->off_kernels, h->n_kernels, sizeof(dlrt_plan_kernel)) ||
        !table_ok(h, h->off_args, h->n_args, 4) ||
        !table_ok(h, h->off_entry_kernels, h->n_entry_kernels, 4) ||
        !table_ok(h, h->off_deps, h->n_deps, 4) ||
        !fits(h->off_strings, h->size_strings, h->total_size) ||
        !fits(h->off_data, h->size_data, h->total_size)) {
        return corrupt("a plan table lies outside the plan");
    }
    dlrt_status dst = validate_device(h);
    if (dst != DLRT_OK) {
        return dst;
    }
    if (h->n_fns != n_fns) {
        return corrupt("kernel table size disagrees with the plan");
    }
    m->hdr = h;
    m->buffers = (const dlrt_plan_buffer *)(m->plan + h->off_buffers);
    m->tensors = (const dlrt_plan_tensor *)(m->plan + h->off_tensors);
    m->kernels = (const dlrt_plan_kernel *)(m->plan + h->off_kernels);
    m->args = (const uint32_t *)(m->plan + h->off_args);
    m->entry_kernels = (const uint32_t *)(m->plan + h->off_entry_kernels);
    m->strings = (const char *)(m->plan + h->off_strings);
    m->data = m->plan + h->off_data;
    for (uint32_t i = 0; i < h->n_buffers; i++) {
        const dlrt_plan_buffer *b = &m->buffers[i];
        if (b->kind > DLRT_BUF_PACKED || b->size > (UINT64_C(1) << 48) ||
            (b->flags & ~(uint32_t)DLRT_BUF_F_INIT_DATA) != 0) {
            return corrupt("bad buffer");
        }
        if (b->flags != 0 && b->kind != DLRT_BUF_STATE) {
            return corrupt(b->kind == DLRT_BUF_PACKED ? "a packed buffer has flags" : "bad buffer");
        }
        if ((b->kind == DLRT_BUF_CONST || (b->flags & DLRT_BUF_F_INIT_DATA)) &&
            !fits(b->data_off, b->size, h->size_data)) {
            return corrupt("constant data outside the plan");
        }
    }
    dlrt_status mst = validate_arena(m);
    if (mst != DLRT_OK) {
        return mst;
    }
    for (uint32_t i = 0; i < h->n_kernels; i++) {
        const dlrt_plan_kernel *k = &m->kernels[i];
        if (k->fn >= h->n_fns || !fits(k->first_arg, k->n_args, h->n_args) || k->range < 1 ||
            k->n_out > k->n_args || !fits(k->first_dep, k->n_deps, h->n_deps) ||
            !name_ok(h, m->strings, k->name_off, k->name_len, true) ||
            !name_ok(h, m->strings, k->ops_off, k->ops_len, true) ||
            (k->flags & ~DLRT_KERNEL_F_ALL) != 0 ||
            ((k->flags & DLRT_KERNEL_F_ALLREDUCE_MEAN) &&
             (k->n_out != 1 || m->args[k->first_arg] >= h->n_buffers ||
              m->buffers[m->args[k->first_arg]].size % sizeof(float) != 0))) {
            return corrupt("bad kernel record");
        }
        if ((k->flags & DLRT_KERNEL_F_PREPACK) && (k->flags & DLRT_KERNEL_F_ALLREDUCE_MEAN)) {
            return corrupt("a prepack kernel is also flagged for an all-reduce");
        }
        m->n_prepack += (k->flags & DLRT_KERNEL_F_PREPACK) != 0;
    }
    const uint32_t *deps = (const uint32_t *)(m->plan + h->off_deps);
    for (uint32_t i = 0; i < h->n_kernels; i++) {
        for (uint32_t j = 0; j < m->kernels[i].n_deps; j++) {
            if (deps[m->kernels[i].first_dep + j] >= i) {
                return corrupt("a kernel depends on a later kernel (cycle)");
            }
        }
    }
    for (uint32_t i = 0; i < h->n_entry_kernels; i++) {
        if (m->entry_kernels[i] >= h->n_kernels) {
            return corrupt("entry point names no kernel");
        }
    }
    // Each entry point lists plan records in increasing order: no kernel twice, and since
    // dependencies point to earlier records, to earlier kernels of the entry.
    for (int e = 0; e < DLRT_ENTRY_COUNT; e++) {
        if (!fits(h->entry_first[e], h->entry_count[e], h->n_entry_kernels)) {
            return corrupt("entry point outside the kernel list");
        }
        for (uint32_t j = 1; j < h->entry_count[e]; j++) {
            if (m->entry_kernels[h->entry_first[e] + j] <=
                m->entry_kernels[h->entry_first[e] + j - 1]) {
                return corrupt("an entry point's kernels are out of order or repeated");
            }
        }
    }
    if (!name_ok(h, m->strings, h->model_name_off, h->model_name_len, true) ||
        !name_ok(h, m->strings, h->target_off, h->target_len, true)) {
        return corrupt("string outside the plan");
    }
    dlrt_status kst = validate_kernels(m, fns);
    if (kst != DLRT_OK) {
        return kst;
    }
    if (h->device == DLRT_PLAN_DEVICE_CPU) {
        dlrt_status ist = check_isa(h, m->strings + h->target_off, h->target_len);
        if (ist != DLRT_OK) {
            return ist;
        }
    } else if (h->isa != 0) {
        return corrupt("x86 instruction-set bits on a device plan");
    }
    dlrt_status tst = validate_train(m);
    if (tst != DLRT_OK) {
        return tst;
    }
    // Tensors: grouped by role (inputs, outputs, params, states), each consistent with its buffer.
    uint32_t prev_role = 0;
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        const dlrt_plan_tensor *t = &m->tensors[i];
        if (t->role > DLRT_ROLE_STATE || t->role < prev_role || t->dtype >= DLRT_DT_COUNT ||
            t->rank > DLRT_MAX_RANK || t->buffer >= h->n_buffers ||
            !name_ok(h, m->strings, t->name_off, t->name_len, false)) {
            return corrupt("bad tensor record");
        }
        // Inputs are fed (or bound zero-copy) into INPUT buffers, params into PARAM buffers.
        uint32_t bk = m->buffers[t->buffer].kind;
        if ((t->role == DLRT_ROLE_INPUT && bk != DLRT_BUF_INPUT) ||
            (t->role == DLRT_ROLE_PARAM && bk != DLRT_BUF_PARAM)) {
            return corrupt("a tensor's role disagrees with its buffer's kind");
        }
        prev_role = t->role;
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->rank; d++) {
            if (t->dims[d] < 0 ||
                (t->dims[d] != 0 && n > (UINT64_C(1) << 48) / (uint64_t)t->dims[d])) {
                return corrupt("bad tensor shape");
            }
            n *= (uint64_t)t->dims[d];
        }
        if (n * rt__dtype_size(t->dtype) != m->buffers[t->buffer].size) {
            return corrupt("tensor size disagrees with its buffer");
        }
        if (t->role == DLRT_ROLE_PARAM) {
            if (t->init > DLRT_INIT_DATA ||
                (t->init == DLRT_INIT_DATA && (t->data_size != m->buffers[t->buffer].size ||
                                               !fits(t->data_off, t->data_size, h->size_data)))) {
                return corrupt("bad param initialiser");
            }
        }
        if (t->role == DLRT_ROLE_STATE && m->buffers[t->buffer].kind != DLRT_BUF_STATE) {
            return corrupt("optimizer state outside a state buffer");
        }
        switch (t->role) {
        case DLRT_ROLE_INPUT:
            m->n_inputs++;
            break;
        case DLRT_ROLE_OUTPUT:
            m->n_outputs++;
            break;
        case DLRT_ROLE_PARAM:
            m->n_params++;
            break;
        default:
            m->n_states++;
            break;
        }
    }
    m->first_input = 0;
    m->first_output = m->n_inputs;
    m->first_param = m->n_inputs + m->n_outputs;
    m->first_state = m->first_param + m->n_params;
    return validate_grads(m);
}

static char *dup_range(const char *s, size_t n) {
    char *p = dl_mem_alloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

// The dynamic loader trusts the file: a truncated or forged ELF makes dlopen fault (it maps and
// clears segments past the end of the file). So before dlopen the headers are checked against
// the bytes: a 64-bit little-endian x86-64 shared object whose program headers, loadable and
// dynamic segments and section headers all lie inside the file.
static dlrt_status check_elf(const uint8_t *p, size_t size, const char *what) {
    Elf64_Ehdr eh;
    if (size < sizeof eh || memcmp(p, ELFMAG, SELFMAG) != 0) {
        return rt__fail(DLRT_ERR_CORRUPT, "%s is not an ELF shared object", what);
    }
    memcpy(&eh, p, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_type != ET_DYN || eh.e_machine != EM_X86_64) {
        return rt__fail(DLRT_ERR_CORRUPT, "%s is not an x86-64 ELF shared object", what);
    }
    if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
        !fits(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size)) {
        return rt__fail(DLRT_ERR_CORRUPT, "%s is truncated or damaged (program headers)", what);
    }
    if (eh.e_shnum != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                            !fits(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), size))) {
        return rt__fail(DLRT_ERR_CORRUPT, "%s is truncated or damaged (section headers)", what);
    }
    for (uint16_t i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) &&
            (!fits(ph.p_offset, ph.p_filesz, size) || ph.p_filesz > ph.p_memsz)) {
            return rt__fail(DLRT_ERR_CORRUPT, "%s is truncated or damaged (segment %u)", what,
                            (unsigned)i);
        }
    }
    return DLRT_OK;
}

dlrt_status rt__model_from_plan(const uint8_t *plan, uint64_t plan_size, uint32_t n_fns,
                                const dlrt_kernel_fn *fns, dlrt_model **out) {
    *out = NULL;
    dlrt_model *m = dl_mem_calloc(1, sizeof *m);
    if (!m) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    atomic_init(&m->refs, 1);
    m->plan = plan;
    dlrt_status st = validate(m, plan_size, n_fns, fns);
    if (st == DLRT_OK) {
        const dlrt_plan_hdr *h = m->hdr;
        m->name = dup_range(m->strings + h->model_name_off, h->model_name_len);
        m->target = dup_range(m->strings + h->target_off, h->target_len);
        m->tensor_names = dl_mem_calloc(h->n_tensors ? h->n_tensors : 1, sizeof(char *));
        st = m->name && m->target && m->tensor_names ? DLRT_OK : DLRT_ERR_NOMEM;
        for (uint32_t i = 0; st == DLRT_OK && i < h->n_tensors; i++) {
            m->tensor_names[i] =
                dup_range(m->strings + m->tensors[i].name_off, m->tensors[i].name_len);
            if (!m->tensor_names[i]) {
                st = DLRT_ERR_NOMEM;
            }
        }
        if (st == DLRT_OK) {
            m->hparam_names = dl_mem_calloc(h->n_hparams ? h->n_hparams : 1, sizeof(char *));
            st = m->hparam_names ? DLRT_OK : DLRT_ERR_NOMEM;
        }
        for (uint32_t i = 0; st == DLRT_OK && i < h->n_hparams; i++) {
            m->hparam_names[i] =
                dup_range(m->strings + m->hparams[i].name_off, m->hparams[i].name_len);
            if (!m->hparam_names[i]) {
                st = DLRT_ERR_NOMEM;
            }
        }
        if (st == DLRT_ERR_NOMEM) {
            rt__fail(st, "out of memory");
        }
    }
    if (st != DLRT_OK) {
        dlrt_model_release(m);
        return st;
    }
    *out = m;
    return DLRT_OK;
}

static dlrt_status finish_load(void *handle, const char *what, dlrt_model **out) {
    const dlrt_artifact_desc *desc = dlsym(handle, DLRT_ARTIFACT_SYMBOL);
    if (!desc) {
        dlclose(handle);
        return rt__fail(DLRT_ERR_CORRUPT, "%s is not a dlcc artifact (no %s symbol)", what,
                        DLRT_ARTIFACT_SYMBOL);
    }
    if (desc->version != DLRT_FORMAT_VERSION) {
        dlclose(handle);
        return wrong_version(what, desc->version);
    }
    dlrt_model *m = NULL;
    dlrt_status st = rt__model_from_plan(desc->plan, desc->plan_size, desc->n_fns, desc->fns, &m);
    if (st == DLRT_OK && m->hdr->device == DLRT_PLAN_DEVICE_CPU && !desc->fns) {
        dlrt_model_release(m);
        st = rt__fail(DLRT_ERR_CORRUPT, "%s is a CPU artifact without a kernel table", what);
    }
    if (st != DLRT_OK) {
        dlclose(handle);
        return st;
    }
    m->handle = handle;
    m->desc = desc;
    *out = m;
    return DLRT_OK;
}

// The checksum trailer (format 4), checked on the file's bytes before anything maps them: any
// accidental change of the file (a flipped bit, a truncation, a partial copy) is refused here
// with DLRT_ERR_CORRUPT, before the dynamic loader (which trusts its input and may abort the
// process) or a kernel sees it. On success *body_size is the size of the ELF object before it.
static dlrt_status check_trailer(const uint8_t *p, size_t size, const char *what,
                                 size_t *body_size) {
    dlrt_artifact_trailer t;
    if (size < sizeof t) {
        return rt__fail(DLRT_ERR_CORRUPT, "%s is not a dlcc artifact (too short)", what);
    }
    memcpy(&t, p + size - sizeof t, sizeof t);
    if (memcmp(t.magic, DLRT_TRAILER_MAGIC, sizeof t.magic) != 0) {
        return rt__fail(DLRT_ERR_CORRUPT,
                        "%s is not a dlcc artifact (no checksum trailer: truncated or damaged, or "
                        "made by a dlcc older than artifact format %u; recompile it)",
                        what, DLRT_FORMAT_VERSION);
    }
    if (t.size != size) {
        return rt__fail(DLRT_ERR_CORRUPT,
                        "%s is damaged: it has %zu bytes, its checksum trailer says %llu", what,
                        size, (unsigned long long)t.size);
    }
    dl_hash128 h = dl_hash128_of(p, size - 16);
    if (h.lo != t.hash_lo || h.hi != t.hash_hi) {
        return rt__fail(DLRT_ERR_CORRUPT,
                        "%s is damaged: its checksum does not match its contents (recompile it, "
                        "or clear the cache entry)",
                        what);
    }
    if (t.version != DLRT_FORMAT_VERSION) {
        return wrong_version(what, t.version);
    }
    *body_size = size - sizeof t;
    return DLRT_OK;
}

// Everything checked on the bytes before dlopen: the ELF headers (a clear message for files
// that are no shared object at all), then the checksum.
static dlrt_status check_bytes(const uint8_t *p, size_t size, const char *what) {
    dlrt_status st = check_elf(p, size, what);
    size_t body = 0;
    if (st == DLRT_OK) {
        st = check_trailer(p, size, what, &body);
    }
    return st == DLRT_OK ? check_elf(p, body, what) : st;
}

// Loads checked bytes: they are copied into a memory file and the dynamic loader maps that
// copy, so what runs is exactly what was checked (a file replaced on disk after the check is
// never mapped). `what` names the artifact in messages.
static dlrt_status load_bytes(const void *data, size_t size, const char *what, dlrt_model **out) {
    dlrt_status est = check_bytes(data, size, what);
    if (est != DLRT_OK) {
        return est;
    }
    int fd = memfd_create("dlcc-artifact", MFD_CLOEXEC);
    if (fd < 0) {
        return rt__fail(DLRT_ERR_IO, "memfd_create: %s", strerror(errno));
    }
    const uint8_t *p = data;
    size_t left = size;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            int e = errno;
            close(fd);
            return rt__fail(DLRT_ERR_IO, "writing %s to memory: %s", what, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        close(fd);
        return rt__fail(DLRT_ERR_CORRUPT, "cannot load %s: %s", what, dlerror());
    }
    // The dynamic loader finds already loaded objects by the name given to dlopen, so a second
    // artifact loaded from memory under a reused fd number would silently get the first one
    // back. The memory file is closed (its mapping keeps it alive), but its fd number stays
    // taken by /dev/null until the model is released, so the name is unique while it lives.
    dlrt_status st = finish_load(h, what, out);
    int nul = st == DLRT_OK ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
    if (nul >= 0 && dup3(nul, fd, O_CLOEXEC) == fd) {
        (*out)->memfd = fd; // now /dev/null
    } else if (st == DLRT_OK) {
        (*out)->memfd = fd; // keep the memory file itself open instead
        fd = -1;
    }
    if (nul >= 0) {
        close(nul);
    }
    if (st != DLRT_OK) {
        close(fd);
    }
    return st;
}

dlrt_status dlrt_model_load_file(const char *path, dlrt_model **out) {
    if (!path || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_model_load_file: NULL argument");
    }
    *out = NULL;
    char *bytes = NULL;
    size_t len = 0;
    char why[160];
    if (dl_read_file_max(path, DL_READ_LIMIT_DEFAULT, &bytes, &len, why, sizeof why) != DL_OK) {
        return rt__fail(DLRT_ERR_IO, "cannot read %s: %s", path, why);
    }
    // The bytes read are the bytes checked and the bytes mapped (load_bytes).
    dlrt_status st = load_bytes(bytes, len, path, out);
    free(bytes);
    return st;
}

dlrt_status dlrt_model_load_memory(const void *data, size_t size, dlrt_model **out) {
    if (!data || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_model_load_memory: NULL argument");
    }
    *out = NULL;
    return load_bytes(data, size, "the artifact", out);
}

void dlrt_model_retain(dlrt_model *m) {
    // ordering: relaxed suffices for an increment; the caller already holds a reference.
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void dlrt_model_release(dlrt_model *m) {
    if (!m) {
        return;
    }
    // ordering: acq_rel so the last releaser sees every other holder's writes before freeing.
    int prev = atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel);
    if (prev > 1) {
        return;
    }
    if (prev < 1) {
        fprintf(stderr, "dlrt: internal error: dlrt_model_release below zero\n");
        abort();
    }
    if (m->tensor_names) {
        for (uint32_t i = 0; m->hdr && i < m->hdr->n_tensors; i++) {
            free(m->tensor_names[i]);
        }
        free(m->tensor_names);
    }
    if (m->hparam_names) {
        for (uint32_t i = 0; m->hdr && i < m->hdr->n_hparams; i++) {
            free(m->hparam_names[i]);
        }
        free(m->hparam_names);
    }
    free(m->name);
    free(m->target);
    if (m->handle) {
        dlclose(m->handle);
    }
    if (m->memfd > 0) {
        close(m->memfd);
    }
    free(m);
}

const char *dlrt_model_name(const dlrt_model *m) {
    return m ? m->name : "";
}

const char *dlrt_model_target(const dlrt_model *m) {
    return m ? m->target : "";
}

dlrt_device_kind dlrt_model_device(const dlrt_model *m) {
    return m ? (dlrt_device_kind)m->hdr->device : DLRT_DEVICE_CPU;
}

size_t dlrt_model_num_inputs(const dlrt_model *m) {
    return m ? m->n_inputs : 0;
}

size_t dlrt_model_num_outputs(const dlrt_model *m) {
    return m ? m->n_outputs : 0;
}

size_t dlrt_model_num_params(const dlrt_model *m) {
    return m ? m->n_params : 0;
}

static void describe(const dlrt_model *m, size_t t, dlrt_tensor_desc *out) {
    const dlrt_plan_tensor *pt = &m->tensors[t];
    memset(out, 0, sizeof *out);
    out->name = m->tensor_names[t];
    out->dtype = (dlrt_dtype)pt->dtype;
    out->rank = (int32_t)pt->rank;
    for (uint32_t d = 0; d < pt->rank; d++) {
        out->dims[d] = pt->dims[d];
    }
    out->nbytes = (size_t)m->buffers[pt->buffer].size;
    out->device = (dlrt_device_kind)m->hdr->device;
}

static dlrt_status describe_role(const dlrt_model *m, size_t first, size_t n, size_t i,
                                 dlrt_tensor_desc *out, const char *what) {
    if (!m || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_model_%s: NULL argument", what);
    }
    if (i >= n) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "%s index %zu out of range (model has %zu)", what, i,
                        n);
    }
    describe(m, first + i, out);
    return DLRT_OK;
}

dlrt_status dlrt_model_input(const dlrt_model *m, size_t i, dlrt_tensor_desc *out) {
    return describe_role(m, m ? m->first_input : 0, m ? m->n_inputs : 0, i, out, "input");
}

dlrt_status dlrt_model_output(const dlrt_model *m, size_t i, dlrt_tensor_desc *out) {
    return describe_role(m, m ? m->first_output : 0, m ? m->n_outputs : 0, i, out, "output");
}

dlrt_status dlrt_model_param(const dlrt_model *m, size_t i, dlrt_tensor_desc *out) {
    return describe_role(m, m ? m->first_param : 0, m ? m->n_params : 0, i, out, "param");
}

dlrt_status dlrt_model_state(const dlrt_model *m, size_t i, dlrt_tensor_desc *out) {
    return describe_role(m, m ? m->first_state : 0, m ? m->n_states : 0, i, out, "state");
}

void dlrt_model_kernels(const dlrt_model *m, int train_step, uint32_t *n_kernels, uint32_t *n_fused,
                        uint32_t *n_ops) {
    uint32_t nk = 0, nf = 0, no = 0;
    int e = train_step ? DLRT_ENTRY_TRAIN_STEP : DLRT_ENTRY_INFER;
    for (uint32_t i = 0; m && i < m->hdr->entry_count[e]; i++) {
        // Validated at load: entry_kernels and every kernel's strings are in bounds.
        const dlrt_plan_kernel *k = &m->kernels[m->entry_kernels[m->hdr->entry_first[e] + i]];
        if (k->flags & DLRT_KERNEL_F_PREPACK) {
            continue; // not run per call
        }
        uint32_t ops = 1;
        for (uint32_t j = 0; j < k->ops_len; j++) {
            ops += m->strings[k->ops_off + j] == DLRT_OPS_SEPARATOR;
        }
        nk++;
        nf += ops > 1;
        no += ops;
    }
    if (n_kernels) {
        *n_kernels = nk;
    }
    if (n_fused) {
        *n_fused = nf;
    }
    if (n_ops) {
        *n_ops = no;
    }
}

uint32_t dlrt_model_prepack(const dlrt_model *m, uint64_t *packed_bytes) {
    uint64_t bytes = 0;
    for (uint32_t i = 0; m && i < m->hdr->n_buffers; i++) {
        bytes += m->buffers[i].kind == DLRT_BUF_PACKED ? m->buffers[i].size : 0;
    }
    if (packed_bytes) {
        *packed_bytes = bytes;
    }
    return m ? m->n_prepack : 0;
}

void dlrt_model_memory(const dlrt_model *m, uint64_t *arena_bytes, uint64_t *buffers_bytes) {
    uint64_t sum = 0;
    for (uint32_t i = 0; m && i < m->hdr->n_buffers; i++) {
        sum += m->buffers[i].size;
    }
    if (arena_bytes) {
        *arena_bytes = m ? m->hdr->arena_size : 0;
    }
    if (buffers_bytes) {
        *buffers_bytes = sum;
    }
}
