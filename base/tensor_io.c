// base/tensor_io.c — tensor files: NumPy .npy (read 1.0/2.0/3.0, write 1.0) and safetensors
// (read one tensor by name).
//
// Both readers treat their input as untrusted: every length, offset and count is checked before
// it is used, and every failure is a status plus a one-line reason written into the caller's
// `err` buffer (never a crash, never a print). The .npy header is a Python dict literal; we
// parse exactly the subset numpy writes (string keys, string/bool/tuple-of-int values) rather
// than scanning for substrings, so key order and spacing do not matter. safetensors goes through
// the full reader of base/dl_safetensors.h.
#include "dl_safetensors.h"
#include "dl_tensor_io.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

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

// Multiplies the dims into an element count, failing on overflow (or absurd sizes: the byte
// count must fit in size_t and int64_t).
static bool shape_numel(const int64_t *dims, int32_t rank, size_t elem_size, int64_t *out_n) {
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) {
            return false;
        }
        if (dims[i] != 0 && n > (INT64_MAX / (int64_t)elem_size) / dims[i]) {
            return false;
        }
        n *= dims[i];
    }
    if ((uint64_t)n * elem_size > (uint64_t)SIZE_MAX) {
        return false;
    }
    *out_n = n;
    return true;
}

// ---------------------------------------------------------------------------------------------
// .npy

const char *dl_npy_descr(dl_dtype t) {
    switch (t) {
    case DL_DT_FLOAT:
        return "<f4";
    case DL_DT_FLOAT16:
        return "<f2";
    case DL_DT_BFLOAT16:
        return "<u2";
    case DL_DT_INT32:
        return "<i4";
    case DL_DT_INT64:
        return "<i8";
    case DL_DT_BOOL:
        return "|b1";
    case DL_DT_COUNT:
        break;
    }
    return "?";
}

#define NPY_SUPPORTED                                                                              \
    "'<f4' float, '<f2' float16, '<u2' bfloat16, '<i4' int32, '<i8' int64, '|b1' bool"

// Maps a descr to a dtype, or explains why not.
static bool descr_to_dtype(const char *descr, dl_dtype *out, char *err, size_t err_size) {
    for (int i = 0; i < DL_DT_COUNT; i++) {
        if (strcmp(descr, dl_npy_descr((dl_dtype)i)) == 0) {
            *out = (dl_dtype)i;
            return true;
        }
    }
    // '=' is native order, which numpy writes as '<' on little-endian hosts; accept it for the
    // multi-byte types and '<b1'/'=b1' for bool, which are the same bytes.
    if ((descr[0] == '=' || descr[0] == '<') && descr[1] && strcmp(descr + 1, "b1") == 0) {
        *out = DL_DT_BOOL;
        return true;
    }
    if (descr[0] == '=') {
        for (int i = 0; i < DL_DT_COUNT; i++) {
            const char *d = dl_npy_descr((dl_dtype)i);
            if (d[0] == '<' && strcmp(descr + 1, d + 1) == 0) {
                *out = (dl_dtype)i;
                return true;
            }
        }
    }
    if (descr[0] == '>') {
        set_err(err, err_size,
                "big-endian dtype '%s' is not supported (convert with .astype('<%s'))", descr,
                descr + 1);
        return false;
    }
    set_err(err, err_size, "unsupported dtype '%s' (supported: " NPY_SUPPORTED ")", descr);
    return false;
}

// A cursor over the header dict text.
typedef struct npy_cur {
    const char *p, *end;
} npy_cur;

static void npy_ws(npy_cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        c->p++;
    }
}

static bool npy_eat(npy_cur *c, char ch) {
    npy_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

// A Python string literal in single or double quotes, without escapes (numpy never writes
// them in the keys and values we read). Copies at most size-1 bytes.
static bool npy_string(npy_cur *c, char *buf, size_t size) {
    npy_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) {
        return false;
    }
    char q = *c->p++;
    const char *s = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n') {
            return false;
        }
        c->p++;
    }
    if (c->p >= c->end) {
        return false;
    }
    size_t n = (size_t)(c->p - s);
    c->p++;
    if (n >= size) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    return true;
}

static bool npy_word(npy_cur *c, const char *w) {
    npy_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

// shape -> '(' ( INT (',' INT)* ','? )? ')'
static bool npy_shape(npy_cur *c, int64_t *dims, int32_t *rank, char *err, size_t err_size) {
    if (!npy_eat(c, '(')) {
        set_err(err, err_size, "bad .npy header: 'shape' is not a tuple");
        return false;
    }
    *rank = 0;
    if (npy_eat(c, ')')) {
        return true;
    }
    for (;;) {
        npy_ws(c);
        int64_t v = 0;
        bool any = false;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            int dgt = *c->p - '0';
            if (v > (INT64_MAX - dgt) / 10) {
                set_err(err, err_size, "bad .npy header: dimension too large");
                return false;
            }
            v = v * 10 + dgt;
            any = true;
            c->p++;
        }
        // Python 2 era files may write "3L".
        if (any && c->p < c->end && *c->p == 'L') {
            c->p++;
        }
        if (!any) {
            set_err(err, err_size, "bad .npy header: 'shape' must hold non-negative integers");
            return false;
        }
        if (*rank >= DL_MAX_RANK) {
            set_err(err, err_size, "array has more than %d dimensions", DL_MAX_RANK);
            return false;
        }
        dims[(*rank)++] = v;
        if (npy_eat(c, ')')) {
            return true;
        }
        if (!npy_eat(c, ',')) {
            set_err(err, err_size, "bad .npy header: expected ',' or ')' in 'shape'");
            return false;
        }
        if (npy_eat(c, ')')) {
            return true;
        }
    }
}

// header -> '{' (KEY ':' VALUE (',' KEY ':' VALUE)* ','?)? '}'
static bool npy_header(const char *h, size_t n, dl_dtype *dtype, int64_t *dims, int32_t *rank,
                       char *err, size_t err_size) {
    npy_cur c = {h, h + n};
    bool has_descr = false, has_order = false, has_shape = false;
    if (!npy_eat(&c, '{')) {
        set_err(err, err_size, "bad .npy header: expected a '{...}' dictionary");
        return false;
    }
    while (!npy_eat(&c, '}')) {
        char key[32];
        if (!npy_string(&c, key, sizeof key)) {
            set_err(err, err_size, "bad .npy header: expected a quoted key");
            return false;
        }
        if (!npy_eat(&c, ':')) {
            set_err(err, err_size, "bad .npy header: expected ':' after '%s'", key);
            return false;
        }
        if (strcmp(key, "descr") == 0) {
            char descr[32];
            if (!npy_string(&c, descr, sizeof descr)) {
                npy_ws(&c);
                if (c.p < c.end && *c.p == '[') {
                    set_err(err, err_size,
                            "structured arrays are not supported (supported: " NPY_SUPPORTED ")");
                } else {
                    set_err(err, err_size, "bad .npy header: 'descr' is not a string");
                }
                return false;
            }
            if (!descr_to_dtype(descr, dtype, err, err_size)) {
                return false;
            }
            has_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (npy_word(&c, "True")) {
                set_err(err, err_size,
                        "Fortran-order arrays are not supported (save with "
                        "np.ascontiguousarray)");
                return false;
            }
            if (!npy_word(&c, "False")) {
                set_err(err, err_size, "bad .npy header: 'fortran_order' must be True or False");
                return false;
            }
            has_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!npy_shape(&c, dims, rank, err, err_size)) {
                return false;
            }
            has_shape = true;
        } else {
            set_err(err, err_size, "bad .npy header: unexpected key '%s'", key);
            return false;
        }
        if (!npy_eat(&c, ',')) {
            if (!npy_eat(&c, '}')) {
                set_err(err, err_size, "bad .npy header: expected ',' or '}'");
                return false;
            }
            break;
        }
    }
    npy_ws(&c);
    if (c.p != c.end) {
        set_err(err, err_size, "bad .npy header: unexpected text after the dictionary");
        return false;
    }
    if (!has_descr || !has_order || !has_shape) {
        set_err(err, err_size, "bad .npy header: missing key '%s'",
                !has_descr   ? "descr"
                : !has_order ? "fortran_order"
                             : "shape");
        return false;
    }
    return true;
}

dl_status dl_npy_parse(const void *data, size_t len, dl_tensor *out, char *err, size_t err_size) {
    const unsigned char *b = data;
    out->data = NULL;
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
        set_err(err, err_size, "not a .npy file (bad magic)");
        return DL_ERR_PARSE;
    }
    unsigned major = b[6], minor = b[7];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) {
            set_err(err, err_size, "truncated .npy header");
            return DL_ERR_PARSE;
        }
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        set_err(err, err_size, "unsupported .npy format version %u.%u (supported: 1.0, 2.0, 3.0)",
                major, minor);
        return DL_ERR_PARSE;
    }
    if (hlen > len - hstart) {
        set_err(err, err_size, "truncated .npy header: expected %zu bytes, got %zu", hlen,
                len - hstart);
        return DL_ERR_PARSE;
    }
    dl_dtype dtype = DL_DT_FLOAT;
    int64_t dims[DL_MAX_RANK] = {0};
    int32_t rank = 0;
    if (!npy_header((const char *)b + hstart, hlen, &dtype, dims, &rank, err, err_size)) {
        return DL_ERR_PARSE;
    }
    int64_t numel;
    if (!shape_numel(dims, rank, dl_dtype_size(dtype), &numel)) {
        set_err(err, err_size, "array too large");
        return DL_ERR_PARSE;
    }
    size_t need = (size_t)numel * dl_dtype_size(dtype);
    size_t have = len - hstart - hlen;
    if (have < need) {
        set_err(err, err_size, "truncated data: expected %zu bytes, got %zu", need, have);
        return DL_ERR_PARSE;
    }
    if (have > need) {
        set_err(err, err_size, "trailing data: expected %zu bytes, got %zu", need, have);
        return DL_ERR_PARSE;
    }
    dl_tensor t = {0};
    dl_status st = dl_tensor_alloc(&t, dtype, rank, dims);
    if (st != DL_OK) {
        set_err(err, err_size, "%s", dl_status_str(st));
        return st;
    }
    if (need) {
        memcpy(t.data, b + hstart + hlen, need);
    }
    if (dtype == DL_DT_BOOL) {
        const unsigned char *v = t.data;
        for (size_t i = 0; i < need; i++) {
            if (v[i] > 1) {
                set_err(err, err_size, "bool element %zu is %u (must be 0 or 1)", i, v[i]);
                dl_tensor_free(&t);
                return DL_ERR_PARSE;
            }
        }
    }
    *out = t;
    return DL_OK;
}

dl_status dl_npy_read(const char *path, dl_tensor *out, char *err, size_t err_size) {
    char *buf;
    size_t len;
    out->data = NULL;
    dl_status st = dl_read_file(path, &buf, &len);
    if (st != DL_OK) {
        set_err(err, err_size, "cannot read: %s",
                st == DL_ERR_IO ? strerror(errno) : dl_status_str(st));
        return st;
    }
    st = dl_npy_parse(buf, len, out, err, err_size);
    free(buf);
    return st;
}

dl_status dl_npy_write(const char *path, const dl_tensor *t) {
    if ((unsigned)t->dtype >= DL_DT_COUNT || t->rank < 0 || t->rank > DL_MAX_RANK) {
        return DL_ERR_INVALID_ARG;
    }
    int64_t numel;
    if (!shape_numel(t->dims, t->rank, dl_dtype_size(t->dtype), &numel)) {
        return DL_ERR_INVALID_ARG;
    }
    dl_strbuf h = {0};
    dl_strbuf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     dl_npy_descr(t->dtype));
    for (int32_t i = 0; i < t->rank; i++) {
        dl_strbuf_printf(&h, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    }
    dl_strbuf_puts(&h, t->rank == 1 ? ",), }" : "), }");
    // Pad with spaces so magic + length + header + '\n' is a multiple of 64 (numpy's alignment).
    while (!h.oom && (10 + h.len + 1) % 64 != 0) {
        dl_strbuf_append(&h, " ", 1);
    }
    dl_strbuf_append(&h, "\n", 1);
    if (h.oom) {
        dl_strbuf_fini(&h);
        return DL_ERR_NOMEM;
    }
    size_t nbytes = (size_t)numel * dl_dtype_size(t->dtype);
    size_t total = 10 + h.len + nbytes;
    unsigned char *buf = malloc(total);
    if (!buf) {
        dl_strbuf_fini(&h);
        return DL_ERR_NOMEM;
    }
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(h.len & 0xff);
    buf[9] = (unsigned char)(h.len >> 8);
    memcpy(buf + 10, h.data, h.len);
    if (nbytes) {
        memcpy(buf + 10 + h.len, t->data, nbytes);
    }
    dl_strbuf_fini(&h);
    dl_status st = dl_write_file_atomic(path, buf, total);
    free(buf);
    return st;
}

// ---------------------------------------------------------------------------------------------
// safetensors: one tensor by name, through the full reader of base/dl_safetensors.h (which
// validates the whole header, offsets and coverage).

dl_status dl_safetensors_read_tensor(const char *path, const char *name, dl_tensor *out, char *err,
                                     size_t err_size) {
    out->data = NULL;
    dl_st_file *f = NULL;
    dl_status st = dl_st_open(path, &f, err, err_size);
    if (st != DL_OK) {
        return st;
    }
    int64_t i = dl_st_find(f, name);
    if (i < 0) {
        set_err(err, err_size, "no tensor named '%s'", name);
        dl_st_close(f);
        return DL_ERR_PARSE;
    }
    st = dl_st_read(f, (size_t)i, out, err, err_size);
    dl_st_close(f);
    return st;
}
