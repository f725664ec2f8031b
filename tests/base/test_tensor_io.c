// tests/base/test_tensor_io.c — .npy and safetensors reading and writing (base/tensor_io.c).
// Files are built byte by byte here so every header variant and every corruption is explicit;
// truncation and byte-flip sweeps check that no malformed file crashes the readers (run them
// under ASan to catch out-of-bounds reads).
#include "dl_tensor_io.h"
#include "dl_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Builds an .npy image: magic, version, header length (2 or 4 bytes) and header text, then
// `data`. Returns a heap buffer (caller frees) and its size.
static unsigned char *make_npy(int major, const char *header, const void *data, size_t nbytes,
                               size_t *out_len) {
    size_t hl = strlen(header);
    size_t lenb = major == 1 ? 2 : 4;
    size_t total = 8 + lenb + hl + nbytes;
    unsigned char *b = malloc(total);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < lenb; i++) {
        b[8 + i] = (unsigned char)(hl >> (8 * i));
    }
    memcpy(b + 8 + lenb, header, hl);
    if (nbytes) {
        memcpy(b + 8 + lenb + hl, data, nbytes);
    }
    *out_len = total;
    return b;
}

// Parses an image built by make_npy; returns the status and the reason in err.
static dl_status parse_npy(int major, const char *header, const void *data, size_t nbytes,
                           dl_tensor *t, char *err, size_t err_size) {
    size_t len;
    unsigned char *b = make_npy(major, header, data, nbytes, &len);
    err[0] = 0;
    dl_status st = dl_npy_parse(b, len, t, err, err_size);
    free(b);
    return st;
}

static char tmpdir_[64];

static void remove_tmpdir(void) {
    rmdir(tmpdir_); // every test unlinks its own files
}

static const char *tmp_path(const char *name) {
    static char buf[160];
    if (!tmpdir_[0]) {
        strcpy(tmpdir_, "/tmp/dl_test_tio_XXXXXX");
        if (!mkdtemp(tmpdir_)) {
            abort();
        }
        atexit(remove_tmpdir);
    }
    snprintf(buf, sizeof buf, "%s/%s", tmpdir_, name);
    return buf;
}

static bool write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        return false;
    }
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

// ---------------------------------------------------------------------------------------------
// .npy reading

DL_TEST(npy_reads_v1_float_matrix) {
    float v[6] = {1, 2, 3, 4, 5, 6.5f};
    dl_tensor t;
    char err[256];
    DL_CHECK_OK(parse_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n", v,
                          sizeof v, &t, err, sizeof err));
    DL_CHECK_EQ_I64(t.dtype, DL_DT_FLOAT);
    DL_CHECK_EQ_I64(t.rank, 2);
    DL_CHECK_EQ_I64(t.dims[0], 2);
    DL_CHECK_EQ_I64(t.dims[1], 3);
    DL_CHECK_NEAR(dl_tensor_get(&t, 5), 6.5, 0, 0);
    dl_tensor_free(&t);
}

DL_TEST(npy_header_key_order_spacing_and_tuples) {
    int64_t v[3] = {7, -8, 9};
    dl_tensor t;
    char err[256];
    // Any key order, odd spacing, double quotes, 1-tuple with trailing comma, no trailing comma.
    DL_CHECK_OK(parse_npy(2, "{ \"shape\" :(3 ,) ,'fortran_order':False,'descr':'<i8'}\n", v,
                          sizeof v, &t, err, sizeof err));
    DL_CHECK_EQ_I64(t.dtype, DL_DT_INT64);
    DL_CHECK_EQ_I64(t.rank, 1);
    DL_CHECK_EQ_I64(t.dims[0], 3);
    DL_CHECK_EQ_I64(((int64_t *)t.data)[1], -8);
    dl_tensor_free(&t);
    // Version 3.0 (utf-8 header), scalar shape ().
    int32_t s = 42;
    DL_CHECK_OK(parse_npy(3, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }\n", &s,
                          sizeof s, &t, err, sizeof err));
    DL_CHECK_EQ_I64(t.rank, 0);
    DL_CHECK_EQ_I64(dl_tensor_numel(&t), 1);
    DL_CHECK_EQ_I64(((int32_t *)t.data)[0], 42);
    dl_tensor_free(&t);
    // A zero-size dimension needs no data.
    DL_CHECK_OK(parse_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }\n", NULL,
                          0, &t, err, sizeof err));
    DL_CHECK_EQ_I64(dl_tensor_numel(&t), 0);
    dl_tensor_free(&t);
}

DL_TEST(npy_reads_every_supported_dtype) {
    static const struct {
        const char *descr;
        dl_dtype dt;
    } cases[] = {{"<f4", DL_DT_FLOAT}, {"<f2", DL_DT_FLOAT16}, {"<u2", DL_DT_BFLOAT16},
                 {"<i4", DL_DT_INT32}, {"<i8", DL_DT_INT64},   {"|b1", DL_DT_BOOL},
                 {"=f4", DL_DT_FLOAT}, {"<b1", DL_DT_BOOL}};
    unsigned char data[16] = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0};
    for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
        char hdr[128];
        snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }\n",
                 cases[i].descr);
        dl_tensor t;
        char err[256];
        DL_CHECK_OK(parse_npy(1, hdr, data, 2 * dl_dtype_size(cases[i].dt), &t, err, sizeof err));
        DL_CHECK_EQ_I64(t.dtype, cases[i].dt);
        dl_tensor_free(&t);
    }
    DL_CHECK_STR_EQ(dl_npy_descr(DL_DT_BFLOAT16), "<u2");
    DL_CHECK_STR_EQ(dl_npy_descr(DL_DT_BOOL), "|b1");
}

// Each malformed file fails with DL_ERR_PARSE and a reason containing `want`.
static bool rejects(int major, const char *header, const void *data, size_t n, const char *want,
                    char *err, size_t err_size) {
    dl_tensor t = {0};
    dl_status st = parse_npy(major, header, data, n, &t, err, err_size);
    if (st == DL_OK) {
        dl_tensor_free(&t);
        return false;
    }
    if (!strstr(err, want)) {
        fprintf(stderr, "reason was: %s\n", err);
        return false;
    }
    return st == DL_ERR_PARSE && strchr(err, '\n') == NULL;
}

DL_TEST(npy_rejects_with_clear_reasons) {
    char err[512];
    float v[8] = {0};
    DL_CHECK(rejects(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", v, 16,
                     "unsupported dtype '<f8' (supported: '<f4' float, '<f2' float16, '<u2' "
                     "bfloat16, '<i4' int32, '<i8' int64, '|b1' bool)",
                     err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", v, 8,
                     "big-endian dtype '>f4' is not supported", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", v, 16,
                     "Fortran-order arrays are not supported", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, 20,
                     "truncated data: expected 24 bytes, got 20", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", v, 12,
                     "trailing data: expected 8 bytes, got 12", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", v, 16,
                     "unsupported dtype '|O'", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", v, 8,
                     "structured arrays are not supported", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'shape': (2,), }", v, 8, "missing key 'fortran_order'",
                     err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", v, 8,
                     "'shape' must hold non-negative integers", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", v, 8,
                     "'shape' is not a tuple", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", v,
                     4, "more than 8 dimensions", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", v, 8,
                     "unexpected key 'x'", err, sizeof err));
    DL_CHECK(rejects(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", v, 8,
                     "unexpected text after the dictionary", err, sizeof err));
    DL_CHECK(rejects(1,
                     "{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (4294967296, 4294967296, 4294967296), }",
                     v, 8, "array too large", err, sizeof err));
    unsigned char bools[2] = {1, 2};
    DL_CHECK(rejects(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", bools, 2,
                     "bool element 1 is 2", err, sizeof err));
    DL_CHECK(rejects(4, "{}", v, 0, "unsupported .npy format version 4.0", err, sizeof err));

    dl_tensor t;
    DL_CHECK(dl_npy_parse("PK\x03\x04 this is a zip", 17, &t, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "not a .npy file (bad magic)");
    DL_CHECK(dl_npy_parse("", 0, &t, err, sizeof err) == DL_ERR_PARSE);
    // Header length pointing past the end of the file.
    unsigned char shortf[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0x00, '{', '}'};
    DL_CHECK(dl_npy_parse(shortf, sizeof shortf, &t, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "truncated .npy header: expected 255 bytes, got 2");
}

// The in-place view: every element type, the caller's accept mask, the data left where it is,
// and UNSUPPORTED (valid file, not taken) told apart from PARSE (malformed).
static dl_status view_npy(const char *header, const void *data, size_t nbytes, unsigned accept,
                          dl_npy_view *v, unsigned char **img, char *err, size_t err_size) {
    size_t len;
    *img = make_npy(1, header, data, nbytes, &len);
    err[0] = 0;
    return dl_npy_view_parse(*img, len, accept, v, err, err_size);
}

DL_TEST(npy_view_element_types_and_accept_mask) {
    static const struct {
        const char *descr;
        dl_npy_elem elem;
        size_t size;
        const char *name;
    } cases[] = {
        {"|u1", DL_NPY_U8, 1, "uint8"},  {"<u1", DL_NPY_U8, 1, "uint8"},
        {"|i1", DL_NPY_I8, 1, "int8"},   {"<i2", DL_NPY_I16, 2, "int16"},
        {"=i2", DL_NPY_I16, 2, "int16"}, {"<f8", DL_NPY_F64, 8, "float64"},
        {"<f4", DL_NPY_F32, 4, "float"}, {"<u2", DL_NPY_BF16, 2, "bfloat16"},
        {"|b1", DL_NPY_BOOL, 1, "bool"}, {"<i8", DL_NPY_I64, 8, "int64"},
    };
    unsigned char data[48] = {0};
    char err[512], header[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(header, sizeof header,
                 "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }", cases[i].descr);
        dl_npy_view v;
        unsigned char *img = NULL;
        dl_status st =
            view_npy(header, data, 6 * cases[i].size, DL_NPY_ALL_ELEMS, &v, &img, err, sizeof err);
        DL_CHECK_OK(st);
        DL_CHECK_EQ_I64(v.elem, cases[i].elem);
        DL_CHECK_EQ_I64(v.elem_size, cases[i].size);
        DL_CHECK_EQ_I64(v.rank, 2);
        DL_CHECK_EQ_I64(v.dims[1], 3);
        DL_CHECK_EQ_I64(v.nbytes, 6 * cases[i].size);
        DL_CHECK_STR_EQ(dl_npy_elem_name(v.elem), cases[i].name);
        DL_CHECK((const unsigned char *)v.data > img); // in place, after the header
        free(img);
    }
    dl_npy_view v;
    unsigned char *img = NULL;
    // Refused by the mask: the message lists what the caller takes.
    DL_CHECK_EQ_I64(view_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", data, 16,
                             (1u << DL_NPY_U8) | (1u << DL_NPY_I64), &v, &img, err, sizeof err),
                    DL_ERR_UNSUPPORTED);
    DL_CHECK_STR_EQ(err, "unsupported dtype '<f8' (supported: '<i8' int64, '|u1' uint8)");
    free(img);
    DL_CHECK_EQ_I64(view_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", data, 8,
                             DL_NPY_ALL_ELEMS, &v, &img, err, sizeof err),
                    DL_ERR_UNSUPPORTED);
    free(img);
    DL_CHECK_EQ_I64(view_npy("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", data, 4,
                             DL_NPY_ALL_ELEMS, &v, &img, err, sizeof err),
                    DL_ERR_UNSUPPORTED);
    DL_CHECK(strstr(err, "big-endian dtype '>i2'") != NULL);
    free(img);
    DL_CHECK_EQ_I64(view_npy("{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", data, 2,
                             DL_NPY_ALL_ELEMS, &v, &img, err, sizeof err),
                    DL_OK); // byte order means nothing for single bytes
    free(img);
    DL_CHECK_EQ_I64(view_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", data, 4,
                             DL_NPY_ALL_ELEMS, &v, &img, err, sizeof err),
                    DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "truncated data: expected 5 bytes, got 4");
    free(img);
}

DL_TEST(npy_read_missing_file_is_io_error) {
    dl_tensor t;
    char err[256];
    DL_CHECK(dl_npy_read("/nonexistent/dir/x.npy", &t, err, sizeof err) == DL_ERR_IO);
    DL_CHECK_STR_EQ(err, "cannot read: No such file or directory");
    DL_CHECK(t.data == NULL);
}

DL_TEST(npy_truncation_and_bitflip_sweep_never_crashes) {
    float v[6] = {1, 2, 3, 4, 5, 6};
    size_t len;
    unsigned char *b =
        make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }        \n", v,
                 sizeof v, &len);
    char err[256];
    for (size_t n = 0; n < len; n++) {
        dl_tensor t;
        DL_CHECK(dl_npy_parse(b, n, &t, err, sizeof err) == DL_ERR_PARSE);
        DL_CHECK(err[0] != 0);
    }
    int ok = 0;
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            unsigned char *c = malloc(len);
            memcpy(c, b, len);
            c[i] ^= (unsigned char)(1u << bit);
            dl_tensor t;
            if (dl_npy_parse(c, len, &t, err, sizeof err) == DL_OK) {
                ok++;
                dl_tensor_free(&t);
            }
            free(c);
        }
    }
    DL_CHECK(ok > 0); // flips inside the data or padding are still valid files
    free(b);
}

// ---------------------------------------------------------------------------------------------
// .npy writing

DL_TEST(npy_write_layout_and_round_trip) {
    static const struct {
        dl_dtype dt;
        int32_t rank;
        int64_t dims[3];
        const char *shape_text;
    } cases[] = {
        {DL_DT_FLOAT, 1, {3}, "(3,)"},
        {DL_DT_FLOAT16, 2, {2, 2}, "(2, 2)"},
        {DL_DT_BFLOAT16, 3, {1, 2, 3}, "(1, 2, 3)"},
        {DL_DT_INT32, 0, {0}, "()"},
        {DL_DT_INT64, 1, {0}, "(0,)"},
        {DL_DT_BOOL, 2, {3, 1}, "(3, 1)"},
    };
    for (size_t c = 0; c < DL_ARRAY_LEN(cases); c++) {
        dl_tensor t;
        DL_CHECK_OK(dl_tensor_alloc(&t, cases[c].dt, cases[c].rank, cases[c].dims));
        for (int64_t i = 0; i < dl_tensor_numel(&t); i++) {
            dl_tensor_set(&t, i, cases[c].dt == DL_DT_BOOL ? (double)(i % 2) : (double)i - 1.5);
        }
        const char *path = tmp_path("w.npy");
        DL_CHECK_OK(dl_npy_write(path, &t));
        char *data;
        size_t len;
        DL_CHECK_OK(dl_read_file(path, &data, &len));
        DL_CHECK(memcmp(data, "\x93NUMPY\x01\x00", 8) == 0);
        size_t hl = (size_t)(unsigned char)data[8] | (size_t)(unsigned char)data[9] << 8;
        DL_CHECK_EQ_I64((10 + hl) % 64, 0);
        DL_CHECK_EQ_I64(data[10 + hl - 1], '\n');
        char want[128];
        snprintf(want, sizeof want, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                 dl_npy_descr(cases[c].dt), cases[c].shape_text);
        DL_CHECK(strncmp(data + 10, want, strlen(want)) == 0);
        DL_CHECK_EQ_I64(len, 10 + hl + dl_tensor_nbytes(&t));
        free(data);
        dl_tensor r;
        char err[256];
        DL_CHECK_OK(dl_npy_read(path, &r, err, sizeof err));
        DL_CHECK_EQ_I64(r.dtype, t.dtype);
        DL_CHECK_EQ_I64(r.rank, t.rank);
        for (int32_t i = 0; i < t.rank; i++) {
            DL_CHECK_EQ_I64(r.dims[i], t.dims[i]);
        }
        DL_CHECK(memcmp(r.data, t.data, dl_tensor_nbytes(&t)) == 0);
        dl_tensor_free(&r);
        dl_tensor_free(&t);
        unlink(path);
    }
}

DL_TEST(npy_write_failure_leaves_no_file) {
    dl_tensor t;
    int64_t d[1] = {4};
    DL_CHECK_OK(dl_tensor_alloc(&t, DL_DT_FLOAT, 1, d));
    DL_CHECK(dl_npy_write("/nonexistent/dir/out.npy", &t) == DL_ERR_IO);
    dl_tensor_free(&t);
}

// ---------------------------------------------------------------------------------------------
// safetensors

// Writes a safetensors file: header JSON (padded to 8 bytes with spaces) and data.
static const char *make_st(const char *name, const char *json, const void *data, size_t n) {
    size_t jl = strlen(json);
    size_t pad = (8 - jl % 8) % 8;
    size_t hl = jl + pad;
    size_t total = 8 + hl + n;
    unsigned char *b = malloc(total);
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    }
    memcpy(b + 8, json, jl);
    memset(b + 8 + jl, ' ', pad);
    if (n) {
        memcpy(b + 8 + hl, data, n);
    }
    const char *path = tmp_path(name);
    bool ok = write_bytes(path, b, total);
    free(b);
    return ok ? path : NULL;
}

DL_TEST(safetensors_reads_tensors_by_name) {
    unsigned char data[64];
    float f[6] = {1, 2, 3, 4, 5, 6};
    int64_t i64[2] = {-5, 1LL << 40};
    memcpy(data, f, 24);
    memcpy(data + 24, i64, 16);
    data[40] = 1;
    data[41] = 0;
    const char *json =
        "{\"__metadata__\": {\"format\": \"pt\", \"note\": \"\\u00e9 \\\" x\"},"
        " \"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
        " \"idx\": {\"data_offsets\": [24, 40], \"dtype\": \"I64\", \"shape\": [2]},"
        " \"m\\u00e9\\\"x\": {\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [40, 42]},"
        " \"s\": {\"dtype\": \"F16\", \"shape\": [], \"data_offsets\": [42, 44]}}";
    uint16_t h = dl_f32_to_f16(0.5f);
    memcpy(data + 42, &h, 2);
    const char *path = make_st("a.safetensors", json, data, 44);
    DL_CHECK(path != NULL);
    dl_tensor t;
    char err[256];
    DL_CHECK_OK(dl_safetensors_read_tensor(path, "w", &t, err, sizeof err));
    DL_CHECK_EQ_I64(t.dtype, DL_DT_FLOAT);
    DL_CHECK_EQ_I64(t.rank, 2);
    DL_CHECK_EQ_I64(t.dims[1], 3);
    DL_CHECK_NEAR(dl_tensor_get(&t, 4), 5.0, 0, 0);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_safetensors_read_tensor(path, "idx", &t, err, sizeof err));
    DL_CHECK_EQ_I64(((int64_t *)t.data)[1], 1LL << 40);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_safetensors_read_tensor(path, "m\xc3\xa9\"x", &t, err, sizeof err));
    DL_CHECK_EQ_I64(t.dtype, DL_DT_BOOL);
    DL_CHECK_EQ_I64(((unsigned char *)t.data)[0], 1);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_safetensors_read_tensor(path, "s", &t, err, sizeof err));
    DL_CHECK_EQ_I64(t.rank, 0);
    DL_CHECK_NEAR(dl_tensor_get(&t, 0), 0.5, 0, 0);
    dl_tensor_free(&t);
    DL_CHECK(dl_safetensors_read_tensor(path, "nope", &t, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "no tensor named 'nope'");
    unlink(path);
}

static bool st_rejects(const char *json, const void *data, size_t n, const char *want) {
    const char *path = make_st("bad.safetensors", json, data, n);
    if (!path) {
        return false;
    }
    dl_tensor t = {0};
    char err[512] = "";
    dl_status st = dl_safetensors_read_tensor(path, "w", &t, err, sizeof err);
    unlink(path);
    if (st == DL_OK) {
        dl_tensor_free(&t);
        return false;
    }
    if (!strstr(err, want)) {
        fprintf(stderr, "reason was: %s\n", err);
        return false;
    }
    return true;
}

DL_TEST(safetensors_rejects_malformed_headers) {
    unsigned char d[32] = {0};
    DL_CHECK(
        st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}", d,
                   16, "data_offsets [0, 24] exceed the data section (16 bytes)"));
    DL_CHECK(
        st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", d,
                   24, "data_offsets span 20 bytes but F32[2, 3] needs 24"));
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"F64\", \"shape\": [2], \"data_offsets\": [0, 16]}}",
                        d, 16, "unsupported dtype F64 (supported: F32 F16 BF16 I32 I64 BOOL)"));
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}",
                        d, 16, "have begin > end"));
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}",
                        d, 16, "expected a non-negative integer"));
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [2]}}", d, 16,
                        "tensor 'w' lacks 'data_offsets'"));
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},}",
                        d, 16, "bad safetensors header"));
    DL_CHECK(st_rejects("[1, 2]", d, 16, "expected '{'"));
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}} x",
                        d, 16, "unexpected text after the JSON object"));
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                        " \"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
                        d, 16, "listed twice"));
    DL_CHECK(st_rejects("{\"__metadata__\": {\"a\": \"\\q\"}}", d, 0, "bad escape '\\q'"));
    DL_CHECK(st_rejects("{\"v\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
                        d, 8, "no tensor named 'w'"));
    unsigned char bools[2] = {0, 7};
    DL_CHECK(st_rejects("{\"w\": {\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [0, 2]}}",
                        bools, 2, "bool element 1 is 7"));

    // Header length larger than the file, and files shorter than the length field.
    unsigned char hdr[12] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}', ' ', ' '};
    const char *path = tmp_path("len.safetensors");
    DL_CHECK(write_bytes(path, hdr, sizeof hdr));
    dl_tensor t;
    char err[256];
    DL_CHECK(dl_safetensors_read_tensor(path, "w", &t, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK(strstr(err, "exceeds the file size") != NULL);
    DL_CHECK(write_bytes(path, hdr, 5));
    DL_CHECK(dl_safetensors_read_tensor(path, "w", &t, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK_STR_EQ(err, "not a safetensors file (shorter than 8 bytes)");
    unlink(path);
    DL_CHECK(dl_safetensors_read_tensor("/nonexistent/x.safetensors", "w", &t, err, sizeof err) ==
             DL_ERR_IO);
}

DL_TEST(safetensors_truncation_sweep_never_crashes) {
    float f[2] = {1, 2};
    const char *json = "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
    const char *path = make_st("full.safetensors", json, f, 8);
    DL_CHECK(path != NULL);
    char *full;
    size_t len;
    DL_CHECK_OK(dl_read_file(path, &full, &len));
    char cut_path[200];
    snprintf(cut_path, sizeof cut_path, "%s", tmp_path("cut.safetensors"));
    for (size_t n = 0; n < len; n++) {
        DL_CHECK(write_bytes(cut_path, full, n));
        dl_tensor t;
        char err[256];
        DL_CHECK(dl_safetensors_read_tensor(cut_path, "w", &t, err, sizeof err) != DL_OK);
    }
    // Every single-byte corruption of the header either parses or fails cleanly.
    for (size_t i = 8; i < len - 8; i++) {
        char saved = full[i];
        full[i] = (char)(full[i] ^ 0x5a);
        DL_CHECK(write_bytes(cut_path, full, len));
        dl_tensor t;
        char err[256];
        if (dl_safetensors_read_tensor(cut_path, "w", &t, err, sizeof err) == DL_OK) {
            dl_tensor_free(&t);
        }
        full[i] = saved;
    }
    free(full);
    unlink(cut_path);
    unlink(path);
}
