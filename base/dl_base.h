// base/dl_base.h — dependency-free utilities shared by every dlcc module: status codes, source
// locations and the diagnostics sink, arenas, growable buffers, file reading, half-precision
// conversion and the counter-based random generator used by seeded initialisers.
//
// Nothing here prints, exits or aborts on bad input; DL_ASSERT is for our own broken invariants.
#ifndef DL_BASE_H
#define DL_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DL_NODISCARD    __attribute__((warn_unused_result))
#define DL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define DL_NORETURN     __attribute__((noreturn))

// ---------------------------------------------------------------------------------------------
// Status

typedef enum dl_status {
    DL_OK = 0,
    DL_ERR_INVALID_ARG, // a caller passed something the contract forbids (also: bad user argument)
    DL_ERR_NOMEM,
    DL_ERR_IO,          // a file could not be read or written
    DL_ERR_PARSE,       // bad .dlg / .npy / .onnx text or bytes
    DL_ERR_SHAPE,       // shape or type rule broken
    DL_ERR_UNSUPPORTED, // valid input we do not handle
    DL_ERR_BACKEND,
    DL_ERR_CACHE,
    DL_ERR_CORRUPT,
} dl_status;

// Static string naming `s` ("ok", "out of memory", ...). Never NULL.
const char *dl_status_str(dl_status s);

#define DL_TRY(expr)                                                                               \
    do {                                                                                           \
        dl_status st_ = (expr);                                                                    \
        if (st_ != DL_OK) {                                                                        \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

// Broken invariants (our bugs, never user input): print file:line and abort.
DL_NORETURN void dl__assert_fail(const char *expr, const char *file, int line);
#define DL_ASSERT(e)     ((e) ? (void)0 : dl__assert_fail(#e, __FILE__, __LINE__))
#define DL_UNREACHABLE() dl__assert_fail("unreachable", __FILE__, __LINE__)
#define DL_ARRAY_LEN(a)  (sizeof(a) / sizeof((a)[0]))

// ---------------------------------------------------------------------------------------------
// Allocation
//
// Every dlcc module allocates heap memory through these (libc's contracts; free() releases), so
// that a test can make allocations fail on purpose (SQLite's faultsim): after
// dl_test_fail_alloc_after(n), the first n allocations succeed and every later one returns NULL
// until the hook is reset with n < 0. Thread-safe (relaxed atomics); LLVM's and SQLite's own
// allocations are not counted.

void *dl_mem_alloc(size_t size);
void *dl_mem_calloc(size_t n, size_t size);
void *dl_mem_realloc(void *p, size_t size);
char *dl_mem_strdup(const char *s);
char *dl_mem_strndup(const char *s, size_t n);
// Test hook (see above). n < 0 disarms it. Also resets the counter dl_test_alloc_count reports.
void dl_test_fail_alloc_after(long n);
// Allocations attempted since the last dl_test_fail_alloc_after call (failed ones included).
long dl_test_alloc_count(void);
// True when an allocation was refused by the hook since the last dl_test_fail_alloc_after call.
bool dl_test_alloc_failed(void);

// ---------------------------------------------------------------------------------------------
// Source locations and diagnostics

// 1-based line and column (column counts bytes); len = length of the highlighted token (>= 1
// when a caret is wanted). file 0 = no location; other values are ids from dl_diags_add_file.
typedef struct dl_src_loc {
    uint32_t file, line, col, len;
} dl_src_loc;
#define DL_NO_LOC ((dl_src_loc){0, 0, 0, 0})

typedef enum dl_severity { DL_SEV_ERROR, DL_SEV_WARNING, DL_SEV_NOTE } dl_severity;

typedef struct dl_diag_entry {
    dl_severity sev;
    dl_src_loc loc;
    char *msg; // OWNED by the sink
} dl_diag_entry;

// A diagnostics sink. It collects entries and never prints; tools render them.
// Thread-safety: a sink is used by one thread at a time.
typedef struct dl_diags dl_diags;

DL_NODISCARD dl_status dl_diags_create(dl_diags **out);
void dl_diags_destroy(dl_diags *d); // NULL is a no-op
// Registers a source file so locations can be rendered with their line. `name` and `text` are
// copied. Returns the file id (>= 1) in *out_id.
DL_NODISCARD dl_status dl_diags_add_file(dl_diags *d, const char *name, const char *text,
                                         size_t len, uint32_t *out_id);
const char *dl_diags_file_name(const dl_diags *d, uint32_t file); // "" for 0 / unknown
// Records a diagnostic. Allocation failure is remembered (dl_diags_oom) rather than returned,
// so callers can report and move on.
void dl_diag(dl_diags *d, dl_severity sev, dl_src_loc loc, const char *fmt, ...) DL_PRINTF(4, 5);
void dl_vdiag(dl_diags *d, dl_severity sev, dl_src_loc loc, const char *fmt, va_list ap)
    DL_PRINTF(4, 0);
size_t dl_diags_count(const dl_diags *d);
size_t dl_diags_error_count(const dl_diags *d);
const dl_diag_entry *dl_diags_get(const dl_diags *d, size_t i); // borrowed
bool dl_diags_oom(const dl_diags *d);
// Removes every entry (files stay registered).
void dl_diags_clear(dl_diags *d);

// Renders every entry as
//   FILE:LINE:COL: error: MESSAGE
//       LINE | source text
//            |     ^~~~~~
// into a NUL-terminated heap string (*out, caller frees). Entries without a location render as
// "error: MESSAGE". Returns DL_ERR_NOMEM on allocation failure.
DL_NODISCARD dl_status dl_diags_render(const dl_diags *d, char **out);

// ---------------------------------------------------------------------------------------------
// Arena: bump allocator in chunks; everything is freed at once by dl_arena_fini.

typedef struct dl_arena_chunk dl_arena_chunk;
typedef struct dl_arena {
    dl_arena_chunk *head;
    size_t chunk_size;
} dl_arena;

void dl_arena_init(dl_arena *a); // caller's storage
void dl_arena_fini(dl_arena *a);
// Zeroed, 16-byte aligned memory, or NULL when out of memory.
void *dl_arena_alloc(dl_arena *a, size_t size);
char *dl_arena_strdup(dl_arena *a, const char *s);
char *dl_arena_strndup(dl_arena *a, const char *s, size_t n);
void *dl_arena_memdup(dl_arena *a, const void *p, size_t size);
#define DL_ARENA_NEW(a, T)     ((T *)dl_arena_alloc((a), sizeof(T)))
#define DL_ARENA_NEWN(a, T, n) ((T *)dl_arena_alloc((a), sizeof(T) * (size_t)(n)))

// ---------------------------------------------------------------------------------------------
// Growable heap arrays. Usage: `DL_VEC(int) v = {0}; if (DL_VEC_PUSH(&v, 3)) ...; free(v.data);`

#define DL_VEC(T)                                                                                  \
    struct {                                                                                       \
        T *data;                                                                                   \
        size_t len, cap;                                                                           \
    }
// Ensures room for `need` elements. Returns false on allocation failure (vector unchanged).
bool dl__vec_reserve(void **data, size_t *cap, size_t need, size_t elem_size);
#define DL_VEC_RESERVE(v, n)                                                                       \
    dl__vec_reserve((void **)&(v)->data, &(v)->cap, (n), sizeof(*(v)->data))
// Appends x; evaluates to true on success, false when out of memory.
#define DL_VEC_PUSH(v, x)                                                                          \
    (DL_VEC_RESERVE((v), (v)->len + 1) ? ((v)->data[(v)->len++] = (x), true) : false)

// Growable NUL-terminated string. A failed append sets `oom` and leaves the text as it was.
typedef struct dl_strbuf {
    char *data; // always NUL-terminated once anything was appended; OWNED
    size_t len, cap;
    bool oom;
} dl_strbuf;
void dl_strbuf_append(dl_strbuf *b, const char *s, size_t n);
void dl_strbuf_puts(dl_strbuf *b, const char *s);
void dl_strbuf_printf(dl_strbuf *b, const char *fmt, ...) DL_PRINTF(2, 3);
void dl_strbuf_vprintf(dl_strbuf *b, const char *fmt, va_list ap) DL_PRINTF(2, 0);
void dl_strbuf_fini(dl_strbuf *b);
// Gives the buffer away (caller frees); the strbuf is reset. Returns NULL if oom was hit.
char *dl_strbuf_take(dl_strbuf *b);

// 128-bit hashes (cache keys, blob checksums): XXH3-128 from Debian's libxxhash.
typedef struct dl_hash128 {
    uint64_t lo, hi;
} dl_hash128;
dl_hash128 dl_hash128_of(const void *data, size_t len);
// Streaming: init, update as often as needed, then final.
typedef struct dl_hash128_state dl_hash128_state; // opaque
DL_NODISCARD dl_status dl_hash128_begin(dl_hash128_state **out);
void dl_hash128_update(dl_hash128_state *s, const void *data, size_t len);
dl_hash128 dl_hash128_end(dl_hash128_state *s); // frees s
// 32 lower-case hex digits (hi then lo) + NUL into buf[33]; parse accepts exactly 32 hex digits.
void dl_hash128_hex(dl_hash128 h, char buf[33]);
bool dl_hash128_parse(const char *hex, dl_hash128 *out);
bool dl_hash128_eq(dl_hash128 a, dl_hash128 b);

// FNV-1a 64-bit hash of a NUL-terminated string (hash tables, default seeds; not for cache keys).
uint64_t dl_hash_fnv1a64(const char *s);

// Prints a double so that strtod gives back the same value, shortest of %.15g..%.17g, and
// always with a '.', 'e', "inf" or "nan" so it reads as a float ("1.0" not "1").
void dl_format_double(double v, char buf[40]);

// ---------------------------------------------------------------------------------------------
// Files

// Reads the whole file into a NUL-terminated heap buffer (*out, caller frees; *out_len excludes
// the NUL). DL_ERR_IO with errno preserved on failure. The same as dl_read_file_max with
// DL_READ_LIMIT_DEFAULT: only a regular file is read (errno EISDIR for a directory, EINVAL for
// a FIFO, device or socket), and one larger than the limit is refused (EFBIG).
DL_NODISCARD dl_status dl_read_file(const char *path, char **out, size_t *out_len);

// Read limits per kind of input (docs/graph-format.md, "Limits"). Nothing reads unbounded: a
// file is refused before anything is allocated when fstat says it is larger, and reading stops
// when a file grows past the limit while being read.
#define DL_READ_LIMIT_DLG     ((size_t)64 << 20) // .dlg text: 64 MiB
#define DL_READ_LIMIT_ONNX    ((size_t)2 << 30)  // .onnx: 2 GiB, protobuf's own message limit
#define DL_READ_LIMIT_DEFAULT ((size_t)64 << 30) // anything else (.npy, artifacts): 64 GiB

// Opens `path` for reading when it is a regular file of at most max_len bytes. The open never
// blocks (a FIFO without a writer is refused, not waited on). *out_fd: a blocking O_RDONLY,
// O_CLOEXEC descriptor (caller closes); *out_size: the size fstat reported. DL_ERR_IO on
// failure with errno set (EISDIR: a directory, EINVAL: not a regular file, EFBIG: too large)
// and, when why is non-NULL, a message in why: "not a regular file", "is a directory", "file
// is N bytes, more than the limit of M bytes" or strerror(errno).
DL_NODISCARD dl_status dl_open_regular(const char *path, size_t max_len, int *out_fd,
                                       uint64_t *out_size, char *why, size_t why_size);
// The same as a stdio stream ("rb"; caller fcloses), for readers that use stdio.
DL_NODISCARD dl_status dl_fopen_regular(const char *path, size_t max_len, FILE **out, char *why,
                                        size_t why_size);
// dl_read_file with an explicit limit and the reason for a failure in why (as dl_open_regular;
// "out of memory" with DL_ERR_NOMEM).
DL_NODISCARD dl_status dl_read_file_max(const char *path, size_t max_len, char **out,
                                        size_t *out_len, char *why, size_t why_size);
// An output file written atomically: dl_out_open opens a temporary file in the target's
// directory (fd), dl_out_close(ok) gives it the usual permissions, fsyncs it and renames it over
// the target, or when !ok (or any step fails) removes it, so no file, partial or temporary, is
// left behind. A target that is a stream (dl_path_is_stream: /dev/null, a FIFO) is opened and
// written in place instead (tmp NULL): renaming over it would replace the device node with a
// regular file (as root, /dev/null itself). dl_out_close keeps errno of the first failure.
typedef struct dl_out {
    int fd;
    char *tmp; // OWNED: the temporary file's path; NULL for a stream
    const char *path;
} dl_out;
DL_NODISCARD dl_status dl_out_open(const char *path, dl_out *o);
DL_NODISCARD dl_status dl_out_close(dl_out *o, bool ok);
// Writes `len` bytes to `path` atomically (dl_out_open, dl_out_close).
DL_NODISCARD dl_status dl_write_file_atomic(const char *path, const void *data, size_t len);
// True when `path` exists and is neither a regular file nor a directory: a character or block
// device, a FIFO or a socket, which writers open and write where they stand.
bool dl_path_is_stream(const char *path);
// Writes all of data[0 .. len) to fd, resuming after EINTR and short writes; false (errno set)
// on an error.
bool dl_write_fd_all(int fd, const void *data, size_t len);

// ---------------------------------------------------------------------------------------------
// Half precision (IEEE binary16 and bfloat16), round to nearest even; NaN stays NaN.

uint16_t dl_f32_to_f16(float f);
float dl_f16_to_f32(uint16_t h);
uint16_t dl_f32_to_bf16(float f);
float dl_bf16_to_f32(uint16_t h);

// ---------------------------------------------------------------------------------------------
// Counter-based random numbers (documented in docs/graph-format.md, "Seeded initialisers").
// Element i of a tensor initialised with seed S draws from dl_rng_bits(S, i): a pure function of
// (seed, counter), so results do not depend on thread count, order or machine.

uint64_t dl_rng_bits(uint64_t seed, uint64_t counter);
// Uniform in [0, 1) with 53 random bits.
double dl_rng_uniform(uint64_t seed, uint64_t counter);
// Standard normal (Box-Muller over counters 2i and 2i+1, cosine branch).
double dl_rng_normal(uint64_t seed, uint64_t i);

// ---------------------------------------------------------------------------------------------
// Element types and host tensors (shared by the IR, the evaluator, .npy I/O and the runtime).

typedef enum dl_dtype {
    DL_DT_FLOAT,    // IEEE binary32
    DL_DT_FLOAT16,  // IEEE binary16, stored as uint16_t
    DL_DT_BFLOAT16, // stored as uint16_t
    DL_DT_INT32,
    DL_DT_INT64,
    DL_DT_BOOL, // one byte, 0 or 1
    DL_DT_COUNT
} dl_dtype;

const char *dl_dtype_name(dl_dtype t);                    // "float", "float16", ... as in .dlg
bool dl_dtype_from_name(const char *name, dl_dtype *out); // inverse of dl_dtype_name
size_t dl_dtype_size(dl_dtype t);                         // bytes per element
bool dl_dtype_is_float(dl_dtype t);                       // float, float16, bfloat16

#define DL_MAX_RANK 8

// A dense, C-order host tensor. `data` holds numel * dl_dtype_size(dtype) bytes; its owner is
// whoever created it (dl_tensor_alloc: the caller, freed with dl_tensor_free).
typedef struct dl_tensor {
    dl_dtype dtype;
    int32_t rank; // 0 = scalar
    int64_t dims[DL_MAX_RANK];
    void *data;
} dl_tensor;

int64_t dl_tensor_numel(const dl_tensor *t);
size_t dl_tensor_nbytes(const dl_tensor *t);
// Allocates zeroed data for the given dtype/shape into *t. DL_ERR_NOMEM or DL_ERR_INVALID_ARG.
DL_NODISCARD dl_status dl_tensor_alloc(dl_tensor *t, dl_dtype dtype, int32_t rank,
                                       const int64_t *dims);
void dl_tensor_free(dl_tensor *t); // frees data, leaves the shape
// Element i as a double / stores a double into element i, converting to the dtype
// (float16/bfloat16 round to nearest even; ints truncate toward zero; bool is v != 0).
double dl_tensor_get(const dl_tensor *t, int64_t i);
void dl_tensor_set(dl_tensor *t, int64_t i, double v);
// Element i as an int64: exact for the integer dtypes (int64 beyond 2^53 too), bool as 0 / 1,
// floats truncated toward zero (saturating; NaN is 0).
int64_t dl_tensor_get_i64(const dl_tensor *t, int64_t i);
// Writes "[2, 3]" style shape text into buf.
void dl_shape_format(const int64_t *dims, int32_t rank, char *buf, size_t size);

#endif
