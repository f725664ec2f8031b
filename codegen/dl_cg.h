// codegen/dl_cg.h — lowers a shape-inferred IR module to native code through the LLVM C API
// and packages it as an artifact: an ELF shared object holding the kernels and the plan
// (runtime/dlrt_format.h). Used by tools/ and libdlcc; the runtime never includes it.
#ifndef DL_CG_H
#define DL_CG_H

#include "dl_ir.h"

typedef struct dl_cg_options {
    const char *cpu;      // LLVM CPU name; NULL or "native": the host CPU
    const char *features; // LLVM feature string ("+avx2,-avx512f"); NULL: the host's features
                          // when cpu is the host, else the CPU's defaults
    int opt_level;        // 0..3; LLVM's default<On> pipeline
    const char *linker;   // NULL: $DLCC_LD, else ld.lld-19, ld.lld, cc found on PATH
} dl_cg_options;

// Fills *o with the defaults: host CPU and features, -O3, linker looked up.
void dl_cg_options_init(dl_cg_options *o);

// Checks the options a user can set: the CPU must be one LLVM knows for x86-64, every feature
// of the comma list must be +NAME or -NAME with a known NAME, opt_level 0..3. On failure
// returns DL_ERR_INVALID_ARG and writes a one-line reason (naming the value) into err.
DL_NODISCARD dl_status dl_cg_options_check(const dl_cg_options *o, char *err, size_t err_size);

// Compiles `m` (verified, shapes inferred by dl_pass_shape) into artifact bytes. On DL_OK,
// *out (malloc'd, caller frees) holds the shared object, byte-identical for the same module,
// options and compiler. Errors (an op not lowered yet, a missing linker, LLVM failures) go to `d`;
// nothing is written to disk except a private temporary directory for the link step, removed
// before returning. Thread-safety: independent calls may run concurrently (one LLVM context
// each).
DL_NODISCARD dl_status dl_cg_compile(const dl_ir_module *m, const dl_cg_options *o, dl_diags *d,
                                     uint8_t **out, size_t *out_len);

// The target description codegen would use for `o`: "x86_64-pc-linux-gnu/skylake-avx512" into
// buf. For `dlcc --version` and (later) the cache key.
void dl_cg_target_describe(const dl_cg_options *o, char *buf, size_t size);

// The exact target feature string codegen uses for `o` (the host's features from cpuid when the
// CPU is the host and no features are given, then "+64bit" appended) as a heap string the caller
// frees; NULL when out of memory. Cheap (no LLVM target initialisation): the cache key uses it.
char *dl_cg_target_features(const dl_cg_options *o);

// LLVM's version string, e.g. "19.1.7".
const char *dl_cg_llvm_version(void);

#endif
