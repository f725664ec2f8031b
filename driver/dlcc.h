// driver/dlcc.h — the compiler as a library (libdlcc's public API, prefix dlcc_): compile a model
// from source text or a file, through the compilation cache. For trainers that compile at
// start-up and for the dlcc command line.
//
// The cache key is XXH3-128 over a versioned, length-prefixed encoding of (docs/cache.md):
//   the canonical IR (dl_ir_canonical with DL_IR_CANON_NO_HYPERPARAMS: intermediate names,
//   comments and layout do not count; input, param and output names do; of the train block only
//   its structure counts — optimizer, nesterov/amsgrad/centered, whether momentum is used,
//   whether clipping and which loss scaling exist, accumulate, precision, freeze, the loss — not
//   the values of lr, momentum, dampening, betas, eps, weight_decay, alpha, clip_norm or the loss
//   scale's init/growth/backoff/interval), the bound dims, every option that changes code (opt
//   level, target triple, CPU, features), the artifact format version, and the compiler's version
//   (project version, git revision, a build ID hashing the compiler's sources, LLVM version).
//
// Hyper-parameter values are session values (the compiled step reads them from its hyper
// buffer), so a learning-rate sweep compiles once. Every artifact the driver hands out (from the
// cache or freshly compiled) carries the values of the .dlg it was asked for: they are written
// into its plan (the hyper buffer's initial data, the hparam records' init, the loss seed) before
// it is returned, so the bytes equal those of a fresh compile of that .dlg. The cache keeps the
// bytes of the compile that stored the entry.
#ifndef DLCC_H
#define DLCC_H

#include "dl_base.h"
#include "dl_cg.h"
#include "dl_ir.h"
#include "dl_pass.h"

typedef struct dlcc_bind {
    const char *name;
    int64_t value;
} dlcc_bind;

typedef struct dlcc_options {
    dl_cg_options cg;       // target and optimisation (dl_cg_options_init for defaults)
    const dlcc_bind *binds; // -D NAME=VALUE
    size_t n_binds;
    bool use_cache;        // default true; DLCC_CACHE=0 in the environment turns it off too
    const char *cache_dir; // NULL: the default location
    // The pass pipeline (passes/pipeline.c): verify after every pass (--verify-each), and dump
    // the IR after one pass or all of them (--dump-after). A dump asks for the passes to run, so
    // the cache is not looked up then (the artifact is still stored).
    bool verify_each;
    bool dump_all;
    int dump_after;       // a dl_pass_id, or -1 (the default)
    dl_pass_dump_fn dump; // receives each dump (NULL: none)
    void *dump_ctx;
    // The fusion pass groups nothing: every node gets its own kernels (tests of the kernels
    // themselves, and of the memory plan on long chains). Such a compile neither reads nor
    // writes the cache (its key does not say so).
    bool no_fusion;
    // Sets the train block's sync_batchnorm = true (dlcc train --sync-bn): BatchNormalization
    // in the train step uses the global batch's statistics across data-parallel ranks. Part of
    // the key (through the canonical text). A model without a train block is an error.
    bool sync_bn;
} dlcc_options;

void dlcc_options_init(dlcc_options *o);

// What happened, for `-v` and the benchmarks.
typedef struct dlcc_result {
    uint8_t *artifact; // OWNED by the caller (free)
    size_t artifact_len;
    dl_hash128 key;
    bool cache_hit;
    bool cache_used; // false: no cache (disabled, or unusable: see the warnings)
    // Why the cache was off or read-only, for -v: "disabled by DLCC_CACHE=0", "read-only
    // (DLCC_CACHE_READONLY=1)"; "" when it was used normally (or turned off by use_cache).
    char cache_note[384];
    double total_ms;   // the whole call
    double compile_ms; // front end + codegen (0 on a hit)
    char model[128];   // model name
} dlcc_result;

// One component of the key, for `dlcc-cache explain`: a name ("ir", "dims", "options",
// "target", "format", "compiler") and the hash of its encoding.
typedef struct dlcc_key_part {
    const char *name;
    dl_hash128 hash;
} dlcc_key_part;
#define DLCC_KEY_PARTS 6

// Computes the key of a parsed, bound and shape-inferred module under `o`, and (if parts is
// non-NULL) the hash of each component.
DL_NODISCARD dl_status dlcc_key(const dl_ir_module *m, const dlcc_options *o, dl_hash128 *out,
                                dlcc_key_part parts[DLCC_KEY_PARTS]);

// Parses (file name `name` for diagnostics), binds dims, infers shapes, verifies; then fetches
// the artifact from the cache or compiles and stores it. Errors in the model go to `d` (the
// function returns their status); cache problems never fail the call: they become one warning
// in `d` and the compile goes on without the cache (so does a cache entry that cannot take the
// model's train-step values: it is compiled again and replaced). On success r->artifact holds
// the bytes, carrying the train block's hyper-parameter values of this source.
DL_NODISCARD dl_status dlcc_compile_source(const char *name, const char *text, size_t len,
                                           const dlcc_options *o, dl_diags *d, dlcc_result *r);
DL_NODISCARD dl_status dlcc_compile_file(const char *path, const dlcc_options *o, dl_diags *d,
                                         dlcc_result *r);

// Compiles a module from dlcc_load_module, perhaps changed since by the caller (`dlcc run`
// keeps only the outputs asked for: dl_ir_module_keep_outputs), through the cache like
// dlcc_compile_file; the options' binds were applied when it was loaded. `source` names it in
// the cache entry (the file it came from). The module is verified again first; the pass
// pipeline then rewrites it in place (autodiff, fusion): do not evaluate it afterwards.
DL_NODISCARD dl_status dlcc_compile_module(dl_ir_module *m, const char *source,
                                           const dlcc_options *o, dl_diags *d, dlcc_result *r);

// Loads `path` and applies the options' binds, infers shapes and verifies: the front half of
// dlcc_compile_file (for `dlcc run --backend ref`, `dlcc check` and `dlcc-cache explain`).
// The pipeline's `shapes` pass (with the options' verify and dumps); dlcc_check_module goes on.
DL_NODISCARD dl_status dlcc_load_module(const char *path, const dlcc_options *o, dl_diags *d,
                                        dl_ir_module **out);

// Runs the rest of the pipeline short of the back end on a module from dlcc_load_module:
// autodiff, precision, simplify and fusion (`dlcc check`: a train block is checked by deriving
// its training graph), with the options' verify and dumps.
DL_NODISCARD dl_status dlcc_check_module(dl_ir_module *m, const dlcc_options *o, dl_diags *d);

// The compiler's version string used in keys: "dlcc VERSION (GITREV, build ID) LLVM X.Y.Z", where
// ID hashes every compiler source file at build time (so a locally edited compiler never reuses
// artifacts of another build).
const char *dlcc_version_string(void);

#endif
