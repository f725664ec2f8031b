// base/base.c — status names, assertion failure, arena, growable buffers, number formatting,
// file I/O, half-precision conversion and the counter-based RNG.
//
// The arena hands out zeroed 16-byte aligned blocks from a singly linked list of chunks; a request
// larger than the chunk size gets a chunk of its own. Nothing is freed before dl_arena_fini.
#include "dl_base.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *dl_status_str(dl_status s) {
    switch (s) {
    case DL_OK:
        return "ok";
    case DL_ERR_INVALID_ARG:
        return "invalid argument";
    case DL_ERR_NOMEM:
        return "out of memory";
    case DL_ERR_IO:
        return "i/o error";
    case DL_ERR_PARSE:
        return "parse error";
    case DL_ERR_SHAPE:
        return "shape error";
    case DL_ERR_UNSUPPORTED:
        return "unsupported";
    case DL_ERR_BACKEND:
        return "backend error";
    case DL_ERR_CACHE:
        return "cache error";
    case DL_ERR_CORRUPT:
        return "corrupt data";
    }
    return "unknown status";
}

void dl__assert_fail(const char *expr, const char *file, int line) {
    // Only reached on our own bugs: the one place base/ writes to stderr.
    fprintf(stderr, "dlcc: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}

// ---------------------------------------------------------------------------------------------
// Arena

struct dl_arena_chunk {
    dl_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

#define ARENA_DEFAULT_CHUNK ((size_t)64 * 1024)

void dl_arena_init(dl_arena *a) {
    a->head = NULL;
    a->chunk_size = ARENA_DEFAULT_CHUNK;
}

void dl_arena_fini(dl_arena *a) {
    dl_arena_chunk *c = a->head;
    while (c) {
        dl_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}

void *dl_arena_alloc(dl_arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size == 0) {
        size = 16;
    }
    dl_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = a->chunk_size ? a->chunk_size : ARENA_DEFAULT_CHUNK;
        if (size > cap) {
            cap = size;
        }
        dl_arena_chunk *n = dl_mem_alloc(sizeof(*n) + cap);
        if (!n) {
            return NULL;
        }
        n->used = 0;
        n->cap = cap;
        if (c && size > a->chunk_size) {
            // An oversized block: keep the current chunk at the head so its room is not lost.
            n->next = c->next;
            c->next = n;
            n->used = size;
            memset(n->mem, 0, size);
            return n->mem;
        }
        n->next = c;
        a->head = c = n;
    }
    void *p = c->mem + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

void *dl_arena_memdup(dl_arena *a, const void *p, size_t size) {
    void *q = dl_arena_alloc(a, size);
    if (q && size) {
        memcpy(q, p, size);
    }
    return q;
}

char *dl_arena_strndup(dl_arena *a, const char *s, size_t n) {
    char *q = dl_arena_alloc(a, n + 1);
    if (q) {
        memcpy(q, s, n);
        q[n] = 0;
    }
    return q;
}

char *dl_arena_strdup(dl_arena *a, const char *s) {
    return dl_arena_strndup(a, s, strlen(s));
}

// ---------------------------------------------------------------------------------------------
// Allocation with a fault hook (faultsim). fail_after < 0: never fail; otherwise the allocation
// whose 0-based index since the last arming is >= fail_after returns NULL.

static _Atomic long alloc_fail_after = -1;
static _Atomic long alloc_count;
static _Atomic bool alloc_refused;

static bool alloc_allowed(void) {
    long i = atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    long limit = atomic_load_explicit(&alloc_fail_after, memory_order_relaxed);
    if (limit >= 0 && i >= limit) {
        atomic_store_explicit(&alloc_refused, true, memory_order_relaxed);
        return false;
    }
    return true;
}

void dl_test_fail_alloc_after(long n) {
    // ordering: a test arms the hook from one thread before starting the work it measures.
    atomic_store_explicit(&alloc_count, 0, memory_order_relaxed);
    atomic_store_explicit(&alloc_refused, false, memory_order_relaxed);
    atomic_store_explicit(&alloc_fail_after, n < 0 ? -1 : n, memory_order_relaxed);
}

long dl_test_alloc_count(void) {
    return atomic_load_explicit(&alloc_count, memory_order_relaxed);
}

bool dl_test_alloc_failed(void) {
    return atomic_load_explicit(&alloc_refused, memory_order_relaxed);
}

void *dl_mem_alloc(size_t size) {
    return alloc_allowed() ? malloc(size) : NULL;
}

void *dl_mem_calloc(size_t n, size_t size) {
    return alloc_allowed() ? calloc(n, size) : NULL;
}

void *dl_mem_realloc(void *p, size_t size) {
    return alloc_allowed() ? realloc(p, size) : NULL;
}

char *dl_mem_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *q = dl_mem_alloc(len + 1);
    if (q) {
        memcpy(q, s, len);
        q[len] = 0;
    }
    return q;
}

char *dl_mem_strdup(const char *s) {
    return dl_mem_strndup(s, SIZE_MAX);
}

// ---------------------------------------------------------------------------------------------
// Growable buffers

bool dl__vec_reserve(void **data, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) {
        return true;
    }
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need) {
        ncap *= 2;
    }
    void *p = dl_mem_realloc(*data, ncap * elem_size);
    if (!p) {
        return false;
    }
    *data = p;
    *cap = ncap;
    return true;
}

void dl_strbuf_append(dl_strbuf *b, const char *s, size_t n) {
    if (b->oom) {
        return;
    }
    if (!dl__vec_reserve((void **)&b->data, &b->cap, b->len + n + 1, 1)) {
        b->oom = true;
        return;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void dl_strbuf_puts(dl_strbuf *b, const char *s) {
    dl_strbuf_append(b, s, strlen(s));
}

void dl_strbuf_vprintf(dl_strbuf *b, const char *fmt, va_list ap) {
    if (b->oom) {
        return;
    }
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !dl__vec_reserve((void **)&b->data, &b->cap, b->len + (size_t)n + 1, 1)) {
        b->oom = true;
        return;
    }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void dl_strbuf_printf(dl_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dl_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void dl_strbuf_fini(dl_strbuf *b) {
    free(b->data);
    *b = (dl_strbuf){0};
}

char *dl_strbuf_take(dl_strbuf *b) {
    if (b->oom) {
        dl_strbuf_fini(b);
        return NULL;
    }
    if (!b->data) {
        dl_strbuf_append(b, "", 0);
        if (b->oom) {
            return NULL;
        }
    }
    char *p = b->data;
    *b = (dl_strbuf){0};
    return p;
}

uint64_t dl_hash_fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void dl_format_double(double v, char buf[40]) {
    if (isnan(v)) {
        strcpy(buf, "nan");
        return;
    }
    if (isinf(v)) {
        strcpy(buf, v < 0 ? "-inf" : "inf");
        return;
    }
    // The fewest significant digits that read back to the same double (1e-3 -> "0.001",
    // 0.1 -> "0.1", not "0.10000000000000001").
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 40, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            break;
        }
    }
    // "1e-05" -> "1e-5": printf pads exponents to two digits, people don't.
    char *e = strchr(buf, 'e');
    if (e) {
        char *d = e + 1;
        if (*d == '-' || *d == '+') {
            if (*d == '+') {
                memmove(d, d + 1, strlen(d + 1) + 1);
            } else {
                d++;
            }
        }
        while (d[0] == '0' && d[1] != 0) {
            memmove(d, d + 1, strlen(d + 1) + 1);
        }
    }
    if (!strpbrk(buf, ".eEn")) {
        strcat(buf, ".0");
    }
}

// ---------------------------------------------------------------------------------------------
// Files

static void set_why(char *why, size_t why_size, const char *fmt, ...) DL_PRINTF(3, 4);
static void set_why(char *why, size_t why_size, const char *fmt, ...) {
    if (why && why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
    }
}

dl_status dl_open_regular(const char *path, size_t max_len, int *out_fd, uint64_t *out_size,
                          char *why, size_t why_size) {
    *out_fd = -1;
    *out_size = 0;
    set_why(why, why_size, "%s", "");
    // O_NONBLOCK: opening a FIFO that has no writer would otherwise wait forever. It is refused
    // below, and for a regular file the flag changes nothing (cleared anyway).
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        set_why(why, why_size, "%s", strerror(e));
        errno = e;
        return DL_ERR_IO;
    }
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) != 0) {
        e = errno;
        set_why(why, why_size, "%s", strerror(e));
    } else if (S_ISDIR(st.st_mode)) {
        e = EISDIR;
        set_why(why, why_size, "is a directory");
    } else if (!S_ISREG(st.st_mode)) {
        // /dev/zero, a FIFO, a socket, a terminal: reading them may never end.
        e = EINVAL;
        set_why(why, why_size, "not a regular file");
    } else if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)max_len) {
        e = EFBIG;
        set_why(why, why_size, "file is %lld bytes, more than the limit of %llu bytes",
                (long long)st.st_size, (unsigned long long)max_len);
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
            e = errno;
            set_why(why, why_size, "%s", strerror(e));
        }
    }
    if (e) {
        close(fd);
        errno = e;
        return DL_ERR_IO;
    }
    *out_fd = fd;
    *out_size = (uint64_t)st.st_size;
    return DL_OK;
}

dl_status dl_fopen_regular(const char *path, size_t max_len, FILE **out, char *why,
                           size_t why_size) {
    *out = NULL;
    int fd;
    uint64_t size;
    DL_TRY(dl_open_regular(path, max_len, &fd, &size, why, why_size));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        set_why(why, why_size, "%s", strerror(e));
        errno = e;
        return DL_ERR_IO;
    }
    *out = f;
    return DL_OK;
}

dl_status dl_read_file_max(const char *path, size_t max_len, char **out, size_t *out_len, char *why,
                           size_t why_size) {
    *out = NULL;
    *out_len = 0;
    if (max_len > SIZE_MAX - 2) {
        max_len = SIZE_MAX - 2; // room for the NUL and the one byte that detects growth
    }
    int fd;
    uint64_t size;
    DL_TRY(dl_open_regular(path, max_len, &fd, &size, why, why_size));
    // Sized from fstat, plus one byte to see EOF without a second allocation. A file that grows
    // while being read still stops at max_len.
    size_t cap = (size_t)size + 2, len = 0;
    char *buf = dl_mem_alloc(cap);
    dl_status st = DL_OK;
    int e = 0;
    if (!buf) {
        st = DL_ERR_NOMEM;
        set_why(why, why_size, "out of memory");
        goto out;
    }
    for (;;) {
        if (len + 1 == cap) {
            if (len > max_len) {
                e = EFBIG;
                set_why(why, why_size, "file grew past the limit of %zu bytes while being read",
                        max_len);
                break;
            }
            size_t ncap = cap <= (max_len + 2) / 2 ? cap * 2 : max_len + 2;
            char *nb = dl_mem_realloc(buf, ncap);
            if (!nb) {
                st = DL_ERR_NOMEM;
                set_why(why, why_size, "out of memory");
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            e = errno;
            set_why(why, why_size, "%s", strerror(e));
            break;
        }
        if (r == 0) {
            break;
        }
        len += (size_t)r;
    }
    if (e) {
        st = DL_ERR_IO;
    }
out:
    close(fd);
    if (st != DL_OK) {
        free(buf);
        errno = e ? e : ENOMEM;
        return st;
    }
    buf[len] = 0;
    *out = buf;
    *out_len = len;
    return DL_OK;
}

dl_status dl_read_file(const char *path, char **out, size_t *out_len) {
    return dl_read_file_max(path, DL_READ_LIMIT_DEFAULT, out, out_len, NULL, 0);
}

bool dl_path_is_stream(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

bool dl_write_fd_all(int fd, const void *data, size_t len) {
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        p += w;
        len -= (size_t)w;
    }
    return true;
}

dl_status dl_out_open(const char *path, dl_out *o) {
    o->path = path;
    o->tmp = NULL;
    if (dl_path_is_stream(path)) {
        o->fd = open(path, O_WRONLY | O_CLOEXEC);
        return o->fd < 0 ? DL_ERR_IO : DL_OK;
    }
    size_t plen = strlen(path);
    o->tmp = dl_mem_alloc(plen + 16);
    if (!o->tmp) {
        o->fd = -1;
        return DL_ERR_NOMEM;
    }
    memcpy(o->tmp, path, plen);
    memcpy(o->tmp + plen, ".tmp.XXXXXX", 12);
    o->fd = mkstemp(o->tmp);
    if (o->fd < 0) {
        int saved = errno;
        free(o->tmp);
        o->tmp = NULL;
        errno = saved;
        return DL_ERR_IO;
    }
    return DL_OK;
}

dl_status dl_out_close(dl_out *o, bool ok) {
    int saved = errno;
    if (o->tmp) {
        // mkstemp creates 0600; give the file the usual permissions (umask applies).
        mode_t mask = umask(0);
        umask(mask);
        if (ok && (fchmod(o->fd, 0666 & ~mask) != 0 || fsync(o->fd) != 0)) {
            ok = false;
            saved = errno;
        }
    }
    if (close(o->fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (o->tmp) {
        if (ok && rename(o->tmp, o->path) != 0) {
            ok = false;
            saved = errno;
        }
        if (!ok) {
            unlink(o->tmp);
        }
        free(o->tmp);
        o->tmp = NULL;
    }
    o->fd = -1;
    errno = saved;
    return ok ? DL_OK : DL_ERR_IO;
}

dl_status dl_write_file_atomic(const char *path, const void *data, size_t len) {
    dl_out o;
    dl_status st = dl_out_open(path, &o);
    if (st != DL_OK) {
        return st;
    }
    return dl_out_close(&o, dl_write_fd_all(o.fd, data, len));
}

// ---------------------------------------------------------------------------------------------
// Half precision

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t dl_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) {
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    }
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (e <= 0) {
        if (e < -10) {
            return (uint16_t)sign;
        }
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) {
            half++;
        }
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) {
        half++; // may carry into the exponent, which is the correct rounding to inf
    }
    return (uint16_t)(sign | half);
}

float dl_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) {
            return bits_f32(sign);
        }
        float v = (float)man * 5.9604644775390625e-8f; // 2^-24
        return sign ? -v : v;
    }
    if (exp == 31) {
        return bits_f32(sign | 0x7f800000u | (man << 13));
    }
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t dl_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u); // quiet NaN
    }
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

float dl_bf16_to_f32(uint16_t h) {
    return bits_f32((uint32_t)h << 16);
}

// ---------------------------------------------------------------------------------------------
// RNG: splitmix64's finaliser applied twice over (seed, counter). Stateless and counter-based,
// so any element can be drawn independently.

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t dl_rng_bits(uint64_t seed, uint64_t counter) {
    return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^
                 (counter * 0xd1b54a32d192ed03ull + 0x8cb92ba72f3d8dd7ull));
}

double dl_rng_uniform(uint64_t seed, uint64_t counter) {
    return (double)(dl_rng_bits(seed, counter) >> 11) * 0x1.0p-53;
}

double dl_rng_normal(uint64_t seed, uint64_t i) {
    double u1 = dl_rng_uniform(seed, 2 * i);
    double u2 = dl_rng_uniform(seed, 2 * i + 1);
    if (u1 < 0x1.0p-60) {
        u1 = 0x1.0p-60; // log(0) guard
    }
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925286766559 * u2);
}
