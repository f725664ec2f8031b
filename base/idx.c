// base/idx.c — IDX reader (MNIST-style data files), plain or gzip, see dl_idx.h for the format.
//
// The input is untrusted. A file is read through a tiny source abstraction (stdio for plain
// files, zlib's gzread for gzip ones, chosen by the magic bytes 1f 8b) in three steps: the
// 4-byte magic, the dims, then the data into a buffer that grows as bytes actually arrive, so a
// header claiming gigabytes in a tiny (or compressed) file never makes us allocate them. After
// the data we read one more byte to catch trailing data, and only then ask zlib whether the
// stream ended cleanly (CRC and length trailer present), which is how a gzip file cut inside
// its trailer is caught. Data is converted from big-endian to host order once, in place.
#include "dl_idx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static void set_err(char *err, size_t err_size, const char *fmt, ...) DL_PRINTF(3, 4);
static void set_err(char *err, size_t err_size, const char *fmt, ...) {
    if (!err || err_size == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

size_t dl_idx_type_size(dl_idx_type t) {
    switch (t) {
    case DL_IDX_U8:
    case DL_IDX_I8:
        return 1;
    case DL_IDX_I16:
        return 2;
    case DL_IDX_I32:
    case DL_IDX_F32:
        return 4;
    case DL_IDX_F64:
        return 8;
    }
    return 0; // not an enumerator: the byte came from a file
}

const char *dl_idx_type_name(dl_idx_type t) {
    switch (t) {
    case DL_IDX_U8:
        return "uint8";
    case DL_IDX_I8:
        return "int8";
    case DL_IDX_I16:
        return "int16";
    case DL_IDX_I32:
        return "int32";
    case DL_IDX_F32:
        return "float32";
    case DL_IDX_F64:
        return "float64";
    }
    return "?";
}

int64_t dl_idx_numel(const dl_idx *x) {
    int64_t n = 1;
    for (int32_t i = 0; i < x->rank; i++) {
        n *= x->dims[i];
    }
    return n;
}

void dl_idx_free(dl_idx *x) {
    if (!x) {
        return;
    }
    free(x->data);
    memset(x, 0, sizeof *x);
}

// ---------------------------------------------------------------------------------------------
// Sources: a plain FILE or a gzFile, read with one function.

typedef struct src {
    FILE *f;   // plain file, or NULL
    gzFile gz; // gzip file, or NULL
    const char *path;
} src;

// Reads up to n bytes; fewer means end of input or an error (see src_check).
static size_t src_read(src *s, void *buf, size_t n) {
    if (s->f) {
        return fread(buf, 1, n, s->f);
    }
    size_t got = 0;
    while (got < n) {
        size_t want = n - got;
        if (want > (1u << 30)) {
            want = 1u << 30; // gzread takes an unsigned and returns an int
        }
        int r = gzread(s->gz, (unsigned char *)buf + got, (unsigned)want);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    return got;
}

// After a short read, or at the end: DL_OK if the source is healthy (a clean end of input),
// otherwise the status and reason. `*is_truncated_gz` is set when zlib says the compressed
// stream ended early (then the caller words the message).
static dl_status src_check(src *s, bool *is_truncated_gz, char *err, size_t err_size) {
    *is_truncated_gz = false;
    if (s->f) {
        if (ferror(s->f)) {
            set_err(err, err_size, "read error: %s", strerror(errno));
            return DL_ERR_IO;
        }
        return DL_OK;
    }
    int errnum = Z_OK;
    const char *msg = gzerror(s->gz, &errnum);
    switch (errnum) {
    case Z_OK:
    case Z_STREAM_END:
        return DL_OK;
    case Z_BUF_ERROR: // "unexpected end of file"
        *is_truncated_gz = true;
        return DL_ERR_PARSE;
    case Z_MEM_ERROR:
        set_err(err, err_size, "gzip: out of memory");
        return DL_ERR_NOMEM;
    case Z_ERRNO:
        set_err(err, err_size, "read error: %s", strerror(errno));
        return DL_ERR_IO;
    default:
        // zlib prefixes its messages with "PATH: " ("<fd:N>: " for a descriptor); our reasons
        // never name the path
        if (msg && strncmp(msg, s->path, strlen(s->path)) == 0 &&
            strncmp(msg + strlen(s->path), ": ", 2) == 0) {
            msg += strlen(s->path) + 2;
        } else if (msg && strncmp(msg, "<fd:", 4) == 0 && strstr(msg, ">: ")) {
            msg = strstr(msg, ">: ") + 3;
        }
        set_err(err, err_size, "gzip: %s", msg ? msg : "corrupt stream");
        return DL_ERR_PARSE;
    }
}

// Reads exactly n bytes or reports why not: "truncated: expected [at least] N bytes, got M",
// counting the `done` bytes consumed before this call; `is_min` is for headers, whose full
// size is not known yet.
static dl_status src_read_exact(src *s, void *buf, size_t n, size_t done, bool is_min, char *err,
                                size_t err_size) {
    size_t got = src_read(s, buf, n);
    if (got == n) {
        return DL_OK;
    }
    bool trunc_gz = false;
    dl_status st = src_check(s, &trunc_gz, err, err_size);
    if (st == DL_OK || trunc_gz) {
        set_err(err, err_size, "truncated%s: expected %s%zu bytes, got %zu",
                trunc_gz ? " gzip stream" : "", is_min ? "at least " : "", done + n, done + got);
        return DL_ERR_PARSE;
    }
    return st;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

// Big-endian to host order, in place, for `n` elements of `size` bytes.
static void swap_to_host(void *data, size_t n, size_t size) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    (void)data, (void)n, (void)size;
#else
    unsigned char *p = data;
    for (size_t i = 0; i < n; i++, p += size) {
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
    }
#endif
}

// Reads the body after the magic and dims: exactly `expected` bytes, then checks for trailing
// data and a clean end. `hdr` bytes were consumed already; `hint` is how much data the source
// can plausibly hold (plain file: its remaining size), to size the first allocation.
static dl_status read_body(src *s, size_t hdr, size_t expected, size_t hint, void **out_data,
                           char *err, size_t err_size) {
    size_t cap = expected < hint ? expected : hint;
    if (cap < expected && cap < ((size_t)1 << 20)) {
        cap = expected < ((size_t)1 << 20) ? expected : ((size_t)1 << 20);
    }
    unsigned char *buf = dl_mem_alloc(cap ? cap : 1);
    if (!buf) {
        set_err(err, err_size, "out of memory for %zu data bytes", expected);
        return DL_ERR_NOMEM;
    }
    size_t got = 0;
    dl_status st = DL_OK;
    while (got < expected) {
        if (got == cap) {
            size_t ncap = cap > expected / 2 ? expected : cap * 2;
            unsigned char *nb = dl_mem_realloc(buf, ncap);
            if (!nb) {
                set_err(err, err_size, "out of memory for %zu data bytes", expected);
                st = DL_ERR_NOMEM;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        size_t n = src_read(s, buf + got, cap - got);
        got += n;
        if (got < cap) {
            break; // end of input or error
        }
    }
    bool trunc_gz = false;
    if (got < expected) {
        st = src_check(s, &trunc_gz, err, err_size);
        if (st == DL_OK || trunc_gz) {
            set_err(err, err_size, "truncated%s: expected %zu bytes, got %zu",
                    trunc_gz ? " gzip stream" : "", hdr + expected, hdr + got);
            st = DL_ERR_PARSE;
        }
        goto out;
    }
    unsigned char extra;
    if (src_read(s, &extra, 1) == 1) {
        set_err(err, err_size, "trailing data: more than the expected %zu bytes", hdr + expected);
        st = DL_ERR_PARSE;
        goto out;
    }
    // All data is there; the gzip trailer (CRC, length) must be too.
    st = src_check(s, &trunc_gz, err, err_size);
    if (trunc_gz) {
        set_err(err, err_size, "truncated gzip stream: data complete but the stream ends early");
    }
out:
    if (st != DL_OK) {
        free(buf);
        return st;
    }
    *out_data = buf;
    return DL_OK;
}

dl_status dl_idx_read(const char *path, dl_idx *out, char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    dl_status st = DL_OK;
    src s = {NULL, NULL, path};
    FILE *f = NULL;
    char why[160];
    // Regular files only (a FIFO or device would block or never end); gzip streams are bounded
    // by the header's counts as they are read.
    if (dl_fopen_regular(path, DL_READ_LIMIT_DEFAULT, &f, why, sizeof why) != DL_OK) {
        set_err(err, err_size, "cannot open: %s", why);
        return DL_ERR_IO;
    }
    unsigned char magic[4];
    size_t n_peek = fread(magic, 1, 2, f);
    if (ferror(f)) {
        set_err(err, err_size, "read error: %s", strerror(errno));
        fclose(f);
        return DL_ERR_IO;
    }
    size_t hint = (size_t)1 << 24; // gzip: grow from 16 MiB
    if (n_peek == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        // The descriptor already checked, not the path again (it could have been swapped).
        int fd = dup(fileno(f));
        fclose(f);
        s.gz = fd >= 0 && lseek(fd, 0, SEEK_SET) == 0 ? gzdopen(fd, "rb") : NULL;
        if (!s.gz && fd >= 0) {
            close(fd);
        }
        if (!s.gz) {
            set_err(err, err_size, "cannot open: %s", errno ? strerror(errno) : "gzopen failed");
            return errno == ENOMEM ? DL_ERR_NOMEM : DL_ERR_IO;
        }
        gzbuffer(s.gz, 1u << 17);
    } else {
        rewind(f);
        s.f = f;
        struct stat sb;
        if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0) {
            hint = (size_t)sb.st_size; // the data can be no larger than the file
        }
    }

    st = src_read_exact(&s, magic, 4, 0, true, err, err_size);
    if (st != DL_OK) {
        goto out;
    }
    if (magic[0] != 0 || magic[1] != 0) {
        set_err(err, err_size,
                "bad magic: expected 00 00 <type> <ndims>, got %02x %02x %02x %02x (not an IDX "
                "file)",
                magic[0], magic[1], magic[2], magic[3]);
        st = DL_ERR_PARSE;
        goto out;
    }
    dl_idx_type type = (dl_idx_type)magic[2];
    size_t esize = dl_idx_type_size(type);
    if (esize == 0) {
        set_err(err, err_size,
                "unsupported element type 0x%02x (supported: 0x08 uint8, 0x09 int8, 0x0b int16, "
                "0x0c int32, 0x0d float32, 0x0e float64)",
                magic[2]);
        st = DL_ERR_PARSE;
        goto out;
    }
    int32_t rank = magic[3];
    if (rank < 1 || rank > DL_IDX_MAX_RANK) {
        set_err(err, err_size, "unsupported number of dimensions %d (expected 1..%d)", rank,
                DL_IDX_MAX_RANK);
        st = DL_ERR_PARSE;
        goto out;
    }
    unsigned char dimbuf[4 * DL_IDX_MAX_RANK];
    size_t hdr = 4 + 4 * (size_t)rank;
    st = src_read_exact(&s, dimbuf, 4 * (size_t)rank, 4, true, err, err_size);
    if (st != DL_OK) {
        goto out;
    }
    size_t numel = 1;
    bool overflow = false;
    for (int32_t i = 0; i < rank; i++) {
        uint32_t d = be32(dimbuf + 4 * i);
        out->dims[i] = d;
        if (d != 0 && numel > SIZE_MAX / esize / d) {
            overflow = true;
        } else {
            numel *= d;
        }
    }
    if (overflow || numel * esize > SIZE_MAX - hdr) {
        set_err(err, err_size, "data size overflows (dims are too large)");
        st = DL_ERR_PARSE;
        goto out;
    }
    size_t expected = numel * esize;
    hint = hint > hdr ? hint - hdr : 0;
    void *data = NULL;
    st = read_body(&s, hdr, expected, hint, &data, err, err_size);
    if (st != DL_OK) {
        goto out;
    }
    swap_to_host(data, numel, esize);
    out->type = type;
    out->rank = rank;
    out->data = data;
    out->nbytes = expected;
out:
    if (s.f) {
        fclose(s.f);
    }
    if (s.gz) {
        gzclose_r(s.gz);
    }
    if (st != DL_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

// ---------------------------------------------------------------------------------------------
// Conversions

void dl_idx_to_float(const dl_idx *x, float *out, float scale, float shift) {
    size_t n = (size_t)dl_idx_numel(x);
    switch (x->type) {
    case DL_IDX_U8: {
        const uint8_t *p = x->data;
        for (size_t i = 0; i < n; i++) {
            out[i] = (float)p[i] * scale + shift;
        }
        return;
    }
    case DL_IDX_I8: {
        const int8_t *p = x->data;
        for (size_t i = 0; i < n; i++) {
            out[i] = (float)p[i] * scale + shift;
        }
        return;
    }
    case DL_IDX_I16: {
        const int16_t *p = x->data;
        for (size_t i = 0; i < n; i++) {
            out[i] = (float)p[i] * scale + shift;
        }
        return;
    }
    case DL_IDX_I32: {
        const int32_t *p = x->data;
        for (size_t i = 0; i < n; i++) {
            out[i] = (float)p[i] * scale + shift;
        }
        return;
    }
    case DL_IDX_F32: {
        const float *p = x->data;
        for (size_t i = 0; i < n; i++) {
            out[i] = p[i] * scale + shift;
        }
        return;
    }
    case DL_IDX_F64: {
        const double *p = x->data;
        for (size_t i = 0; i < n; i++) {
            out[i] = (float)(p[i] * (double)scale + (double)shift);
        }
        return;
    }
    }
    DL_UNREACHABLE(); // a dl_idx with a type the reader never produces
}

dl_status dl_idx_labels_to_i64(const dl_idx *x, int64_t *out, int64_t n_classes, char *err,
                               size_t err_size) {
    size_t n = (size_t)dl_idx_numel(x);
    switch (x->type) {
    case DL_IDX_U8:
        for (size_t i = 0; i < n; i++) {
            out[i] = ((const uint8_t *)x->data)[i];
        }
        break;
    case DL_IDX_I8:
        for (size_t i = 0; i < n; i++) {
            out[i] = ((const int8_t *)x->data)[i];
        }
        break;
    case DL_IDX_I16:
        for (size_t i = 0; i < n; i++) {
            out[i] = ((const int16_t *)x->data)[i];
        }
        break;
    case DL_IDX_I32:
        for (size_t i = 0; i < n; i++) {
            out[i] = ((const int32_t *)x->data)[i];
        }
        break;
    case DL_IDX_F32:
    case DL_IDX_F64:
        set_err(err, err_size, "labels must have an integer type, got %s",
                dl_idx_type_name(x->type));
        return DL_ERR_INVALID_ARG;
    }
    if (n_classes > 0) {
        for (size_t i = 0; i < n; i++) {
            if (out[i] < 0 || out[i] >= n_classes) {
                set_err(err, err_size, "label %zu is %lld, outside 0..%lld", i, (long long)out[i],
                        (long long)(n_classes - 1));
                return DL_ERR_PARSE;
            }
        }
    }
    return DL_OK;
}

dl_status dl_idx_check_pair(const dl_idx *images, const dl_idx *labels, char *err,
                            size_t err_size) {
    if (images->rank < 2) {
        set_err(err, err_size, "images need at least 2 dimensions, got %d", images->rank);
        return DL_ERR_SHAPE;
    }
    if (labels->rank != 1) {
        set_err(err, err_size, "labels need 1 dimension, got %d", labels->rank);
        return DL_ERR_SHAPE;
    }
    if (labels->type == DL_IDX_F32 || labels->type == DL_IDX_F64) {
        set_err(err, err_size, "labels must have an integer type, got %s",
                dl_idx_type_name(labels->type));
        return DL_ERR_SHAPE;
    }
    if (images->dims[0] != labels->dims[0]) {
        set_err(err, err_size, "%lld images but %lld labels", (long long)images->dims[0],
                (long long)labels->dims[0]);
        return DL_ERR_SHAPE;
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST files

const char *dl_idx_default_fashion_mnist_dir(void) {
    return "/usr/share/datasets/fashion-mnist";
}

static const char *const mnist_names[DL_IDX_MNIST_N_FILES] = {
    [DL_IDX_TRAIN_IMAGES] = "train-images-idx3-ubyte",
    [DL_IDX_TRAIN_LABELS] = "train-labels-idx1-ubyte",
    [DL_IDX_TEST_IMAGES] = "t10k-images-idx3-ubyte",
    [DL_IDX_TEST_LABELS] = "t10k-labels-idx1-ubyte",
};

const char *dl_idx_mnist_file_name(dl_idx_mnist_file f) {
    return (unsigned)f < DL_IDX_MNIST_N_FILES ? mnist_names[f] : "?";
}

void dl_idx_mnist_paths_fini(dl_idx_mnist_paths *p) {
    if (!p) {
        return;
    }
    for (int i = 0; i < DL_IDX_MNIST_N_FILES; i++) {
        free(p->path[i]);
        p->path[i] = NULL;
    }
}

#define MNIST_FIX                                                                                  \
    "install Debian's dataset-fashion-mnist package (apt-get install dataset-fashion-mnist) or "   \
    "use a directory holding the four IDX files"

static bool is_regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

dl_status dl_idx_find_mnist_files(const char *dir, dl_idx_mnist_paths *out, char *err,
                                  size_t err_size) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        set_err(err, err_size, "fashion-mnist: directory %s not found; " MNIST_FIX, dir);
        return DL_ERR_IO;
    }
    for (int i = 0; i < DL_IDX_MNIST_N_FILES; i++) {
        size_t len = strlen(dir) + 1 + strlen(mnist_names[i]) + 4; // "/", name, ".gz", NUL
        char *p = dl_mem_alloc(len);
        if (!p) {
            dl_idx_mnist_paths_fini(out);
            set_err(err, err_size, "out of memory");
            return DL_ERR_NOMEM;
        }
        snprintf(p, len, "%s/%s", dir, mnist_names[i]);
        if (!is_regular_file(p)) {
            snprintf(p, len, "%s/%s.gz", dir, mnist_names[i]);
            if (!is_regular_file(p)) {
                free(p);
                dl_idx_mnist_paths_fini(out);
                set_err(err, err_size, "fashion-mnist: missing %s(.gz) in %s; " MNIST_FIX,
                        mnist_names[i], dir);
                return DL_ERR_IO;
            }
        }
        out->path[i] = p;
    }
    return DL_OK;
}
