// codegen/dl_cg.h — lowers a shape-inferred IR module to native code through the LLVM C API
// and packages it as an artifact: an ELF shared object holding the kernels and the plan
// (runtime/dlrt_format.h). Targets: x86-64 (codegen/x86/); codegen/nvptx/ emits PTX only. Used by
// tools/ and libdlcc; the runtime never includes it.
#ifndef DL_CG_H
#define DL_CG_H

#include "dl_ir.h"

typedef struct dl_cg_options {
    const char *target;   // NULL, "" or "x86-64": x86-64 (dl_cg_target_list names the targets)
    const char *cpu;      // LLVM CPU name; NULL or "native": the host CPU
    const char *features; // LLVM feature string ("+avx2,-avx512f"); NULL: the host's features
                          // when cpu is the host, else the CPU's defaults
    int opt_level;        // 0..3; LLVM's default<On> pipeline
    const char *linker;   // NULL: $DLCC_LD, else ld.lld-19, ld.lld, cc found on PATH
    // No prepacked weights. By default a CPU product whose B is a param or constant reads it,
    // in `infer`, from a buffer of its packed panels that an infer-only kernel fills once per
    // change of the params (artifact format 8), instead of packing it at every call. Costs
    // that buffer (about the weight's size) in the session's arena; true packs at every call.
    bool no_prepack;
} dl_cg_options;

// Fills *o with the defaults: host CPU and features, -O3, linker looked up.
void dl_cg_options_init(dl_cg_options *o);

// Checks the options a user can set: the target must be one dl_cg_compile builds for (a
// listed but unbuilt one, such as cuda:sm_80, gives DL_ERR_UNSUPPORTED), the CPU must be one
// LLVM knows for x86-64, every feature of the comma list must be +NAME or -NAME with a known
// NAME, opt_level 0..3. On failure returns DL_ERR_INVALID_ARG (or DL_ERR_UNSUPPORTED) and
// writes a one-line reason (naming the value) into err.
DL_NODISCARD dl_status dl_cg_options_check(const dl_cg_options *o, char *err, size_t err_size);

// Compiles `m` (verified, shapes inferred by dl_pass_shape) into artifact bytes. On DL_OK,
// *out (malloc'd, caller frees) holds the shared object, byte-identical for the same module,
// options and compiler. Errors (an op not lowered yet, a missing linker, LLVM failures) go to `d`;
// nothing is written to disk except a private temporary directory for the link step, removed
// before returning. Thread-safety: independent calls may run concurrently (one LLVM context
// each).
DL_NODISCARD dl_status dl_cg_compile(const dl_ir_module *m, const dl_cg_options *o, dl_diags *d,
                                     uint8_t **out, size_t *out_len);

// The target description codegen would use for `o` (NULL: the defaults; a target name
// dl_cg_options_check refuses: the default target's):
// "x86_64-pc-linux-gnu/skylake-avx512" into buf. For `dlcc --version`, `-v` and the plan.
void dl_cg_target_describe(const dl_cg_options *o, char *buf, size_t size);

// The target's part of the cache key for checked options `o`: the target's name, then every
// target input that changes the code (x86-64: triple/CPU as resolved, the user's CPU and feature
// strings, the exact feature string LLVM gets: the host's features from cpuid when the CPU is
// the host), as a heap string the caller frees; NULL when out of memory. Cheap (no LLVM target
// initialisation): a warm compile is a cache lookup.
char *dl_cg_target_key(const dl_cg_options *o);

// A target `dlcc compile --target` names. Static data.
typedef struct dl_cg_target_info {
    const char *name;          // what --target takes: "x86-64", "cuda:sm_XX"
    const char *summary;       // one line
    const char *const *levels; // CPU levels --cpu takes (NULL-terminated), or NULL
    bool is_built;             // false: named, refused by dl_cg_options_check (not built yet)
} dl_cg_target_info;

// The targets, the default first; *n_out gets their count.
const dl_cg_target_info *dl_cg_target_list(size_t *n_out);

// The PTX (text, NUL-terminated, malloc'd into *out) of the kernels of `m` (verified, shapes
// inferred; no train block) for an NVIDIA GPU `sm` ("sm_80"; NULL: sm_80), lowered by the
// shared lowering through codegen/nvptx/ and emitted by LLVM's NVPTX target: the proof of the
// target seam. Only elementwise ops lower so far; no artifact is packaged (the CUDA backend is
// issue 14). Errors go to `d`.
DL_NODISCARD dl_status dl_cg_emit_ptx(const dl_ir_module *m, const char *sm, dl_diags *d,
                                      char **out, size_t *out_len);

// LLVM's version string, e.g. "19.1.7".
const char *dl_cg_llvm_version(void);

#endif
