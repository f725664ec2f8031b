// driver/libdlcc.h — the compiler as a shared library for bindings (libdlcc.so): one call that
// compiles a .dlg file through the compilation cache and hands back the artifact bytes, with
// plain C types only (no compiler structures cross the boundary), so ctypes / FFI users need no
// struct mirrors. Exports nothing but the dlcc_lib_* symbols (driver/libdlcc.map). The artifact
// is loaded with libdlrt's dlrt_model_load_memory.
#ifndef LIBDLCC_H
#define LIBDLCC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Compiles the model in the .dlg file `path` (or fetches it from the cache): binds dims
// dim_names[i] = dim_values[i] (i < n_dims; as `dlcc compile -D`), at optimisation level
// opt_level (0..3, or -1 for the default -O3), for the host CPU, through the cache in cache_dir
// (NULL: $DLCC_CACHE_DIR, else the user's default) unless use_cache is 0. Returns 0 on success
// with *artifact (malloc'd, free with dlcc_lib_free) and *artifact_len set and *cache_hit 1 when
// it came from the cache. Otherwise returns a nonzero status (1 invalid argument, 2 out of
// memory, 3 I/O, 4 parse, 5 shape/type, 6 unsupported, 7 backend) and *artifact is NULL.
// Either way, when `messages` is non-NULL, *messages receives the rendered diagnostics
// ("model.dlg:3:7: error: ...", warnings such as an unusable cache included; NULL when there
// are none; free with dlcc_lib_free). cache_hit may be NULL. Thread-safe.
int dlcc_lib_compile(const char *path, const char *const *dim_names, const int64_t *dim_values,
                     size_t n_dims, const char *cache_dir, int use_cache, int opt_level,
                     void **artifact, size_t *artifact_len, int *cache_hit, char **messages);
// Frees what dlcc_lib_compile returned. NULL is a no-op.
void dlcc_lib_free(void *p);
// The compiler's version string, as in the cache key ("dlcc 0.1.0 (GITREV, build ID) LLVM X").
const char *dlcc_lib_version(void);

#ifdef __cplusplus
}
#endif
#endif
