// driver/train_values.c — writes a .dlg's train-step values into an artifact's plan.
//
// The cache key leaves the values of the train block's hyper-parameters out (lr, momentum,
// dampening, betas, eps, weight_decay, alpha, the clip norm, the loss scale's init, growth,
// backoff and interval: DL_IR_CANON_NO_HYPERPARAMS), because the compiled step reads every one
// of them from the session's hyper buffer, never from code. An artifact found under such a key
// may therefore have been compiled from a .dlg with other values; before the driver hands it
// out, this file rewrites the three places a plan keeps them, so the artifact (in memory, or
// written by `dlcc compile -o`) always carries the values of the .dlg it was asked for:
//   - the hyper buffer's initial data (DLRT_HP_COUNT doubles, dl_cg_train_hyper_init),
//   - the `init` field of every hparam record (what checkpoints fall back to, what set_hparam
//     compares momentum against),
//   - the loss seed buffer's initial data ((float) initial loss scale), with loss scaling.
// Everything structural (optimizer, nesterov, amsgrad, centered, accumulate, whether momentum
// is used, clipping and loss scaling present) is in the key; it is compared here anyway and a
// mismatch refuses the artifact (a forged or foreign cache entry), as does any plan that does
// not look exactly like codegen's.
//
// Locating the plan: the ELF object exports DLRT_ARTIFACT_SYMBOL, a dlrt_artifact_desc whose
// `plan` pointer (offset 8) is a relocated address (an R_X86_64_RELATIVE addend, or the stored
// value when no RELA entry covers it) and whose `plan_size` (offset 16) is a constant; virtual
// addresses are mapped to file offsets through the section headers. When the file ends with a
// dlrt_artifact_trailer (format 4), its checksum is recomputed after the rewrite.
#include "dl_cg_train.h"
#include "driver_internal.h"

#include <elf.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct elf_view {
    const uint8_t *p;
    size_t len; // the ELF part (without a trailer)
    const Elf64_Shdr *sh;
    size_t n_sh;
} elf_view;

static dl_status fail(char *why, size_t n, const char *fmt, ...) DL_PRINTF(3, 4);
static dl_status fail(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return DL_ERR_CORRUPT;
}

static bool in_file(const elf_view *e, uint64_t off, uint64_t n) {
    return off <= e->len && n <= e->len - off;
}

// File offset of [vaddr, vaddr + n) in an allocated section with file contents, or -1.
static int64_t vaddr_to_off(const elf_view *e, uint64_t vaddr, uint64_t n) {
    for (size_t i = 0; i < e->n_sh; i++) {
        const Elf64_Shdr *s = &e->sh[i];
        if (!(s->sh_flags & SHF_ALLOC) || s->sh_type == SHT_NOBITS || vaddr < s->sh_addr ||
            vaddr - s->sh_addr > s->sh_size || n > s->sh_size - (vaddr - s->sh_addr)) {
            continue;
        }
        uint64_t off = s->sh_offset + (vaddr - s->sh_addr);
        return in_file(e, s->sh_offset, s->sh_size) ? (int64_t)off : -1;
    }
    return -1;
}

// The virtual address of the exported descriptor, or 0.
static uint64_t find_desc(const elf_view *e) {
    for (size_t i = 0; i < e->n_sh; i++) {
        const Elf64_Shdr *s = &e->sh[i];
        if (s->sh_type != SHT_DYNSYM || s->sh_entsize != sizeof(Elf64_Sym) ||
            s->sh_link >= e->n_sh || !in_file(e, s->sh_offset, s->sh_size)) {
            continue;
        }
        const Elf64_Shdr *str = &e->sh[s->sh_link];
        if (!in_file(e, str->sh_offset, str->sh_size)) {
            continue;
        }
        const char *names = (const char *)e->p + str->sh_offset;
        size_t n_sym = s->sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < n_sym; k++) {
            Elf64_Sym sym;
            memcpy(&sym, e->p + s->sh_offset + k * sizeof sym, sizeof sym);
            size_t want = sizeof DLRT_ARTIFACT_SYMBOL; // with its NUL
            if (sym.st_shndx == SHN_UNDEF || sym.st_name >= str->sh_size ||
                str->sh_size - sym.st_name < want ||
                memcmp(names + sym.st_name, DLRT_ARTIFACT_SYMBOL, want) != 0) {
                continue;
            }
            return sym.st_value;
        }
    }
    return 0;
}

// The value the dynamic loader stores at `vaddr` (a pointer of the descriptor).
static bool relocated_ptr(const elf_view *e, uint64_t vaddr, uint64_t *out) {
    for (size_t i = 0; i < e->n_sh; i++) {
        const Elf64_Shdr *s = &e->sh[i];
        if (s->sh_type != SHT_RELA || s->sh_entsize != sizeof(Elf64_Rela) ||
            !in_file(e, s->sh_offset, s->sh_size)) {
            continue;
        }
        for (size_t k = 0; k < s->sh_size / sizeof(Elf64_Rela); k++) {
            Elf64_Rela r;
            memcpy(&r, e->p + s->sh_offset + k * sizeof r, sizeof r);
            if (r.r_offset == vaddr) {
                if (ELF64_R_TYPE(r.r_info) != R_X86_64_RELATIVE) {
                    return false;
                }
                *out = (uint64_t)r.r_addend;
                return true;
            }
        }
    }
    int64_t off = vaddr_to_off(e, vaddr, 8); // REL / RELR: the addend is stored in place
    if (off < 0) {
        return false;
    }
    memcpy(out, e->p + off, 8);
    return true;
}

// The plan's file offset and size, or a reason.
static dl_status locate_plan(const uint8_t *art, size_t elf_len, uint64_t *plan_off,
                             uint64_t *plan_size, char *why, size_t why_len) {
    Elf64_Ehdr eh;
    if (elf_len < sizeof eh) {
        return fail(why, why_len, "not an ELF object");
    }
    memcpy(&eh, art, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr)) {
        return fail(why, why_len, "not a 64-bit little-endian ELF object");
    }
    elf_view e = {art, elf_len, NULL, eh.e_shnum};
    if (eh.e_shoff % 8 != 0 ||
        !in_file(&e, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr))) {
        return fail(why, why_len, "the section headers lie outside the file");
    }
    e.sh = (const Elf64_Shdr *)(const void *)(art + eh.e_shoff);
    uint64_t desc = find_desc(&e), plan_va = 0;
    int64_t desc_off = desc ? vaddr_to_off(&e, desc, sizeof(dlrt_artifact_desc)) : -1;
    if (desc_off < 0) {
        return fail(why, why_len, "no %s descriptor", DLRT_ARTIFACT_SYMBOL);
    }
    if (!relocated_ptr(&e, desc + offsetof(dlrt_artifact_desc, plan), &plan_va)) {
        return fail(why, why_len, "the descriptor's plan pointer cannot be resolved");
    }
    memcpy(plan_size, art + desc_off + offsetof(dlrt_artifact_desc, plan_size), 8);
    int64_t off = vaddr_to_off(&e, plan_va, *plan_size);
    if (off < 0 || *plan_size < sizeof(dlrt_plan_hdr)) {
        return fail(why, why_len, "the plan lies outside the file");
    }
    *plan_off = (uint64_t)off;
    return DL_OK;
}

// A STATE buffer with init data of exactly `size` bytes: its data's offset in the plan.
static bool state_data(const uint8_t *plan, const dlrt_plan_hdr *h, uint32_t id, uint64_t size,
                       uint64_t *out) {
    dlrt_plan_buffer b;
    if (id >= h->n_buffers) {
        return false;
    }
    memcpy(&b, plan + h->off_buffers + (uint64_t)id * sizeof b, sizeof b);
    if (b.kind != DLRT_BUF_STATE || !(b.flags & DLRT_BUF_F_INIT_DATA) || b.size != size ||
        b.data_off > h->size_data || size > h->size_data - b.data_off) {
        return false;
    }
    *out = h->off_data + b.data_off;
    return true;
}

static bool table_fits(const dlrt_plan_hdr *h, uint64_t off, uint64_t n, uint64_t elem) {
    return n <= h->total_size / (elem ? elem : 1) && off <= h->total_size &&
           n * elem <= h->total_size - off;
}

dl_status dlcc__set_train_values(uint8_t *art, size_t len, const dl_ir_train *t, char *why,
                                 size_t why_len) {
    why[0] = 0;
    size_t elf_len = len;
    bool has_trailer = false;
#ifdef DLRT_TRAILER_MAGIC
    dlrt_artifact_trailer tr;
    if (len >= sizeof tr) {
        memcpy(&tr, art + len - sizeof tr, sizeof tr);
        if (memcmp(tr.magic, DLRT_TRAILER_MAGIC, sizeof tr.magic) == 0 && tr.size == len) {
            has_trailer = true;
            elf_len = len - sizeof tr;
        }
    }
#endif
    uint64_t plan_off = 0, plan_size = 0;
    DL_TRY(locate_plan(art, elf_len, &plan_off, &plan_size, why, why_len));
    uint8_t *plan = art + plan_off;
    dlrt_plan_hdr h;
    memcpy(&h, plan, sizeof h);
    if (memcmp(h.magic, DLRT_PLAN_MAGIC, sizeof h.magic) != 0 || h.version != DLRT_FORMAT_VERSION ||
        h.hdr_size != sizeof h || h.total_size != plan_size) {
        return fail(why, why_len, "the plan header is not this compiler's (format %u)",
                    (unsigned)h.version);
    }
    if (h.optimizer != (uint32_t)t->optimizer) {
        return fail(why, why_len, "its train step uses another optimizer");
    }
    uint64_t hyper_off = 0, seed_off = 0;
    if (!table_fits(&h, h.off_buffers, h.n_buffers, sizeof(dlrt_plan_buffer)) ||
        !table_fits(&h, h.off_hparams, h.n_hparams, sizeof(dlrt_plan_hparam)) ||
        h.off_data > h.total_size || h.size_data > h.total_size - h.off_data ||
        !state_data(plan, &h, h.hyper_buffer, DLRT_HP_COUNT * sizeof(double), &hyper_off)) {
        return fail(why, why_len, "its plan has no well-formed hyper buffer");
    }
    bool scaled = t->loss_scale != DL_IR_LS_NONE;
    if (scaled != (h.seed_buffer != UINT32_MAX) ||
        (scaled && !state_data(plan, &h, h.seed_buffer, sizeof(float), &seed_off))) {
        return fail(why, why_len, "its train step %s loss scaling", scaled ? "has no" : "has");
    }
    double old[DLRT_HP_COUNT], now[DLRT_HP_COUNT];
    memcpy(old, plan + hyper_off, sizeof old);
    dl_cg_train_hyper_init(t, now);
    // Structural settings: equal whenever the keys are (a mismatch is no artifact of this model).
    static const int same[] = {DLRT_HP_NESTEROV, DLRT_HP_AMSGRAD, DLRT_HP_CENTERED,
                               DLRT_HP_ACCUMULATE};
    for (size_t i = 0; i < DL_ARRAY_LEN(same); i++) {
        if (!(old[same[i]] == now[same[i]])) {
            return fail(why, why_len, "its train step was compiled with other structural settings");
        }
    }
    if ((old[DLRT_HP_MOMENTUM] != 0.0) != (now[DLRT_HP_MOMENTUM] != 0.0) ||
        (old[DLRT_HP_CLIP_NORM] != 0.0) != t->has_clip_norm) {
        return fail(why, why_len, "its train step was compiled with other structural settings");
    }
    for (uint32_t i = 0; i < h.n_hparams; i++) { // checked before anything is written
        dlrt_plan_hparam r;
        memcpy(&r, plan + h.off_hparams + (uint64_t)i * sizeof r, sizeof r);
        if (r.index >= DLRT_HP_COUNT) {
            return fail(why, why_len, "its plan has a bad hparam record");
        }
    }
    for (uint32_t i = 0; i < h.n_hparams; i++) {
        dlrt_plan_hparam r;
        uint64_t at = h.off_hparams + (uint64_t)i * sizeof r;
        memcpy(&r, plan + at, sizeof r);
        r.init = now[r.index];
        memcpy(plan + at, &r, sizeof r);
    }
    memcpy(plan + hyper_off, now, sizeof now);
    if (scaled) {
        float seed = (float)now[DLRT_HP_LOSS_SCALE];
        memcpy(plan + seed_off, &seed, sizeof seed);
    }
#ifdef DLRT_TRAILER_MAGIC
    if (has_trailer) {
        dl_hash128 hh = dl_hash128_of(art, len - 16);
        tr.hash_lo = hh.lo;
        tr.hash_hi = hh.hi;
        memcpy(art + len - sizeof tr, &tr, sizeof tr);
    }
#else
    (void)has_trailer;
#endif
    return DL_OK;
}
