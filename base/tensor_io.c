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

// Every element type: descr (the '<' form for multi-byte types, '|' for single bytes), size,
// name. The first six are dl_dtype's, in its order.
static const struct {
    const char *descr;
    size_t size;
    const char *name;
} npy_elems[DL_NPY_ELEM_COUNT] = {
    {"<f4", 4, "float"}, {"<f2", 2, "float16"}, {"<u2", 2, "bfloat16"}, {"<i4", 4, "int32"},
    {"<i8", 8, "int64"}, {"|b1", 1, "bool"},    {"<f8", 8, "float64"},  {"|u1", 1, "uint8"},
    {"|i1", 1, "int8"},  {"<i2", 2, "int16"},
};

_Static_assert((int)DL_NPY_F32 == (int)DL_DT_FLOAT && (int)DL_NPY_F16 == (int)DL_DT_FLOAT16 &&
                   (int)DL_NPY_BF16 == (int)DL_DT_BFLOAT16 && (int)DL_NPY_I32 == (int)DL_DT_INT32 &&
                   (int)DL_NPY_I64 == (int)DL_DT_INT64 && (int)DL_NPY_BOOL == (int)DL_DT_BOOL,
               "dl_npy_elem starts with dl_dtype's types, in its order");

const char *dl_npy_elem_name(dl_npy_elem e) {
    return (unsigned)e < DL_NPY_ELEM_COUNT ? npy_elems[e].name : "?";
}

// The element types dl_npy_parse takes: the dl_dtype ones.
#define NPY_TENSOR_ELEMS                                                                           \
    ((1u << DL_NPY_F32) | (1u << DL_NPY_F16) | (1u << DL_NPY_BF16) | (1u << DL_NPY_I32) |          \
     (1u << DL_NPY_I64) | (1u << DL_NPY_BOOL))

// "'<f4' float, '<f2' float16, ..." for the elements in `accept`.
static void accepted_list(unsigned accept, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < DL_NPY_ELEM_COUNT && o < size; i++) {
        if (accept & (1u << i)) {
            int n = snprintf(buf + o, size - o, "%s'%s' %s", o ? ", " : "", npy_elems[i].descr,
                             npy_elems[i].name);
            o += n > 0 ? (size_t)n : 0;
        }
    }
}

// Maps a descr to an element type, or explains why not (DL_ERR_UNSUPPORTED). '=' (native order,
// little-endian here) is accepted for every type; '<', '=' and '>' for single bytes.
static dl_status descr_to_elem(const char *descr, unsigned accept, dl_npy_elem *out, char *err,
                               size_t err_size) {
    char list[512];
    char order = descr[0];
    for (int i = 0; order && i < DL_NPY_ELEM_COUNT; i++) {
        const char *d = npy_elems[i].descr;
        if (strcmp(descr + 1, d + 1) != 0) {
            continue;
        }
        bool single = npy_elems[i].size == 1;
        if (order == '>' && !single) {
            set_err(err, err_size,
                    "big-endian dtype '%s' is not supported (convert with .astype('<%s'))", descr,
                    descr + 1);
            return DL_ERR_UNSUPPORTED;
        }
        if (order != '=' && order != d[0] && !(single && (order == '<' || order == '>'))) {
            break;
        }
        if (!(accept & (1u << i))) {
            break;
        }
        *out = (dl_npy_elem)i;
        return DL_OK;
    }
    accepted_list(accept, list, sizeof list);
    set_err(err, err_size, "unsupported dtype '%s' (supported: %s)", descr, list);
    return DL_ERR_UNSUPPORTED;
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
static dl_status npy_header(const char *h, size_t n, unsigned accept, dl_npy_elem *elem,
                            int64_t *dims, int32_t *rank, char *err, size_t err_size) {
    npy_cur c = {h, h + n};
    bool has_descr = false, has_order = false, has_shape = false;
    if (!npy_eat(&c, '{')) {
        set_err(err, err_size, "bad .npy header: expected a '{...}' dictionary");
        return DL_ERR_PARSE;
    }
    while (!npy_eat(&c, '}')) {
        char key[32];
        if (!npy_string(&c, key, sizeof key)) {
            set_err(err, err_size, "bad .npy header: expected a quoted key");
            return DL_ERR_PARSE;
        }
        if (!npy_eat(&c, ':')) {
            set_err(err, err_size, "bad .npy header: expected ':' after '%s'", key);
            return DL_ERR_PARSE;
        }
        if (strcmp(key, "descr") == 0) {
            char descr[32];
            if (!npy_string(&c, descr, sizeof descr)) {
                npy_ws(&c);
                if (c.p < c.end && *c.p == '[') {
                    char list[512];
                    accepted_list(accept, list, sizeof list);
                    set_err(err, err_size, "structured arrays are not supported (supported: %s)",
                            list);
                    return DL_ERR_UNSUPPORTED;
                }
                set_err(err, err_size, "bad .npy header: 'descr' is not a string");
                return DL_ERR_PARSE;
            }
            dl_status st = descr_to_elem(descr, accept, elem, err, err_size);
            if (st != DL_OK) {
                return st;
            }
            has_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (npy_word(&c, "True")) {
                set_err(err, err_size,
                        "Fortran-order arrays are not supported (save with "
                        "np.ascontiguousarray)");
                return DL_ERR_UNSUPPORTED;
            }
            if (!npy_word(&c, "False")) {
                set_err(err, err_size, "bad .npy header: 'fortran_order' must be True or False");
                return DL_ERR_PARSE;
            }
            has_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!npy_shape(&c, dims, rank, err, err_size)) {
                return DL_ERR_PARSE;
            }
            has_shape = true;
        } else {
            set_err(err, err_size, "bad .npy header: unexpected key '%s'", key);
            return DL_ERR_PARSE;
        }
        if (!npy_eat(&c, ',')) {
            if (!npy_eat(&c, '}')) {
                set_err(err, err_size, "bad .npy header: expected ',' or '}'");
                return DL_ERR_PARSE;
            }
            break;
        }
    }
    npy_ws(&c);
    if (c.p != c.end) {
        set_err(err, err_size, "bad .npy header: unexpected text after the dictionary");
        return DL_ERR_PARSE;
    }
    if (!has_descr || !has_order || !has_shape) {
        set_err(err, err_size, "bad .npy header: missing key '%s'",
                !has_descr   ? "descr"
                : !has_order ? "fortran_order"
                             : "shape");
        return DL_ERR_PARSE;
    }
    return DL_OK;
}

dl_status dl_npy_view_parse(const void *data, size_t len, unsigned accept, dl_npy_view *out,
                            char *err, size_t err_size) {
    const unsigned char *b = data;
    memset(out, 0, sizeof *out);
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
    dl_npy_view v;
    memset(&v, 0, sizeof v);
    dl_status st =
        npy_header((const char *)b + hstart, hlen, accept, &v.elem, v.dims, &v.rank, err, err_size);
    if (st != DL_OK) {
        return st;
    }
    v.elem_size = npy_elems[v.elem].size;
    int64_t numel;
    if (!shape_numel(v.dims, v.rank, v.elem_size, &numel)) {
        set_err(err, err_size, "array too large");
        return DL_ERR_PARSE;
    }
    v.nbytes = (size_t)numel * v.elem_size;
    size_t have = len - hstart - hlen;
    if (have != v.nbytes) {
        set_err(err, err_size, "%s data: expected %zu bytes, got %zu",
                have < v.nbytes ? "truncated" : "trailing", v.nbytes, have);
        return DL_ERR_PARSE;
    }
    v.data = b + hstart + hlen;
    *out = v;
    return DL_OK;
}

dl_status dl_npy_parse(const void *data, size_t len, dl_tensor *out, char *err, size_t err_size) {
    out->data = NULL;
    dl_npy_view v;
    dl_status st = dl_npy_view_parse(data, len, NPY_TENSOR_ELEMS, &v, err, err_size);
    if (st != DL_OK) {
        return DL_ERR_PARSE; // this reader's contract: every bad or unsupported file
    }
    // The first elements of npy_elems are dl_dtype's, in order.
    dl_dtype dtype = (dl_dtype)v.elem;
    dl_tensor t = {0};
    st = dl_tensor_alloc(&t, dtype, v.rank, v.dims);
    if (st != DL_OK) {
        set_err(err, err_size, "%s", dl_status_str(st));
        return st;
    }
    if (v.nbytes) {
        memcpy(t.data, v.data, v.nbytes);
    }
    if (dtype == DL_DT_BOOL) {
        const unsigned char *p = t.data;
        for (size_t i = 0; i < v.nbytes; i++) {
            if (p[i] > 1) {
                set_err(err, err_size, "bool element %zu is %u (must be 0 or 1)", i, p[i]);
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
    char why[160];
    dl_status st = dl_read_file_max(path, DL_READ_LIMIT_DEFAULT, &buf, &len, why, sizeof why);
    if (st != DL_OK) {
        set_err(err, err_size, "cannot read: %s", why);
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
    unsigned char *buf = dl_mem_alloc(total);
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
