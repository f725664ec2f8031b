// tests/safetensors/test_safetensors.c — dl_st_* (base/dl_safetensors.h): exact writer bytes,
// round trips of every dtype (scalar and empty tensors included), metadata escaping, a python
// cross-check in both directions (json + struct + numpy; the safetensors package is not used),
// malformed files (every truncation, bad JSON, bad offsets, dtypes, duplicates) and atomic writes.
#include "dl_safetensors.h"
#include "dl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

static const char *tmpdir(void) {
    if (!g_dir[0]) {
        strcpy(g_dir, "/tmp/dl_st_test_XXXXXX");
        if (!mkdtemp(g_dir)) {
            perror("mkdtemp");
            abort();
        }
    }
    return g_dir;
}

static void tmppath(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmpdir(), name);
}

static bool write_raw(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        return false;
    }
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

// The tensors of st_crosscheck.py's expected(), same names, order, shapes and values.
#define N_T 8
typedef struct fixture {
    float f32[6];
    uint16_t f16[6], bf16[6];
    int32_t i32[6];
    int64_t i64[6];
    uint8_t b[6];
    float scalar;
    int32_t empty[1];
    const char *names[N_T];
    dl_tensor t[N_T];
} fixture;

static const char *META_K1 = "quote\"back\\slash";
static const char *META_V1 = "line\nbreak\ttab\x01 caf\xc3\xa9 \xe2\x98\x83";

static void make_fixture(fixture *fx) {
    memset(fx, 0, sizeof *fx);
    for (int i = 0; i < 6; i++) {
        fx->f32[i] = (float)i * 0.5f - 1.25f;
        fx->f16[i] = dl_f32_to_f16(fx->f32[i]);
        fx->bf16[i] = dl_f32_to_bf16(fx->f32[i]);
        fx->i32[i] = i * 7 - 20;
        fx->i64[i] = (int64_t)i * 3000000000LL - 5;
        fx->b[i] = (uint8_t)(i % 2);
    }
    fx->scalar = 3.5f;
    static const char *const names[N_T] = {"f32", "f16",  "bf16",   "i32",
                                           "i64", "bool", "scalar", "empty"};
    memcpy(fx->names, names, sizeof names);
    fx->t[0] = (dl_tensor){DL_DT_FLOAT, 2, {2, 3}, fx->f32};
    fx->t[1] = (dl_tensor){DL_DT_FLOAT16, 1, {6}, fx->f16};
    fx->t[2] = (dl_tensor){DL_DT_BFLOAT16, 2, {3, 2}, fx->bf16};
    fx->t[3] = (dl_tensor){DL_DT_INT32, 1, {6}, fx->i32};
    fx->t[4] = (dl_tensor){DL_DT_INT64, 2, {1, 6}, fx->i64};
    fx->t[5] = (dl_tensor){DL_DT_BOOL, 1, {6}, fx->b};
    fx->t[6] = (dl_tensor){DL_DT_FLOAT, 0, {0}, &fx->scalar};
    fx->t[7] = (dl_tensor){DL_DT_INT32, 2, {0, 4}, NULL};
}

static dl_status make_writer(const fixture *fx, dl_st_writer **out) {
    dl_st_writer *w;
    DL_TRY(dl_st_writer_create(&w));
    dl_status st = dl_st_writer_set_metadata(w, META_K1, META_V1);
    if (st == DL_OK) {
        st = dl_st_writer_set_metadata(w, "step", "42");
    }
    for (int i = 0; st == DL_OK && i < N_T; i++) {
        st = dl_st_writer_add(w, fx->names[i], &fx->t[i]);
    }
    if (st != DL_OK) {
        dl_st_writer_destroy(w);
        return st;
    }
    *out = w;
    return DL_OK;
}

// Checks that `path` holds exactly the fixture (any order in the file).
static bool check_fixture_file(const char *path, const fixture *fx, bool same_order) {
    char err[256] = "";
    dl_st_file *f;
    if (dl_st_open(path, &f, err, sizeof err) != DL_OK) {
        fprintf(stderr, "open %s: %s\n", path, err);
        return false;
    }
    bool ok = dl_st_count(f) == N_T && dl_st_metadata_count(f) == 2;
    ok = ok && dl_st_metadata(f, META_K1) && strcmp(dl_st_metadata(f, META_K1), META_V1) == 0;
    ok = ok && dl_st_metadata(f, "step") && strcmp(dl_st_metadata(f, "step"), "42") == 0;
    ok = ok && dl_st_metadata(f, "nope") == NULL;
    for (int i = 0; ok && i < N_T; i++) {
        int64_t k = dl_st_find(f, fx->names[i]);
        dl_st_tensor_info info;
        if (k < 0 || (same_order && k != i) || dl_st_info(f, (size_t)k, &info) != DL_OK) {
            fprintf(stderr, "tensor %s: index %lld\n", fx->names[i], (long long)k);
            ok = false;
            break;
        }
        const dl_tensor *want = &fx->t[i];
        ok = strcmp(info.name, fx->names[i]) == 0 && info.dtype == want->dtype &&
             info.rank == want->rank;
        for (int d = 0; ok && d < want->rank; d++) {
            ok = info.dims[d] == want->dims[d];
        }
        dl_tensor got;
        if (!ok || dl_st_read(f, (size_t)k, &got, err, sizeof err) != DL_OK) {
            fprintf(stderr, "tensor %s: info mismatch or read error %s\n", fx->names[i], err);
            ok = false;
            break;
        }
        size_t nb = dl_tensor_nbytes(want);
        ok = got.dtype == want->dtype && got.rank == want->rank && dl_tensor_nbytes(&got) == nb &&
             info.end - info.begin == nb && (nb == 0 || memcmp(got.data, want->data, nb) == 0);
        if (!ok) {
            fprintf(stderr, "tensor %s: values differ\n", fx->names[i]);
        }
        dl_tensor_free(&got);
    }
    dl_st_close(f);
    return ok;
}

DL_TEST(st_header_exact) {
    float x[2] = {1.0f, -2.0f};
    dl_tensor t = {DL_DT_FLOAT, 1, {2}, x};
    dl_st_writer *w;
    DL_CHECK(dl_st_writer_create(&w) == DL_OK);
    DL_CHECK(dl_st_writer_set_metadata(w, "a", "b\"c\n") == DL_OK);
    DL_CHECK(dl_st_writer_add(w, "x", &t) == DL_OK);
    unsigned char *buf;
    size_t len;
    DL_CHECK(dl_st_writer_serialize(w, &buf, &len) == DL_OK);
    dl_st_writer_destroy(w);
    const char *json =
        "{\"__metadata__\":{\"a\":\"b\\\"c\\n\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]}}";
    size_t jl = strlen(json); // 84, padded to 88 with 4 spaces
    DL_CHECK_EQ_I64(jl, 84);
    DL_CHECK_EQ_I64(len, 8 + 88 + 8);
    DL_CHECK_EQ_I64(buf[0], 88);
    for (int i = 1; i < 8; i++) {
        DL_CHECK_EQ_I64(buf[i], 0);
    }
    DL_CHECK(memcmp(buf + 8, json, jl) == 0);
    DL_CHECK(memcmp(buf + 8 + jl, "    ", 4) == 0);
    DL_CHECK(memcmp(buf + 96, x, 8) == 0);
    free(buf);

    // No metadata, no tensors: "{}" padded to 8.
    DL_CHECK(dl_st_writer_create(&w) == DL_OK);
    DL_CHECK(dl_st_writer_serialize(w, &buf, &len) == DL_OK);
    dl_st_writer_destroy(w);
    DL_CHECK_EQ_I64(len, 16);
    DL_CHECK(memcmp(buf, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(buf);
}

DL_TEST(st_roundtrip_and_deterministic) {
    fixture fx;
    make_fixture(&fx);
    dl_st_writer *w;
    DL_CHECK(make_writer(&fx, &w) == DL_OK);
    char p1[128], p2[128];
    tmppath(p1, sizeof p1, "rt1.safetensors");
    tmppath(p2, sizeof p2, "rt2.safetensors");
    DL_CHECK(dl_st_write_file(w, p1) == DL_OK);
    DL_CHECK(dl_st_write_file(w, p2) == DL_OK);
    unsigned char *mem;
    size_t mlen;
    DL_CHECK(dl_st_writer_serialize(w, &mem, &mlen) == DL_OK);
    dl_st_writer_destroy(w);
    char *a, *b;
    size_t la, lb;
    DL_CHECK(dl_read_file(p1, &a, &la) == DL_OK);
    DL_CHECK(dl_read_file(p2, &b, &lb) == DL_OK);
    bool same = la == lb && la == mlen && memcmp(a, b, la) == 0 && memcmp(a, mem, la) == 0;
    free(a);
    free(b);
    free(mem);
    DL_CHECK(same);
    DL_CHECK(check_fixture_file(p1, &fx, true));
    // read_into with a wrong size is refused, with the right size works.
    char err[256];
    dl_st_file *f;
    DL_CHECK(dl_st_open(p1, &f, err, sizeof err) == DL_OK);
    float got[6];
    DL_CHECK(dl_st_read_into(f, 0, got, 20, err, sizeof err) == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_st_read_into(f, 0, got, sizeof got, err, sizeof err) == DL_OK);
    DL_CHECK(memcmp(got, fx.f32, sizeof got) == 0);
    dl_st_tensor_info info;
    DL_CHECK(dl_st_info(f, N_T, &info) == DL_ERR_INVALID_ARG);
    dl_tensor t;
    DL_CHECK(dl_st_read(f, N_T, &t, err, sizeof err) == DL_ERR_INVALID_ARG);
    DL_CHECK(t.data == NULL);
    dl_st_close(f);
}

DL_TEST(st_writer_rejects_bad_args) {
    int32_t v = 1;
    dl_tensor t = {DL_DT_INT32, 0, {0}, &v};
    dl_st_writer *w;
    DL_CHECK(dl_st_writer_create(&w) == DL_OK);
    DL_CHECK(dl_st_writer_add(w, "a", &t) == DL_OK);
    DL_CHECK(dl_st_writer_add(w, "a", &t) == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_st_writer_add(w, "__metadata__", &t) == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_st_writer_add(w, "bad\xff", &t) == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_st_writer_add(w, "surrogate\xed\xa0\x80", &t) == DL_ERR_INVALID_ARG);
    dl_tensor neg = {DL_DT_INT32, 1, {-1}, &v};
    DL_CHECK(dl_st_writer_add(w, "neg", &neg) == DL_ERR_INVALID_ARG);
    dl_tensor nul = {DL_DT_INT32, 1, {2}, NULL};
    DL_CHECK(dl_st_writer_add(w, "nul", &nul) == DL_ERR_INVALID_ARG);
    dl_tensor bad_dt = {DL_DT_COUNT, 0, {0}, &v};
    DL_CHECK(dl_st_writer_add(w, "dt", &bad_dt) == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_st_writer_set_metadata(w, "k", "v") == DL_OK);
    DL_CHECK(dl_st_writer_set_metadata(w, "k", "w") == DL_ERR_INVALID_ARG);
    DL_CHECK(dl_st_writer_set_metadata(w, "k2", "\xc0\x80") == DL_ERR_INVALID_ARG);
    dl_st_writer_destroy(w);
    dl_st_writer_destroy(NULL);
    dl_st_close(NULL);
}

DL_TEST(st_atomic_write_missing_dir) {
    int32_t v = 1;
    dl_tensor t = {DL_DT_INT32, 0, {0}, &v};
    dl_st_writer *w;
    DL_CHECK(dl_st_writer_create(&w) == DL_OK);
    DL_CHECK(dl_st_writer_add(w, "a", &t) == DL_OK);
    char dir[128], p[192];
    tmppath(dir, sizeof dir, "no_such_dir");
    snprintf(p, sizeof p, "%s/x.safetensors", dir);
    DL_CHECK(dl_st_write_file(w, p) == DL_ERR_IO);
    DL_CHECK(!exists(p));
    DL_CHECK(!exists(dir));
    // A target that is a directory: the rename fails and the temporary file is removed.
    char sub[128];
    tmppath(sub, sizeof sub, "adir");
    DL_CHECK(mkdir(sub, 0700) == 0);
    char inner[192];
    snprintf(inner, sizeof inner, "%s/keep", sub);
    DL_CHECK(write_raw(inner, "x", 1));
    DL_CHECK(dl_st_write_file(w, sub) == DL_ERR_IO);
    dl_st_writer_destroy(w);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s | grep -v '^adir$' | grep tmp)\"", tmpdir());
    DL_CHECK(system(cmd) == 0);
}

// Python writes and reads without the safetensors package.
DL_TEST(st_python_crosscheck) {
    if (access(ST_PYTHON, X_OK) != 0) {
        fprintf(stderr, "skipping: %s not found\n", ST_PYTHON);
        return;
    }
    fixture fx;
    make_fixture(&fx);
    dl_st_writer *w;
    DL_CHECK(make_writer(&fx, &w) == DL_OK);
    char p1[128], p2[128], cmd[512];
    tmppath(p1, sizeof p1, "c_wrote.safetensors");
    tmppath(p2, sizeof p2, "py_wrote.safetensors");
    DL_CHECK(dl_st_write_file(w, p1) == DL_OK);
    dl_st_writer_destroy(w);
    snprintf(cmd, sizeof cmd, "%s %s check %s", ST_PYTHON, ST_PY_SCRIPT, p1);
    DL_CHECK_EQ_I64(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s %s write %s", ST_PYTHON, ST_PY_SCRIPT, p2);
    DL_CHECK_EQ_I64(system(cmd), 0);
    DL_CHECK(check_fixture_file(p2, &fx, false));
}

// Builds a file from a header text and `data_len` data bytes (value 1) and opens it.
static dl_status open_text(const char *json, size_t data_len, char *err, size_t err_size) {
    size_t jl = strlen(json);
    unsigned char *buf = calloc(1, 8 + jl + data_len + 1);
    for (int i = 0; i < 8; i++) {
        buf[i] = (unsigned char)((uint64_t)jl >> (8 * i));
    }
    memcpy(buf + 8, json, jl);
    memset(buf + 8 + jl, 1, data_len);
    char p[128];
    tmppath(p, sizeof p, "bad.safetensors");
    dl_status st = DL_ERR_IO;
    if (write_raw(p, buf, 8 + jl + data_len)) {
        dl_st_file *f = NULL;
        err[0] = 0;
        st = dl_st_open(p, &f, err, err_size);
        if (st == DL_OK) {
            // Also read every tensor: must not crash.
            for (size_t i = 0; i < dl_st_count(f); i++) {
                dl_tensor t;
                if (dl_st_read(f, i, &t, err, err_size) == DL_OK) {
                    dl_tensor_free(&t);
                }
            }
        }
        dl_st_close(f);
    }
    free(buf);
    return st;
}

#define T1(off) "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" off "}"

DL_TEST(st_malformed_headers) {
    static const struct {
        const char *json;
        size_t data;
        dl_status st;
        const char *msg; // substring of the error
    } cases[] = {
        {"{" T1("[0,8]") "}", 8, DL_OK, ""},
        {"  {" T1("[0,8]") "}  \n\t ", 8, DL_OK, ""},
        {"{}", 0, DL_OK, ""},
        {"{" T1("[0,8]") "}", 9, DL_ERR_PARSE, "trailing data"},
        {"{" T1("[0,8]") "}", 7, DL_ERR_PARSE, "exceed the data section"},
        {"{" T1("[0,4]") "}", 4, DL_ERR_PARSE, "needs 8"},
        {"{" T1("[8,0]") "}", 8, DL_ERR_PARSE, "begin > end"},
        {"{" T1("[4,12]") "}", 12, DL_ERR_PARSE, "leave a gap"},
        {"{" T1("[0,8]") ",\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
         DL_ERR_PARSE, "overlap"},
        {"{" T1("[0,8]") "," T1("[8,16]") "}", 16, DL_ERR_PARSE, "listed twice"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, DL_ERR_PARSE, "listed twice"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, DL_ERR_PARSE, "two __metadata__"},
        {"{\"__metadata__\":{\"k\":1}}", 0, DL_ERR_PARSE, "not a string"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, DL_ERR_UNSUPPORTED,
         "unsupported dtype F64"},
        {"{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, DL_ERR_PARSE,
         "unknown dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         DL_ERR_PARSE, "two 'dtype'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 0, DL_ERR_PARSE, "lacks 'data_offsets'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
         DL_ERR_PARSE, "unexpected key"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, DL_ERR_PARSE,
         "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, DL_ERR_PARSE,
         "fraction"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, DL_ERR_PARSE,
         "leading zero"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         DL_ERR_PARSE, "more than 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4,
         DL_ERR_PARSE, "too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
         DL_ERR_PARSE, "too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, DL_ERR_PARSE,
         "more than 2"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, DL_ERR_PARSE,
         "[begin, end]"},
        {"{" T1("[0,8]") ",}", 8, DL_ERR_PARSE, "expected a string"},
        {"{" T1("[0,8]"), 8, DL_ERR_PARSE, "end of the header"},
        {"{" T1("[0,8]") "}x", 8, DL_ERR_PARSE, "unexpected text"},
        {"[]", 0, DL_ERR_PARSE, "expected '{'"},
        {"{\"a\x01\":{}}", 0, DL_ERR_PARSE, "control character"},
        {"{\"a\xff\":{}}", 0, DL_ERR_PARSE, "invalid UTF-8"},
        {"{\"a\\q\":{}}", 0, DL_ERR_PARSE, "bad escape"},
        {"{\"a\\ud800\":{}}", 0, DL_ERR_PARSE, "surrogate"},
        {"{\"a\\u0000\":{}}", 0, DL_ERR_PARSE, "\\u0000"},
        {"{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, DL_OK, ""},
        {"{'a':{}}", 0, DL_ERR_PARSE, "expected a string"},
        {"{\"a\" {}}", 0, DL_ERR_PARSE, "expected ':'"},
        {"{\"a\":[]}", 0, DL_ERR_PARSE, "expected '{'"},
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
        char err[256];
        dl_status st = open_text(cases[i].json, cases[i].data, err, sizeof err);
        if (st != cases[i].st || !strstr(err, cases[i].msg) || strchr(err, '\n')) {
            DL_FAIL_("case %zu (%s): status %s, err '%s'", i, cases[i].json, dl_status_str(st),
                     err);
        }
    }
}

DL_TEST(st_escaped_json_names) {
    // JSON escapes in names decode (\u00e9 = e-acute, surrogate pair = U+1F600, \/).
    char err[256];
    DL_CHECK(open_text("{\"caf\\u00e9\\ud83d\\ude00\\/\":{\"dtype\":\"I32\",\"shape\":[],"
                       "\"data_offsets\":[0,4]}}",
                       4, err, sizeof err) == DL_OK);
    char p[128];
    tmppath(p, sizeof p, "bad.safetensors");
    dl_st_file *f;
    DL_CHECK(dl_st_open(p, &f, err, sizeof err) == DL_OK);
    DL_CHECK_EQ_I64(dl_st_find(f, "caf\xc3\xa9\xf0\x9f\x98\x80/"), 0);
    dl_st_close(f);
}

DL_TEST(st_bad_bool_and_header_length) {
    char err[256];
    char p[128];
    tmppath(p, sizeof p, "bad.safetensors");
    // open_text fills data with 1s; a bool 2 must fail at read.
    const char *json = "{\"b\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}";
    size_t jl = strlen(json);
    unsigned char buf[128] = {0};
    buf[0] = (unsigned char)jl;
    memcpy(buf + 8, json, jl);
    buf[8 + jl] = 1;
    buf[8 + jl + 1] = 2;
    DL_CHECK(write_raw(p, buf, 8 + jl + 2));
    dl_st_file *f;
    DL_CHECK(dl_st_open(p, &f, err, sizeof err) == DL_OK);
    dl_tensor t;
    DL_CHECK(dl_st_read(f, 0, &t, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK(strstr(err, "must be 0 or 1") != NULL);
    DL_CHECK(t.data == NULL);
    dl_st_close(f);
    // Header length larger than the file / huge.
    unsigned char h[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    DL_CHECK(write_raw(p, h, 16));
    DL_CHECK(dl_st_open(p, &f, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK(strstr(err, "exceeds the file size") != NULL);
    DL_CHECK(write_raw(p, "\0\0\0\0\0\0\0\0", 8));
    DL_CHECK(dl_st_open(p, &f, err, sizeof err) == DL_ERR_PARSE);
    DL_CHECK(dl_st_open("/nonexistent/x.safetensors", &f, err, sizeof err) == DL_ERR_IO);
    DL_CHECK(strstr(err, "cannot read") != NULL);
    DL_CHECK(dl_st_open(tmpdir(), &f, err, sizeof err) == DL_ERR_IO);
    DL_CHECK(f == NULL);
}

// Every proper prefix of a valid file is rejected with a message, never a crash; so is the
// file with any single byte of its header flipped (status may be OK when the flip is benign).
DL_TEST(st_truncated_and_flipped) {
    fixture fx;
    make_fixture(&fx);
    dl_st_writer *w;
    DL_CHECK(make_writer(&fx, &w) == DL_OK);
    unsigned char *buf;
    size_t len;
    DL_CHECK(dl_st_writer_serialize(w, &buf, &len) == DL_OK);
    dl_st_writer_destroy(w);
    char p[128], err[256];
    tmppath(p, sizeof p, "trunc.safetensors");
    for (size_t n = 0; n < len; n++) {
        if (!write_raw(p, buf, n)) {
            DL_FAIL_("cannot write %s", p);
        }
        dl_st_file *f = NULL;
        err[0] = 0;
        dl_status st = dl_st_open(p, &f, err, sizeof err);
        if (st == DL_OK || err[0] == 0 || f != NULL) {
            free(buf);
            DL_FAIL_("prefix of %zu bytes: status %s, err '%s'", n, dl_status_str(st), err);
        }
    }
    size_t hlen = buf[0] | (size_t)buf[1] << 8;
    for (size_t i = 0; i < 8 + hlen; i++) {
        unsigned char *copy = malloc(len);
        memcpy(copy, buf, len);
        copy[i] ^= (unsigned char)(i % 2 ? 0x20 : 0x81);
        bool ok = write_raw(p, copy, len);
        free(copy);
        if (!ok) {
            DL_FAIL_("cannot write %s", p);
        }
        dl_st_file *f = NULL;
        err[0] = 0;
        if (dl_st_open(p, &f, err, sizeof err) == DL_OK) {
            for (size_t k = 0; k < dl_st_count(f); k++) {
                dl_tensor t;
                if (dl_st_read(f, k, &t, err, sizeof err) == DL_OK) {
                    dl_tensor_free(&t);
                }
            }
            dl_st_close(f);
        } else if (err[0] == 0) {
            DL_FAIL_("flip at %zu: no message", i);
        }
    }
    free(buf);
}

// dl_st_open_mem reads an in-memory image as dl_st_open reads the file: same entries, same
// bytes; every proper prefix is refused with a message (the fuzz target's entry point).
DL_TEST(st_open_mem_matches_file) {
    fixture fx;
    make_fixture(&fx);
    dl_st_writer *w;
    DL_CHECK(make_writer(&fx, &w) == DL_OK);
    unsigned char *buf;
    size_t len;
    DL_CHECK(dl_st_writer_serialize(w, &buf, &len) == DL_OK);
    dl_st_writer_destroy(w);
    char p[128], err[256];
    tmppath(p, sizeof p, "mem.safetensors");
    DL_CHECK(write_raw(p, buf, len));
    dl_st_file *ff = NULL, *fm = NULL;
    DL_CHECK(dl_st_open(p, &ff, err, sizeof err) == DL_OK);
    DL_CHECK(dl_st_open_mem(buf, len, &fm, err, sizeof err) == DL_OK);
    DL_CHECK_EQ_I64(dl_st_count(fm), dl_st_count(ff));
    DL_CHECK(dl_st_count(fm) > 0);
    for (size_t i = 0; i < dl_st_count(fm); i++) {
        dl_st_tensor_info a, b;
        DL_CHECK(dl_st_info(ff, i, &a) == DL_OK && dl_st_info(fm, i, &b) == DL_OK);
        DL_CHECK_STR_EQ(a.name, b.name);
        DL_CHECK(a.begin == b.begin && a.end == b.end && a.dtype == b.dtype);
        dl_tensor ta, tb;
        DL_CHECK(dl_st_read(ff, i, &ta, err, sizeof err) == DL_OK);
        DL_CHECK(dl_st_read(fm, i, &tb, err, sizeof err) == DL_OK);
        size_t nb = (size_t)(a.end - a.begin);
        DL_CHECK(nb == 0 || memcmp(ta.data, tb.data, nb) == 0);
        dl_tensor_free(&ta);
        dl_tensor_free(&tb);
    }
    DL_CHECK_STR_EQ(dl_st_metadata(fm, META_K1), META_V1);
    dl_st_close(ff);
    dl_st_close(fm);
    for (size_t n = 0; n < len; n++) {
        dl_st_file *f = NULL;
        err[0] = 0;
        dl_status st = dl_st_open_mem(buf, n, &f, err, sizeof err);
        if (st == DL_OK || err[0] == 0 || f != NULL) {
            free(buf);
            DL_FAIL_("prefix of %zu bytes: status %s, err '%s'", n, dl_status_str(st), err);
        }
    }
    free(buf);
}

DL_TEST(st_zz_cleanup) {
    if (g_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        DL_CHECK_EQ_I64(system(cmd), 0);
    }
}

DL_TEST_MAIN()
