// base/tensor_io.c — tensor files: NumPy .npy (read 1.0/2.0/3.0, write 1.0) and safetensors
// (read one tensor by name).
//
// Both readers treat their input as untrusted: every length, offset and count is checked before
// it is used, and every failure is a status plus a one-line reason written into the caller's
// `err` buffer (never a crash, never a print). The .npy header is a Python dict literal; we
// parse exactly the subset numpy writes (string keys, string/bool/tuple-of-int values) rather
// than scanning for substrings, so key order and spacing do not matter. The safetensors header
// is JSON; a small strict reader handles objects, strings with escapes and integer arrays, and
// skips any other JSON value (e.g. inside `__metadata__`).
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
// safetensors

typedef struct json_cur {
    const char *p, *end;
    int depth;
} json_cur;

#define JSON_MAX_DEPTH 64

static void json_ws(json_cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        c->p++;
    }
}

static bool json_eat(json_cur *c, char ch) {
    json_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

static void utf8_put(dl_strbuf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    dl_strbuf_append(b, u, n);
}

static bool json_hex4(json_cur *c, uint32_t *out) {
    if (c->end - c->p < 4) {
        return false;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(c->p[i]);
        if (h < 0) {
            return false;
        }
        v = v << 4 | (uint32_t)h;
    }
    c->p += 4;
    *out = v;
    return true;
}

// string -> '"' (char | '\' escape)* '"'. Decodes into `b` (which the caller resets); `b` may
// be NULL to only skip. Control characters are rejected as JSON requires.
static bool json_string(json_cur *c, dl_strbuf *b) {
    json_ws(c);
    if (c->p >= c->end || *c->p != '"') {
        return false;
    }
    c->p++;
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p++;
        if (ch < 0x20) {
            return false;
        }
        if (ch != '\\') {
            if (b) {
                dl_strbuf_append(b, (const char *)&ch, 1);
            }
            continue;
        }
        if (c->p >= c->end) {
            return false;
        }
        char e = *c->p++;
        char lit = 0;
        switch (e) {
        case '"':
            lit = '"';
            break;
        case '\\':
            lit = '\\';
            break;
        case '/':
            lit = '/';
            break;
        case 'b':
            lit = '\b';
            break;
        case 'f':
            lit = '\f';
            break;
        case 'n':
            lit = '\n';
            break;
        case 'r':
            lit = '\r';
            break;
        case 't':
            lit = '\t';
            break;
        case 'u': {
            uint32_t cp;
            if (!json_hex4(c, &cp)) {
                return false;
            }
            if (cp >= 0xd800 && cp < 0xdc00) {
                uint32_t lo;
                if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u') {
                    return false;
                }
                c->p += 2;
                if (!json_hex4(c, &lo) || lo < 0xdc00 || lo >= 0xe000) {
                    return false;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                return false;
            }
            if (b) {
                utf8_put(b, cp);
            }
            continue;
        }
        default:
            return false;
        }
        if (b) {
            dl_strbuf_append(b, &lit, 1);
        }
    }
    if (c->p >= c->end) {
        return false;
    }
    c->p++;
    if (b && !b->data) {
        dl_strbuf_append(b, "", 0); // an empty string is still a string
    }
    return true;
}

// A non-negative integer without sign, fraction or exponent (what offsets and dims are).
static bool json_uint(json_cur *c, uint64_t *out) {
    json_ws(c);
    const char *s = c->p;
    uint64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned dgt = (unsigned)(*c->p - '0');
        if (v > (UINT64_MAX - dgt) / 10) {
            return false;
        }
        v = v * 10 + dgt;
        c->p++;
    }
    if (c->p == s || (c->p - s > 1 && *s == '0')) {
        return false;
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) {
        return false;
    }
    *out = v;
    return true;
}

// uint_array -> '[' (UINT (',' UINT)*)? ']'
static bool json_uint_array(json_cur *c, uint64_t *vals, size_t max, size_t *n) {
    *n = 0;
    if (!json_eat(c, '[')) {
        return false;
    }
    if (json_eat(c, ']')) {
        return true;
    }
    do {
        uint64_t v;
        if (*n >= max || !json_uint(c, &v)) {
            return false;
        }
        vals[(*n)++] = v;
    } while (json_eat(c, ','));
    return json_eat(c, ']');
}

static bool json_skip_value(json_cur *c);

// Skips one JSON number (full grammar).
static bool json_skip_number(json_cur *c) {
    const char *s = c->p;
    if (c->p < c->end && *c->p == '-') {
        c->p++;
    }
    const char *d = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        c->p++;
    }
    if (c->p == d) {
        return false;
    }
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        d = c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            c->p++;
        }
        if (c->p == d) {
            return false;
        }
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) {
            c->p++;
        }
        d = c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            c->p++;
        }
        if (c->p == d) {
            return false;
        }
    }
    return c->p > s;
}

static bool json_skip_value(json_cur *c) {
    json_ws(c);
    if (c->p >= c->end) {
        return false;
    }
    if (++c->depth > JSON_MAX_DEPTH) {
        return false;
    }
    bool ok = false;
    char ch = *c->p;
    if (ch == '"') {
        ok = json_string(c, NULL);
    } else if (ch == '{') {
        c->p++;
        ok = true;
        if (!json_eat(c, '}')) {
            do {
                if (!json_string(c, NULL) || !json_eat(c, ':') || !json_skip_value(c)) {
                    ok = false;
                    break;
                }
            } while (json_eat(c, ','));
            ok = ok && json_eat(c, '}');
        }
    } else if (ch == '[') {
        c->p++;
        ok = true;
        if (!json_eat(c, ']')) {
            do {
                if (!json_skip_value(c)) {
                    ok = false;
                    break;
                }
            } while (json_eat(c, ','));
            ok = ok && json_eat(c, ']');
        }
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
        ok = json_skip_number(c);
    } else {
        static const char *const words[] = {"true", "false", "null"};
        for (size_t i = 0; i < DL_ARRAY_LEN(words); i++) {
            size_t n = strlen(words[i]);
            if ((size_t)(c->end - c->p) >= n && memcmp(c->p, words[i], n) == 0) {
                c->p += n;
                ok = true;
                break;
            }
        }
    }
    c->depth--;
    return ok;
}

static bool st_dtype(const char *s, dl_dtype *out) {
    static const struct {
        const char *name;
        dl_dtype dt;
    } map[] = {{"F32", DL_DT_FLOAT}, {"F16", DL_DT_FLOAT16}, {"BF16", DL_DT_BFLOAT16},
               {"I32", DL_DT_INT32}, {"I64", DL_DT_INT64},   {"BOOL", DL_DT_BOOL}};
    for (size_t i = 0; i < DL_ARRAY_LEN(map); i++) {
        if (strcmp(s, map[i].name) == 0) {
            *out = map[i].dt;
            return true;
        }
    }
    return false;
}

typedef struct st_entry {
    bool found;
    dl_dtype dtype;
    int32_t rank;
    int64_t dims[DL_MAX_RANK];
    uint64_t begin, end;
} st_entry;

// tensor_info -> '{' ("dtype" ':' STRING | "shape" ':' uint_array |
//                     "data_offsets" ':' uint_array) (',' ...)* '}'
static bool st_tensor_info(json_cur *c, const char *name, st_entry *e, char *err, size_t err_size) {
    bool has_dtype = false, has_shape = false, has_off = false;
    dl_strbuf key = {0}, val = {0};
    bool ok = false;
    if (!json_eat(c, '{')) {
        set_err(err, err_size, "bad safetensors header: entry '%s' is not an object", name);
        goto out;
    }
    if (!json_eat(c, '}')) {
        do {
            dl_strbuf_fini(&key);
            if (!json_string(c, &key) || key.oom || !json_eat(c, ':')) {
                set_err(err, err_size, "bad safetensors header: malformed entry '%s'", name);
                goto out;
            }
            if (strcmp(key.data, "dtype") == 0) {
                dl_strbuf_fini(&val);
                if (!json_string(c, &val) || val.oom) {
                    set_err(err, err_size, "bad safetensors header: '%s' dtype is not a string",
                            name);
                    goto out;
                }
                if (!st_dtype(val.data, &e->dtype)) {
                    set_err(err, err_size,
                            "tensor '%s' has unsupported dtype %s (supported: F32 F16 BF16 I32 "
                            "I64 BOOL)",
                            name, val.data);
                    goto out;
                }
                has_dtype = true;
            } else if (strcmp(key.data, "shape") == 0) {
                uint64_t d[DL_MAX_RANK + 1];
                size_t n;
                if (!json_uint_array(c, d, DL_ARRAY_LEN(d), &n) || n > DL_MAX_RANK) {
                    set_err(err, err_size,
                            "bad safetensors header: '%s' shape must be a list of at most %d "
                            "non-negative integers",
                            name, DL_MAX_RANK);
                    goto out;
                }
                e->rank = (int32_t)n;
                for (size_t i = 0; i < n; i++) {
                    if (d[i] > (uint64_t)INT64_MAX) {
                        set_err(err, err_size, "bad safetensors header: '%s' dim too large", name);
                        goto out;
                    }
                    e->dims[i] = (int64_t)d[i];
                }
                has_shape = true;
            } else if (strcmp(key.data, "data_offsets") == 0) {
                uint64_t d[2];
                size_t n;
                if (!json_uint_array(c, d, 2, &n) || n != 2 || d[0] > d[1]) {
                    set_err(err, err_size,
                            "bad safetensors header: '%s' data_offsets must be [begin, end] "
                            "with begin <= end",
                            name);
                    goto out;
                }
                e->begin = d[0];
                e->end = d[1];
                has_off = true;
            } else if (!json_skip_value(c)) {
                set_err(err, err_size, "bad safetensors header: malformed entry '%s'", name);
                goto out;
            }
        } while (json_eat(c, ','));
        if (!json_eat(c, '}')) {
            set_err(err, err_size, "bad safetensors header: malformed entry '%s'", name);
            goto out;
        }
    }
    if (!has_dtype || !has_shape || !has_off) {
        set_err(err, err_size, "bad safetensors header: entry '%s' lacks '%s'", name,
                !has_dtype   ? "dtype"
                : !has_shape ? "shape"
                             : "data_offsets");
        goto out;
    }
    ok = true;
out:
    dl_strbuf_fini(&key);
    dl_strbuf_fini(&val);
    return ok;
}

// header -> '{' (STRING ':' (tensor_info | any-value-for-__metadata__))* '}'
// Every entry is validated (not only the one asked for), so a corrupt file is reported as such
// whichever tensor is read.
static dl_status st_header(const char *h, size_t n, const char *name, st_entry *want, char *err,
                           size_t err_size) {
    json_cur c = {h, h + n, 0};
    dl_strbuf key = {0};
    dl_status st = DL_ERR_PARSE;
    if (!json_eat(&c, '{')) {
        set_err(err, err_size, "bad safetensors header: not a JSON object");
        goto out;
    }
    if (!json_eat(&c, '}')) {
        do {
            dl_strbuf_fini(&key);
            if (!json_string(&c, &key) || !json_eat(&c, ':')) {
                set_err(err, err_size, "bad safetensors header: expected \"name\": {...}");
                goto out;
            }
            if (key.oom) {
                st = DL_ERR_NOMEM;
                set_err(err, err_size, "out of memory");
                goto out;
            }
            if (strcmp(key.data, "__metadata__") == 0) {
                if (!json_skip_value(&c)) {
                    set_err(err, err_size, "bad safetensors header: malformed __metadata__");
                    goto out;
                }
                continue;
            }
            st_entry e = {0};
            if (!st_tensor_info(&c, key.data, &e, err, err_size)) {
                goto out;
            }
            if (strcmp(key.data, name) == 0) {
                if (want->found) {
                    set_err(err, err_size, "bad safetensors header: tensor '%s' listed twice",
                            name);
                    goto out;
                }
                *want = e;
                want->found = true;
            }
        } while (json_eat(&c, ','));
        if (!json_eat(&c, '}')) {
            set_err(err, err_size, "bad safetensors header: expected ',' or '}'");
            goto out;
        }
    }
    json_ws(&c);
    if (c.p != c.end) {
        set_err(err, err_size, "bad safetensors header: unexpected text after the JSON object");
        goto out;
    }
    st = DL_OK;
out:
    dl_strbuf_fini(&key);
    return st;
}

dl_status dl_safetensors_read_tensor(const char *path, const char *name, dl_tensor *out, char *err,
                                     size_t err_size) {
    out->data = NULL;
    char *hdr = NULL;
    dl_status st = DL_ERR_PARSE;
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, err_size, "cannot read: %s", strerror(errno));
        return DL_ERR_IO;
    }
    // File size, to bound every length and offset in the header.
    if (fseek(f, 0, SEEK_END) != 0) {
        set_err(err, err_size, "cannot read: %s", strerror(errno));
        st = DL_ERR_IO;
        goto out;
    }
    long fsz = ftell(f);
    if (fsz < 0 || fseek(f, 0, SEEK_SET) != 0) {
        set_err(err, err_size, "cannot read: %s", strerror(errno));
        st = DL_ERR_IO;
        goto out;
    }
    uint64_t size = (uint64_t)fsz;
    unsigned char lenb[8];
    if (size < 8 || fread(lenb, 1, 8, f) != 8) {
        set_err(err, err_size, "not a safetensors file (shorter than 8 bytes)");
        goto out;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) {
        hlen = hlen << 8 | lenb[i];
    }
    if (hlen > size - 8) {
        set_err(err, err_size,
                "not a safetensors file (header length %llu exceeds the file size %llu)",
                (unsigned long long)hlen, (unsigned long long)size);
        goto out;
    }
    if (hlen > (uint64_t)100 * 1024 * 1024) {
        set_err(err, err_size, "safetensors header too large (%llu bytes)",
                (unsigned long long)hlen);
        goto out;
    }
    hdr = malloc((size_t)hlen + 1);
    if (!hdr) {
        set_err(err, err_size, "out of memory");
        st = DL_ERR_NOMEM;
        goto out;
    }
    if (fread(hdr, 1, (size_t)hlen, f) != (size_t)hlen) {
        set_err(err, err_size, "cannot read: short read");
        st = DL_ERR_IO;
        goto out;
    }
    hdr[hlen] = 0;
    st_entry e = {0};
    st = st_header(hdr, (size_t)hlen, name, &e, err, err_size);
    if (st != DL_OK) {
        goto out;
    }
    st = DL_ERR_PARSE;
    if (!e.found) {
        set_err(err, err_size, "no tensor named '%s'", name);
        goto out;
    }
    uint64_t data_size = size - 8 - hlen;
    if (e.end > data_size) {
        set_err(err, err_size,
                "tensor '%s': data_offsets [%llu, %llu] exceed the data section (%llu bytes)", name,
                (unsigned long long)e.begin, (unsigned long long)e.end,
                (unsigned long long)data_size);
        goto out;
    }
    int64_t numel;
    if (!shape_numel(e.dims, e.rank, dl_dtype_size(e.dtype), &numel)) {
        set_err(err, err_size, "tensor '%s' is too large", name);
        goto out;
    }
    uint64_t need = (uint64_t)numel * dl_dtype_size(e.dtype);
    if (e.end - e.begin != need) {
        char shp[160];
        dl_shape_format(e.dims, e.rank, shp, sizeof shp);
        set_err(err, err_size, "tensor '%s': data_offsets span %llu bytes but %s%s needs %llu",
                name, (unsigned long long)(e.end - e.begin), dl_dtype_name(e.dtype), shp,
                (unsigned long long)need);
        goto out;
    }
    dl_tensor t = {0};
    st = dl_tensor_alloc(&t, e.dtype, e.rank, e.dims);
    if (st != DL_OK) {
        set_err(err, err_size, "%s", dl_status_str(st));
        goto out;
    }
    if (need) {
        uint64_t off = 8 + hlen + e.begin;
        if (off > (uint64_t)LONG_MAX || fseek(f, (long)off, SEEK_SET) != 0 ||
            fread(t.data, 1, (size_t)need, f) != (size_t)need) {
            dl_tensor_free(&t);
            set_err(err, err_size, "cannot read: short read");
            st = DL_ERR_IO;
            goto out;
        }
    }
    if (e.dtype == DL_DT_BOOL) {
        const unsigned char *v = t.data;
        for (uint64_t i = 0; i < need; i++) {
            if (v[i] > 1) {
                set_err(err, err_size, "tensor '%s': bool element %llu is %u (must be 0 or 1)",
                        name, (unsigned long long)i, v[i]);
                dl_tensor_free(&t);
                st = DL_ERR_PARSE;
                goto out;
            }
        }
    }
    *out = t;
    st = DL_OK;
out:
    free(hdr);
    fclose(f);
    return st;
}
