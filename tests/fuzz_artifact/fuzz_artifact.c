// tests/fuzz_artifact/fuzz_artifact.c — libFuzzer entry point for the runtime's plan validator:
// any bytes are taken as a plan blob (runtime/dlrt_format.h) and handed to rt__model_from_plan,
// the function every load path runs on the plan of a mapped artifact (rt_model.c is compiled into
// this program, so its internal function is reachable). Nothing is dlopen'ed: fuzzing the dynamic
// loader with mutated ELF files would fuzz glibc and could run arbitrary code, and the checksum
// trailer keeps accidental damage away from it anyway; what must hold against forged plans is the
// validator. There is no kernel code, so the kernel table is absent (fns = NULL) and its size is
// the header's own n_fns.
//
// A plan the validator accepts is then checked against the guarantees the rest of the runtime
// relies on without checking (every buffer inside the arena, every kernel argument's buffer
// at least as large as its compiled extent, no kernel writing an INPUT or CONST buffer,
// dependencies pointing backwards, entry lists increasing, names without NUL; format 5: a known
// device kind, an image exactly when the device needs one, inside the plan, kernel symbol names
// non-empty and unique, launch data zero on the CPU, op strings inside the strings; format 8:
// the rules of prepack kernels and PACKED buffers), and the introspection API is walked. A
// broken guarantee aborts (a finding).
//
// Built with DL_FUZZ_REPLAY_MAIN it is a plain program feeding every file of the given
// directories to the same entry point: the ctest over tests/fuzz_artifact/corpus, and the way to
// replay a crash file without libFuzzer. In replay mode, corpus files whose names start with
// "valid-" must be accepted (they are real plans, compiled for a baseline x86-64 CPU), and those
// whose names start with "formatN-" (real plans of an older artifact format N: 4 to 7) must be
// refused as unsupported with a message that names version N and says to recompile.
#include "dl_base.h"
#include "rt_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool fits(uint64_t a, uint64_t b, uint64_t limit) {
    return a <= limit && b <= limit - a;
}

#define ENSURE(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_artifact: accepted plan breaks: %s (line %d)\n", #c, __LINE__);  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

// Format 8: what the executor relies on when it skips the prepack kernels of an infer. A prepack
// kernel is in the infer entry only, writes PACKED buffers only (at least one), reads PARAM and
// CONST buffers only and waits for prepack kernels only; a PACKED buffer is written by exactly
// one kernel, a prepack one, and no train step kernel touches it.
static void check_prepack(const dlrt_model *m) {
    const dlrt_plan_hdr *h = m->hdr;
    const uint32_t *deps = (const uint32_t *)(m->plan + h->off_deps);
    uint32_t n_prepack = 0;
    for (uint32_t i = 0; i < h->n_kernels; i++) {
        const dlrt_plan_kernel *k = &m->kernels[i];
        bool in_entry[DLRT_ENTRY_COUNT] = {false};
        for (int e = 0; e < DLRT_ENTRY_COUNT; e++) {
            for (uint32_t j = 0; j < h->entry_count[e]; j++) {
                in_entry[e] = in_entry[e] || m->entry_kernels[h->entry_first[e] + j] == i;
            }
        }
        bool is_prepack = (k->flags & DLRT_KERNEL_F_PREPACK) != 0;
        n_prepack += is_prepack;
        if (is_prepack) {
            ENSURE(in_entry[DLRT_ENTRY_INFER] && !in_entry[DLRT_ENTRY_TRAIN_STEP]);
            ENSURE(k->n_out >= 1 && !(k->flags & DLRT_KERNEL_F_ALLREDUCE_MEAN));
            for (uint32_t j = 0; j < k->n_deps; j++) {
                ENSURE(m->kernels[deps[k->first_dep + j]].flags & DLRT_KERNEL_F_PREPACK);
            }
        }
        for (uint32_t a = 0; a < k->n_args; a++) {
            uint32_t kind = m->buffers[m->args[k->first_arg + a]].kind;
            if (is_prepack) {
                ENSURE(a < k->n_out ? kind == DLRT_BUF_PACKED
                                    : kind == DLRT_BUF_PARAM || kind == DLRT_BUF_CONST);
            }
            if (kind == DLRT_BUF_PACKED) {
                ENSURE(!in_entry[DLRT_ENTRY_TRAIN_STEP] && (a >= k->n_out || is_prepack));
            }
        }
    }
    ENSURE(n_prepack == m->n_prepack);
    for (uint32_t b = 0; b < h->n_buffers; b++) {
        if (m->buffers[b].kind != DLRT_BUF_PACKED) {
            continue;
        }
        ENSURE(m->buffers[b].flags == 0);
        uint32_t writer = UINT32_MAX;
        for (uint32_t i = 0; i < h->n_kernels; i++) {
            const dlrt_plan_kernel *k = &m->kernels[i];
            for (uint32_t a = 0; a < k->n_out; a++) {
                if (m->args[k->first_arg + a] == b) {
                    ENSURE(writer == UINT32_MAX || writer == i);
                    writer = i;
                }
            }
        }
        ENSURE(writer != UINT32_MAX);
    }
}

// The guarantees of an accepted plan (see the file comment).
static void check_accepted(const dlrt_model *m) {
    const dlrt_plan_hdr *h = m->hdr;
    const dlrt_plan_fn *sig = (const dlrt_plan_fn *)(m->plan + h->off_fns);
    const uint64_t *ext = (const uint64_t *)(m->plan + h->off_fn_extents);
    const uint32_t *deps = (const uint32_t *)(m->plan + h->off_deps);
    for (uint32_t b = 0; b < h->n_buffers; b++) {
        ENSURE(fits(m->buffers[b].offset, m->buffers[b].size, h->arena_size));
    }
    for (uint32_t i = 0; i < h->n_kernels; i++) {
        const dlrt_plan_kernel *k = &m->kernels[i];
        ENSURE(k->fn < h->n_fns && k->range >= 1 && k->range == sig[k->fn].range);
        ENSURE(fits(k->first_arg, k->n_args, h->n_args) && k->n_args == sig[k->fn].n_args);
        for (uint32_t a = 0; a < k->n_args; a++) {
            uint32_t b = m->args[k->first_arg + a];
            ENSURE(b < h->n_buffers);
            ENSURE(m->buffers[b].size >= ext[sig[k->fn].first_extent + a]);
            if (a < k->n_out) {
                ENSURE(m->buffers[b].kind != DLRT_BUF_INPUT &&
                       m->buffers[b].kind != DLRT_BUF_CONST);
            }
        }
        ENSURE(fits(k->first_dep, k->n_deps, h->n_deps));
        for (uint32_t j = 0; j < k->n_deps; j++) {
            ENSURE(deps[k->first_dep + j] < i);
        }
    }
    for (int e = 0; e < DLRT_ENTRY_COUNT; e++) {
        ENSURE(fits(h->entry_first[e], h->entry_count[e], h->n_entry_kernels));
        for (uint32_t j = 0; j < h->entry_count[e]; j++) {
            uint32_t k = m->entry_kernels[h->entry_first[e] + j];
            ENSURE(k < h->n_kernels);
            ENSURE(j == 0 || k > m->entry_kernels[h->entry_first[e] + j - 1]);
        }
    }
    for (uint32_t t = 0; t < h->n_tensors; t++) {
        ENSURE(strlen(m->tensor_names[t]) == m->tensors[t].name_len);
    }
    // Format 5: the device, its image and the kernels' names and launch data.
    ENSURE(h->device < DLRT_PLAN_DEVICE_COUNT);
    ENSURE(fits(h->off_image, h->size_image, h->total_size));
    ENSURE((h->device == DLRT_PLAN_DEVICE_CPU) == (h->size_image == 0));
    ENSURE(dlrt_model_device(m) == (dlrt_device_kind)h->device);
    for (uint32_t f = 0; f < h->n_fns; f++) {
        ENSURE(sig[f].name_len > 0 && fits(sig[f].name_off, sig[f].name_len, h->size_strings));
        ENSURE(!memchr(m->strings + sig[f].name_off, 0, sig[f].name_len));
        for (uint32_t g = 0; g < f; g++) {
            ENSURE(sig[g].name_len != sig[f].name_len ||
                   memcmp(m->strings + sig[g].name_off, m->strings + sig[f].name_off,
                          sig[f].name_len) != 0);
        }
        if (h->device == DLRT_PLAN_DEVICE_CPU) {
            ENSURE((sig[f].grid[0] | sig[f].grid[1] | sig[f].grid[2] | sig[f].block[0] |
                    sig[f].block[1] | sig[f].block[2] | sig[f].shared_bytes) == 0);
        } else {
            ENSURE((uint64_t)sig[f].block[0] * sig[f].block[1] * sig[f].block[2] <= 1024);
        }
    }
    for (uint32_t i = 0; i < h->n_kernels; i++) {
        ENSURE(fits(m->kernels[i].ops_off, m->kernels[i].ops_len, h->size_strings));
    }
    check_prepack(m);
    // The introspection API over the validated model.
    size_t n_in = dlrt_model_num_inputs(m), n_out = dlrt_model_num_outputs(m);
    size_t n_par = dlrt_model_num_params(m);
    dlrt_tensor_desc d;
    for (size_t i = 0; i < n_in; i++) {
        ENSURE(dlrt_model_input(m, i, &d) == DLRT_OK && d.name && d.rank <= DLRT_MAX_RANK);
    }
    for (size_t i = 0; i < n_out; i++) {
        ENSURE(dlrt_model_output(m, i, &d) == DLRT_OK && d.name);
    }
    for (size_t i = 0; i < n_par; i++) {
        ENSURE(dlrt_model_param(m, i, &d) == DLRT_OK && d.name);
    }
    uint64_t arena = 0, sum = 0;
    dlrt_model_memory(m, &arena, &sum);
    ENSURE(arena == h->arena_size);
    ENSURE(strlen(dlrt_model_name(m)) == h->model_name_len);
}

static int last_accepted;
static dlrt_status last_status;

#ifndef DL_FUZZ_REPLAY_MAIN
// A structure-aware mutator: random byte mutations almost always break the header first, so half
// of the mutations instead rewrite one to three aligned 32-bit words of the plan (every field is
// 4-byte aligned) with a boundary value (0, 1, all ones, a neighbour of the old value, or another
// word of the plan, which is often a count or an offset): the plan stays mostly well formed and
// the validator's deeper checks get exercised.
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    uint64_t r = dl_rng_bits(seed, 0);
    if ((r & 1) || size < 8) {
        return LLVMFuzzerMutate(data, size, max_size);
    }
    size_t words = size / 4;
    int edits = 1 + (int)((r >> 1) % 3);
    for (int e = 0; e < edits; e++) {
        uint64_t q = dl_rng_bits(seed, (uint64_t)e + 1);
        size_t at = (size_t)(q % words) * 4;
        uint32_t old, v;
        memcpy(&old, data + at, 4);
        switch ((q >> 32) % 7) {
        case 0:
            v = 0;
            break;
        case 1:
            v = 1;
            break;
        case 2:
            v = UINT32_MAX;
            break;
        case 3:
            v = old + 1;
            break;
        case 4:
            v = old - 1;
            break;
        case 5: {
            size_t from = (size_t)((q >> 40) % words) * 4;
            memcpy(&v, data + from, 4);
            break;
        }
        default:
            v = old ^ (1u << ((q >> 48) % 32));
            break;
        }
        memcpy(data + at, &v, 4);
    }
    return size;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    last_accepted = 0;
    // The validator reads the plan in place, as the loaded object's 8-byte aligned array.
    uint8_t *plan = malloc(size ? size : 1);
    if (!plan) {
        return 0;
    }
    memcpy(plan, data, size);
    uint32_t n_fns = 0;
    if (size >= sizeof(dlrt_plan_hdr)) {
        memcpy(&n_fns, plan + offsetof(dlrt_plan_hdr, n_fns), sizeof n_fns);
    }
    dlrt_model *m = NULL;
    dlrt_status st = rt__model_from_plan(plan, size, n_fns, NULL, &m);
    last_status = st;
    if (st == DLRT_OK) {
        ENSURE(m != NULL);
        check_accepted(m);
        last_accepted = 1;
    } else {
        ENSURE(m == NULL);
        ENSURE(dlrt_last_error()[0] != 0); // a refusal always says why
        ENSURE(st == DLRT_ERR_CORRUPT || st == DLRT_ERR_UNSUPPORTED || st == DLRT_ERR_NOMEM);
    }
    dlrt_model_release(m);
    free(plan);
    return 0;
}

#ifdef DL_FUZZ_REPLAY_MAIN
#    include <dirent.h>
#    include <sys/stat.h>

static int run_file(const char *path, const char *name) {
    char *buf = NULL;
    size_t len = 0;
    if (dl_read_file(path, &buf, &len) != DL_OK) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    free(buf);
    if (strncmp(name, "valid-", 6) == 0 && !last_accepted) {
        fprintf(stderr, "%s: a valid plan was refused: %s\n", path, dlrt_last_error());
        return 1;
    }
    // "formatN-": a real plan of an older format N, refused as such.
    char want[32];
    if (strncmp(name, "format", 6) == 0 && name[6] >= '1' && name[6] <= '9' && name[7] == '-') {
        snprintf(want, sizeof want, "version %c", name[6]);
        if (last_status != DLRT_ERR_UNSUPPORTED || !strstr(dlrt_last_error(), want) ||
            !strstr(dlrt_last_error(), "recompile")) {
            fprintf(stderr, "%s: a format-%c plan was not refused as such: status %d (%s)\n", path,
                    name[6], (int)last_status, dlrt_last_error());
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    int n = 0, bad = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            fprintf(stderr, "cannot stat %s\n", argv[a]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            const char *base = strrchr(argv[a], '/');
            bad += run_file(argv[a], base ? base + 1 : argv[a]);
            n++;
            continue;
        }
        DIR *dir = opendir(argv[a]);
        if (!dir) {
            fprintf(stderr, "cannot open %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            bad += run_file(path, e->d_name);
            n++;
        }
        closedir(dir);
    }
    printf("%d inputs replayed, %d failed\n", n, bad);
    return (bad || n == 0) ? 1 : 0;
}
#endif
