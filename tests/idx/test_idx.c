// tests/idx/test_idx.c — the IDX reader (base/dl_idx.h): files of every element type written
// here plain and gzip-compressed (zlib's gzwrite) and read back, big-endian decoding, strict
// validation (every truncation length, bad magic/type/rank, trailing data, corrupt gzip), the
// float/label conversions, the Fashion-MNIST file finder, and — when Debian's
// dataset-fashion-mnist package is installed — the real test and training sets (skipped, not
// failed, when absent; the expected figures were computed independently with Python's gzip).
#include "dl_idx.h"
#include "dl_test.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static char tmp_root[256];

// A fresh temporary directory per process (created once).
static const char *tmpdir(void) {
    if (!tmp_root[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_root, sizeof tmp_root, "%s/dl_idx_XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            abort();
        }
    }
    return tmp_root;
}

static void tmp_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmpdir(), name);
}

static bool write_bytes(const char *path, const void *data, size_t len, bool gz) {
    if (gz) {
        gzFile g = gzopen(path, "wb");
        if (!g) {
            return false;
        }
        int n = len ? gzwrite(g, data, (unsigned)len) : 0;
        return gzclose(g) == Z_OK && (size_t)n == len;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        return false;
    }
    size_t n = fwrite(data, 1, len, f);
    return fclose(f) == 0 && n == len;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

// Serialises an IDX file: header + elements (host values) written big-endian.
static size_t build_idx(unsigned char *buf, unsigned type, unsigned rank, const uint32_t *dims,
                        const void *vals, size_t esize, size_t n) {
    size_t o = 0;
    buf[o++] = 0;
    buf[o++] = 0;
    buf[o++] = (unsigned char)type;
    buf[o++] = (unsigned char)rank;
    for (unsigned i = 0; i < rank; i++) {
        buf[o++] = (unsigned char)(dims[i] >> 24);
        buf[o++] = (unsigned char)(dims[i] >> 16);
        buf[o++] = (unsigned char)(dims[i] >> 8);
        buf[o++] = (unsigned char)dims[i];
    }
    const unsigned char *v = vals;
    for (size_t i = 0; i < n; i++) {
        for (size_t b = 0; b < esize; b++) {
            buf[o++] = v[i * esize + esize - 1 - b]; // little-endian host -> big-endian
        }
    }
    return o;
}

static bool is_zeroed(const dl_idx *x) {
    return x->data == NULL && x->rank == 0 && x->nbytes == 0 && x->dims[0] == 0;
}

DL_TEST(idx_types_roundtrip_plain_and_gz) {
    uint8_t u8[6] = {0, 1, 127, 128, 254, 255};
    int8_t i8[4] = {-128, -1, 0, 127};
    int16_t i16[3] = {-32768, 258, 32767};
    int32_t i32[4] = {0x01020304, -2, INT32_MAX, INT32_MIN};
    float f32[4] = {1.5f, -0.25f, 3e38f, -0.0f};
    double f64[8] = {1.0, -2.5, 1e300, 3.141592653589793, 0, -1e-300, 7, 8};
    struct {
        unsigned type;
        unsigned rank;
        uint32_t dims[3];
        const void *vals;
        size_t esize, n;
    } cases[] = {
        {0x08, 2, {2, 3}, u8, 1, 6},  {0x09, 1, {4}, i8, 1, 4},  {0x0B, 1, {3}, i16, 2, 3},
        {0x0C, 2, {2, 2}, i32, 4, 4}, {0x0D, 1, {4}, f32, 4, 4}, {0x0E, 3, {2, 2, 2}, f64, 8, 8},
    };
    for (size_t c = 0; c < DL_ARRAY_LEN(cases); c++) {
        for (int gz = 0; gz < 2; gz++) {
            unsigned char buf[256];
            size_t len = build_idx(buf, cases[c].type, cases[c].rank, cases[c].dims, cases[c].vals,
                                   cases[c].esize, cases[c].n);
            char path[512];
            // the name never says .gz: detection is by magic
            tmp_path(path, sizeof path, "rt.idx");
            DL_CHECK(write_bytes(path, buf, len, gz));
            dl_idx x;
            char err[256] = "";
            DL_CHECK_OK(dl_idx_read(path, &x, err, sizeof err));
            DL_CHECK_EQ_I64(x.type, cases[c].type);
            DL_CHECK_EQ_I64(x.rank, cases[c].rank);
            for (unsigned i = 0; i < cases[c].rank; i++) {
                DL_CHECK_EQ_I64(x.dims[i], cases[c].dims[i]);
            }
            DL_CHECK_EQ_I64(dl_idx_numel(&x), cases[c].n);
            DL_CHECK_EQ_I64(x.nbytes, cases[c].n * cases[c].esize);
            DL_CHECK(memcmp(x.data, cases[c].vals, x.nbytes) == 0);
            DL_CHECK_EQ_I64(dl_idx_type_size(x.type), cases[c].esize);
            dl_idx_free(&x);
            DL_CHECK(is_zeroed(&x));
        }
    }
}

DL_TEST(idx_big_endian_bytes) {
    // Written byte by byte, independent of build_idx.
    const unsigned char i32[] = {0,    0,    0x0C, 1,    0,    0,    0,    3, 0x12, 0x34,
                                 0x56, 0x78, 0xff, 0xff, 0xff, 0xfe, 0x80, 0, 0,    0};
    const unsigned char f32[] = {0,    0,    0x0D, 2, 0,    0, 0, 1, 0,    0,    0, 3,
                                 0x3f, 0x80, 0,    0, 0xc0, 0, 0, 0, 0x7f, 0x80, 0, 0};
    const unsigned char i16[] = {0, 0, 0x0B, 1, 0, 0, 0, 2, 0x01, 0x02, 0xff, 0xfe};
    char path[512];
    tmp_path(path, sizeof path, "be.idx");
    dl_idx x;
    char err[256] = "";

    DL_CHECK(write_bytes(path, i32, sizeof i32, false));
    DL_CHECK_OK(dl_idx_read(path, &x, err, sizeof err));
    const int32_t *p = x.data;
    DL_CHECK_EQ_I64(p[0], 0x12345678);
    DL_CHECK_EQ_I64(p[1], -2);
    DL_CHECK_EQ_I64(p[2], INT32_MIN);
    dl_idx_free(&x);

    DL_CHECK(write_bytes(path, f32, sizeof f32, true));
    DL_CHECK_OK(dl_idx_read(path, &x, err, sizeof err));
    DL_CHECK_EQ_I64(x.dims[0], 1);
    DL_CHECK_EQ_I64(x.dims[1], 3);
    const float *q = x.data;
    DL_CHECK(q[0] == 1.0f);
    DL_CHECK(q[1] == -2.0f);
    DL_CHECK(isinf(q[2]) && q[2] > 0);
    dl_idx_free(&x);

    DL_CHECK(write_bytes(path, i16, sizeof i16, false));
    DL_CHECK_OK(dl_idx_read(path, &x, err, sizeof err));
    DL_CHECK_EQ_I64(((const int16_t *)x.data)[0], 0x0102);
    DL_CHECK_EQ_I64(((const int16_t *)x.data)[1], -2);
    dl_idx_free(&x);
}

// Writes `full` (a valid file), truncated to every shorter length; each must fail cleanly.
DL_TEST(idx_truncated_every_length_plain) {
    uint8_t vals[18];
    for (int i = 0; i < 18; i++) {
        vals[i] = (uint8_t)(i * 7);
    }
    uint32_t dims[2] = {3, 6};
    unsigned char full[64];
    size_t len = build_idx(full, 0x08, 2, dims, vals, 1, 18);
    DL_CHECK_EQ_I64(len, 12 + 18);
    char path[512];
    tmp_path(path, sizeof path, "trunc.idx");
    for (size_t cut = 0; cut < len; cut++) {
        DL_CHECK(write_bytes(path, full, cut, false));
        dl_idx x;
        char err[256] = "";
        dl_status st = dl_idx_read(path, &x, err, sizeof err);
        if (st != DL_ERR_PARSE || !strstr(err, "truncated") || !is_zeroed(&x)) {
            DL_FAIL_("cut %zu: status %d err '%s'", cut, (int)st, err);
        }
    }
    DL_CHECK(write_bytes(path, full, 25, false));
    dl_idx x;
    char err[256] = "";
    DL_CHECK_EQ_I64(dl_idx_read(path, &x, err, sizeof err), DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "truncated: expected 30 bytes, got 25");
    DL_CHECK(write_bytes(path, full, 6, false));
    DL_CHECK_EQ_I64(dl_idx_read(path, &x, err, sizeof err), DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "truncated: expected at least 12 bytes, got 6");
    DL_CHECK(write_bytes(path, full, len, false));
    DL_CHECK_OK(dl_idx_read(path, &x, err, sizeof err));
    dl_idx_free(&x);
}

// Both kinds of gzip truncation: the decompressed IDX is short, and the compressed stream is
// cut (down to a missing last byte of the CRC/length trailer).
DL_TEST(idx_truncated_every_length_gz) {
    int32_t vals[40];
    for (int i = 0; i < 40; i++) {
        vals[i] = i * 1000003 - 7;
    }
    uint32_t dims[2] = {5, 8};
    unsigned char full[256];
    size_t len = build_idx(full, 0x0C, 2, dims, vals, 4, 40);
    char path[512];
    tmp_path(path, sizeof path, "trunc.gz");
    for (size_t cut = 0; cut < len; cut++) { // short IDX content, well-formed gzip
        DL_CHECK(write_bytes(path, full, cut, true));
        dl_idx x;
        char err[256] = "";
        dl_status st = dl_idx_read(path, &x, err, sizeof err);
        if (st != DL_ERR_PARSE || !strstr(err, "truncated") || !is_zeroed(&x)) {
            DL_FAIL_("content cut %zu: status %d err '%s'", cut, (int)st, err);
        }
    }
    DL_CHECK(write_bytes(path, full, len, true));
    size_t glen = 0;
    unsigned char *gz = slurp(path, &glen);
    DL_CHECK(gz && glen > 20);
    char cpath[512];
    tmp_path(cpath, sizeof cpath, "cut.gz");
    for (size_t cut = 0; cut < glen; cut++) { // cut compressed stream
        DL_CHECK(write_bytes(cpath, gz, cut, false));
        dl_idx x;
        char err[256] = "";
        dl_status st = dl_idx_read(cpath, &x, err, sizeof err);
        if (st == DL_OK || !err[0] || !is_zeroed(&x)) {
            free(gz);
            DL_FAIL_("stream cut %zu of %zu: status %d err '%s'", cut, glen, (int)st, err);
        }
    }
    // Flipped bits anywhere (header, deflate data, CRC, length) must never crash; flips in the
    // CRC/length trailer or the data must be errors.
    for (size_t at = 0; at < glen; at++) {
        gz[at] ^= 0x55;
        DL_CHECK(write_bytes(cpath, gz, glen, false));
        gz[at] ^= 0x55;
        dl_idx x;
        char err[256] = "";
        dl_status st = dl_idx_read(cpath, &x, err, sizeof err);
        if (st == DL_OK) {
            // only possible if the flip hit a header field zlib ignores (mtime, OS, XFL)
            if (at < 4 || at >= 10) {
                free(gz);
                DL_FAIL_("flip at %zu of %zu accepted", at, glen);
            }
            dl_idx_free(&x);
        }
    }
    gz[glen - 8] ^= 1; // CRC-32: the message carries zlib's reason, without the path
    DL_CHECK(write_bytes(cpath, gz, glen, false));
    free(gz);
    dl_idx x;
    char err[256] = "";
    DL_CHECK_EQ_I64(dl_idx_read(cpath, &x, err, sizeof err), DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "gzip: incorrect data check");
    DL_CHECK(write_bytes(path, full, len, true));
    DL_CHECK_OK(dl_idx_read(path, &x, err, sizeof err));
    DL_CHECK(memcmp(x.data, vals, sizeof vals) == 0);
    dl_idx_free(&x);
}

static dl_status read_bytes_as_idx(const unsigned char *b, size_t n, bool gz, char *err,
                                   size_t err_size) {
    char path[512];
    tmp_path(path, sizeof path, "bad.idx");
    if (!write_bytes(path, b, n, gz)) {
        return DL_ERR_IO;
    }
    dl_idx x;
    dl_status st = dl_idx_read(path, &x, err, err_size);
    if (st == DL_OK) {
        dl_idx_free(&x);
    } else if (!is_zeroed(&x)) {
        return DL_ERR_CORRUPT; // marks "out not zeroed" for the caller's check
    }
    return st;
}

DL_TEST(idx_bad_headers) {
    char err[256] = "";
    for (int gz = 0; gz < 2; gz++) {
        const unsigned char bad_magic[] = {0x01, 0x00, 0x08, 0x01, 0, 0, 0, 1, 42};
        DL_CHECK_EQ_I64(read_bytes_as_idx(bad_magic, sizeof bad_magic, gz, err, sizeof err),
                        DL_ERR_PARSE);
        DL_CHECK_STR_EQ(err, "bad magic: expected 00 00 <type> <ndims>, got 01 00 08 01 (not an "
                             "IDX file)");
        const unsigned char text[] = "hello, world\n";
        DL_CHECK_EQ_I64(read_bytes_as_idx(text, sizeof text - 1, gz, err, sizeof err),
                        DL_ERR_PARSE);
        DL_CHECK(strstr(err, "bad magic") != NULL);
        const unsigned char types[] = {0x00, 0x07, 0x0A, 0x0F, 0xff};
        for (size_t t = 0; t < sizeof types; t++) {
            const unsigned char b[] = {0, 0, types[t], 1, 0, 0, 0, 1, 42, 0, 0, 0, 0, 0, 0, 0};
            DL_CHECK_EQ_I64(read_bytes_as_idx(b, sizeof b, gz, err, sizeof err), DL_ERR_PARSE);
            DL_CHECK(strstr(err, "unsupported element type") != NULL);
        }
        const unsigned char rank0[] = {0, 0, 0x08, 0, 42};
        DL_CHECK_EQ_I64(read_bytes_as_idx(rank0, sizeof rank0, gz, err, sizeof err), DL_ERR_PARSE);
        DL_CHECK_STR_EQ(err, "unsupported number of dimensions 0 (expected 1..8)");
        unsigned char rank9[4 + 36 + 1] = {0, 0, 0x08, 9};
        for (int i = 0; i < 9; i++) {
            rank9[4 + 4 * i + 3] = 1;
        }
        DL_CHECK_EQ_I64(read_bytes_as_idx(rank9, sizeof rank9, gz, err, sizeof err), DL_ERR_PARSE);
        DL_CHECK(strstr(err, "dimensions 9") != NULL);
        // 8 dims of 2^32-1 overflow any size_t
        unsigned char huge[4 + 32] = {0, 0, 0x0E, 8};
        memset(huge + 4, 0xff, 32);
        DL_CHECK_EQ_I64(read_bytes_as_idx(huge, sizeof huge, gz, err, sizeof err), DL_ERR_PARSE);
        DL_CHECK(strstr(err, "overflows") != NULL);
        // a header claiming ~1 TB in a tiny file: truncated, without allocating it
        const unsigned char big[] = {0, 0, 0x08, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 1, 2};
        DL_CHECK_EQ_I64(read_bytes_as_idx(big, sizeof big, gz, err, sizeof err), DL_ERR_PARSE);
        DL_CHECK(strstr(err, "truncated") != NULL);
    }
}

DL_TEST(idx_trailing_data) {
    char err[256] = "";
    for (int gz = 0; gz < 2; gz++) {
        const unsigned char b[] = {0, 0, 0x08, 1, 0, 0, 0, 2, 7, 8, 9};
        DL_CHECK_EQ_I64(read_bytes_as_idx(b, sizeof b, gz, err, sizeof err), DL_ERR_PARSE);
        DL_CHECK_STR_EQ(err, "trailing data: more than the expected 10 bytes");
        DL_CHECK_OK(read_bytes_as_idx(b, sizeof b - 1, gz, err, sizeof err));
    }
}

DL_TEST(idx_empty_dims_and_missing_file) {
    const unsigned char b[] = {0, 0, 0x0D, 2, 0, 0, 0, 0, 0, 0, 0, 5};
    char path[512];
    tmp_path(path, sizeof path, "empty.idx");
    DL_CHECK(write_bytes(path, b, sizeof b, false));
    dl_idx x;
    char err[256] = "";
    DL_CHECK_OK(dl_idx_read(path, &x, err, sizeof err));
    DL_CHECK_EQ_I64(dl_idx_numel(&x), 0);
    DL_CHECK_EQ_I64(x.dims[1], 5);
    DL_CHECK(x.data != NULL);
    dl_idx_free(&x);
    tmp_path(path, sizeof path, "does-not-exist.idx");
    DL_CHECK_EQ_I64(dl_idx_read(path, &x, err, sizeof err), DL_ERR_IO);
    DL_CHECK(strstr(err, "cannot open") != NULL);
    DL_CHECK(is_zeroed(&x));
    DL_CHECK_EQ_I64(dl_idx_read(tmpdir(), &x, NULL, 0) == DL_OK, 0); // a directory; NULL err
    dl_idx_free(NULL);
}

DL_TEST(idx_to_float_and_labels) {
    uint8_t px[4] = {0, 51, 255, 102};
    dl_idx x = {.type = DL_IDX_U8, .rank = 2, .dims = {2, 2}, .data = px, .nbytes = 4};
    float f[4];
    dl_idx_to_float(&x, f, 1.0f / 255.0f, 0.0f);
    DL_CHECK_NEAR(f[0], 0.0, 0, 0);
    DL_CHECK_NEAR(f[1], 0.2, 1e-7, 0);
    DL_CHECK_NEAR(f[2], 1.0, 1e-7, 0);
    dl_idx_to_float(&x, f, 2.0f, -1.0f);
    DL_CHECK_NEAR(f[3], 203.0, 0, 0);
    int16_t s[3] = {-3, 0, 300};
    dl_idx y = {.type = DL_IDX_I16, .rank = 1, .dims = {3}, .data = s, .nbytes = 6};
    dl_idx_to_float(&y, f, 0.5f, 1.0f);
    DL_CHECK_NEAR(f[0], -0.5, 0, 0);
    DL_CHECK_NEAR(f[2], 151.0, 0, 0);
    double d[2] = {1e10, -4.0};
    dl_idx z = {.type = DL_IDX_F64, .rank = 1, .dims = {2}, .data = d, .nbytes = 16};
    dl_idx_to_float(&z, f, 0.5f, 0.0f);
    DL_CHECK_NEAR(f[0], 5e9, 0, 1e-7);
    DL_CHECK_NEAR(f[1], -2.0, 0, 0);

    uint8_t lab[5] = {0, 9, 3, 3, 7};
    dl_idx l = {.type = DL_IDX_U8, .rank = 1, .dims = {5}, .data = lab, .nbytes = 5};
    int64_t li[5];
    char err[256] = "";
    DL_CHECK_OK(dl_idx_labels_to_i64(&l, li, 10, err, sizeof err));
    DL_CHECK_EQ_I64(li[1], 9);
    DL_CHECK_EQ_I64(li[4], 7);
    DL_CHECK_EQ_I64(dl_idx_labels_to_i64(&l, li, 9, err, sizeof err), DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "label 1 is 9, outside 0..8");
    DL_CHECK_OK(dl_idx_labels_to_i64(&l, li, 0, err, sizeof err)); // 0: no range check
    DL_CHECK_EQ_I64(dl_idx_labels_to_i64(&y, li, 10, err, sizeof err), DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "label 0 is -3, outside 0..9");
    DL_CHECK_EQ_I64(dl_idx_labels_to_i64(&z, li, 10, err, sizeof err), DL_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(err, "labels must have an integer type, got float64");

    dl_idx imgs = {.type = DL_IDX_U8, .rank = 3, .dims = {5, 2, 2}};
    DL_CHECK_OK(dl_idx_check_pair(&imgs, &l, err, sizeof err));
    imgs.dims[0] = 4;
    DL_CHECK_EQ_I64(dl_idx_check_pair(&imgs, &l, err, sizeof err), DL_ERR_SHAPE);
    DL_CHECK_STR_EQ(err, "4 images but 5 labels");
    DL_CHECK_EQ_I64(dl_idx_check_pair(&l, &l, err, sizeof err), DL_ERR_SHAPE);
    DL_CHECK_EQ_I64(dl_idx_check_pair(&imgs, &imgs, err, sizeof err), DL_ERR_SHAPE);
}

DL_TEST(idx_find_mnist_files) {
    DL_CHECK_STR_EQ(dl_idx_default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
    DL_CHECK_STR_EQ(dl_idx_mnist_file_name(DL_IDX_TEST_LABELS), "t10k-labels-idx1-ubyte");
    char dir[512];
    tmp_path(dir, sizeof dir, "mnist");
    DL_CHECK(mkdir(dir, 0700) == 0);
    dl_idx_mnist_paths p;
    char err[512] = "";
    DL_CHECK_EQ_I64(dl_idx_find_mnist_files(dir, &p, err, sizeof err), DL_ERR_IO);
    DL_CHECK(strstr(err, "missing train-images-idx3-ubyte(.gz)") != NULL);
    DL_CHECK(strstr(err, "dataset-fashion-mnist") != NULL);
    const char *names[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte.gz"};
    for (size_t i = 0; i < DL_ARRAY_LEN(names); i++) {
        char f[600];
        snprintf(f, sizeof f, "%s/%s", dir, names[i]);
        DL_CHECK(write_bytes(f, "x", 1, false));
    }
    DL_CHECK_EQ_I64(dl_idx_find_mnist_files(dir, &p, err, sizeof err), DL_ERR_IO);
    DL_CHECK(strstr(err, "missing t10k-labels-idx1-ubyte(.gz) in ") != NULL);
    for (int i = 0; i < DL_IDX_MNIST_N_FILES; i++) {
        DL_CHECK(p.path[i] == NULL);
    }
    char f[600];
    snprintf(f, sizeof f, "%s/t10k-labels-idx1-ubyte.gz", dir);
    DL_CHECK(write_bytes(f, "x", 1, false));
    DL_CHECK_OK(dl_idx_find_mnist_files(dir, &p, err, sizeof err));
    DL_CHECK(strstr(p.path[DL_IDX_TRAIN_IMAGES], "/train-images-idx3-ubyte.gz") != NULL);
    DL_CHECK(strstr(p.path[DL_IDX_TRAIN_LABELS], "/train-labels-idx1-ubyte") != NULL);
    DL_CHECK(strstr(p.path[DL_IDX_TEST_LABELS], "/t10k-labels-idx1-ubyte.gz") != NULL);
    dl_idx_mnist_paths_fini(&p);
    dl_idx_mnist_paths_fini(NULL);
    tmp_path(dir, sizeof dir, "no-such-dir");
    DL_CHECK_EQ_I64(dl_idx_find_mnist_files(dir, &p, err, sizeof err), DL_ERR_IO);
    DL_CHECK(strstr(err, "not found") != NULL && strstr(err, "dataset-fashion-mnist") != NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Real data, when Debian's dataset-fashion-mnist is installed (else skipped). Expected values
// from Python: t10k labels 1000 per class, first labels 9 2 1 1 6 1 4 6 5 7, pixels 0..255 with
// sum 573469082; train labels 6000 per class, first image pixel sum 76247.
DL_TEST(idx_real_fashion_mnist) {
    const char *dir = dl_idx_default_fashion_mnist_dir();
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        printf("skip: %s absent (Debian package dataset-fashion-mnist)\n", dir);
        return;
    }
    dl_idx_mnist_paths p;
    char err[512] = "";
    DL_CHECK_OK(dl_idx_find_mnist_files(dir, &p, err, sizeof err));
    dl_idx img = {0}, lab = {0};
    int64_t *li = NULL;
    float *fx = NULL;
    bool ok = false;
    do {
        if (dl_idx_read(p.path[DL_IDX_TEST_IMAGES], &img, err, sizeof err) != DL_OK ||
            dl_idx_read(p.path[DL_IDX_TEST_LABELS], &lab, err, sizeof err) != DL_OK) {
            fprintf(stderr, "read: %s\n", err);
            break;
        }
        if (img.type != DL_IDX_U8 || img.rank != 3 || img.dims[0] != 10000 || img.dims[1] != 28 ||
            img.dims[2] != 28 || lab.type != DL_IDX_U8 || lab.rank != 1 || lab.dims[0] != 10000 ||
            dl_idx_check_pair(&img, &lab, err, sizeof err) != DL_OK) {
            fprintf(stderr, "t10k shapes wrong\n");
            break;
        }
        li = malloc(10000 * sizeof *li);
        if (dl_idx_labels_to_i64(&lab, li, 10, err, sizeof err) != DL_OK) {
            fprintf(stderr, "labels: %s\n", err);
            break;
        }
        int64_t hist[10] = {0};
        for (int i = 0; i < 10000; i++) {
            hist[li[i]]++;
        }
        const int64_t first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
        bool hist_ok = true;
        for (int c = 0; c < 10; c++) {
            hist_ok = hist_ok && hist[c] == 1000 && li[c] == first[c];
        }
        const uint8_t *px = img.data;
        uint64_t sum = 0;
        uint8_t lo = 255, hi = 0;
        for (size_t i = 0; i < img.nbytes; i++) {
            sum += px[i];
            lo = px[i] < lo ? px[i] : lo;
            hi = px[i] > hi ? px[i] : hi;
        }
        if (!hist_ok || sum != 573469082u || lo != 0 || hi != 255) {
            fprintf(stderr, "t10k content: sum %llu lo %u hi %u\n", (unsigned long long)sum, lo,
                    hi);
            break;
        }
        dl_idx_free(&img);
        dl_idx_free(&lab);
        // Training set, timed: read + convert to float in [0, 1].
        double t0 = now_s();
        if (dl_idx_read(p.path[DL_IDX_TRAIN_IMAGES], &img, err, sizeof err) != DL_OK) {
            fprintf(stderr, "read train: %s\n", err);
            break;
        }
        double t1 = now_s();
        fx = malloc((size_t)dl_idx_numel(&img) * sizeof *fx);
        dl_idx_to_float(&img, fx, 1.0f / 255.0f, 0.0f);
        double t2 = now_s();
        printf("fashion-mnist train images [%lld, %lld, %lld]: read %.3f s, to float %.3f s\n",
               (long long)img.dims[0], (long long)img.dims[1], (long long)img.dims[2], t1 - t0,
               t2 - t1);
        double s0 = 0;
        for (int i = 0; i < 784; i++) {
            s0 += fx[i];
        }
        if (img.dims[0] != 60000 || fabs(s0 * 255.0 - 76247.0) > 0.05) {
            fprintf(stderr, "train image 0 sum %.3f\n", s0 * 255.0);
            break;
        }
        if (dl_idx_read(p.path[DL_IDX_TRAIN_LABELS], &lab, err, sizeof err) != DL_OK ||
            dl_idx_check_pair(&img, &lab, err, sizeof err) != DL_OK) {
            fprintf(stderr, "train labels: %s\n", err);
            break;
        }
        int64_t *tl = realloc(li, 60000 * sizeof *li);
        li = tl;
        if (dl_idx_labels_to_i64(&lab, li, 10, err, sizeof err) != DL_OK) {
            break;
        }
        int64_t th[10] = {0};
        for (int i = 0; i < 60000; i++) {
            th[li[i]]++;
        }
        ok = true;
        for (int c = 0; c < 10; c++) {
            ok = ok && th[c] == 6000;
        }
    } while (0);
    free(fx);
    free(li);
    dl_idx_free(&img);
    dl_idx_free(&lab);
    dl_idx_mnist_paths_fini(&p);
    DL_CHECK(ok);
}

DL_TEST_MAIN()
